package vram_test

import (
	"sync"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

// TestCUDAStreams runs tensor work on CUDA streams: a producer and a
// consumer ordered by an event, non-blocking copies through pinned memory
// both ways, RecordStream, priorities and timing.
func TestCUDAStreams(t *testing.T) {
	requireCUDA(t, 1)
	dev := vram.CUDA(0)
	lo, hi, err := vram.StreamPriorityRange(dev)
	if err != nil || hi > lo {
		t.Fatalf("StreamPriorityRange = %d, %d, %v", lo, hi, err)
	}
	t.Logf("stream priorities on %v: %d (lowest) to %d (highest)", dev, lo, hi)
	prod, err := vram.NewStream(dev, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Release()
	cons, err := vram.NewStream(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Release()
	if prod.Priority() != hi {
		t.Errorf("priority %d, want %d", prod.Priority(), hi)
	}

	host := vram.Full(vram.Shape{1 << 22}, 1.5) // 16 MiB of float32
	defer host.Release()
	pinned := host.PinMemory(dev)
	defer pinned.Release()
	start, end := vram.NewTimingEvent(), vram.NewTimingEvent()
	defer start.Release()
	defer end.Release()
	var x, y *vram.Tensor
	start.Record(prod)
	vram.WithStream(prod, func() {
		g := pinned.To(dev, vram.NonBlocking)
		x = g.MulScalar(2)
		g.Release()
	})
	ready := prod.RecordEvent()
	defer ready.Release()
	cons.WaitEvent(ready)
	vram.WithStream(cons, func() {
		x.RecordStream(cons)
		y = x.AddScalar(1).To(vram.CPU, vram.NonBlocking)
	})
	x.Release()
	end.Record(cons)
	if !y.IsPinned() {
		t.Error("the non-blocking copy to the host is not pinned")
	}
	// The host read waits for the copy.
	if got, want := y.Sum().Item(), float64(4<<22); got != want {
		t.Errorf("sum = %v, want %v", got, want)
	}
	y.Release()
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	el, err := start.ElapsedTime(end)
	if err != nil || el <= 0 || el > time.Minute {
		t.Errorf("ElapsedTime = %v, %v", el, err)
	}
	if err := vram.Synchronize(dev); err != nil {
		t.Fatal(err)
	}
	if !prod.Query() || !cons.Query() {
		t.Error("streams not idle after Synchronize")
	}
}

// TestCUDAStreamsConcurrent: goroutines each train on their own stream of
// one GPU, with releases racing queued work.
func TestCUDAStreamsConcurrent(t *testing.T) {
	requireCUDA(t, 1)
	dev := vram.CUDA(0)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := vram.NewStream(dev, -i)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Release()
			var sum float64
			vram.WithStream(s, func() {
				w := vram.Ones(vram.Shape{256, 256}, dev)
				defer w.Release()
				for range 50 {
					vram.Tidy(func() {
						x := vram.Full(vram.Shape{64, 256}, float64(i+1), dev)
						w.AddInPlace(x.MatMul(w).Mean().MulScalar(0))
					})
				}
				sum = w.Sum().Item()
			})
			if sum != 256*256 {
				t.Errorf("goroutine %d: sum %v, want %v", i, sum, 256*256)
			}
		}()
	}
	wg.Wait()
	if err := vram.Synchronize(dev); err != nil {
		t.Fatal(err)
	}
}
