package monitor_test

import (
	"os"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/monitor"
)

// TestSeedWalkthrough replays the seeds' GPUtil walkthrough with vram's own
// CUDA tensors and monitor's readings: the memory used on the card rises
// when tensors are allocated, stays after they are released (the caching
// allocator keeps it) and falls after EmptyCache.
func TestSeedWalkthrough(t *testing.T) {
	src := openNVML(t)
	if !vram.CUDAAvailable() {
		if os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
			t.Fatal("NVML sees a GPU but vram has no CUDA device")
		}
		t.Skip("no CUDA device")
	}
	dev := vram.CUDA(0)
	// read returns the memory used on the card and by this process on the
	// GPU that lists this process (the first GPU before it has a context).
	read := func(what string) (card, mine int64) {
		r, err := src.Read()
		if err != nil {
			t.Fatal(err)
		}
		g := r.GPUs[0]
		mine = -1
		for _, gg := range r.GPUs {
			for _, p := range gg.Processes {
				if p.PID == os.Getpid() {
					g, mine = gg, p.Bytes
				}
			}
		}
		t.Logf("%-30s GPU %d: %8.1f MiB used on the card, %8.1f MiB by this process (visible %v)", what, g.Index,
			float64(g.Memory.UsedBytes)/(1<<20), float64(mine)/(1<<20), g.ProcessesVisible)
		var buf strings.Builder
		monitor.WriteUtilization(&buf, []monitor.GPU{g}, false)
		t.Logf("GPUtil's table:\n%s", buf.String())
		return g.Memory.UsedBytes, mine
	}
	err := vram.Catch(func() {
		vram.Zeros(vram.Shape{1}, dev).Release() // create the context first, as the seeds' initial reading had one
		base, _ := read("initial:")
		var ts []*vram.Tensor
		for range 10 { // the seeds' ten tensors of 10,000,000 x 10 float32: 3.7 GiB
			ts = append(ts, vram.Randn(vram.Shape{10_000_000, 10}, dev))
		}
		full, mine := read("after allocating 10 tensors:")
		for _, x := range ts {
			x.Release()
		}
		kept, _ := read("after Release:")
		vram.EmptyCache(dev)
		empty, _ := read("after EmptyCache:")
		const tensors = 10 * 10_000_000 * 10 * 4
		if full-base < tensors*9/10 {
			t.Errorf("used memory rose by %d bytes for %d bytes of tensors", full-base, tensors)
		}
		if mine >= 0 && mine < tensors {
			t.Errorf("this process holds %d bytes, less than its tensors", mine)
		}
		if d := kept - full; d < -(64<<20) || d > 64<<20 {
			t.Errorf("after Release used memory moved by %d bytes; the cache should keep it", d)
		}
		if full-empty < tensors*9/10 {
			t.Errorf("EmptyCache gave back %d bytes of %d", full-empty, tensors)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
