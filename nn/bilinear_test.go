package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// Bilinear computes Σ_ij x1[i]·W[o, i, j]·x2[j] + b[o] over any leading
// dimensions, with PyTorch's parameter names, shapes and initial bounds,
// on the CPU and a simulated device; its gradients match finite
// differences.
func TestBilinear(t *testing.T) {
	const in1, in2, out = 3, 2, 4
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		t.Run(dev.String(), func(t *testing.T) {
			g := vram.WithGenerator(vram.NewGenerator(2))
			l := nn.NewBilinear(in1, in2, out, vram.Float64, dev, g)
			if names := paramNames(l); !slices.Equal(names, []string{"weight", "bias"}) {
				t.Fatalf("parameters %v", names)
			}
			if !slices.Equal(l.Weight.Shape(), vram.Shape{out, in1, in2}) || !slices.Equal(l.Bias.Shape(), vram.Shape{out}) {
				t.Fatalf("shapes %v %v", l.Weight.Shape(), l.Bias.Shape())
			}
			bound := 1 / math.Sqrt(in1)
			for _, v := range append(l.Weight.Float64s(), l.Bias.Float64s()...) {
				if v < -bound || v >= bound {
					t.Fatalf("initial value %v outside ±%v", v, bound)
				}
			}
			x1 := vram.Randn(vram.Shape{2, 3, in1}, vram.Float64, dev, g)
			x2 := vram.Randn(vram.Shape{2, 3, in2}, vram.Float64, dev, g)
			y := l.ForwardPair(x1, x2)
			if !slices.Equal(y.Shape(), vram.Shape{2, 3, out}) {
				t.Fatalf("shape %v", y.Shape())
			}
			w, b, a, c := l.Weight.Float64s(), l.Bias.Float64s(), x1.Float64s(), x2.Float64s()
			var want []float64
			for r := range 6 {
				for o := range out {
					v := b[o]
					for i := range in1 {
						for j := range in2 {
							v += a[r*in1+i] * w[o*in1*in2+i*in2+j] * c[r*in2+j]
						}
					}
					want = append(want, v)
				}
			}
			checkValues(t, "values", y.Float64s(), want, 1e-12)
			nb := nn.NewBilinearNoBias(in1, in1, 1, vram.Float64, dev)
			if names := paramNames(nb); !slices.Equal(names, []string{"weight"}) {
				t.Fatalf("no-bias parameters %v", names)
			}
			if s := nb.Forward(x1).Shape(); !slices.Equal(s, vram.Shape{2, 3, 1}) {
				t.Fatalf("self shape %v", s)
			}
			if dev == vram.CPU {
				finiteDifferences(t, func() *vram.Tensor { return l.ForwardPair(x1, x2) }, x1, x2, l.Weight, l.Bias)
			}
		})
	}
}

// Inputs that do not fit give an error of kind vram.ErrShape.
func TestBilinearErrors(t *testing.T) {
	l := nn.NewBilinear(3, 2, 4)
	for _, tc := range []struct {
		name   string
		x1, x2 vram.Shape
	}{
		{"in1", vram.Shape{5, 2}, vram.Shape{5, 2}},
		{"in2", vram.Shape{5, 3}, vram.Shape{5, 3}},
		{"leading", vram.Shape{5, 3}, vram.Shape{4, 2}},
		{"scalar", vram.Shape{}, vram.Shape{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(func() { l.ForwardPair(vram.Randn(tc.x1), vram.Randn(tc.x2)) })
			if !errors.Is(err, vram.ErrShape) {
				t.Fatalf("got %v", err)
			}
		})
	}
	if err := vram.Catch(func() { nn.NewBilinear(-1, 2, 3) }); !errors.Is(err, vram.ErrArgument) {
		t.Fatalf("negative size: %v", err)
	}
}

// TestBilinearChangedFields sets a Bilinear's Weight or Bias after
// construction to a tensor it cannot use: Forward panics with an
// *vram.Error of the kind named, not with a runtime error from reading
// the weight's shape.
func TestBilinearChangedFields(t *testing.T) {
	x := vram.Randn(vram.Shape{5, 3})
	defer x.Release()
	tests := []struct {
		name   string
		change func(l *nn.Bilinear)
		kind   error
	}{
		{"nil weight", func(l *nn.Bilinear) { l.Weight = nil }, vram.ErrArgument},
		{"1-D weight", func(l *nn.Bilinear) { l.Weight = vram.Ones(vram.Shape{7}) }, vram.ErrShape},
		{"scalar weight", func(l *nn.Bilinear) { l.Weight = vram.Scalar(1) }, vram.ErrShape},
		{"4-D weight", func(l *nn.Bilinear) { l.Weight = vram.Ones(vram.Shape{4, 3, 3, 1}) }, vram.ErrShape},
		{"bias of 3", func(l *nn.Bilinear) { l.Bias = vram.Ones(vram.Shape{3}) }, vram.ErrShape},
		{"bias [1]", func(l *nn.Bilinear) { l.Bias = vram.Ones(vram.Shape{1}) }, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := nn.NewBilinear(3, 3, 4)
			tc.change(l)
			defer nn.Release(l)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked with %v (%T), want an *vram.Error", r, r)
					}
				}()
				err = vram.Catch(func() { l.Forward(x).Release() })
			}()
			if !errors.Is(err, tc.kind) {
				t.Errorf("got %v, want an error of kind %v", err, tc.kind)
			}
		})
	}
}
