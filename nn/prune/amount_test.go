package prune_test

import (
	"strings"
	"testing"

	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

// TestCountAboveWhatIsLeftNamesTheUnit checks that a count larger than what
// is left unpruned is refused with the number of what the amount counts:
// elements for unstructured pruning, slices along the dimension for
// structured pruning.
func TestCountAboveWhatIsLeftNamesTheUnit(t *testing.T) {
	tests := []struct {
		name  string
		prune func(l *nn.Linear) error
		want  string
	}{
		{"L1Unstructured", func(l *nn.Linear) error { return prune.L1Unstructured(l, "weight", prune.Count(9)) }, "the 8 elements left unpruned"},
		{"RandomUnstructured", func(l *nn.Linear) error { return prune.RandomUnstructured(l, "weight", prune.Count(9), nil) }, "the 8 elements left unpruned"},
		{"LnStructured rows", func(l *nn.Linear) error { return prune.LnStructured(l, "weight", prune.Count(3), 2, 0) }, "the 2 slices along dimension 0 left unpruned"},
		{"RandomStructured columns", func(l *nn.Linear) error { return prune.RandomStructured(l, "weight", prune.Count(5), -1, nil) }, "the 4 slices along dimension 1 left unpruned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := linear(t, 4, 2, []float32{1, 2, 3, 4, 5, 6, 7, 8})
			defer nn.Release(l)
			err := tt.prune(l)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
			if l.WeightMask != nil {
				t.Error("a refused call attached a mask")
			}
		})
	}
}
