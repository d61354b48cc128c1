package memtest

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// childEnv is set in the process that InChild starts.
const childEnv = "VRAM_MEMTEST_CHILD"

// InChild reports whether the calling test runs in a process of its own,
// started by InChild: when it does not, InChild runs the test alone in a
// new process of the test binary (where no other test's goroutines
// allocate while the heap is measured), logs its output, fails t if it
// failed, and returns false, and the caller returns.
func InChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) != "" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// PeakHeap runs f and returns the live heap before it and the highest
// live heap above that during it, sampled every millisecond, with the
// collector running at every tenth of growth so that the heap measures
// what f holds rather than the garbage it left.
func PeakHeap(f func()) (base, extra int64) {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	start, peak := ms.HeapAlloc, ms.HeapAlloc
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
	f()
	close(done)
	wg.Wait()
	return int64(start), int64(peak - start)
}
