package vram_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
)

// TestLayerNormEps checks eps as RMSNorm checks it: PyTorch's layer_norm
// adds eps to the variance, so a NaN eps makes every output NaN and an
// infinite one every output 0, which a caller never means; both are
// refused with ErrArgument. A finite eps, 0 included, is PyTorch's
// y = (x - mean)/sqrt(var + eps) with the biased variance.
func TestLayerNormEps(t *testing.T) {
	x := vram.FromSlice([]float64{1, 2, 4, -3, 0, 3}, vram.Shape{2, 3})
	defer x.Release()
	for _, eps := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		err := vram.Catch(func() { vram.LayerNorm(x, []int{3}, nil, nil, eps) })
		if !errors.Is(err, vram.ErrArgument) || errorOp(err) != "layer_norm" {
			t.Errorf("eps %v: got %v, want a layer_norm error of kind ErrArgument", eps, err)
		}
	}
	for _, eps := range []float64{0, 1e-5, 2} {
		y := vram.LayerNorm(x, []int{3}, nil, nil, eps)
		got := y.Float64s()
		y.Release()
		xs := []float64{1, 2, 4, -3, 0, 3}
		for r := range 2 {
			row := xs[3*r : 3*r+3]
			mean := (row[0] + row[1] + row[2]) / 3
			var v float64
			for _, a := range row {
				v += (a - mean) * (a - mean) / 3
			}
			for i, a := range row {
				want := (a - mean) / math.Sqrt(v+eps)
				if math.Abs(got[3*r+i]-want) > 1e-12 {
					t.Errorf("eps %v, element %d: %v, want %v", eps, 3*r+i, got[3*r+i], want)
				}
			}
		}
	}
}
