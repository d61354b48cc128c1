package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestLayerNormEpsChanged sets a LayerNorm's Eps after construction to
// what NewLayerNorm refuses: Forward refuses it too rather than return
// NaN (or, for a negative Eps larger than a row's variance, NaN rows).
func TestLayerNormEpsChanged(t *testing.T) {
	x := vram.FromSlice([]float64{1, 1, 1, 1, 1, 1.001}, vram.Shape{2, 3})
	defer x.Release()
	for _, eps := range []float64{math.NaN(), math.Inf(1), -1} {
		l := nn.NewLayerNorm([]int{3}, 1e-5, vram.Float64)
		l.Eps = eps
		err := vram.Catch(func() { l.Forward(x) })
		var ve *vram.Error
		if !errors.Is(err, vram.ErrArgument) || !errors.As(err, &ve) || ve.Op != "layer_norm" {
			t.Errorf("Eps %v: got %v, want a layer_norm error of kind ErrArgument", eps, err)
		}
		nn.Release(l)
	}
}
