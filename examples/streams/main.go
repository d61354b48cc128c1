// Streams overlaps a host-to-device copy with a matrix product, as a data
// loader feeding a GPU does: the next batch comes from pinned memory on a
// copy stream while the current one computes on the default stream, and
// an event tells the compute stream when the batch has landed. On a
// machine without a GPU it runs on a simulated device, whose side streams
// run only when something waits for them, so the ordering shown is exactly
// the one a GPU needs.
//
//	go run ./examples/streams
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
)

func main() {
	cmdline.NoArgs("Streams overlaps host-to-device copies with computation using streams and events.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "streams:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	return vram.Catch(func() { streams(w) })
}

const (
	batches = 4
	rows    = 512
	cols    = 1024
)

func streams(w io.Writer) {
	dev := vram.Sim(0)
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	copyStream, err := vram.NewStream(dev)
	if err != nil {
		panic(err)
	}
	defer copyStream.Release()
	weights := vram.Full(vram.Shape{cols, cols}, 1.0/cols, dev)
	defer weights.Release()

	// Batches in pinned host memory, so that the copies need not wait.
	host := make([]*vram.Tensor, batches)
	for i := range host {
		b := vram.Full(vram.Shape{rows, cols}, float64(i+1))
		host[i] = b.PinMemory(dev)
		b.Release()
	}
	defer func() {
		for _, h := range host {
			h.Release()
		}
	}()

	// Queue the first batch's copy, then, for each batch: queue the next
	// copy, wait for this batch's, compute.
	load := func(i int) (*vram.Tensor, *vram.Event) {
		var x *vram.Tensor
		vram.WithStream(copyStream, func() { x = host[i].To(dev, vram.NonBlocking) })
		return x, copyStream.RecordEvent()
	}
	start := vram.NewTimingEvent()
	defer start.Release()
	start.Record(vram.CurrentStream(dev))
	x, ready := load(0)
	total := 0.0
	for i := range batches {
		var next *vram.Tensor
		var nextReady *vram.Event
		if i+1 < batches {
			next, nextReady = load(i + 1)
		}
		compute := vram.CurrentStream(dev)
		compute.WaitEvent(ready) // the batch has landed
		x.RecordStream(compute)  // and compute uses memory of the copy stream
		y := x.MatMul(weights).Sum()
		total += y.Item()
		fmt.Fprintf(w, "batch %d on %v: sum of x·W = %.0f\n", i, dev, y.Item())
		y.Release()
		x.Release()
		ready.Release()
		x, ready = next, nextReady
	}
	end := vram.NewTimingEvent()
	defer end.Release()
	end.Record(vram.CurrentStream(dev))
	if err := vram.Synchronize(dev); err != nil {
		panic(err)
	}
	el, err := start.ElapsedTime(end)
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(w, "all %d batches: %.0f (want %.0f), in %v\n", batches, total, float64(rows*cols)*(1+2+3+4), el.Round(time.Microsecond))
}
