package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// The elementwise activations give PyTorch's values and gradients, kinks
// included, on the CPU and a simulated device, against float64 formulas
// worked out here.
func TestMoreActivations(t *testing.T) {
	in := []float64{-30, -3, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 3, 6, 30}
	step := func(c bool, a, b float64) float64 {
		if c {
			return a
		}
		return b
	}
	const alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
	tests := []struct {
		name         string
		m            nn.Module
		value, deriv func(x float64) float64
	}{
		{"softsign", nn.NewSoftsign(),
			func(x float64) float64 { return x / (1 + math.Abs(x)) },
			func(x float64) float64 { return 1 / ((1 + math.Abs(x)) * (1 + math.Abs(x))) }},
		{"tanhshrink", nn.NewTanhshrink(),
			func(x float64) float64 { return x - math.Tanh(x) },
			func(x float64) float64 { return math.Tanh(x) * math.Tanh(x) }},
		{"hardshrink", nn.NewHardshrink(0.5),
			func(x float64) float64 { return step(math.Abs(x) > 0.5, x, 0) },
			func(x float64) float64 { return step(math.Abs(x) > 0.5, 1, 0) }},
		{"hardshrink negative lambda", nn.NewHardshrink(-1),
			func(x float64) float64 { return x },
			func(x float64) float64 { return 1 }},
		{"hardshrink 0", nn.NewHardshrink(0),
			func(x float64) float64 { return step(x != 0, x, 0) },
			func(x float64) float64 { return step(x != 0, 1, 0) }},
		{"softshrink", nn.NewSoftshrink(0.5),
			func(x float64) float64 {
				return step(x > 0.5, x-0.5, step(x < -0.5, x+0.5, 0))
			},
			func(x float64) float64 { return step(math.Abs(x) > 0.5, 1, 0) }},
		{"threshold", nn.NewThreshold(0.25, -7),
			func(x float64) float64 { return step(x > 0.25, x, -7) },
			func(x float64) float64 { return step(x > 0.25, 1, 0) }},
		{"log sigmoid", nn.NewLogSigmoid(),
			func(x float64) float64 { return math.Min(x, 0) - math.Log1p(math.Exp(-math.Abs(x))) },
			func(x float64) float64 { return 1 - 1/(1+math.Exp(-x)) }},
		{"hardsigmoid", nn.NewHardsigmoid(),
			func(x float64) float64 { return math.Min(math.Max(x+3, 0), 6) / 6 },
			func(x float64) float64 { return step(x > -3 && x < 3, 1.0/6, 0) }},
		{"celu", nn.NewCELU(2),
			func(x float64) float64 { return math.Max(0, x) + math.Min(0, 2*math.Expm1(x/2)) },
			func(x float64) float64 { return step(x > 0, 1, math.Exp(x/2)) }},
		{"celu negative alpha", nn.NewCELU(-2),
			func(x float64) float64 { return math.Max(0, x) + math.Min(0, -2*math.Expm1(x/-2)) },
			func(x float64) float64 { return step(x > 0, 1, math.Exp(x/-2)) }},
		{"selu", nn.NewSELU(),
			func(x float64) float64 { return scale * step(x > 0, x, alpha*math.Expm1(x)) },
			func(x float64) float64 { return scale * step(x > 0, 1, alpha*math.Exp(x)) }},
		{"prelu", nn.NewPReLU(1, 0.25, vram.Float64),
			func(x float64) float64 { return step(x > 0, x, 0.25*x) },
			func(x float64) float64 { return step(x > 0, 1, 0.25) }},
		{"rrelu eval", func() nn.Module { m := nn.NewRReLU(0.1, 0.3); m.Eval(); return m }(),
			func(x float64) float64 { return step(x > 0, x, 0.2*x) },
			func(x float64) float64 { return step(x > 0, 1, 0.2) }},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+" "+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					tc.m.To(dev)
					x := vram.FromSlice(in, vram.Shape{3, 4}, vram.Float64, dev, vram.WithGrad())
					y := tc.m.Forward(x)
					if !slices.Equal(y.Shape(), vram.Shape{3, 4}) || y.Device() != dev {
						t.Fatalf("got %v on %v", y.Shape(), y.Device())
					}
					y.Sum().Backward()
					got, grad := y.Float64s(), x.Grad().Float64s()
					for i, v := range in {
						if !near(got[i], tc.value(v), 1e-12) {
							t.Errorf("f(%v) = %v, want %v", v, got[i], tc.value(v))
						}
						if !near(grad[i], tc.deriv(v), 1e-12) {
							t.Errorf("f'(%v) = %v, want %v", v, grad[i], tc.deriv(v))
						}
					}
				})
			})
		}
	}
}

// Softmin, GLU and PReLU with a slope per channel match their formulas,
// and their gradients (the slopes' included) match finite differences.
func TestSoftminGLUPReLU(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(3))
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		t.Run(dev.String(), func(t *testing.T) {
			x := vram.Randn(vram.Shape{2, 4, 3}, vram.Float64, dev, g)
			xs := x.Float64s()

			sm := nn.NewSoftmin(1).Forward(x).Float64s()
			for n := range 2 {
				for k := range 3 {
					var z float64
					for c := range 4 {
						z += math.Exp(-xs[n*12+c*3+k])
					}
					for c := range 4 {
						if i := n*12 + c*3 + k; !near(sm[i], math.Exp(-xs[i])/z, 1e-12) {
							t.Fatalf("softmin element %d: %v, want %v", i, sm[i], math.Exp(-xs[i])/z)
						}
					}
				}
			}

			glu := nn.NewGLU(1).Forward(x)
			if !slices.Equal(glu.Shape(), vram.Shape{2, 2, 3}) {
				t.Fatalf("glu shape %v", glu.Shape())
			}
			gv := glu.Float64s()
			for n := range 2 {
				for c := range 2 {
					for k := range 3 {
						a, b := xs[n*12+c*3+k], xs[n*12+(c+2)*3+k]
						if i := n*6 + c*3 + k; !near(gv[i], a/(1+math.Exp(-b)), 1e-12) {
							t.Fatalf("glu element %d: %v, want %v", i, gv[i], a/(1+math.Exp(-b)))
						}
					}
				}
			}

			p := nn.NewPReLU(4, 0.25, vram.Float64, dev)
			if names := paramNames(p); !slices.Equal(names, []string{"weight"}) {
				t.Fatalf("parameters %v", names)
			}
			set(p.Weight, 0.1, -0.2, 0.3, 0.5)
			pv := p.Forward(x).Float64s()
			for i, v := range xs {
				want := v
				if v <= 0 {
					want = []float64{0.1, -0.2, 0.3, 0.5}[(i/3)%4] * v
				}
				if !near(pv[i], want, 1e-12) {
					t.Fatalf("prelu element %d: %v, want %v", i, pv[i], want)
				}
			}
			if dev != vram.CPU {
				return // finiteDifferences works on the CPU
			}
			xg := x.Clone()
			finiteDifferences(t, func() *vram.Tensor { return p.Forward(xg) }, xg, p.Weight)
			finiteDifferences(t, func() *vram.Tensor { return nn.NewGLU(-1).Forward(xg.Narrow(2, 0, 2)) }, xg)
			finiteDifferences(t, func() *vram.Tensor { return nn.NewSoftmin(0).Forward(xg) }, xg)
		})
	}
}

// RReLU draws a slope in [Lower, Upper] for each negative element in
// training mode, the same ones for the same seed, passes the positive
// elements, and its gradient is the slope drawn.
func TestRReLUTraining(t *testing.T) {
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		t.Run(dev.String(), func(t *testing.T) {
			x := vram.Randn(vram.Shape{200}, vram.Float64, dev, vram.WithGenerator(vram.NewGenerator(1)), vram.WithGrad())
			run := func() ([]float64, []float64) {
				x.ZeroGrad()
				y := nn.NewRReLU(0.1, 0.3, vram.WithGenerator(vram.NewGenerator(5))).Forward(x)
				y.Sum().Backward()
				return y.Float64s(), x.Grad().Float64s()
			}
			y, grad := run()
			y2, _ := run()
			if !slices.Equal(y, y2) {
				t.Fatal("one seed gave two results")
			}
			var slopes []float64
			for i, v := range x.Float64s() {
				if v > 0 {
					if y[i] != v || grad[i] != 1 {
						t.Fatalf("positive %v gave %v, gradient %v", v, y[i], grad[i])
					}
					continue
				}
				a := y[i] / v
				if a < 0.1 || a > 0.3 || !near(grad[i], a, 1e-12) {
					t.Fatalf("negative %v gave slope %v, gradient %v", v, a, grad[i])
				}
				slopes = append(slopes, a)
			}
			if slices.Min(slopes) == slices.Max(slopes) {
				t.Fatal("every slope is the same")
			}
		})
	}
}

// Hardshrink zeroes the elements it drops as +0, as PyTorch's does, and
// never gives −0 for a small negative element.
func TestHardshrinkGivesPositiveZero(t *testing.T) {
	tests := []struct {
		name   string
		lambda float64
		in     []float32
	}{
		{"small negatives", 0.5, []float32{-0.25, -0.5, float32(math.Copysign(0, -1))}},
		{"negative zero at lambda 0", 0, []float32{float32(math.Copysign(0, -1))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			y := nn.NewHardshrink(tc.lambda).Forward(vram.FromSlice(tc.in, vram.Shape{len(tc.in)}))
			for i, v := range y.Float32s() {
				if v != 0 || math.Signbit(float64(v)) {
					t.Errorf("hardshrink(%v)[%d] = %v (signbit %v), want +0", tc.in, i, v, math.Signbit(float64(v)))
				}
			}
		})
	}
}

// Bad arguments and shapes give errors of vram's kinds naming the layer.
func TestMoreActivationErrors(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 3})
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"hardshrink NaN", func() { nn.NewHardshrink(math.NaN()) }, vram.ErrArgument},
		{"softshrink NaN", func() { nn.NewSoftshrink(math.NaN()) }, vram.ErrArgument},
		{"threshold NaN", func() { nn.NewThreshold(math.NaN(), 0) }, vram.ErrArgument},
		{"celu 0", func() { nn.NewCELU(0) }, vram.ErrArgument},
		{"rrelu bounds", func() { nn.NewRReLU(0.5, 0.1) }, vram.ErrArgument},
		{"prelu 0 parameters", func() { nn.NewPReLU(0, 0.25) }, vram.ErrArgument},
		{"prelu channels", func() { nn.NewPReLU(4, 0.25).Forward(x) }, vram.ErrShape},
		{"prelu 1-d", func() { nn.NewPReLU(3, 0.25).Forward(vram.Randn(vram.Shape{3})) }, vram.ErrShape},
		{"glu odd", func() { nn.NewGLU(-1).Forward(x) }, vram.ErrShape},
		{"glu dim", func() { nn.NewGLU(2).Forward(x) }, vram.ErrIndex},
		{"glu scalar", func() { nn.NewGLU(0).Forward(vram.Scalar(1)) }, vram.ErrShape},
		{"softsign nil", func() { nn.NewSoftsign().Forward(nil) }, vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := vram.Catch(tc.fn); !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
		})
	}
}

// NaN passes through every elementwise activation, as in PyTorch, whose
// threshold keeps x unless x <= threshold.
func TestMoreActivationsPropagateNaN(t *testing.T) {
	eval := nn.NewRReLU(0.1, 0.3)
	eval.Eval()
	for _, m := range []nn.Module{nn.NewSoftsign(), nn.NewTanhshrink(), nn.NewHardshrink(0.5), nn.NewSoftshrink(0.5),
		nn.NewThreshold(0.1, 20), nn.NewLogSigmoid(), nn.NewHardsigmoid(), nn.NewCELU(1), nn.NewSELU(),
		nn.NewPReLU(1, 0.25), nn.NewRReLU(0.1, 0.3), eval} {
		x := vram.FromSlice([]float32{float32(math.NaN()), 1}, vram.Shape{2})
		if got := m.Forward(x).Float64s(); !math.IsNaN(got[0]) {
			t.Errorf("%T: NaN gave %v", m, got[0])
		}
	}
}
