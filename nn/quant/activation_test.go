package quant_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
)

// TestQuantizedForwardActRefusesUnknownActivation: a quantized layer's
// ForwardAct refuses an activation vram does not know with
// vram.ErrArgument, as the float layer's does, instead of applying GELU.
func TestQuantizedForwardActRefusesUnknownActivation(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 3}, vram.WithGenerator(vram.NewGenerator(1)))
	defer x.Release()
	for _, quantized := range []bool{false, true} {
		l := nn.NewLinear(3, 2, vram.WithGenerator(vram.NewGenerator(2)))
		if quantized {
			if err := quant.QuantizeLinear(l); err != nil {
				t.Fatal(err)
			}
		}
		err := vram.Catch(func() { l.ForwardAct(x, vram.Activation(9)).Release() })
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("quantized %v: ForwardAct with an unknown activation: %v, want an error matching vram.ErrArgument", quantized, err)
		}
		nn.Release(l)
	}
}
