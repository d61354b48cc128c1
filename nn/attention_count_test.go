package nn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestMultiheadAttentionRefusesUncountableSizes checks that
// NewMultiheadAttention refuses, with an ErrArgument of its own before
// allocating, sizes whose projections have more elements than an int
// counts: 3·embed_dim wrapped around to a negative size that the caller
// never gave, and the packed projection's shape failed in the factory,
// named after it.
func TestMultiheadAttentionRefusesUncountableSizes(t *testing.T) {
	third := math.MaxInt/3 + 2 // 3·third wraps an int
	third -= third % 2
	tests := []struct {
		name     string
		embedDim int
		o        nn.MultiheadAttentionOptions
	}{
		{"3·embed_dim wraps", third, nn.MultiheadAttentionOptions{}},
		{"3·embed_dim wraps without biases", third, nn.MultiheadAttentionOptions{NoBias: true}},
		{"packed projection past an int", 1 << 32, nn.MultiheadAttentionOptions{}},
		{"key projection past an int", 4, nn.MultiheadAttentionOptions{KDim: math.MaxInt / 2}},
		{"value projection past an int", 1 << 20, nn.MultiheadAttentionOptions{VDim: 1 << 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := vram.MemoryAllocated(vram.CPU)
			err := vram.Catch(func() { nn.NewMultiheadAttention(tt.embedDim, 2, tt.o, vram.CPU) })
			var e *vram.Error
			if !errors.As(err, &e) || e.Kind != vram.ErrArgument || e.Op != "multihead_attention" {
				t.Fatalf("got %v, want an ErrArgument *vram.Error of multihead_attention", err)
			}
			if !strings.Contains(e.Detail, "more parameters than an int can count") {
				t.Errorf("%q does not say that an int cannot count the parameters", e.Detail)
			}
			if after := vram.MemoryAllocated(vram.CPU); after != before {
				t.Errorf("%d bytes allocated on the CPU before, %d after", before, after)
			}
		})
	}
}
