package swa_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim/swa"
)

// TestUpdateParametersRefusesLoadedCount checks that an AveragedModel
// whose n_averaged was loaded from a crafted state dict (a count no run
// of updates gives) refuses to update, changing nothing, rather than
// averaging with a weight of 1/(n+1) that is infinite or negative.
func TestUpdateParametersRefusesLoadedCount(t *testing.T) {
	model := nn.NewLinear(3, 2)
	defer nn.Release(model)
	for _, n := range []int64{-1, -3, 1<<53 + 2, 1<<63 - 1} {
		setValues(model, 0)
		avg, err := swa.NewAveragedModel(model, swa.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer nn.Release(avg)
		if err := avg.UpdateParameters(model); err != nil {
			t.Fatal(err)
		}
		count := vram.FromSlice([]int64{n}, vram.Shape{})
		state := map[string]*vram.Tensor{"n_averaged": count}
		for _, p := range avg.NamedParameters() {
			state[p.Name] = p.Tensor
		}
		if _, err := nn.LoadStateDict(avg, state, true); err != nil {
			t.Fatal(err)
		}
		count.Release()
		setValues(model, 1)
		before := avg.Parameters()[0].Float64s()
		var uerr error
		if p := vram.Catch(func() { uerr = avg.UpdateParameters(model) }); p != nil {
			t.Fatalf("n_averaged %d: UpdateParameters panicked: %v", n, p)
		}
		if !errors.Is(uerr, vram.ErrArgument) {
			t.Errorf("n_averaged %d: got %v, want vram.ErrArgument", n, uerr)
		}
		if got := avg.Parameters()[0].Float64s(); !slices.Equal(got, before) {
			t.Errorf("n_averaged %d: the refused update changed the average to %v, was %v", n, got, before)
		}
	}
}
