package data_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
	"github.com/vramgo/vram/internal/memtest"
)

// TestEpochsReleaseWhatTheyMake runs whole and broken-off epochs of
// loaders, with and without workers, devices and pinned memory, and checks
// that the library released every tensor it made while collating: no
// storage stays live and none is left for the garbage collector, on the
// CPU and on the destination device.
func TestEpochsReleaseWhatTheyMake(t *testing.T) {
	tests := []struct {
		name  string
		opts  data.Options
		stopK int // batches to take before breaking off; 0: the whole epoch
	}{
		{"in line", data.Options{}, 0},
		{"workers", data.Options{NumWorkers: 2, Shuffle: true}, 0},
		{"workers, broken off", data.Options{NumWorkers: 2, Prefetch: 3}, 1},
		{"device", data.Options{Device: vram.Sim(1)}, 0},
		{"device and workers, pinned, broken off", data.Options{Device: vram.Sim(1), NumWorkers: 2, PinMemory: true}, 2},
	}
	x := vram.Randn(vram.Shape{10, 3})
	y := vram.Arange(0, 10, 1, vram.Int64)
	defer x.Release()
	defer y.Release()
	ds, err := data.NewTensorDataset(x, y)
	if err != nil {
		t.Fatal(err)
	}
	devs := []vram.Device{vram.CPU, vram.Sim(1)}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			memtest.Settle(devs...)
			before := []vram.StorageStats{vram.Storage(vram.CPU), vram.Storage(vram.Sim(1))}
			l, err := data.NewLoader(ds, 3, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for b, err := range l.All() {
				if err != nil {
					t.Fatal(err)
				}
				s := b.Tensors[0].Sum()
				s.Release()
				if n++; n == tc.stopK {
					break
				}
			}
			memtest.Settle(devs...)
			for i, d := range devs {
				now := vram.Storage(d)
				if now.LiveBytes != before[i].LiveBytes || now.Allocs-before[i].Allocs != now.Frees-before[i].Frees ||
					now.Leaked != before[i].Leaked {
					t.Errorf("%s: %d storages made, %d freed, %d left to the collector; %d bytes live, %d before", d,
						now.Allocs-before[i].Allocs, now.Frees-before[i].Frees, now.Leaked-before[i].Leaked, now.LiveBytes, before[i].LiveBytes)
				}
			}
		})
	}
}
