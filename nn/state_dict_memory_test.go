package nn_test

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

// TestLoadStateDictPeakMemory loads the state dict of one model of 64 MB
// into another and measures the host memory loading takes beside the two:
// a tensor at a time, not a copy of the whole state dict.
func TestLoadStateDictPeakMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two models of 64 MB")
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
	_, err := nn.LoadStateDict(dst, state, true)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	extra := int64(peak - base)
	t.Logf("state dict %d MB: peak %d MB beside the models", size>>20, extra>>20)
	// A few tensors and a margin for the collector's pacing, which lets
	// the heap grow by a tenth before collecting.
	if limit := 4*largest + int64(base)/5; extra > limit {
		t.Errorf("loading took %d MB beside the models, want at most %d MB", extra>>20, limit>>20)
	}
}

// peakChildEnv is set in the process that measures the heap.
const peakChildEnv = "VRAM_PEAK_MEMORY_CHILD"
