package vram

import "testing"

// TestScaledDotProductAttentionMoreGradients checks by finite differences
// the gradients PyTorch also gives: of a float mask (attn_mask is added
// to the scores, so its gradient is that of the scores), and of grouped
// queries under a causal mask with L > S and a negative scale (each key
// and value head gathers the gradients of the query heads it serves).
func TestScaledDotProductAttentionMoreGradients(t *testing.T) {
	tests := []struct {
		name string
		f    func([]*Tensor) *Tensor
		xs   []*Tensor
	}{
		{"float mask", func(xs []*Tensor) *Tensor {
			return ScaledDotProductAttention(xs[0], xs[1], xs[2], AttentionOptions{Mask: xs[3]})
		}, []*Tensor{rnd(1, 2, 3, 4), rnd(2, 2, 5, 4), rnd(3, 2, 5, 2), rnd(4, 3, 5)}},
		{"grouped causal L>S negative scale", func(xs []*Tensor) *Tensor {
			return ScaledDotProductAttention(xs[0], xs[1], xs[2], AttentionOptions{Causal: true, EnableGQA: true, Scale: -0.5})
		}, []*Tensor{rnd(1, 4, 5, 4), rnd(2, 2, 3, 4), rnd(3, 2, 3, 2)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { gradCheck(t, tc.f, tc.xs...) })
	}
}
