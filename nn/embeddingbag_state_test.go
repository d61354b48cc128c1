package nn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestEmbeddingBagBadWeightsChangeNothing gives an EmbeddingBag with
// MaxNorm, which renormalises the rows it looks up in place, per-sample
// weights it cannot use: ForwardBags panics with an *vram.Error of the
// kind named and leaves Weight as it was, rather than renormalise it and
// fail after.
func TestEmbeddingBagBadWeightsChangeNothing(t *testing.T) {
	idx := vram.FromSlice([]int64{0, 1, 2, 3}, vram.Shape{2, 2})
	defer idx.Release()
	released := vram.Ones(vram.Shape{2, 2})
	released.Release()
	tests := []struct {
		name    string
		weights func() *vram.Tensor
		kind    error
	}{
		{"on another device", func() *vram.Tensor { return vram.Ones(vram.Shape{2, 2}, vram.Sim(0)) }, vram.ErrDevice},
		{"released", func() *vram.Tensor { return released }, vram.ErrReleased},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := nn.NewEmbeddingBagOptions(4, 3, nn.EmbeddingBagOptions{Mode: "sum", MaxNorm: 0.5}, vram.WithGenerator(vram.NewGenerator(1)))
			defer nn.Release(e)
			before := e.Weight.Float64s()
			psw := tc.weights()
			defer psw.Release()
			err := vram.Catch(func() { e.ForwardBags(idx, nil, psw).Release() })
			if !errors.Is(err, tc.kind) {
				t.Errorf("got %v, want an error of kind %v", err, tc.kind)
			}
			if got := e.Weight.Float64s(); !slices.Equal(got, before) {
				t.Errorf("the failed ForwardBags changed Weight from %v to %v", before, got)
			}
		})
	}
}
