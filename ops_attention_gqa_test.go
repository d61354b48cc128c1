package vram

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestScaledDotProductAttentionGQAEdges checks grouped-query attention
// where PyTorch's rule, key and value heads repeated
// Hq/Hk times each (repeat_interleave along dimension -3) when Hk divides
// Hq, gives an unusual but valid result: no query heads (0 % Hk == 0, so
// the keys are repeated 0 times and the output has 0 heads), and key
// heads equal to the query's (repeated once).
func TestScaledDotProductAttentionGQAEdges(t *testing.T) {
	tests := []struct {
		name    string
		q, k, v *Tensor
		want    Shape
	}{
		{"no query heads", rnd(1, 2, 0, 3, 4), rnd(2, 2, 2, 5, 4), rnd(3, 2, 2, 5, 6), Shape{2, 0, 3, 6}},
		{"unbatched, no query heads", rnd(1, 0, 3, 4), rnd(2, 1, 5, 4), rnd(3, 1, 5, 6), Shape{0, 3, 6}},
		{"as many key heads", rnd(1, 2, 3, 3, 4), rnd(2, 2, 3, 5, 4), rnd(3, 2, 3, 5, 6), Shape{2, 3, 3, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, o := range []AttentionOptions{{EnableGQA: true}, {EnableGQA: true, Causal: true}} {
				var got *Tensor
				if err := Catch(func() { got = ScaledDotProductAttention(tc.q, tc.k, tc.v, o) }); err != nil {
					t.Fatalf("causal=%v: %v", o.Causal, err)
				}
				if !slices.Equal(got.Shape(), tc.want) {
					t.Fatalf("causal=%v: shape %v, want %v", o.Causal, got.Shape(), tc.want)
				}
				if got.NumElements() > 0 {
					o.EnableGQA = false
					want := ScaledDotProductAttention(tc.q, tc.k, tc.v, o)
					if !slices.Equal(got.Float64s(), want.Float64s()) {
						t.Errorf("causal=%v: got %v, want %v", o.Causal, got, want)
					}
				}
			}
		})
	}
}

// TestScaledDotProductAttentionGQABatchError checks that batch
// dimensions that do not broadcast under grouped-query attention are
// reported with the caller's shapes, not with the key's heads already
// multiplied by the group size.
func TestScaledDotProductAttentionGQABatchError(t *testing.T) {
	q, k, v := rnd(1, 2, 4, 3, 4), rnd(2, 3, 2, 5, 4), rnd(3, 3, 2, 5, 6)
	err := Catch(func() { ScaledDotProductAttention(q, k, v, AttentionOptions{EnableGQA: true}) })
	var ve *Error
	if !errors.Is(err, ErrShape) || !errors.As(err, &ve) || ve.Op != "scaled_dot_product_attention" {
		t.Fatalf("got %v, want a scaled_dot_product_attention error of kind ErrShape", err)
	}
	if strings.Contains(ve.Detail, "[3, 4]") || !strings.Contains(ve.Detail, "[2] and [3]") {
		t.Errorf("error %q does not name the batch sizes 2 and 3 as given", ve.Detail)
	}
}
