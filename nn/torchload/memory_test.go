package torchload

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

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
	if os.Getenv(peakChildEnv) == "" {
		// In a process of its own, where no other test's goroutines
		// allocate while the heap is measured.
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
		cmd.Env = append(os.Environ(), peakChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil {
			t.Fatal(err)
		}
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

	// A collection at every tenth of the heap grown, so that the heap
	// measures what loading holds, not the garbage it left.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	res, err := LoadPyTorch(m, path, true)
	elapsed := time.Since(start)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing)+len(res.Unexpected) > 0 {
		t.Fatalf("result %+v", res)
	}
	extra := int64(peak - base)
	t.Logf("state dict %d MB, largest tensor %d MB: peak %d MB above the model, in %v", size>>20, largest>>20, extra>>20, elapsed)
	// A few tensors (the storage read, the bytes handed over) and a margin
	// for the collector's pacing, which lets the heap grow by a tenth
	// before collecting.
	if limit := 4*largest + int64(base)/5; extra > limit {
		t.Errorf("loading took %d MB beside the model, want at most %d MB", extra>>20, limit>>20)
	}
}

// peakChildEnv is set in the process that measures the heap.
const peakChildEnv = "VRAM_PEAK_MEMORY_CHILD"
