package cpu

import (
	"runtime"
	"strings"
	"testing"
)

func TestParallelPanic(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	err := parallel(1000, 1<<20, func(lo, hi int) error {
		if lo > 0 {
			var s []int
			_ = s[lo] // index out of range on a worker goroutine
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Errorf("parallel with a panicking worker: %v", err)
	}
	// Small work runs on the calling goroutine, still recovering.
	err = parallel(10, 10, func(lo, hi int) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("parallel with a panicking caller: %v", err)
	}
}

// TestCursor checks that a cursor visits the offsets of a strided view in
// row-major order, from any starting element.
func TestCursor(t *testing.T) {
	shape := []int{3, 1, 4, 5}
	strides := [][]int{{20, 20, 5, 1}, {1, 0, 15, 3}, {0, 7, 0, 1}}
	want := func(k, i int) int {
		off := 0
		for d := len(shape) - 1; d >= 0; d-- {
			off += (i % shape[d]) * strides[k][d]
			i /= shape[d]
		}
		return off + 10*k
	}
	sp := newSpace(shape, strides, []int{0, 10, 20})
	if len(sp.shape) != 3 { // the first operand is contiguous over the last two dims, the others are not
		t.Errorf("merged shape %v", sp.shape)
	}
	cur := newCursor(sp)
	for lo := range sp.size {
		for hi := lo; hi <= sp.size; hi += 7 {
			cur.reset(lo, hi, [maxOperands]int{})
			i := lo
			for {
				off, n, ok := cur.next()
				if !ok {
					break
				}
				for j := range n {
					for k := range 3 {
						if got := off[k] + j*sp.inner[k]; got != want(k, i) {
							t.Fatalf("range [%d,%d) element %d operand %d: offset %d, want %d", lo, hi, i, k, got, want(k, i))
						}
					}
					i++
				}
			}
			if i != hi {
				t.Fatalf("range [%d,%d) visited up to %d", lo, hi, i)
			}
		}
	}
}
