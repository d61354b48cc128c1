package cpu

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vramgo/vram/backend"
)

// withLimit sets the CPU device's limit to the memory live now plus extra
// for the rest of the test.
func withLimit(t *testing.T, extra int64) int64 {
	t.Helper()
	limit := LiveBytes() + extra
	if err := Configure(Options{MemoryLimit: limit}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Configure(Options{}); err != nil {
			t.Error(err)
		}
	})
	return limit
}

// TestAllocPastTheLimit checks that an allocation that would take the live
// total past the limit is an *OutOfMemoryError with the numbers, however
// small each allocation is, that it counts nothing, and that freed memory
// comes back to the budget.
func TestAllocPastTheLimit(t *testing.T) {
	tests := []struct {
		name  string
		limit int64 // above the memory live when the test starts
		size  int64 // of each allocation
	}{
		{"one byte at a time", 64, 1},
		{"small pieces", 1 << 20, 4 << 10},
		{"pieces that do not divide the limit", 1000, 24},
		{"one piece larger than the limit", 1 << 10, 1<<10 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := withLimit(t, tt.limit)
			var held []backend.Buffer
			defer func() {
				for _, b := range held {
					theDevice.Free(b, nil)
				}
			}()
			var err error
			for range tt.limit/tt.size + 1 {
				var b backend.Buffer
				if b, err = theDevice.Alloc(tt.size, nil, ""); err != nil {
					break
				}
				held = append(held, b)
			}
			var oom *OutOfMemoryError
			if !errors.As(err, &oom) {
				t.Fatalf("after %d allocations of %d bytes under a limit of %d: %v, want an *OutOfMemoryError", len(held), tt.size, limit, err)
			}
			live := limit - tt.limit + int64(len(held))*tt.size
			if want := tt.limit / tt.size; int64(len(held)) != want {
				t.Errorf("%d allocations fit, want %d", len(held), want)
			}
			if *oom != (OutOfMemoryError{Requested: tt.size, Live: live, Limit: limit, Configured: true}) {
				t.Errorf("error %+v, want %d requested, %d live, limit %d", *oom, tt.size, live, limit)
			}
			for _, part := range []string{"out of memory", strconv.FormatInt(tt.size, 10) + " byte", strconv.FormatInt(live, 10) + " bytes", strconv.FormatInt(limit, 10) + " bytes", "configured limit"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%q does not say %q", err, part)
				}
			}
			if got := LiveBytes(); got != live {
				t.Errorf("%d bytes live after the refusal, want %d", got, live)
			}
			if len(held) == 0 {
				return
			}
			theDevice.Free(held[0], nil)
			theDevice.Free(held[0], nil) // a second free gives nothing back
			held = held[1:]
			if got := LiveBytes(); got != live-tt.size {
				t.Errorf("%d bytes live after a free, want %d", got, live-tt.size)
			}
			b, err := theDevice.Alloc(tt.size, nil, "")
			if err != nil {
				t.Fatalf("Alloc after a free: %v", err)
			}
			held = append(held, b)
		})
	}
}

// TestMemoryLimitDefault checks that the limit is the machine's physical
// memory unless configured, and that a negative one is refused.
func TestMemoryLimitDefault(t *testing.T) {
	if got, want := MemoryLimit(), physicalMemory(); got != want {
		t.Errorf("MemoryLimit() = %d, want the physical memory, %d", got, want)
	}
	if err := Configure(Options{MemoryLimit: -1}); err == nil {
		t.Error("Configure with a negative limit succeeded")
	}
	if got, want := MemoryLimit(), physicalMemory(); got != want {
		t.Errorf("after a refused Configure, MemoryLimit() = %d, want %d", got, want)
	}
}

// TestAbandonGivesBackOnCollection checks that an abandoned buffer's bytes
// come back when the collector reclaims it, and not twice when it is freed
// too.
func TestAbandonGivesBackOnCollection(t *testing.T) {
	before := LiveBytes()
	func() {
		b, err := theDevice.Alloc(1<<20, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		theDevice.Abandon(b)
		theDevice.Free(b, nil)
		if got := LiveBytes() - before; got != 1<<20 {
			t.Errorf("%d bytes live after Abandon and Free, want 1 MiB until collected", got)
		}
	}()
	for range 100 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		if LiveBytes() == before {
			return
		}
	}
	t.Errorf("%d bytes live after collections, want %d", LiveBytes(), before)
}

// TestBudgetUnderContention takes and gives from many goroutines at once
// (run it with -race): the live total never passes the limit, every byte
// taken comes back, and a refusal happens only when the pieces held really
// leave no room.
func TestBudgetUnderContention(t *testing.T) {
	const (
		limit   = 1000
		workers = 16
		rounds  = 2000
	)
	b := newBudget(limit)
	var over, wrongRefusal atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			size := int64(w%7)*10 + 10
			var held []int64
			for i := range rounds {
				if i%3 == 2 && len(held) > 0 {
					b.give(held[len(held)-1])
					held = held[:len(held)-1]
					continue
				}
				err := b.take(size)
				if live := b.live.Load(); live > limit {
					over.Add(1)
				}
				var oom *OutOfMemoryError
				switch {
				case err == nil:
					held = append(held, size)
				case !errors.As(err, &oom) || oom.Live+size <= limit || oom.Limit != limit || oom.Configured:
					wrongRefusal.Add(1)
				}
			}
			for _, n := range held {
				b.give(n)
			}
		}()
	}
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("the live total passed the limit %d times", n)
	}
	if n := wrongRefusal.Load(); n > 0 {
		t.Errorf("%d refusals did not match the numbers they reported", n)
	}
	if got := b.live.Load(); got != 0 {
		t.Errorf("%d bytes live after every piece was given back", got)
	}
}

// TestAllocUnderContention allocates and frees from many goroutines on the
// device itself under a limit (run it with -race): what is held never
// passes the limit and every byte comes back.
func TestAllocUnderContention(t *testing.T) {
	const (
		extra   = 64 << 10
		workers = 8
		rounds  = 500
	)
	limit := withLimit(t, extra)
	base := limit - extra
	var over atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []backend.Buffer
			for i := range rounds {
				if i%2 == 1 && len(held) > 0 {
					theDevice.Free(held[0], nil)
					held = held[1:]
					continue
				}
				buf, err := theDevice.Alloc(int64(1+w)<<10, nil, "")
				if LiveBytes() > limit {
					over.Add(1)
				}
				if err == nil {
					held = append(held, buf)
				}
			}
			for _, buf := range held {
				theDevice.Free(buf, nil)
			}
		}()
	}
	wg.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("the live total passed the limit %d times", n)
	}
	if got := LiveBytes(); got != base {
		t.Errorf("%d bytes live after every buffer was freed, want %d", got, base)
	}
}

// BenchmarkAlloc measures an allocation and its free.
func BenchmarkAlloc(b *testing.B) {
	for _, size := range []int64{64, 4 << 10, 1 << 20} {
		b.Run(strconv.FormatInt(size, 10), func(b *testing.B) {
			for b.Loop() {
				buf, err := theDevice.Alloc(size, nil, "")
				if err != nil {
					b.Fatal(err)
				}
				theDevice.Free(buf, nil)
			}
		})
	}
}

// BenchmarkBudget measures the check alone: a take and a give.
func BenchmarkBudget(b *testing.B) {
	for b.Loop() {
		if err := host.take(64); err != nil {
			b.Fatal(err)
		}
		host.give(64)
	}
}
