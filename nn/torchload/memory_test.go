package torchload

import (
	"testing"
	"time"

	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestLoadPyTorchPeakMemory loads a checkpoint of 200 MB and measures the
// host memory loading takes beside the model: about a tensor, read from
// the file as it is loaded, not the state dict read into tensors, encoded
// and decoded again (three copies).
func TestLoadPyTorchPeakMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and loads a checkpoint of 200 MB")
	}
	if !memtest.InChild(t) {
		return
	}
	const layers, width = 50, 1024
	mods := make([]nn.Module, layers)
	for i := range mods {
		mods[i] = nn.NewLinear(width, width)
	}
	m := nn.NewSequential(mods...)
	defer nn.Release(m)
	path := saveTorch(t, m, "", nil)
	var size, largest int64
	for _, x := range nn.StateDict(m) {
		size += x.Bytes()
		largest = max(largest, x.Bytes())
	}

	var res nn.LoadResult
	var err error
	start := time.Now()
	base, extra := memtest.PeakHeap(func() { res, err = LoadPyTorch(m, path, true) })
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing)+len(res.Unexpected) > 0 {
		t.Fatalf("result %+v", res)
	}
	t.Logf("state dict %d MB, largest tensor %d MB: peak %d MB above the model, in %v", size>>20, largest>>20, extra>>20, elapsed)
	// A few tensors (the storage read, the bytes handed over) and a margin
	// for the collector's pacing, which lets the heap grow by a tenth
	// before collecting.
	if limit := 4*largest + int64(base)/5; extra > limit {
		t.Errorf("loading took %d MB beside the model, want at most %d MB", extra>>20, limit>>20)
	}
}
