package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestSetInt8WeightWithoutLayer: SetInt8Weight on a nil *Linear, or on a
// Linear made without its constructor (no weight), returns an error
// matching vram.ErrArgument, as for any layer it cannot quantize, rather
// than dereference nil; the tensors given stay the caller's, unreleased.
func TestSetInt8WeightWithoutLayer(t *testing.T) {
	var none *nn.Linear
	for _, tc := range []struct {
		name string
		l    *nn.Linear
	}{{"nil layer", none}, {"no weight", &nn.Linear{}}} {
		t.Run(tc.name, func(t *testing.T) {
			wq := vram.Zeros(vram.Shape{2, 2}, vram.Int8)
			defer wq.Release()
			scale := vram.Ones(vram.Shape{2})
			defer scale.Release()
			var err error
			if perr := vram.Catch(func() { err = tc.l.SetInt8Weight(wq, scale) }); perr != nil {
				t.Fatalf("SetInt8Weight panicked: %v", perr)
			}
			if !errors.Is(err, vram.ErrArgument) {
				t.Errorf("SetInt8Weight: %v, want an error matching vram.ErrArgument", err)
			}
			if wq.Released() || scale.Released() {
				t.Errorf("the int8 weight or scale was released")
			}
		})
	}
}
