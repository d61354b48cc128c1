// Package memtest holds what the tests of vram's packages share to count
// memory exactly: waiting until the garbage that earlier tests left behind
// has been freed, so that its cleanups do not change the counts during a
// measurement, and measuring the host heap a function takes at its peak,
// in a process of the test's own. Tests of package vram itself, which cannot import it, call
// internal/quiesce directly (settle in concurrency_test.go).
package memtest

import (
	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/quiesce"
)

// Settle waits until the cleanups of unreleased tensors stop changing the
// storage counts of ds, or of the CPU and every simulated device when ds
// is empty ([quiesce.Wait]).
func Settle(ds ...vram.Device) {
	if len(ds) == 0 {
		ds = append(ds, vram.CPU)
		for i := range vram.SimDeviceCount() {
			ds = append(ds, vram.Sim(i))
		}
	}
	quiesce.Wait(func() []vram.StorageStats {
		st := make([]vram.StorageStats, len(ds))
		for i, d := range ds {
			st[i] = vram.Storage(d)
		}
		return st
	})
}
