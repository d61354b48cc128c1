package quant_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
)

// TestQuantizeLayerWithoutWeight: a Linear made without its constructor
// has no weight to quantize, which is a bad argument (vram.ErrArgument),
// not a released tensor, whether quantized alone or within a model.
func TestQuantizeLayerWithoutWeight(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"QuantizeLinear", func() error { return quant.QuantizeLinear(&nn.Linear{}) }},
		{"Quantize", func() error { _, err := quant.Quantize(nn.NewSequential(&nn.Linear{})); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, vram.ErrArgument) || errors.Is(err, vram.ErrReleased) {
				t.Errorf("got %v, want an error matching vram.ErrArgument alone", err)
			}
		})
	}
}
