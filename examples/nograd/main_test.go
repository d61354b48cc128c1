package main

import (
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"without NoGrad: output requires grad true", "with NoGrad:    output requires grad false"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

func TestNoGradHoldsLess(t *testing.T) {
	model := nn.NewSequential(nn.NewLinear(8, 32), nn.NewReLU(), nn.NewLinear(32, 2))
	x := vram.Randn(vram.Shape{16, 8})
	defer x.Release()
	held, _, _ := inference(model, x, false)
	heldNG, _, _ := inference(model, x, true)
	// With NoGrad only the [16, 2] float32 output is left.
	if heldNG != 16*2*4 {
		t.Errorf("with NoGrad the forward pass held %d bytes, want %d (the output alone)", heldNG, 16*2*4)
	}
	if held <= heldNG {
		t.Errorf("without NoGrad the forward pass held %d bytes, not more than the %d with it", held, heldNG)
	}
}
