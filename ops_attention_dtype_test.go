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
	if DeviceCount() > 0 {
		devices = append(devices, CUDA(0))
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

// TestScaledDotProductAttentionSixteenBitAccumulates checks that 16-bit
// attention computes its scores and softmax in float32 and rounds only
// the result, as PyTorch's math implementation does by default: scores
// near 100 that bfloat16 would round by up to 0.25, a float32 mask of
// -1e9 that float16 would make -Inf (a row so masked gets uniform
// weights, not zeros), and the same under Autocast from float32 operands
// of mixed dtypes, whose result has the region's dtype.
func TestScaledDotProductAttentionSixteenBitAccumulates(t *testing.T) {
	devices := []Device{CPU}
	if Sim(0).Available() {
		devices = append(devices, Sim(0))
	}
	if DeviceCount() > 0 {
		devices = append(devices, CUDA(0))
	}
	// One query against two keys: scores 100 and 100·(1+2⁻⁷) = 100.78,
	// exactly representable in both 16-bit dtypes' inputs.
	q64 := FromSlice([]float64{100}, Shape{1, 1})
	k64 := FromSlice([]float64{1, 1 + 1.0/128}, Shape{2, 1})
	v64 := FromSlice([]float64{0, 1}, Shape{2, 1})
	big, _ := refAttention(q64, k64, v64, nil, false, 1)
	mask := FromSlice([]float32{0, -1e9}, Shape{1, 2})
	masked, _ := refAttention(q64, k64, v64, mask.Cast(Float64), false, 1)
	// In float32, -1e9 swallows both scores: the weights are uniform.
	allMasked := FromSlice([]float32{-1e9, -1e9}, Shape{1, 2})
	tests := []struct {
		name     string
		mask     *Tensor
		want     float64
		autocast bool
	}{
		{"scores near 100", nil, big[0], false},
		{"float32 mask -1e9", mask, masked[0], false},
		{"every key masked by -1e9", allMasked, 0.5, false},
		{"autocast from float32", nil, big[0], true},
	}
	for _, dt := range []DType{Float16, BFloat16} {
		for _, dev := range devices {
			for _, tc := range tests {
				t.Run(dt.String()+"/"+dev.String()+"/"+tc.name, func(t *testing.T) {
					Tidy(func() {
						var got *Tensor
						o := AttentionOptions{Scale: 1}
						if tc.mask != nil {
							o.Mask = tc.mask.To(dev)
						}
						if tc.autocast {
							q, k, v := q64.Cast(Float32).To(dev), k64.Cast(dt).To(dev), v64.Cast(Float32).To(dev)
							Autocast(dt, func() { got = Keep(ScaledDotProductAttention(q, k, v, o)) })
						} else {
							got = ScaledDotProductAttention(q64.Cast(dt).To(dev), k64.Cast(dt).To(dev), v64.Cast(dt).To(dev), o)
						}
						if got.DType() != dt {
							t.Fatalf("dtype %s, want %s", got.DType(), dt)
						}
						// One rounding of the result to dt, nothing more.
						g := got.To(CPU).Float64s()[0]
						if math.Abs(g-tc.want) > 4e-3 {
							t.Fatalf("%v, want %v (one rounding to %s)", g, tc.want, dt)
						}
					})
				})
			}
		}
	}
}
