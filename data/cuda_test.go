package data_test

import (
	"os"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// TestCUDALoader: batches assembled in pinned memory and copied to cuda:0
// by workers without blocking hold their samples, the host batches are
// pinned, and an epoch gives every byte back. It skips without a GPU unless
// VRAM_REQUIRE_CUDA=1 (scripts/gpu-test.sh), where that is a failure.
func TestCUDALoader(t *testing.T) {
	if !vram.CUDAAvailable() {
		if os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
			t.Fatal("no CUDA device, and VRAM_REQUIRE_CUDA=1")
		}
		t.Skip("no CUDA device")
	}
	dev := vram.CUDA(0)
	ds := rowsDataset(t, 100, vram.CPU)
	for _, tc := range []struct {
		name string
		opts data.Options
		on   vram.Device
	}{
		{"to cuda", data.Options{Device: dev, NumWorkers: 2}, dev},
		{"pinned to cuda", data.Options{Device: dev, PinMemory: true, NumWorkers: 3, Shuffle: true}, dev},
		{"pinned on the host", data.Options{PinMemory: true, NumWorkers: 2}, vram.CPU},
		{"pinned, no workers", data.Options{Device: dev, PinMemory: true}, dev},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settleGarbage()
			mem, host := vram.MemoryAllocated(dev), vram.MemoryAllocated(vram.CPU)
			l, err := data.NewLoader(ds, 16, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for b, err := range l.All() {
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range b.Tensors {
					if x.Device() != tc.on || tc.on == vram.CPU && !x.IsPinned() {
						t.Fatalf("a batch on %v (pinned %v), want %v", x.Device(), x.IsPinned(), tc.on)
					}
				}
			}
			if n := len(epoch(t, l)); n != 7 {
				t.Errorf("%d batches, want 7", n)
			}
			vram.Synchronize(dev)
			if m, h := vram.MemoryAllocated(dev), vram.MemoryAllocated(vram.CPU); m != mem || h != host {
				t.Errorf("after the epochs %v holds %d bytes (%d before), cpu %d (%d before)", dev, m, mem, h, host)
			}
		})
	}
}
