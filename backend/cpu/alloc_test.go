package cpu

import (
	"errors"
	"testing"

	"github.com/vramgo/vram/memory"
)

// TestAllocBeyondTheMachine checks that a buffer larger than the machine's
// memory is an error wrapping memory.ErrTooLarge, not Go's fatal
// out-of-memory crash.
func TestAllocBeyondTheMachine(t *testing.T) {
	m := hostMemory()
	if m == 0 {
		t.Skip("the machine's memory is unknown here")
	}
	for _, n := range []int64{m + 1, 1 << 46, maxAlloc + 1} {
		if _, err := (&Device{}).Alloc(n, nil, ""); !errors.Is(err, memory.ErrTooLarge) {
			t.Errorf("Alloc(%d) with %d bytes of RAM and swap: %v, want ErrTooLarge", n, m, err)
		}
	}
}
