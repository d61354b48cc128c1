package analyze_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vramgo/vram/analyze"
	"github.com/vramgo/vram/memory"
)

// Analyze a snapshot and print what is wasted and why the OOM happened.
func ExampleFile() {
	rep, err := analyze.File("testdata/sim_train.json", analyze.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := rep.Devices[0]
	f := d.Fragmentation
	fmt.Printf("reserved %d MiB, allocated %d MiB, %d free blocks\n", f.ReservedBytes>>20, f.AllocatedBytes>>20, f.FreeBlocks)
	fmt.Println("largest region:", d.ByRegion[0].Key)
	fmt.Println("out-of-memory events:", len(d.OOMs))
	// Output:
	// reserved 408 MiB, allocated 387 MiB, 6 free blocks
	// largest region: optimizer
	// out-of-memory events: 1
}

// Record a run in-process and write the page that shows it. With vram's
// root package the two functions are
// func() memory.Stats { return vram.MemoryStats(dev) } and
// func() *trace.Snapshot { return vram.MemorySnapshot(dev) }, after
// vram.RecordMemoryHistory(dev, true, 0, true).
func ExampleRecorder() {
	alloc := memory.New(memory.NewSimArena(256<<20), memory.Config{})
	alloc.SetHistory(true, 0, true)
	rec := analyze.NewRecorder(alloc.Stats, alloc.Snapshot, 5*time.Millisecond)
	rec.Start()
	var blocks []*memory.Block
	for i := 0; i < 8; i++ {
		b, err := alloc.Alloc(int64(i+1)<<20, 0, "step")
		if err != nil {
			fmt.Println(err)
			return
		}
		blocks = append(blocks, b)
		rec.Sample()
	}
	for _, b := range blocks {
		alloc.Free(b)
	}
	rec.Stop()

	dir, _ := os.MkdirTemp("", "recording")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "run.json")
	if err := rec.WriteFile(path); err != nil {
		fmt.Println(err)
		return
	}
	rep, err := analyze.File(path, analyze.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := rep.Devices[0]
	fmt.Println("history events:", d.HistoryEvents)
	fmt.Println("peak allocated:", d.Timeline.PeakAllocatedBytes>>20, "MiB")
	fmt.Println("has samples:", len(d.Samples) >= 10)
	if err := analyze.WriteHTMLFile(filepath.Join(dir, "run.html"), rep); err != nil {
		fmt.Println(err)
	}
	// Output:
	// history events: 30
	// peak allocated: 36 MiB
	// has samples: true
}
