package prune_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

// TestPruneOtherLayers checks that the layers beyond Linear and Conv2d
// compute with their masked parameters: the output of a pruned layer
// equals that after Remove folds the mask in, differs from the unpruned
// one, and the pruned elements get no gradient.
func TestPruneOtherLayers(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(11))
	idx := vram.FromSlice([]int64{0, 3, 1, 3}, vram.Shape{4}, vram.Int64)
	defer idx.Release()
	tests := []struct {
		name  string
		layer nn.Module
		param string
		input func() *vram.Tensor
	}{
		{"conv1d weight", nn.NewConv1d(2, 3, 3, nn.ConvOptions{}, g), "weight", func() *vram.Tensor { return vram.Randn(vram.Shape{2, 2, 6}, g) }},
		{"conv1d bias", nn.NewConv1d(2, 3, 3, nn.ConvOptions{}, g), "bias", func() *vram.Tensor { return vram.Randn(vram.Shape{2, 2, 6}, g) }},
		{"conv transpose weight", nn.NewConvTranspose2d(2, 3, 2, nn.ConvOptions{}, g), "weight", func() *vram.Tensor { return vram.Randn(vram.Shape{1, 2, 3, 3}, g) }},
		{"conv transpose bias", nn.NewConvTranspose2d(2, 3, 2, nn.ConvOptions{}, g), "bias", func() *vram.Tensor { return vram.Randn(vram.Shape{1, 2, 3, 3}, g) }},
		{"embedding", nn.NewEmbedding(5, 3, g), "weight", func() *vram.Tensor { return idx.Clone() }},
		{"embedding bag", nn.NewEmbeddingBag(5, 3, g), "weight", func() *vram.Tensor { return idx.Reshape(2, 2) }},
		{"layer norm weight", nn.NewLayerNorm([]int{4}, 1e-5), "weight", func() *vram.Tensor { return vram.Randn(vram.Shape{3, 4}, g) }},
		{"layer norm bias", nn.NewLayerNorm([]int{4}, 1e-5), "bias", func() *vram.Tensor { return vram.Randn(vram.Shape{3, 4}, g) }},
		{"rms norm", nn.NewRMSNorm([]int{4}, 1e-5), "weight", func() *vram.Tensor { return vram.Randn(vram.Shape{3, 4}, g) }},
		{"group norm", nn.NewGroupNorm(2, 4, 1e-5), "weight", func() *vram.Tensor { return vram.Randn(vram.Shape{2, 4, 3}, g) }},
		{"batch norm 2d", nn.NewBatchNorm2d(3), "weight", func() *vram.Tensor { return vram.Randn(vram.Shape{2, 3, 2, 2}, g) }},
		{"batch norm 1d", nn.NewBatchNorm1d(3), "bias", func() *vram.Tensor { return vram.Randn(vram.Shape{4, 3}, g) }},
		{"attention out_proj", nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{}, g), "out_proj.weight", func() *vram.Tensor { return vram.Randn(vram.Shape{3, 1, 4}, g) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer nn.Release(tc.layer)
			tc.layer.Eval()
			target, name := tc.layer, tc.param
			if mha, ok := tc.layer.(*nn.MultiheadAttention); ok {
				target, name = mha.OutProj, "weight"
			}
			p := param(t, target, name)
			// Non-trivial values for the norm layers' ones and zeros.
			vram.NoGrad(func() {
				r := vram.Randn(p.Shape(), g)
				defer r.Release()
				p.CopyFrom(r)
			})
			x := tc.input()
			defer x.Release()
			run := func() []float64 {
				var out []float64
				vram.NoGrad(func() { vram.Tidy(func() { out = tc.layer.Forward(x).Float64s() }) })
				return out
			}
			plain := run()
			if err := prune.L1Unstructured(target, name, prune.Fraction(0.5)); err != nil {
				t.Fatal(err)
			}
			if !prune.AnyPruned(tc.layer) {
				t.Error("AnyPruned = false after pruning")
			}
			pruned := run()
			if closeTo(pruned, plain, 1e-9) {
				t.Error("pruning changed nothing in the output: Forward ignores the mask")
			}
			mt, _ := target.(nn.Maskable).ParameterMask(name)
			mask := mt.Float64s()
			vram.Tidy(func() {
				tc.layer.Forward(x).Sum().Backward()
			})
			grad := p.Grad().Float64s()
			for i, m := range mask {
				if m == 0 && grad[i] != 0 {
					t.Errorf("pruned element %d got gradient %v", i, grad[i])
				}
			}
			p.ZeroGrad()
			if err := prune.Remove(target, name); err != nil {
				t.Fatal(err)
			}
			if removed := run(); !closeTo(pruned, removed, 1e-6) {
				t.Errorf("pruned output %v, after Remove %v", pruned, removed)
			}
			if prune.AnyPruned(tc.layer) {
				t.Error("AnyPruned = true after Remove")
			}
		})
	}
}

func param(t *testing.T, m nn.Module, name string) *vram.Tensor {
	t.Helper()
	for _, p := range m.NamedParameters() {
		if p.Name == name {
			return p.Tensor
		}
	}
	t.Fatalf("%T has no parameter %q", m, name)
	return nil
}

// TestIdentityAndCustomFromMask checks prune.Identity and
// prune.CustomFromMask, and their errors.
func TestIdentityAndCustomFromMask(t *testing.T) {
	vals := []float32{1, -2, 3, -4, 5, -6}
	tests := []struct {
		name   string
		first  func(l *nn.Linear) error // nil: unpruned before
		call   func(l *nn.Linear) error
		want   []float64
		errIs  error
		masked bool // whether the layer is pruned after a failed call
	}{
		{"identity", nil, func(l *nn.Linear) error { return prune.Identity(l, "weight") }, []float64{1, 1, 1, 1, 1, 1}, nil, true},
		{"identity keeps a mask", func(l *nn.Linear) error { return prune.L1Unstructured(l, "weight", prune.Count(2)) },
			func(l *nn.Linear) error { return prune.Identity(l, "weight") }, []float64{0, 0, 1, 1, 1, 1}, nil, true},
		{"custom float", nil, func(l *nn.Linear) error {
			m := vram.FromSlice([]float32{1, 0, 1, 0, 1, 1}, vram.Shape{2, 3})
			defer m.Release()
			return prune.CustomFromMask(l, "weight", m)
		}, []float64{1, 0, 1, 0, 1, 1}, nil, true},
		{"custom bool on sim, combined", func(l *nn.Linear) error { return prune.L1Unstructured(l, "weight", prune.Count(1)) },
			func(l *nn.Linear) error {
				m := vram.FromSlice([]bool{true, true, true, true, false, true}, vram.Shape{2, 3}, vram.Sim(0))
				defer m.Release()
				return prune.CustomFromMask(l, "weight", m)
			}, []float64{0, 1, 1, 1, 0, 1}, nil, true},
		{"custom wrong shape", nil, func(l *nn.Linear) error {
			m := vram.Ones(vram.Shape{3, 2})
			defer m.Release()
			return prune.CustomFromMask(l, "weight", m)
		}, nil, vram.ErrArgument, false},
		{"custom not zeros and ones", nil, func(l *nn.Linear) error {
			m := vram.Full(vram.Shape{2, 3}, 0.5)
			defer m.Release()
			return prune.CustomFromMask(l, "weight", m)
		}, nil, vram.ErrArgument, false},
		{"custom nil", nil, func(l *nn.Linear) error { return prune.CustomFromMask(l, "weight", nil) }, nil, vram.ErrArgument, false},
		{"custom released", nil, func(l *nn.Linear) error {
			m := vram.Ones(vram.Shape{2, 3})
			m.Release()
			return prune.CustomFromMask(l, "weight", m)
		}, nil, vram.ErrReleased, false},
		{"identity of no such parameter", nil, func(l *nn.Linear) error { return prune.Identity(l, "gamma") }, nil, vram.ErrArgument, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := linear(t, 3, 2, vals)
			defer nn.Release(l)
			if tc.first != nil {
				if err := tc.first(l); err != nil {
					t.Fatal(err)
				}
			}
			before := maskOf(l)
			err := tc.call(l)
			if tc.errIs != nil {
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("error %v, want %v", err, tc.errIs)
				}
				if got := maskOf(l); !closeTo(got, before, 0) || prune.IsPruned(l, "weight") != (before != nil) {
					t.Errorf("a failed call changed the mask from %v to %v", before, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := maskOf(l); !closeTo(got, tc.want, 0) {
				t.Errorf("mask %v, want %v", got, tc.want)
			}
			if prune.IsPruned(l, "weight") != tc.masked || prune.AnyPruned(nn.NewSequential(l)) != tc.masked {
				t.Errorf("IsPruned/AnyPruned disagree with %v", tc.masked)
			}
		})
	}
}

// TestGlobalImportance checks GlobalUnstructured with importance scores:
// the elements of smallest score are pruned whatever their magnitude, and
// bad scores are refused, changing nothing.
func TestGlobalImportance(t *testing.T) {
	tests := []struct {
		name  string
		imp   func() *vram.Tensor
		want  []float64
		errIs error
	}{
		{"reversed", func() *vram.Tensor { return vram.FromSlice([]float64{6, 5, 4, 3, 2, 1}, vram.Shape{2, 3}) },
			[]float64{1, 1, 1, 1, 0, 0}, nil},
		{"on sim, float16", func() *vram.Tensor {
			return vram.FromSlice([]float32{0, 9, 0, 9, 9, 9}, vram.Shape{2, 3}, vram.Sim(0), vram.Float16)
		}, []float64{0, 1, 0, 1, 1, 1}, nil},
		{"wrong shape", func() *vram.Tensor { return vram.Ones(vram.Shape{6}) }, nil, vram.ErrArgument},
		{"integer", func() *vram.Tensor { return vram.Ones(vram.Shape{2, 3}, vram.Int64) }, nil, vram.ErrDType},
		{"released", func() *vram.Tensor { r := vram.Ones(vram.Shape{2, 3}); r.Release(); return r }, nil, vram.ErrReleased},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := linear(t, 3, 2, []float32{1, 2, 3, 4, 5, 6})
			defer nn.Release(a)
			b := linear(t, 3, 2, []float32{1, 2, 3, 4, 5, 6})
			defer nn.Release(b)
			imp := tc.imp()
			defer imp.Release()
			err := prune.GlobalUnstructured([]prune.Target{{Module: a, Name: "weight", Importance: imp}, {Module: b, Name: "weight"}}, prune.Count(4))
			if tc.errIs != nil {
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("error %v, want %v", err, tc.errIs)
				}
				if a.WeightMask != nil || b.WeightMask != nil {
					t.Error("a failed call left a mask")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Four of the twelve go, the smallest scores (|b| for b),
			// ties to a, listed first.
			all := append(maskOf(a), maskOf(b)...)
			if countZeros(all) != 4 {
				t.Errorf("%d pruned, want 4", countZeros(all))
			}
			if got := maskOf(a); !closeTo(got, tc.want, 0) {
				t.Errorf("mask of a %v, want %v", got, tc.want)
			}
		})
	}
}
