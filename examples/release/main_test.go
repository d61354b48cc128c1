package main

import (
	"strings"
	"testing"

	"github.com/vramgo/vram"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"out := vram.Randn(vram.Shape{1024, 1024}):  4.00 MiB",
		"flat := out.Reshape(-1); out.Release():     4.00 MiB",
		"flat.Release(); loss.Release():             0.00 MiB",
		"after Tidy (only the kept sum is left):     0.00 MiB",
		"after step 2 in Tidy:                       0.00 MiB",
		"leaked to the garbage collector 0",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	if n := vram.MemoryAllocated(dev); n != 0 {
		t.Errorf("%d bytes still allocated after the example", n)
	}
}
