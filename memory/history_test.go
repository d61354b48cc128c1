package memory

import (
	"math"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

// TestHistoryBounds records more and fewer events than the bound of the
// history, for bounds from one event to math.MaxInt (PyTorch's default is
// sys.maxsize): the history keeps the latest events, oldest first, and a
// bound far beyond the events recorded costs only those events.
func TestHistoryBounds(t *testing.T) {
	for _, tt := range []struct {
		name      string
		maxEvents int
		allocs    int // each logs an alloc, a free request and a free
	}{
		{"one", 1, 5},
		{"three", 3, 5},
		{"exact", 16, 5},
		{"room to spare", 100, 5},
		{"past the first chunk", 3000, 2000},
		{"sys.maxsize", math.MaxInt, 5},
		{"max int64", math.MaxInt64, 2000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newTestAllocator(t, "policy:pytorch", 64*mib)
			a.SetHistory(true, tt.maxEvents, false)
			want := min(tt.maxEvents, 1+3*tt.allocs) // and one segment allocation
			for i := range tt.allocs {
				b := mustAlloc(t, a, int64(i+1)*kMinBlockSize, 0)
				a.Free(b)
			}
			if c := cap(a.hist.ring); c > 2*max(want, historyChunk) {
				t.Errorf("the ring holds room for %d events after %d were recorded", c, want)
			}
			h := a.Snapshot().History
			var sizes []int64
			for _, e := range h {
				if e.Action == trace.ActionFreeCompleted {
					sizes = append(sizes, e.Size)
				}
			}
			if len(h) != want {
				t.Fatalf("%d events kept, want %d", len(h), want)
			}
			for i := 1; i < len(sizes); i++ {
				if sizes[i] != sizes[i-1]+kMinBlockSize {
					t.Fatalf("allocations out of order: %v", sizes)
				}
			}
			if last := sizes[len(sizes)-1]; last != int64(tt.allocs)*kMinBlockSize {
				t.Fatalf("the latest free kept is of %d bytes, want %d", last, tt.allocs*kMinBlockSize)
			}
		})
	}
}
