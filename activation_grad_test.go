package vram_test

import (
	"math"
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
