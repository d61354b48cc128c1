package prune_test

import (
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

// TestLnStructuredAfterUnstructured: LnStructured ranks the slices of a
// parameter already pruned by the norms of its masked values, the pruned
// elements counting as zeros, as PyTorch's ln_structured computes
// torch.norm over weight_orig⊙weight_mask: a slice holding a pruned
// element has a smallest magnitude of 0 and an L-p norm of 0 for p < 0,
// and goes first. Rows [1, 5] and [3, 4]; L1Unstructured prunes the 1.
func TestLnStructuredAfterUnstructured(t *testing.T) {
	tests := []struct {
		name string
		n    float64
		want []float64
	}{
		// PyTorch: row 0 is [0, 5], of norms 0 (-Inf), 0 (-1), 1 (0),
		// 5 (1), 5 (Inf); row 1 is [3, 4], of norms 3, 1.71, 2, 7, 4.
		{"min", math.Inf(-1), []float64{0, 0, 1, 1}},
		{"L-1", -1, []float64{0, 0, 1, 1}},
		{"L-0.5", -0.5, []float64{0, 0, 1, 1}},
		{"count of non-zeros", 0, []float64{0, 0, 1, 1}},
		{"L1", 1, []float64{0, 0, 1, 1}},
		{"max", math.Inf(1), []float64{0, 1, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := linear(t, 2, 2, []float32{1, 5, 3, 4})
			defer nn.Release(l)
			if err := prune.L1Unstructured(l, "weight", prune.Count(1)); err != nil {
				t.Fatal(err)
			}
			if err := prune.LnStructured(l, "weight", prune.Count(1), tc.n, 0); err != nil {
				t.Fatal(err)
			}
			if got := maskOf(l); !slices.Equal(got, tc.want) {
				t.Errorf("mask %v, want %v", got, tc.want)
			}
		})
	}
}
