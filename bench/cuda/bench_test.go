package main

import (
	"os"
	"testing"

	"github.com/vramgo/vram"
)

func TestMain(m *testing.M) {
	// Shape-only simulated devices: tensors take memory from the caching
	// allocator, as on a GPU, but hold no data and kernels do no work, so
	// the benchmark's full size can be measured here.
	if err := vram.Configure(vram.Config{SimDevices: []int64{64 << 30}, SimShapeOnly: true}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestCheckpointPeaks runs the checkpointing benchmark's step at its full
// size on a shape-only sim device and checks that checkpointing every
// block lowers the peak above the parameters, which it logs next to
// PyTorch's (5.84 GB plain, 3.83 GB checkpointed on an H200).
func TestCheckpointPeaks(t *testing.T) {
	dev := vram.Sim(0)
	sync := func() {
		if err := vram.Synchronize(dev); err != nil {
			t.Fatal(err)
		}
	}
	net := newCkptNet(dev, ckptFull)
	plain := net.run(dev, false, 0, sync)
	ck := net.run(dev, true, 0, sync)
	net.release()
	t.Logf("peak above the parameters: plain %.3f GB, checkpointed %.3f GB", float64(plain.peakAbove)/1e9, float64(ck.peakAbove)/1e9)
	if ck.peakAbove >= plain.peakAbove {
		t.Errorf("checkpointed peak %d >= plain peak %d", ck.peakAbove, plain.peakAbove)
	}
	if left := vram.MemoryAllocated(dev); left != 0 {
		t.Errorf("%d bytes still allocated after both runs", left)
	}
}

// TestFindBatchSearch runs the FindBatchSize benchmark's search with its
// options on a shape-only sim device of 64 GiB: it finds a batch within
// the trial budget, and a step at that batch then runs.
func TestFindBatchSearch(t *testing.T) {
	dev := vram.Sim(0)
	r, err := findBatchRun(dev, findBatchOptions, func() {
		if err := vram.Synchronize(dev); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("batch %d after %d trials (%v), exhausted %v; step at it %.1f ms", r.batch, len(r.report.Trials), r.search, r.report.Exhausted, r.stepMs)
	if r.batch < findBatchOptions.Init || r.batch > findBatchOptions.MaxBatch {
		t.Errorf("batch %d outside [%d, %d]", r.batch, findBatchOptions.Init, findBatchOptions.MaxBatch)
	}
	if n := len(r.report.Trials); n > findBatchOptions.MaxTrials {
		t.Errorf("%d trials, more than MaxTrials %d", n, findBatchOptions.MaxTrials)
	}
	if fails := r.report.Trials[len(r.report.Trials)-1]; r.batch == findBatchOptions.MaxBatch && !fails.Fit {
		t.Errorf("MaxBatch returned though its trial failed")
	}
	if left := vram.MemoryAllocated(dev); left != 0 {
		t.Errorf("%d bytes still allocated after the search and the step", left)
	}
}
