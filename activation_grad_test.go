package vram_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
)

// The gradients of the activations whose backward is a formula of several
// ops (GELU with the tanh approximation, SiLU) must be those of PyTorch's
// kernels for 16-bit inputs, which compute in float32 and round once: a
// few of the dtype's steps from the exact derivative at the stored input,
// with no NaN where a 16-bit x³ overflows.
func TestActivationGradient16Bit(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	tests := []struct {
		name string
		f    func(*vram.Tensor) *vram.Tensor
		d    func(x float64) float64
	}{
		{"gelu tanh", (*vram.Tensor).GeluTanh, func(x float64) float64 {
			c := math.Sqrt(2 / math.Pi)
			th := math.Tanh(c * (x + 0.044715*x*x*x))
			if math.IsInf(x*x, 1) {
				return 0.5 * (1 + th)
			}
			return 0.5*(1+th) + 0.5*x*(1-th*th)*c*(1+3*0.044715*x*x)
		}},
		{"silu", (*vram.Tensor).Silu, func(x float64) float64 { s := sig(x); return s * (1 + x*(1-s)) }},
	}
	xs := []float64{-300, -60, -8, -3.0625, -3, -2.5, -1.3125, -1, -0.5, 0, 0.5, 1, 2, 3, 6.0625, 8, 60, 300}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float16, vram.BFloat16, vram.Float32, vram.Float64} {
			for _, tc := range tests {
				t.Run(dev.String()+" "+dt.String()+" "+tc.name, func(t *testing.T) {
					vram.Tidy(func() {
						x := vram.FromSlice(xs, vram.Shape{len(xs)}, dt, dev)
						stored := x.Float64s()
						x.SetRequiresGrad(true)
						tc.f(x).Sum().Backward()
						got := x.Grad().Float64s()
						// One rounding to dt of the float32 result, plus
						// float32's own error in the formula.
						tol := map[vram.DType]float64{vram.Float16: 1e-3, vram.BFloat16: 8e-3, vram.Float32: 1e-5, vram.Float64: 1e-12}[dt]
						for i, v := range got {
							want := tc.d(stored[i])
							if math.IsNaN(v) || math.Abs(v-want) > tol*math.Max(math.Abs(want), 1e-2) {
								t.Errorf("d/dx at %v = %v, want %v", stored[i], v, want)
							}
						}
					})
				})
			}
		}
	}
}

// The composite activations (Softplus, Elu, Mish, Hardswish, Hardtanh)
// match PyTorch's values and gradients, with its one-sided derivatives at
// the kinks (Elu'(0) = alpha, Hardswish' −1/2 at −3 and 3/2 at 3,
// Hardtanh' 0 at its bounds), without overflow at large inputs, in every
// floating-point dtype and on every device; in float64 the gradients also
// agree with central finite differences away from the kinks.
func TestCompositeActivations(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	sp := func(x float64) float64 { return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) }
	tests := []struct {
		name  string
		f     func(*vram.Tensor) *vram.Tensor
		value func(x float64) float64
		deriv func(x float64) float64
		kinks []float64
	}{
		{"softplus", func(x *vram.Tensor) *vram.Tensor { return x.Softplus(1, 20) },
			func(x float64) float64 {
				if x > 20 {
					return x
				}
				return sp(x)
			},
			func(x float64) float64 {
				if x > 20 {
					return 1
				}
				return sig(x)
			}, []float64{20}},
		{"softplus beta 2 threshold 3", func(x *vram.Tensor) *vram.Tensor { return x.Softplus(2, 3) },
			func(x float64) float64 {
				if 2*x > 3 {
					return x
				}
				return sp(2*x) / 2
			},
			func(x float64) float64 {
				if 2*x > 3 {
					return 1
				}
				return sig(2 * x)
			}, []float64{1.5}},
		{"softplus beta -1", func(x *vram.Tensor) *vram.Tensor { return x.Softplus(-1, 20) },
			func(x float64) float64 {
				if -x > 20 {
					return x
				}
				return -sp(-x)
			},
			func(x float64) float64 {
				if -x > 20 {
					return 1
				}
				return sig(-x)
			}, []float64{-20}},
		{"elu", func(x *vram.Tensor) *vram.Tensor { return x.Elu(1) },
			func(x float64) float64 {
				if x > 0 {
					return x
				}
				return math.Expm1(x)
			},
			func(x float64) float64 {
				if x > 0 {
					return 1
				}
				return math.Exp(x)
			}, []float64{0}},
		{"elu alpha 0.5", func(x *vram.Tensor) *vram.Tensor { return x.Elu(0.5) },
			func(x float64) float64 {
				if x > 0 {
					return x
				}
				return 0.5 * math.Expm1(x)
			},
			func(x float64) float64 {
				if x > 0 {
					return 1
				}
				return 0.5 * math.Exp(x)
			}, []float64{0}},
		{"mish", (*vram.Tensor).Mish,
			func(x float64) float64 { return x * math.Tanh(sp(x)) },
			func(x float64) float64 {
				th := math.Tanh(sp(x))
				return th + x*sig(x)*(1-th*th)
			}, nil},
		{"hardswish", (*vram.Tensor).Hardswish,
			func(x float64) float64 { return x * math.Min(math.Max(x+3, 0), 6) / 6 },
			func(x float64) float64 {
				switch {
				case x < -3:
					return 0
				case x <= 3:
					return x/3 + 0.5
				}
				return 1
			}, []float64{-3, 3}},
		{"hardtanh", func(x *vram.Tensor) *vram.Tensor { return x.Hardtanh(-1, 1) },
			func(x float64) float64 { return math.Min(math.Max(x, -1), 1) },
			func(x float64) float64 {
				if x <= -1 || x >= 1 {
					return 0
				}
				return 1
			}, []float64{-1, 1}},
		{"relu6", func(x *vram.Tensor) *vram.Tensor { return x.Hardtanh(0, 6) },
			func(x float64) float64 { return math.Min(math.Max(x, 0), 6) },
			func(x float64) float64 {
				if x <= 0 || x >= 6 {
					return 0
				}
				return 1
			}, []float64{0, 6}},
	}
	xs := []float64{-1e4, -100, -21, -20, -8, -3.5, -3, -2.5, -1.5, -1, -0.5, 0, 0.25, 0.5, 1, 1.5, 2, 3, 3.5, 6, 7, 20, 21, 100, 1e4}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32, vram.Float16, vram.BFloat16} {
			tol := map[vram.DType]float64{vram.Float16: 2e-3, vram.BFloat16: 8e-3, vram.Float32: 2e-6, vram.Float64: 1e-12}[dt]
			for _, tc := range tests {
				t.Run(dev.String()+" "+dt.String()+" "+tc.name, func(t *testing.T) {
					vram.Tidy(func() {
						x := vram.FromSlice(xs, vram.Shape{len(xs)}, dt, dev)
						stored := x.Float64s()
						x.SetRequiresGrad(true)
						y := tc.f(x)
						if y.DType() != dt || !slices.Equal(y.Shape(), x.Shape()) {
							t.Fatalf("result %v %v, want %v %v", y.DType(), y.Shape(), dt, x.Shape())
						}
						y.Sum().Backward()
						ys, gs := y.Float64s(), x.Grad().Float64s()
						for i, xv := range stored {
							want, wantD := tc.value(xv), tc.deriv(xv)
							if math.IsNaN(ys[i]) || math.Abs(ys[i]-want) > tol*math.Max(math.Abs(want), 1e-2) {
								t.Errorf("f(%v) = %v, want %v", xv, ys[i], want)
							}
							if math.IsNaN(gs[i]) || math.Abs(gs[i]-wantD) > tol*math.Max(math.Abs(wantD), 1e-2) {
								t.Errorf("f'(%v) = %v, want %v", xv, gs[i], wantD)
							}
							if dt != vram.Float64 || math.Abs(xv) > 1e3 || slices.ContainsFunc(tc.kinks, func(k float64) bool { return math.Abs(k-xv) < 1e-3 }) {
								continue
							}
							const h = 1e-6
							fd := (tc.value(xv+h) - tc.value(xv-h)) / (2 * h)
							if math.Abs(fd-gs[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
								t.Errorf("f'(%v) = %v, finite difference %v", xv, gs[i], fd)
							}
						}
					})
				})
			}
		}
	}
}

// Bad arguments to the composite activations are refused with the
// package's sentinels.
func TestCompositeActivationArguments(t *testing.T) {
	tests := []struct {
		name string
		f    func(x *vram.Tensor)
		kind error
	}{
		{"softplus beta 0", func(x *vram.Tensor) { x.Softplus(0, 20) }, vram.ErrArgument},
		{"softplus beta NaN", func(x *vram.Tensor) { x.Softplus(math.NaN(), 20) }, vram.ErrArgument},
		{"softplus threshold NaN", func(x *vram.Tensor) { x.Softplus(1, math.NaN()) }, vram.ErrArgument},
		{"hardtanh min > max", func(x *vram.Tensor) { x.Hardtanh(1, -1) }, vram.ErrArgument},
		{"hardtanh NaN", func(x *vram.Tensor) { x.Hardtanh(math.NaN(), 1) }, vram.ErrArgument},
		{"elu of int64", func(*vram.Tensor) { vram.Ones(vram.Shape{2}, vram.Int64).Elu(1) }, vram.ErrDType},
		{"mish of bool", func(*vram.Tensor) { vram.Ones(vram.Shape{2}, vram.Bool).Mish() }, vram.ErrDType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vram.Tidy(func() {
				var err error
				func() {
					defer func() { err, _ = recover().(error) }()
					tc.f(vram.Ones(vram.Shape{2}))
				}()
				if !errors.Is(err, tc.kind) {
					t.Errorf("got %v, want an error of kind %v", err, tc.kind)
				}
			})
		})
	}
}
