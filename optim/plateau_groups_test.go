package optim_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// TestReduceLROnPlateauAddedGroupRefusedOnlyToReduce checks that a
// ReduceLROnPlateau made with a minimum rate for each group goes on
// stepping after a group is added, as PyTorch's does, and refuses only the
// Step that would reduce the rates (PyTorch's _reduce_lr raises then),
// changing nothing.
func TestReduceLROnPlateauAddedGroupRefusedOnlyToReduce(t *testing.T) {
	tests := []struct {
		name    string
		metrics []float64 // after the group is added; patience 1
		reduce  int       // the index of the Step that reduces, -1 for none
	}{
		{"improving", []float64{0.9, 0.8, 0.7, 0.6}, -1},
		{"one bad step", []float64{0.9, 0.95, 0.8}, -1},
		{"plateau", []float64{0.9, 0.95, 0.95}, 2},
		{"at once", []float64{1, 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := optim.DefaultPlateauConfig()
			cfg.Patience, cfg.MinLRs = 1, []float64{0.05, 1e-3}
			o := twoGroups(t, []float64{0.1, 0.01})
			r, err := optim.NewReduceLROnPlateau(o, cfg)
			if err != nil {
				t.Fatal(err)
			}
			r.Step(1)
			if err := o.AddParamGroup(optim.Group([]*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad())}, optim.WithLR(1))); err != nil {
				t.Fatal(err)
			}
			rates := groupLRs(o)
			for i, m := range tc.metrics {
				before := r.State()
				err := vram.Catch(func() { r.Step(m) })
				if i == tc.reduce {
					if !errors.Is(err, vram.ErrArgument) || r.State() != before {
						t.Fatalf("step %d: got %v, state %+v (was %+v); want an error matching vram.ErrArgument and no change", i, err, r.State(), before)
					}
				} else if err != nil {
					t.Fatalf("step %d (%v), which reduces no rate: %v", i, m, err)
				}
				checkValues(t, fmt.Sprintf("rates after step %d", i), groupLRs(o), rates, 0)
			}
		})
	}
}
