package nn_test

import (
	"testing"

	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestLoadStateDictPeakMemory loads the state dict of one model of 64 MB
// into another and measures the host memory loading takes beside the two:
// a tensor at a time, not a copy of the whole state dict.
func TestLoadStateDictPeakMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two models of 64 MB")
	}
	if !memtest.InChild(t) {
		return
	}
	build := func() nn.Module {
		mods := make([]nn.Module, 16)
		for i := range mods {
			mods[i] = nn.NewLinear(1024, 1024)
		}
		return nn.NewSequential(mods...)
	}
	src, dst := build(), build()
	defer nn.Release(src)
	defer nn.Release(dst)
	state := nn.StateDict(src)
	var size, largest int64
	for _, x := range state {
		size += x.Bytes()
		largest = max(largest, x.Bytes())
	}
	var err error
	base, extra := memtest.PeakHeap(func() { _, err = nn.LoadStateDict(dst, state, true) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("state dict %d MB: peak %d MB beside the models", size>>20, extra>>20)
	// A few tensors and a margin for the collector's pacing, which lets
	// the heap grow by a tenth before collecting.
	if limit := 4*largest + int64(base)/5; extra > limit {
		t.Errorf("loading took %d MB beside the models, want at most %d MB", extra>>20, limit>>20)
	}
}
