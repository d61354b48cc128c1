package data_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// cached is a dataset that holds a tensor per sample, made before any
// epoch, and returns it as it is.
type cached struct{ items []*vram.Tensor }

func (c cached) Len() int { return len(c.items) }

func (c cached) Get(i int) (data.Sample, error) { return data.Sample{c.items[i]}, nil }

// TestCollatePassesDatasetTensorsThrough: a collate function that returns
// a sample's tensor as it is (PyTorch's collate_fn=lambda b: b[0], for
// samples that come batched already) gives the batch a tensor of its own,
// so that releasing the batch leaves the dataset's tensor alone, and the
// next epoch reads it again, pinned and moved to a device or not; a batch
// kept is the caller's and its release leaves the dataset's tensor alone
// too.
func TestCollatePassesDatasetTensorsThrough(t *testing.T) {
	dev := vram.Sim(0)
	first := func(s []data.Sample, _ vram.Device) ([]*vram.Tensor, error) {
		return []*vram.Tensor{s[0][0].(*vram.Tensor)}, nil
	}
	tests := []struct {
		workers int
		pin     bool // the dataset on the CPU, batches pinned and moved to dev
	}{{0, false}, {2, false}, {0, true}, {2, true}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d workers, pinned %v", tc.workers, tc.pin), func(t *testing.T) {
			home := dev
			if tc.pin {
				home = vram.CPU
			}
			ds := cached{}
			for i := range 4 {
				ds.items = append(ds.items, vram.Full(vram.Shape{2}, float64(i), home))
			}
			defer func() {
				for _, x := range ds.items {
					x.Release()
				}
			}()
			settleGarbage()
			mem, hostMem := vram.MemoryAllocated(dev), vram.MemoryAllocated(vram.CPU)
			opts := data.Options{Collate: first, NumWorkers: tc.workers}
			if tc.pin {
				opts.PinMemory, opts.Device = true, dev
			}
			l, err := data.NewLoader(ds, 1, opts)
			if err != nil {
				t.Fatal(err)
			}
			for epoch := range 2 {
				var got [][]float32
				for b, err := range l.All() {
					if err != nil {
						t.Fatalf("epoch %d: %v", epoch, err)
					}
					got = append(got, b.Tensors[0].Float32s())
					if epoch == 1 && b.Indices[0] == 2 {
						for _, k := range b.Keep() {
							k.Release()
						}
					}
				}
				want := [][]float32{{0, 0}, {1, 1}, {2, 2}, {3, 3}}
				if !slices.EqualFunc(got, want, slices.Equal) {
					t.Fatalf("epoch %d: %v, want %v", epoch, got, want)
				}
				for i, x := range ds.items {
					if x.Released() {
						t.Fatalf("epoch %d released the dataset's tensor %d", epoch, i)
					}
				}
			}
			settleGarbage()
			if after, host := vram.MemoryAllocated(dev), vram.MemoryAllocated(vram.CPU); after != mem || host != hostMem {
				t.Errorf("%s holds %d bytes, %d before; the CPU %d, %d before", dev, after, mem, host, hostMem)
			}
		})
	}
}
