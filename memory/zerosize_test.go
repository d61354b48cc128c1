package memory

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// TestZeroByteAllocTakesNothing checks that Alloc(0), as PyTorch's
// allocator does for a zero-byte request, takes no memory on every policy
// and arena: no statistic moves, no segment or history event appears, it
// succeeds on a full device and under a limit, and Free, RecordStream and a
// second Free behave.
func TestZeroByteAllocTakesNothing(t *testing.T) {
	for _, conf := range statConfigs {
		for k := range statArenas {
			t.Run(statArenas[k].name+"/"+conf, func(t *testing.T) {
				ev := newFakeEvents()
				a, _ := statAllocator(t, conf, k, 64*mib, WithEvents(ev))
				a.SetHistory(true, 100, false)
				// Fill the device, so that any memory a zero-byte request
				// took would have to come from nowhere.
				big := mustAlloc(t, a, 60*mib, 0)
				if err := a.SetMemoryFraction(0.5); err != nil {
					t.Fatal(err)
				}
				before := a.Stats()
				events := len(a.Snapshot().History)
				var zs []*Block
				for _, s := range []Stream{0, 1, 2} {
					b, err := a.Alloc(0, s, "empty")
					if err != nil {
						t.Fatalf("Alloc(0) on stream %d of a full device: %v", s, err)
					}
					if b.Size() != 0 || b.Requested() != 0 || b.Addr() != 0 || b.Stream() != s || b.Region() != "empty" {
						t.Fatalf("zero-byte block: size %d, requested %d, addr %#x, stream %d, region %q",
							b.Size(), b.Requested(), b.Addr(), b.Stream(), b.Region())
					}
					a.RecordStream(b, s+1)
					zs = append(zs, b)
				}
				if after := a.Stats(); after != before {
					t.Fatalf("zero-byte blocks changed the stats:\nbefore %+v\nafter  %+v", before, after)
				}
				snap := a.Snapshot()
				if n := len(snap.History); n != events {
					t.Fatalf("zero-byte blocks added %d history events", n-events)
				}
				for _, seg := range snap.Segments {
					for _, blk := range seg.Blocks {
						if blk.Size == 0 {
							t.Fatalf("snapshot holds a zero-size block: %+v", blk)
						}
					}
				}
				for _, b := range zs {
					a.Free(b)
				}
				if after := a.Stats(); after != before {
					t.Fatalf("freeing zero-byte blocks changed the stats:\nbefore %+v\nafter  %+v", before, after)
				}
				if len(a.pendingEvents) != 0 {
					t.Fatalf("freeing recorded zero-byte blocks left %d pending events", len(a.pendingEvents))
				}
				defer func() {
					if recover() == nil {
						t.Fatal("a second Free of a zero-byte block did not panic")
					}
					a.Free(big)
					check(t, a, nil)
				}()
				a.Free(zs[0])
			})
		}
	}
}

// TestMemoryFractionZero checks SetMemoryFraction at and around 0: as
// torch.cuda.set_per_process_memory_fraction(0.0), 0 lets the allocator
// reserve nothing more, while cached blocks and zero-byte requests are
// still served; values outside [0, 1] are refused and keep the limit.
func TestMemoryFractionZero(t *testing.T) {
	tests := []struct {
		fraction  float64
		ok        bool
		wantLimit int64
	}{
		{0, true, 0},
		{0.5, true, 32 * mib},
		{1, true, 64 * mib},
		{-0.25, false, 64 * mib},
		{1.5, false, 64 * mib},
		{math.NaN(), false, 64 * mib},
		{math.Inf(-1), false, 64 * mib},
	}
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", ""} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%v", conf, tt.fraction), func(t *testing.T) {
				a, sim := newTestAllocator(t, conf, 64*mib)
				cached := mustAlloc(t, a, 4096, 0)
				a.Free(cached)
				err := a.SetMemoryFraction(tt.fraction)
				if (err == nil) != tt.ok {
					t.Fatalf("SetMemoryFraction(%v) = %v, want ok %v", tt.fraction, err, tt.ok)
				}
				if got := a.Limit(); got != tt.wantLimit {
					t.Fatalf("Limit() = %d, want %d", got, tt.wantLimit)
				}
				// The cached block and a zero-byte request need no new
				// memory: they are served under any limit.
				b := mustAlloc(t, a, 4096, 0)
				z := mustAlloc(t, a, 0, 0)
				_, err = a.Alloc(8*mib, 0, "")
				var oom *OutOfMemoryError
				if fits := 8*mib+2*mib <= tt.wantLimit; fits != (err == nil) {
					t.Fatalf("Alloc(8 MiB) under a limit of %d: %v", tt.wantLimit, err)
				} else if !fits && (!errors.As(err, &oom) || oom.Limit != tt.wantLimit) {
					t.Fatalf("Alloc(8 MiB) under a limit of %d: %v, want an OutOfMemoryError naming the limit", tt.wantLimit, err)
				}
				a.Free(b)
				a.Free(z)
				check(t, a, sim)
			})
		}
	}
}
