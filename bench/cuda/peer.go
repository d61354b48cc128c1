package main

import (
	"time"

	"github.com/vramgo/vram/backend"
	cb "github.com/vramgo/vram/backend/cuda"
)

// benchPeer times a direct 1 GiB copy from cuda:0 to cuda:1 (the path
// Tensor.To takes between GPUs), when there are two GPUs.
func benchPeer(reps int) {
	if (&cb.Backend{}).DeviceCount() < 2 {
		return
	}
	d0, err := cb.Open(0)
	must(err)
	d1, err := cb.Open(1)
	must(err)
	const n = 1 << 30
	src := view(d0, backend.Bool, n)
	dst := view(d1, backend.Bool, n)
	must(d0.Fill(d0.DefaultStream(), src, 1))
	run := func() {
		must(d0.CopyPeer(d0.DefaultStream(), dst, d1, d1.DefaultStream(), src))
		must(d0.Synchronize())
		must(d1.Synchronize())
	}
	run()
	var ts []float64
	for range max(5, reps/2) {
		t0 := time.Now()
		run()
		ts = append(ts, time.Since(t0).Seconds())
	}
	emit("copy_peer_1GiB", n/median(ts)/1e9, "GB/s", "cuda:0 -> cuda:1, cuMemcpyPeerAsync (Tensor.To between GPUs)")
	d0.Free(src.Buf, nil)
	d1.Free(dst.Buf, nil)
}
