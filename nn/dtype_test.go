package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// normModel is Linear, LayerNorm, ReLU, Linear.
func normModel() (*nn.Sequential, *nn.LayerNorm) {
	ln := nn.NewLayerNorm([]int{8}, 1e-5)
	return nn.NewSequential(nn.NewLinear(4, 8), ln, nn.NewReLU(), nn.NewLinear(8, 2)), ln
}

func TestModuleToDType(t *testing.T) {
	tests := []struct {
		name    string
		convert func(m nn.Module)
		want    vram.DType
	}{
		{"half", func(m nn.Module) { m.(*nn.Sequential).Half() }, vram.Float16},
		{"bfloat16", func(m nn.Module) { m.(*nn.Sequential).BFloat16() }, vram.BFloat16},
		{"float64 via ConvertDType", func(m nn.Module) { nn.ConvertDType(m, vram.Float64) }, vram.Float64},
		{"half then float", func(m nn.Module) { s := m.(*nn.Sequential); s.Half(); s.Float() }, vram.Float32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ln := normModel()
			defer nn.Release(m)
			before := m.Parameters()
			tc.convert(m)
			after := m.Parameters()
			if len(after) != len(before) {
				t.Fatalf("%d parameters after conversion, want %d", len(after), len(before))
			}
			norm := map[*vram.Tensor]bool{ln.Weight: true, ln.Bias: true}
			for i, p := range after {
				if p != before[i] {
					t.Fatalf("parameter %d changed identity", i)
				}
				want := tc.want
				if norm[p] && want.Size() < 4 {
					// Normalization layers stay float32 under 16 bits
					// and follow a conversion to float64.
					want = vram.Float32
				}
				if p.DType() != want {
					t.Errorf("parameter %d: dtype %s, want %s", i, p.DType(), want)
				}
			}
		})
	}
}

func TestToDTypeKeepsValuesAndGrad(t *testing.T) {
	lin := nn.NewLinear(3, 2)
	defer nn.Release(lin)
	want := lin.Weight.Float32s()
	g := vram.OnesLike(lin.Weight)
	lin.Weight.SetGrad(g)
	lin.Half()
	if lin.Weight.DType() != vram.Float16 || lin.Weight.Grad().DType() != vram.Float16 {
		t.Fatalf("weight %s, grad %s; want float16 for both", lin.Weight.DType(), lin.Weight.Grad().DType())
	}
	lin.Float()
	for i, v := range lin.Weight.Float32s() {
		if math.Abs(float64(v-want[i])) > 1e-3 {
			t.Fatalf("weight[%d] = %v after half and back, want %v", i, v, want[i])
		}
	}
	if got := lin.Weight.Grad().Float32s(); got[0] != 1 {
		t.Fatalf("grad[0] = %v, want 1", got[0])
	}
}

func TestLayerNormStaysFloat32(t *testing.T) {
	ln := nn.NewLayerNorm([]int{4}, 1e-5)
	defer nn.Release(ln)
	ln.Half()
	if ln.Weight.DType() != vram.Float32 || ln.Bias.DType() != vram.Float32 {
		t.Fatalf("LayerNorm parameters %s/%s after Half, want float32", ln.Weight.DType(), ln.Bias.DType())
	}
	var _ nn.Float32Layer = ln
	for _, dt := range []vram.DType{vram.Float16, vram.BFloat16, vram.Float32} {
		x := vram.FromSlice([]float32{1, 2, 3, 4, 2, 2, 2, 6}, vram.Shape{2, 4}, dt)
		y := ln.Forward(x)
		if y.DType() != dt {
			t.Errorf("%s input: output %s, want the input's dtype", dt, y.DType())
		}
		got := y.Float32s()
		// Row 0 normalised: (x-2.5)/sqrt(1.25+eps).
		if want := float32(-1.5 / math.Sqrt(1.25+1e-5)); math.Abs(float64(got[0]-want)) > 1e-2 {
			t.Errorf("%s input: y[0] = %v, want %v", dt, got[0], want)
		}
		x.Release()
		y.Release()
	}
}

func TestHalfModelTrains(t *testing.T) {
	for _, dt := range []vram.DType{vram.Float16, vram.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			m, ln := normModel()
			defer nn.Release(m)
			opt, err := optim.NewSGD(m.Parameters(), optim.SGDConfig{LR: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			nn.ConvertDType(m, dt)
			x := vram.Randn(vram.Shape{16, 4}, dt)
			y := vram.Randn(vram.Shape{16, 2}, dt)
			defer x.Release()
			defer y.Release()
			first := m.At(0).(*nn.Linear).Weight
			before := first.Float32s()
			var losses []float64
			for range 5 {
				opt.ZeroGrad()
				out := m.Forward(x)
				if out.DType() != dt {
					t.Fatalf("output %s, want %s", out.DType(), dt)
				}
				loss := nn.MSELoss(out, y)
				loss.Backward()
				losses = append(losses, loss.Item())
				if g := first.Grad(); g == nil || g.DType() != dt {
					t.Fatalf("first weight's gradient %v, want a %s tensor", g, dt)
				}
				if g := ln.Weight.Grad(); g == nil || g.DType() != vram.Float32 {
					t.Fatalf("LayerNorm weight's gradient %v, want a float32 tensor", g)
				}
				opt.Step()
				out.Release()
				loss.Release()
			}
			if first.DType() != dt {
				t.Fatalf("weight is %s after steps, want %s", first.DType(), dt)
			}
			changed := false
			for i, v := range first.Float32s() {
				changed = changed || v != before[i]
			}
			if !changed {
				t.Fatal("the optimizer made before the conversion did not update the converted weight")
			}
			if !(losses[len(losses)-1] < losses[0]) {
				t.Fatalf("loss did not fall: %v", losses)
			}
		})
	}
}

func TestToDTypeRejectsNonFloat(t *testing.T) {
	m, _ := normModel()
	defer nn.Release(m)
	for _, dt := range []vram.DType{vram.Int32, vram.Int64, vram.Bool, vram.DType(200)} {
		func() {
			defer func() {
				var e *vram.Error
				if r := recover(); r == nil {
					t.Errorf("%v: no panic", dt)
				} else if err, ok := r.(error); !ok || !errors.As(err, &e) || e.Kind != vram.ErrDType {
					t.Errorf("%v: panic %v, want a vram.ErrDType error", dt, r)
				}
			}()
			m.ToDType(dt)
		}()
		for _, p := range m.Parameters() {
			if p.DType() != vram.Float32 {
				t.Fatalf("%v: a parameter became %s; nothing should change", dt, p.DType())
			}
		}
	}
}

func TestCastInPlaceErrors(t *testing.T) {
	leaf := vram.Ones(vram.Shape{2}).SetRequiresGrad(true)
	defer leaf.Release()
	computed := leaf.MulScalar(2)
	defer computed.Release()
	ints := vram.Ones(vram.Shape{2}, vram.Int64)
	defer ints.Release()
	tests := []struct {
		name string
		t    *vram.Tensor
		dt   vram.DType
		kind error
	}{
		{"computed tensor", computed, vram.Float16, vram.ErrAutograd},
		{"integer target", leaf, vram.Int32, vram.ErrDType},
		{"integer tensor", ints, vram.Float16, vram.ErrDType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				var e *vram.Error
				r := recover()
				if err, ok := r.(error); !ok || !errors.As(err, &e) || e.Kind != tc.kind {
					t.Fatalf("panic %v, want kind %v", r, tc.kind)
				}
			}()
			tc.t.CastInPlace(tc.dt)
		})
	}
	if leaf.DType() != vram.Float32 || ints.DType() != vram.Int64 {
		t.Fatal("a failed CastInPlace changed the tensor")
	}
}
