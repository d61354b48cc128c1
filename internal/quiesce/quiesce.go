// Package quiesce waits for the garbage collector's cleanups to stop
// changing a set of counts: what tests that count memory exactly do before
// they take a baseline, so that garbage earlier tests left behind is not
// freed during the measurement. It does not import vram, so that the tests
// of package vram itself can use it; internal/memtest wraps it for the
// tests of the other packages.
package quiesce

import (
	"runtime"
	"slices"
	"time"
)

// Wait runs the garbage collector until read returns the same counts
// three collections in a row, 10 ms apart, or two seconds have passed.
// One quiet collection is not enough: a cleanup can free an object that
// owns another one with a cleanup of its own, and under the race detector
// on a loaded machine the goroutine that runs cleanups can lag a
// collection by milliseconds.
func Wait[T comparable](read func() []T) {
	last := read()
	deadline := time.Now().Add(2 * time.Second)
	for quiet := 0; quiet < 3 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if now := read(); slices.Equal(now, last) {
			quiet++
		} else {
			last, quiet = now, 0
		}
	}
}
