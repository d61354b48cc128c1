package main

import (
	"time"

	"github.com/vramgo/vram"
	cb "github.com/vramgo/vram/backend/cuda"
)

// benchOverlap measures what streams are for: a 1 GiB non-blocking copy
// from pinned host memory on one stream and an 8192³ float32 GEMM (no
// TF32: about as long as the copy on an H200) on another, each alone and
// both at once, through the root package as a user writes it. The target
// is both at once in at most 1.1 times the longer alone.
func benchOverlap(reps int) {
	dev := vram.CUDA(0)
	cb.SetAllowTF32(false)
	const n = 8192
	host := vram.Zeros([]int{1 << 28}) // float32: 1 GiB
	pinned := host.PinMemory(dev)
	host.Release()
	a := vram.Randn([]int{n, n}, dev)
	b := vram.Randn([]int{n, n}, dev)
	copyStream, err := vram.NewStream(dev)
	must(err)
	gemmStream, err := vram.NewStream(dev)
	must(err)
	startCopy := func() *vram.Tensor {
		var out *vram.Tensor
		vram.WithStream(copyStream, func() { out = pinned.To(dev, vram.NonBlocking) })
		return out
	}
	startGEMM := func() *vram.Tensor {
		var out *vram.Tensor
		vram.WithStream(gemmStream, func() { out = a.MatMul(b) })
		return out
	}
	wall := func(fn func() []*vram.Tensor) float64 {
		var ts []float64
		for i := range reps/4 + 2 {
			must(vram.Synchronize(dev))
			t0 := time.Now()
			outs := fn()
			must(vram.Synchronize(dev))
			if i > 0 {
				ts = append(ts, time.Since(t0).Seconds()*1e3)
			}
			for _, o := range outs {
				o.Release()
			}
		}
		return median(ts)
	}
	tc := wall(func() []*vram.Tensor { return []*vram.Tensor{startCopy()} })
	tg := wall(func() []*vram.Tensor { return []*vram.Tensor{startGEMM()} })
	tb := wall(func() []*vram.Tensor { return []*vram.Tensor{startCopy(), startGEMM()} })
	emit("overlap_copy_h2d_1GiB", tc, "ms", "pinned.To(cuda, NonBlocking) on a side stream, alone")
	emit("overlap_gemm_8192_f32", tg, "ms", "a.MatMul(b) on another stream, alone")
	emit("overlap_both", tb, "ms", "both at once")
	emit("overlap_ratio", tb/max(tc, tg), "x", "both / the longer alone (target <= 1.1)")
	copyStream.Release()
	gemmStream.Release()
	for _, t := range []*vram.Tensor{pinned, a, b} {
		t.Release()
	}
}
