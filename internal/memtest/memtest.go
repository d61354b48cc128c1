// Package memtest holds what the tests of vram's packages share to count
// memory exactly: waiting until the garbage that earlier tests left behind
// has been freed, so that its cleanups do not change the counts during a
// measurement. Tests of package vram itself, which cannot import it, have
// their own copy (settle in concurrency_test.go).
package memtest

import (
	"runtime"
	"slices"
	"time"

	"github.com/vramgo/vram"
)

// Settle runs the garbage collector until the cleanups of unreleased
// tensors stop changing the storage counts of ds (of the CPU and every
// simulated device when ds is empty): three quiet collections in a row,
// within two seconds. One quiet collection is not enough: a cleanup can
// free a tensor that owns another one, and under the race detector on a
// loaded machine the goroutine that runs cleanups can lag a collection by
// milliseconds.
func Settle(ds ...vram.Device) {
	if len(ds) == 0 {
		ds = append(ds, vram.CPU)
		for i := range vram.SimDeviceCount() {
			ds = append(ds, vram.Sim(i))
		}
	}
	read := func() []vram.StorageStats {
		st := make([]vram.StorageStats, len(ds))
		for i, d := range ds {
			st[i] = vram.Storage(d)
		}
		return st
	}
	last := read()
	deadline := time.Now().Add(2 * time.Second)
	for quiet := 0; quiet < 3 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		if now := read(); slices.Equal(now, last) {
			quiet++
		} else {
			last, quiet = now, 0
		}
	}
}
