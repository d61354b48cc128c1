package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// The activation modules give PyTorch's values and gradients (kinks
// included) in every floating-point dtype, on the CPU and a simulated
// device, with float64 references computed here.
func TestActivationModules(t *testing.T) {
	in := []float64{-30, -3, -1, -0.5, 0, 0.5, 1, 3, 6, 30}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	sp := func(x float64) float64 { return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) }
	tests := []struct {
		name  string
		m     nn.Module
		value func(x float64) float64
		deriv func(x float64) float64
	}{
		{"leaky relu", nn.NewLeakyReLU(0.1),
			func(x float64) float64 { return map[bool]float64{true: x, false: 0.1 * x}[x > 0] },
			func(x float64) float64 { return map[bool]float64{true: 1, false: 0.1}[x > 0] }},
		{"elu", nn.NewELU(1),
			func(x float64) float64 { return map[bool]float64{true: x, false: math.Expm1(x)}[x > 0] },
			func(x float64) float64 { return map[bool]float64{true: 1, false: math.Exp(x)}[x > 0] }},
		{"silu", nn.NewSiLU(),
			func(x float64) float64 { return x * sig(x) },
			func(x float64) float64 { return sig(x) * (1 + x*(1-sig(x))) }},
		{"mish", nn.NewMish(),
			func(x float64) float64 { return x * math.Tanh(sp(x)) },
			func(x float64) float64 { th := math.Tanh(sp(x)); return th + x*sig(x)*(1-th*th) }},
		{"softplus", nn.NewSoftplus(1, 20),
			func(x float64) float64 { return map[bool]float64{true: x, false: sp(x)}[x > 20] },
			func(x float64) float64 { return map[bool]float64{true: 1, false: sig(x)}[x > 20] }},
		{"hardtanh", nn.NewHardtanh(-1, 1),
			func(x float64) float64 { return math.Min(math.Max(x, -1), 1) },
			func(x float64) float64 { return map[bool]float64{true: 1, false: 0}[x > -1 && x < 1] }},
		{"relu6", nn.NewReLU6(),
			func(x float64) float64 { return math.Min(math.Max(x, 0), 6) },
			func(x float64) float64 { return map[bool]float64{true: 1, false: 0}[x > 0 && x < 6] }},
		{"hardswish", nn.NewHardswish(),
			func(x float64) float64 { return x * math.Min(math.Max(x+3, 0), 6) / 6 },
			func(x float64) float64 {
				if x < -3 {
					return 0
				}
				return map[bool]float64{true: x/3 + 0.5, false: 1}[x <= 3]
			}},
		{"gelu tanh", nn.NewGELUTanh(),
			func(x float64) float64 {
				return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
			},
			func(x float64) float64 {
				c := math.Sqrt(2 / math.Pi)
				th := math.Tanh(c * (x + 0.044715*x*x*x))
				return 0.5*(1+th) + 0.5*x*(1-th*th)*c*(1+3*0.044715*x*x)
			}},
		{"relu", nn.NewReLU(),
			func(x float64) float64 { return math.Max(x, 0) },
			func(x float64) float64 { return map[bool]float64{true: 1, false: 0}[x > 0] }},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32, vram.Float16, vram.BFloat16} {
			tol := map[vram.DType]float64{vram.Float16: 2e-3, vram.BFloat16: 8e-3, vram.Float32: 2e-5, vram.Float64: 1e-12}[dt]
			for _, tc := range tests {
				t.Run(dev.String()+" "+dt.String()+" "+tc.name, func(t *testing.T) {
					vram.Tidy(func() {
						x := vram.FromSlice(in, vram.Shape{2, 5}, dt, dev, vram.WithGrad())
						y := tc.m.Forward(x)
						if y.DType() != dt || !slices.Equal(y.Shape(), vram.Shape{2, 5}) {
							t.Fatalf("got %v %v", y.DType(), y.Shape())
						}
						y.Sum().Backward()
						stored := x.Float64s()
						ys, gs := y.Float64s(), x.Grad().Float64s()
						for i, v := range stored {
							if w := tc.value(v); math.Abs(ys[i]-w) > tol*math.Max(math.Abs(w), 1e-2) || math.IsNaN(ys[i]) {
								t.Errorf("f(%v) = %v, want %v", v, ys[i], w)
							}
							if w := tc.deriv(v); math.Abs(gs[i]-w) > tol*math.Max(math.Abs(w), 1e-2) || math.IsNaN(gs[i]) {
								t.Errorf("f'(%v) = %v, want %v", v, gs[i], w)
							}
						}
					})
				})
			}
		}
	}
}

// Softmax and LogSoftmax modules normalise along their (possibly
// negative) dimension; a row of −Inf gives NaN and huge logits no
// overflow, as in PyTorch.
func TestSoftmaxModules(t *testing.T) {
	inf := math.Inf(-1)
	x := []float64{1, 2, 3, 4, inf, inf, 1000, -1000}
	ls := func(a, b float64) []float64 {
		m := math.Max(a, b)
		l := m + math.Log(math.Exp(a-m)+math.Exp(b-m))
		return []float64{a - l, b - l}
	}
	nan := math.NaN()
	tests := []struct {
		name string
		m    nn.Module
		want []float64
	}{
		// x is [4, 2]: rows (1, 2), (3, 4), (−Inf, −Inf), (1000, −1000).
		{"softmax dim -1", nn.NewSoftmax(-1), []float64{sig(-1), sig(1), sig(-1), sig(1), nan, nan, 1, 0}},
		{"log softmax dim 1", nn.NewLogSoftmax(1), slices.Concat(ls(1, 2), ls(3, 4), []float64{nan, nan}, ls(1000, -1000))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vram.Tidy(func() {
				got := tc.m.Forward(vram.FromSlice(x, vram.Shape{4, 2})).Float64s()
				for i := range got {
					if math.IsNaN(tc.want[i]) != math.IsNaN(got[i]) || !math.IsNaN(got[i]) && !near(got[i], tc.want[i], 1e-12) {
						t.Fatalf("got %v, want %v", got, tc.want)
					}
				}
			})
		})
	}
	vram.Tidy(func() {
		got := nn.NewSoftmax(0).Forward(vram.FromSlice([]float64{0, 0, 0, math.Log(3)}, vram.Shape{2, 2})).Float64s()
		checkValues(t, "softmax dim 0", got, []float64{0.5, 0.25, 0.5, 0.75}, 1e-12)
	})
}

func sig(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// The activation constructors refuse bad settings with vram.ErrArgument.
func TestActivationModuleArguments(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"softplus beta 0", func() { nn.NewSoftplus(0, 20) }},
		{"softplus threshold NaN", func() { nn.NewSoftplus(1, math.NaN()) }},
		{"hardtanh min > max", func() { nn.NewHardtanh(2, 1) }},
		{"hardtanh NaN", func() { nn.NewHardtanh(-1, math.NaN()) }},
		{"elu alpha NaN", func() { nn.NewELU(math.NaN()) }},
		{"leaky relu slope NaN", func() { nn.NewLeakyReLU(math.NaN()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() { err, _ = recover().(error) }()
				tc.f()
			}()
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("got %v, want vram.ErrArgument", err)
			}
		})
	}
}

// A Linear followed by a tanh-approximated GELU in a Sequential is not
// fused into the exact GELU.
func TestSequentialKeepsGELUTanh(t *testing.T) {
	vram.Tidy(func() {
		l := nn.NewLinear(1, 1, vram.Float64)
		set(l.Weight, 1)
		set(l.Bias, 0)
		x := vram.FromSlice([]float64{-1, 1.5}, vram.Shape{2, 1}, vram.Float64)
		got := nn.NewSequential(l, nn.NewGELUTanh()).Forward(x).Float64s()
		want := []float64{x.GeluTanh().Float64s()[0], x.GeluTanh().Float64s()[1]}
		checkValues(t, "linear+gelu tanh", got, want, 1e-15)
	})
}
