package prune_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
)

// TestRemoveAllRefusesBeforeChanging checks that RemoveAll, given a model
// in which one pruned parameter or its mask was released, returns an
// error matching vram.ErrReleased and leaves every other pruned layer as
// it was, rather than folding the masks of the layers before it in.
func TestRemoveAllRefusesBeforeChanging(t *testing.T) {
	tests := []struct {
		name    string
		release func(l *nn.Linear)
	}{
		{"released mask", func(l *nn.Linear) { l.WeightMask.Release() }},
		{"released weight", func(l *nn.Linear) { l.Weight.Release() }},
		{"released bias mask", func(l *nn.Linear) { l.BiasMask.Release() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := vram.WithGenerator(vram.NewGenerator(7))
			first, second := nn.NewLinear(4, 3, g), nn.NewLinear(3, 2, g)
			model := nn.NewSequential(first, nn.NewReLU(), second)
			defer nn.Release(model)
			for _, l := range []*nn.Linear{first, second} {
				for _, name := range []string{"weight", "bias"} {
					if err := prune.L1Unstructured(l, name, prune.Count(1)); err != nil {
						t.Fatal(err)
					}
				}
			}
			weight, mask := first.Weight.Float64s(), first.WeightMask.Float64s()
			tt.release(second)

			n, err := prune.RemoveAll(model)
			if !errors.Is(err, vram.ErrReleased) {
				t.Fatalf("RemoveAll = %d, %v; want an error matching vram.ErrReleased", n, err)
			}
			if n != 0 {
				t.Errorf("RemoveAll reports %d parameters changed, want 0", n)
			}
			if !prune.IsPruned(first, "weight") || !prune.IsPruned(first, "bias") {
				t.Fatal("RemoveAll removed the pruning of the first layer before refusing")
			}
			if got := first.Weight.Float64s(); !slices.Equal(got, weight) {
				t.Errorf("first weight %v, want it unchanged %v", got, weight)
			}
			if got := first.WeightMask.Float64s(); !slices.Equal(got, mask) {
				t.Errorf("first mask %v, want it unchanged %v", got, mask)
			}
		})
	}
}

// TestRemoveRefusals checks that Remove of a pruned parameter whose
// tensor or mask was released, or which the layer no longer has, returns
// a prune *vram.Error of the right kind and keeps the mask.
func TestRemoveRefusals(t *testing.T) {
	tests := []struct {
		name    string
		param   string
		release func(l *nn.Linear)
		want    error
	}{
		{"released mask", "weight", func(l *nn.Linear) { l.WeightMask.Release() }, vram.ErrReleased},
		{"released weight", "weight", func(l *nn.Linear) { l.Weight.Release() }, vram.ErrReleased},
		{"bias dropped after pruning", "bias", func(l *nn.Linear) { l.Bias.Release(); l.Bias = nil }, vram.ErrArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := nn.NewLinear(3, 2)
			defer nn.Release(l)
			if err := prune.L1Unstructured(l, tt.param, prune.Count(1)); err != nil {
				t.Fatal(err)
			}
			tt.release(l)
			var err error
			if perr := vram.Catch(func() { err = prune.Remove(l, tt.param) }); perr != nil {
				t.Fatalf("Remove panicked: %v", perr)
			}
			var ve *vram.Error
			if !errors.As(err, &ve) || !errors.Is(err, tt.want) || ve.Op != "prune" {
				t.Fatalf("Remove = %v, want a prune *vram.Error matching %v", err, tt.want)
			}
			if m, _ := l.ParameterMask(tt.param); m == nil {
				t.Error("Remove dropped the mask of a parameter it refused")
			}
		})
	}
}
