package vram

import (
	"math"
	"slices"
	"testing"
)

// TestScaledDotProductAttentionDTypes runs attention in float32, float16
// and bfloat16 on the CPU and on sim:0 against the float64 definition
// computed from the same (rounded) inputs: softmax(q·kᵀ·scale + mask)·v,
// a bool mask true where a key takes part (PyTorch's convention), a float
// mask added, the causal mask torch.tril(ones(L, S)) aligned to the top
// left, and k and v heads repeated Hq/Hk times with EnableGQA. The result
// keeps q's dtype. The tolerances allow for the roundings of each dtype
// (machine epsilon 2⁻²⁴, 2⁻¹¹, 2⁻⁸ relative to values of order 1).
func TestScaledDotProductAttentionDTypes(t *testing.T) {
	devices := []Device{CPU}
	if Sim(0).Available() {
		devices = append(devices, Sim(0))
	}
	boolMask := FromSlice([]bool{true, false, true, true, true, false, false, true, true, true, false, true}, Shape{3, 4})
	floatMask := FromSlice([]float64{0, -1, 0.5, math.Inf(-1), 0, 0, 0, 0, -2, 1, 0, 0}, Shape{3, 4})
	tests := []struct {
		name    string
		q, k, v *Tensor
		o       AttentionOptions
	}{
		{"plain", rnd(1, 2, 3, 5), rnd(2, 2, 4, 5), rnd(3, 2, 4, 2), AttentionOptions{}},
		{"bool mask broadcast over heads", rnd(1, 2, 3, 5), rnd(2, 2, 4, 5), rnd(3, 2, 4, 2), AttentionOptions{Mask: boolMask}},
		{"float mask", rnd(1, 2, 3, 5), rnd(2, 2, 4, 5), rnd(3, 2, 4, 2), AttentionOptions{Mask: floatMask}},
		{"causal L<S", rnd(1, 2, 3, 5), rnd(2, 2, 4, 5), rnd(3, 2, 4, 2), AttentionOptions{Causal: true, Scale: 0.25}},
		{"causal L>S", rnd(1, 2, 5, 5), rnd(2, 2, 3, 5), rnd(3, 2, 3, 2), AttentionOptions{Causal: true}},
		{"grouped query", rnd(1, 4, 3, 5), rnd(2, 2, 4, 5), rnd(3, 2, 4, 2), AttentionOptions{EnableGQA: true}},
	}
	for _, dt := range []DType{Float32, Float16, BFloat16} {
		tol := map[DType]float64{Float32: 1e-5, Float16: 1e-2, BFloat16: 6e-2}[dt]
		for _, dev := range devices {
			for _, tc := range tests {
				t.Run(dt.String()+"/"+dev.String()+"/"+tc.name, func(t *testing.T) {
					Tidy(func() {
						q, k, v := tc.q.Cast(dt), tc.k.Cast(dt), tc.v.Cast(dt)
						k64, v64 := k.Cast(Float64), v.Cast(Float64)
						if tc.o.EnableGQA {
							k64, v64 = repeatHeads(k64, 2), repeatHeads(v64, 2)
						}
						want, shape := refAttention(q.Cast(Float64), k64, v64, tc.o.Mask, tc.o.Causal, tc.o.Scale)
						o := tc.o
						if o.Mask != nil {
							o.Mask = o.Mask.To(dev)
						}
						got := ScaledDotProductAttention(q.To(dev), k.To(dev), v.To(dev), o)
						if got.DType() != dt || !slices.Equal(got.Shape(), shape) {
							t.Fatalf("got %s %v, want %s %v", got.DType(), got.Shape(), dt, shape)
						}
						for i, g := range got.To(CPU).Float64s() {
							if math.IsNaN(g) || math.Abs(g-want[i]) > tol*(1+math.Abs(want[i])) {
								t.Fatalf("element %d: %v, want %v", i, g, want[i])
							}
						}
					})
				})
			}
		}
	}
}
