package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/vramgo/vram/backend"
	cb "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/native/cuda"
)

// benchPool times the poolings of a ResNet-50 step at batch 64,
// channels-last, in float32 and bf16, forward and backward, with CUDA
// events over 20 runs: the stem's 3×3 max pooling with stride 2 (64
// channels, 112×112 to 56×56) and the head's global average (2048
// channels, 7×7). bench/torch_pool.py times the same in PyTorch.
func benchPool(d *cb.Device) {
	const batch, runs = 64, 20
	s := d.DefaultStream()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	must(cuda.CtxSetCurrent(d.Context()))
	ev0, err := cuda.EventCreate(cuda.EventDefault)
	must(err)
	defer cuda.EventDestroy(ev0)
	ev1, err := cuda.EventCreate(cuda.EventDefault)
	must(err)
	defer cuda.EventDestroy(ev1)
	for _, c := range []struct {
		name      string
		ch, hw, o int
		p         backend.Pool2DParams
	}{
		{"stem_max", 64, 112, 56, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}},
		{"head_avg", 2048, 7, 1, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{7, 7}, Stride: [2]int{7, 7}, CountIncludePad: true}},
	} {
		for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
			x := convView(d, dt, true, batch, c.ch, c.hw, c.hw)
			y := convView(d, dt, true, batch, c.ch, c.o, c.o)
			dx := convView(d, dt, true, batch, c.ch, c.hw, c.hw)
			dy := convView(d, dt, true, batch, c.ch, c.o, c.o)
			for _, dir := range []struct {
				name string
				run  func()
			}{
				{"fwd", func() { must(d.Pool2D(s, y, x, c.p)) }},
				{"bwd", func() { must(d.Pool2DBackward(s, dx, dy, x, y, c.p)) }},
			} {
				for range 3 {
					dir.run()
				}
				must(d.Synchronize())
				must(cuda.CtxSetCurrent(d.Context()))
				must(cuda.EventRecord(ev0, d.Stream()))
				for range runs {
					dir.run()
				}
				must(cuda.CtxSetCurrent(d.Context()))
				must(cuda.EventRecord(ev1, d.Stream()))
				must(cuda.EventSynchronize(ev1))
				el, err := cuda.EventElapsedTime(ev0, ev1)
				must(err)
				us := float64(el.Nanoseconds()) / 1000 / runs
				fmt.Fprintf(os.Stderr, "pool %s %s %s: %.1f us\n", c.name, dt, dir.name, us)
				emit(fmt.Sprintf("pool_%s_%s_%s", c.name, dt, dir.name), us, "us",
					fmt.Sprintf("batch 64, %d channels, %dx%d, channels-last, GPU time between CUDA events", c.ch, c.hw, c.hw))
			}
			for _, v := range []backend.View{x, y, dx, dy} {
				d.Free(v.Buf, s)
			}
		}
	}
}
