package memory

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram/memory/trace"
)

func TestRoundSize(t *testing.T) {
	tests := []struct {
		name string
		conf string
		in   int64
		want int64
	}{
		{"zero", "", 0, 512},
		{"one byte", "", 1, 512},
		{"block", "", 512, 512},
		{"just above", "", 513, 1024},
		{"large", "", 10*mib + 1, 10*mib + 512},
		{"divisions ignore small", "roundup_power2_divisions:4", 1200, 1536},
		{"divisions 4 of 1200 MiB", "roundup_power2_divisions:4", 1200 * mib, 1280 * mib},
		{"divisions power of two", "roundup_power2_divisions:4", 1024 * mib, 1024 * mib},
		{"divisions on a step", "roundup_power2_divisions:4", 1280 * mib, 1280 * mib},
		{"divisions 2", "roundup_power2_divisions:2", 5 * mib, 6 * mib},
		{"per size below first key", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", 100*mib + 1, 100*mib + 512},
		{"per size 512 MiB interval", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", 600 * mib, 768 * mib},
		{"per size 1 GiB interval", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", 1200 * mib, 1280 * mib},
		{"per size above", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", 3000 * mib, 3072 * mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newTestAllocator(t, tt.conf, 1<<30)
			if got := a.roundSize(tt.in); got != tt.want {
				t.Fatalf("roundSize(%d) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

// TestPoolsAndSegments checks pool choice, segment sizes and splitting under
// the PyTorch policy with fixed segments.
func TestPoolsAndSegments(t *testing.T) {
	tests := []struct {
		name      string
		size      int64
		small     bool
		segment   int64 // bytes reserved by the first allocation
		blockSize int64 // rounded block size handed out
	}{
		{"tiny", 8, true, kSmallBuffer, 512},
		{"1 MiB", mib, true, kSmallBuffer, mib},
		{"just above 1 MiB", mib + 1, false, kLargeBuffer, mib + 512},
		{"5 MiB", 5 * mib, false, kLargeBuffer, 5 * mib},
		{"below 10 MiB", 10*mib - 512, false, kLargeBuffer, 10*mib - 512},
		{"10 MiB", 10 * mib, false, 10 * mib, 10 * mib},
		{"11 MiB keeps the 1 MiB rest", 11 * mib, false, 12 * mib, 12 * mib},
		{"19.5 MiB keeps the unsplittable rest", 19*mib + mib/2, false, 20 * mib, 20 * mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, sim := newTestAllocator(t, "policy:pytorch", 1<<30)
			b := mustAlloc(t, a, tt.size, 0)
			s := a.Stats()
			pool := StatLargePool
			if tt.small {
				pool = StatSmallPool
			}
			if s.ReservedBytes[pool].Current != tt.segment || s.ReservedBytes[StatAll].Current != tt.segment {
				t.Errorf("reserved %d (pool %d), want %d in pool %d", s.ReservedBytes[StatAll].Current, s.ReservedBytes[pool].Current, tt.segment, pool)
			}
			if b.Size() != tt.blockSize || b.Requested() != tt.size {
				t.Errorf("block size %d requested %d, want %d and %d", b.Size(), b.Requested(), tt.blockSize, tt.size)
			}
			if s.RequestedBytes[StatAll].Current != tt.size || s.AllocatedBytes[pool].Current != tt.blockSize {
				t.Errorf("stats: requested %d allocated %d", s.RequestedBytes[StatAll].Current, s.AllocatedBytes[pool].Current)
			}
			check(t, a, sim)
			a.Free(b)
			check(t, a, sim)
		})
	}
}

func TestSplitAndCoalesce(t *testing.T) {
	a, sim := newTestAllocator(t, "policy:pytorch", 1<<30)
	x := mustAlloc(t, a, 4*mib, 0) // 20 MiB segment: [x | rest]
	y := mustAlloc(t, a, 4*mib, 0) // [x | y | rest]
	z := mustAlloc(t, a, 4*mib, 0)
	if y.Addr() != x.Addr()+4*mib || z.Addr() != y.Addr()+4*mib {
		t.Fatalf("blocks not carved in order: %x %x %x", x.Addr(), y.Addr(), z.Addr())
	}
	if s := a.Stats(); s.Segment[StatAll].Current != 1 || s.InactiveSplit[StatAll].Current != 1 {
		t.Fatalf("want one segment and one inactive split block, got %d and %d", s.Segment[StatAll].Current, s.InactiveSplit[StatAll].Current)
	}
	check(t, a, sim)
	a.Free(y) // a hole between x and z
	if s := a.Stats(); s.InactiveSplit[StatAll].Current != 2 || s.InactiveSplitBytes[StatAll].Current != 12*mib {
		t.Fatalf("after freeing y: %d inactive split blocks, %d bytes", s.InactiveSplit[StatAll].Current, s.InactiveSplitBytes[StatAll].Current)
	}
	w := mustAlloc(t, a, 3*mib, 0) // best fit: y's 4 MiB hole, not the 8 MiB rest
	if w.Addr() != y.Addr() {
		t.Fatalf("best fit chose 0x%x, want y's hole 0x%x", w.Addr(), y.Addr())
	}
	check(t, a, sim)
	a.Free(w)
	a.Free(x) // x, the hole and... z still in the way
	check(t, a, sim)
	a.Free(z) // everything merges back into one free segment
	s := a.Stats()
	if s.InactiveSplit[StatAll].Current != 0 || s.ReservedBytes[StatAll].Current != 20*mib {
		t.Fatalf("after freeing all: %+v", s.InactiveSplit[StatAll])
	}
	if n := a.pools[poolLarge].free.Len(); n != 1 {
		t.Fatalf("%d free blocks, want the whole segment as one", n)
	}
	check(t, a, sim)
	a.EmptyCache()
	if s := a.Stats(); s.ReservedBytes[StatAll].Current != 0 || s.Segment[StatAll].Current != 0 || s.NumDeviceFree != 1 {
		t.Fatalf("EmptyCache left %d bytes in %d segments", s.ReservedBytes[StatAll].Current, s.Segment[StatAll].Current)
	}
	check(t, a, sim)
}

func TestDoubleFreePanics(t *testing.T) {
	a, _ := newTestAllocator(t, "", 1<<30)
	b := mustAlloc(t, a, 100, 0)
	a.Free(b)
	mustPanic(t, "double free", func() { a.Free(b) })
	other, _ := newTestAllocator(t, "", 1<<30)
	c := mustAlloc(t, other, 100, 0)
	mustPanic(t, "foreign block", func() { a.Free(c) })
	mustPanic(t, "nil block", func() { a.Free(nil) })
	mustPanic(t, "RecordStream after free", func() { a.RecordStream(b, 1) })
	if _, err := a.Alloc(-1, 0, ""); err == nil {
		t.Fatal("Alloc(-1) succeeded")
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}

func TestMaxSplitSize(t *testing.T) {
	a, sim := newTestAllocator(t, "policy:pytorch,max_split_size_mb:100", 1<<30)
	big := mustAlloc(t, a, 200*mib, 0)
	a.Free(big)
	small := mustAlloc(t, a, 50*mib, 0) // must not split the oversize block
	if small.Addr() == big.Addr() {
		t.Fatal("a request below max_split_size took an oversize block")
	}
	near := mustAlloc(t, a, 190*mib, 0) // within kLargeBuffer: takes it whole
	if near.Addr() != big.Addr() || near.Size() != 200*mib {
		t.Fatalf("190 MiB request: block 0x%x of %d, want the 200 MiB block whole", near.Addr(), near.Size())
	}
	a.Free(near)
	far := mustAlloc(t, a, 150*mib, 0) // 50 MiB smaller: not allowed
	if far.Addr() == big.Addr() {
		t.Fatal("a 150 MiB request took a 200 MiB oversize block")
	}
	check(t, a, sim)
	if got := a.Stats().MaxSplitSize; got != 100*mib {
		t.Fatalf("MaxSplitSize stat %d", got)
	}
}

// TestMaxNonSplitRounding checks that max_non_split_rounding_mb widens how
// much larger than a request an unsplit oversize block may be and still
// serve it (20 MiB by default).
func TestMaxNonSplitRounding(t *testing.T) {
	for _, tc := range []struct {
		conf  string
		takes bool // a 160 MiB request takes the cached 200 MiB block
	}{
		{"policy:pytorch,max_split_size_mb:100", false},
		{"policy:pytorch,max_split_size_mb:100,max_non_split_rounding_mb:20", false},
		{"policy:pytorch,max_split_size_mb:100,max_non_split_rounding_mb:40", false}, // 200 >= 160+40
		{"policy:pytorch,max_split_size_mb:100,max_non_split_rounding_mb:41", true},
	} {
		t.Run(tc.conf, func(t *testing.T) {
			a, sim := newTestAllocator(t, tc.conf, 1<<30)
			big := mustAlloc(t, a, 200*mib, 0)
			a.Free(big)
			b := mustAlloc(t, a, 160*mib, 0)
			if took := b.Addr() == big.Addr(); took != tc.takes {
				t.Errorf("160 MiB request took the 200 MiB block: %v, want %v", took, tc.takes)
			}
			check(t, a, sim)
		})
	}
}

func TestGarbageCollectionThreshold(t *testing.T) {
	// Capacity 100 MiB, threshold 0.5: once the reserve passes 50 MiB, a
	// request that misses the cache first releases the oldest free
	// segments.
	a, sim := newTestAllocator(t, "policy:pytorch,garbage_collection_threshold:0.5", 100*mib)
	var bs []*Block
	for i := 0; i < 4; i++ {
		bs = append(bs, mustAlloc(t, a, 14*mib, 0)) // 14 MiB segments each
	}
	for _, b := range bs {
		a.Free(b)
	}
	if r := a.Stats().ReservedBytes[StatAll].Current; r != 56*mib {
		t.Fatalf("reserved %d", r)
	}
	mustAlloc(t, a, 16*mib, 0) // misses the cache: GC runs first
	s := a.Stats()
	if r := s.ReservedBytes[StatAll].Current; r > 50*mib+16*mib || s.NumDeviceFree == 0 {
		t.Fatalf("after GC reserved %d with %d frees", r, s.NumDeviceFree)
	}
	if s.ReservedBytes[StatAll].Current-16*mib > 50*mib {
		t.Fatalf("GC left %d cached", s.ReservedBytes[StatAll].Current-16*mib)
	}
	check(t, a, sim)
	// The oldest block went first; the most recently freed stays.
	if _, ok := a.segs[bs[0].addr]; ok {
		t.Fatal("GC kept the least recently freed segment")
	}
	if _, ok := a.segs[bs[3].addr]; !ok {
		t.Fatal("GC released the most recently freed segment")
	}
}

func TestMemoryFraction(t *testing.T) {
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
		t.Run(conf, func(t *testing.T) {
			a, sim := newTestAllocator(t, conf+",per_process_memory_fraction:0.5", 100*mib)
			x := mustAlloc(t, a, 30*mib, 0)
			_, err := a.Alloc(30*mib, 0, "")
			var oom *OutOfMemoryError
			if !errors.As(err, &oom) {
				t.Fatalf("second 30 MiB under a 50 MiB limit: %v", err)
			}
			if oom.Limit != 50*mib || oom.Capacity != 100*mib {
				t.Fatalf("limit %d capacity %d", oom.Limit, oom.Capacity)
			}
			check(t, a, sim)
			if err := a.SetMemoryFraction(1); err != nil {
				t.Fatal(err)
			}
			y := mustAlloc(t, a, 30*mib, 0)
			a.Free(x)
			a.Free(y)
			check(t, a, sim)
			if err := a.SetMemoryFraction(-0.25); err == nil {
				t.Fatal("SetMemoryFraction(-0.25) accepted")
			}
		})
	}
}

// TestConfigInForceHasTheFraction: after SetMemoryFraction, Config and the
// Config string of a Snapshot (which replays take as the settings the run
// had) carry the new fraction, not the one the allocator was created with;
// a refused fraction changes neither.
func TestConfigInForceHasTheFraction(t *testing.T) {
	tests := []struct {
		name string
		conf string
		set  []float64 // SetMemoryFraction calls, in order; refused ones are ignored
		want float64
	}{
		{"none set", "policy:pytorch", nil, 0},
		{"from the string", "per_process_memory_fraction:0.75", nil, 0.75},
		{"set once", "policy:pytorch", []float64{0.5}, 0.5},
		{"set over the string", "per_process_memory_fraction:0.75,expandable_segments:True", []float64{0.25}, 0.25},
		{"set to 1", "per_process_memory_fraction:0.5", []float64{1}, 1},
		{"refused after a set", "policy:vram", []float64{0.5, 2, -1, math.NaN()}, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newTestAllocator(t, tt.conf, 100*mib)
			for _, f := range tt.set {
				_ = a.SetMemoryFraction(f)
			}
			if got := a.Config().PerProcessMemoryFraction; got != tt.want {
				t.Errorf("Config().PerProcessMemoryFraction = %v, want %v", got, tt.want)
			}
			snap := a.Snapshot().Config
			cfg, err := ParseConfig(snap)
			if err != nil {
				t.Fatalf("ParseConfig(Snapshot().Config = %q): %v", snap, err)
			}
			if cfg.PerProcessMemoryFraction != tt.want {
				t.Errorf("Snapshot().Config = %q, want per_process_memory_fraction %v", snap, tt.want)
			}
			base, _ := ParseConfig(tt.conf)
			base.PerProcessMemoryFraction = tt.want
			if cfg != base {
				t.Errorf("Snapshot().Config = %q, want %q", snap, base.String())
			}
		})
	}
}

func TestExpandableSegments(t *testing.T) {
	a, sim := newTestAllocator(t, "policy:pytorch,expandable_segments:True", 1<<30)
	x := mustAlloc(t, a, 30*mib, 0) // maps two 20 MiB units
	s := a.Stats()
	if s.ReservedBytes[StatAll].Current != 40*mib || s.NumMaps != 2 || s.Segment[StatAll].Current != 1 {
		t.Fatalf("after 30 MiB: reserved %d, %d maps, %d segments", s.ReservedBytes[StatAll].Current, s.NumMaps, s.Segment[StatAll].Current)
	}
	y := mustAlloc(t, a, 15*mib, 0) // 10 MiB left mapped, maps one more unit
	if y.Addr() != x.Addr()+30*mib {
		t.Fatalf("expandable segment did not grow in place: 0x%x after 0x%x", y.Addr(), x.Addr())
	}
	if r := a.Stats().ReservedBytes[StatAll].Current; r != 60*mib {
		t.Fatalf("reserved %d, want 60 MiB", r)
	}
	check(t, a, sim)
	a.Free(y)
	a.EmptyCache() // the unit wholly inside the free tail goes
	if r := a.Stats().ReservedBytes[StatAll].Current; r != 40*mib {
		t.Fatalf("after freeing the tail: reserved %d, want 40 MiB", r)
	}
	check(t, a, sim)
	a.Free(x)
	a.EmptyCache()
	s = a.Stats()
	if s.ReservedBytes[StatAll].Current != 0 || s.Segment[StatAll].Current != 0 || sim.Used() != 0 {
		t.Fatalf("after EmptyCache: reserved %d, %d segments", s.ReservedBytes[StatAll].Current, s.Segment[StatAll].Current)
	}
	check(t, a, sim)
}

func TestVRAMPolicyMovesFreePages(t *testing.T) {
	a, sim := newTestAllocator(t, "", 1<<30)
	// Two 64 MiB blocks; free the first: its pages are cached.
	x := mustAlloc(t, a, 64*mib, 0)
	y := mustAlloc(t, a, 64*mib, 0)
	a.Free(x)
	check(t, a, sim)
	if r := a.Stats().ReservedBytes[StatAll].Current; r != 128*mib {
		t.Fatalf("reserved %d", r)
	}
	// A 100 MiB request fits no free block. PyTorch's expandable segments
	// would grow the reserve to 228 MiB; policy:vram unmaps the hole's
	// whole chunks and maps at the end, staying near what is allocated.
	z := mustAlloc(t, a, 100*mib, 0)
	s := a.Stats()
	if r := s.ReservedBytes[StatAll].Current; r > 164*mib+2*kSmallBuffer {
		t.Fatalf("reserved %d MiB for 164 MiB allocated", r/mib)
	}
	if s.NumUnmaps == 0 {
		t.Fatal("no chunk was unmapped")
	}
	check(t, a, sim)
	a.Free(y)
	a.Free(z)
	a.EmptyCache()
	if r := a.Stats().ReservedBytes[StatAll].Current; r != 0 {
		t.Fatalf("EmptyCache left %d", r)
	}
	check(t, a, sim)
}

func TestCrossStreamReuse(t *testing.T) {
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
		t.Run(conf, func(t *testing.T) {
			ev := newFakeEvents()
			a, sim := newTestAllocator(t, conf, 1<<30, WithEvents(ev))
			b := mustAlloc(t, a, 4*mib, 1)
			a.RecordStream(b, 2)
			a.RecordStream(b, 2) // recorded once
			a.RecordStream(b, 1) // its own stream: nothing
			addr := b.Addr()
			a.Free(b)
			if len(ev.recorded) != 1 {
				t.Fatalf("%d events recorded, want 1 on stream 2", len(ev.recorded))
			}
			s := a.Stats()
			if s.Active[StatAll].Current != 1 || s.Allocation[StatAll].Current != 0 {
				t.Fatalf("pending block: active %d allocations %d", s.Active[StatAll].Current, s.Allocation[StatAll].Current)
			}
			check(t, a, sim)
			c := mustAlloc(t, a, 4*mib, 1)
			if c.Addr() == addr {
				t.Fatal("block reused before stream 2's event completed")
			}
			check(t, a, sim)
			a.Free(c)
			ev.completeAll()
			d := mustAlloc(t, a, 4*mib, 1) // processes the event first
			if s := a.Stats(); s.Active[StatAll].Current != 1 {
				t.Fatalf("after the event: active %d", s.Active[StatAll].Current)
			}
			check(t, a, sim)
			a.Free(d)
			// A block of stream 1 is never reused on stream 3.
			e := mustAlloc(t, a, 4*mib, 3)
			if e.Stream() != 3 {
				t.Fatal("wrong stream")
			}
			if b := a.pools[poolLarge].lowerBound(3, 1); b != nil && b.seg.stream != 3 {
				t.Fatal("pool mixes streams")
			}
			a.Free(e)
			check(t, a, sim)
		})
	}
}

func TestNilEventSourceFreesAtOnce(t *testing.T) {
	a, sim := newTestAllocator(t, "policy:pytorch", 1<<30)
	b := mustAlloc(t, a, 4*mib, 1)
	a.RecordStream(b, 2)
	addr := b.Addr()
	a.Free(b)
	if c := mustAlloc(t, a, 4*mib, 1); c.Addr() != addr {
		t.Fatal("without an EventSource a freed block must be reusable at once")
	}
	check(t, a, sim)
}

func TestEmptyCacheWaitsForNothing(t *testing.T) {
	ev := newFakeEvents()
	a, sim := newTestAllocator(t, "policy:pytorch", 1<<30, WithEvents(ev))
	b := mustAlloc(t, a, 4*mib, 0)
	a.RecordStream(b, 5)
	a.Free(b)
	a.EmptyCache() // the pending block keeps its segment
	if s := a.Stats(); s.Segment[StatAll].Current != 1 {
		t.Fatalf("EmptyCache released a segment with a pending block")
	}
	check(t, a, sim)
	ev.completeAll()
	a.EmptyCache()
	if s := a.Stats(); s.Segment[StatAll].Current != 0 {
		t.Fatalf("EmptyCache kept %d segments after the event", s.Segment[StatAll].Current)
	}
	check(t, a, sim)
}

func TestOOMAndRecovery(t *testing.T) {
	for _, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"} {
		t.Run(conf, func(t *testing.T) {
			a, sim := newTestAllocator(t, conf, 64*mib)
			x := mustAlloc(t, a, 40*mib, 0)
			before := a.Stats()
			_, err := a.Alloc(40*mib, 0, "activations")
			var oom *OutOfMemoryError
			if !errors.As(err, &oom) {
				t.Fatalf("got %v, want an OutOfMemoryError", err)
			}
			if !errors.Is(err, ErrArenaFull) {
				t.Fatalf("OOM does not wrap ErrArenaFull: %v", err)
			}
			if oom.Requested != 40*mib || oom.Region != "activations" || oom.Capacity != 64*mib || oom.Allocated != 40*mib {
				t.Fatalf("OOM fields: %+v", oom)
			}
			after := a.Stats()
			if after.NumOOMs != 1 || after.AllocatedBytes != before.AllocatedBytes || after.RequestedBytes != before.RequestedBytes {
				t.Fatalf("the failure changed the block stats or did not count: %+v", after.NumOOMs)
			}
			check(t, a, sim)
			a.Free(x)
			y := mustAlloc(t, a, 40*mib, 0) // room again
			check(t, a, sim)
			a.Free(y)
			check(t, a, sim)
		})
	}
}

func TestOnOOMHookRunsUnlocked(t *testing.T) {
	a, sim := newTestAllocator(t, "policy:pytorch", 64*mib)
	held := mustAlloc(t, a, 40*mib, 0)
	var mu sync.Mutex
	calls := 0
	a.OnOOM(func() {
		mu.Lock()
		calls++
		mu.Unlock()
		// The hook frees through the allocator (as a GC cleanup would):
		// this deadlocks if the lock were held.
		if held != nil {
			a.Free(held)
			held = nil
		}
		_ = a.Stats()
	})
	b := mustAlloc(t, a, 40*mib, 0)
	if calls != 1 {
		t.Fatalf("hook called %d times", calls)
	}
	check(t, a, sim)
	a.Free(b)
	a.OnOOM(nil)
	fill := mustAlloc(t, a, 40*mib, 0)
	if _, err := a.Alloc(40*mib, 0, ""); err == nil {
		t.Fatal("allocation fit after removing the hook")
	}
	a.Free(fill)
	check(t, a, sim)
}

func TestRetryLadderReleasesCache(t *testing.T) {
	// A cached free segment of another size must be released to make room.
	a, sim := newTestAllocator(t, "policy:pytorch", 64*mib)
	x := mustAlloc(t, a, 40*mib, 0)
	a.Free(x)
	y := mustAlloc(t, a, 50*mib, 0) // the 40 MiB segment must go first
	s := a.Stats()
	if s.NumAllocRetries != 1 || s.NumDeviceFree != 1 || s.NumOOMs != 0 {
		t.Fatalf("retries %d frees %d ooms %d", s.NumAllocRetries, s.NumDeviceFree, s.NumOOMs)
	}
	a.Free(y)
	check(t, a, sim)
}

func TestStatsMapAndResets(t *testing.T) {
	a, sim := newTestAllocator(t, "policy:pytorch", 1<<30)
	b := mustAlloc(t, a, 3*mib, 0)
	c := mustAlloc(t, a, 100, 0)
	m := a.Stats().Map()
	want := map[string]int64{
		"allocated_bytes.all.current":        3*mib + 512,
		"allocated_bytes.large_pool.current": 3 * mib,
		"allocated_bytes.small_pool.current": 512,
		"requested_bytes.all.current":        3*mib + 100,
		"reserved_bytes.all.current":         kLargeBuffer + kSmallBuffer,
		"segment.all.current":                2,
		"allocation.all.allocated":           2,
		"active.small_pool.current":          1,
		"inactive_split.all.current":         2,
		"num_device_alloc":                   2,
		"num_ooms":                           0,
		"max_split_size":                     -1,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	if len(m) != numMapKeys {
		t.Errorf("%d keys", len(m))
	}
	a.Free(b)
	if p := a.MaxAllocated(); p != 3*mib+512 {
		t.Fatalf("MaxAllocated %d", p)
	}
	a.ResetPeakStats()
	if p := a.MaxAllocated(); p != 512 {
		t.Fatalf("after ResetPeakStats: MaxAllocated %d", p)
	}
	if a.MaxReserved() != kLargeBuffer+kSmallBuffer {
		t.Fatalf("MaxReserved %d", a.MaxReserved())
	}
	a.ResetAccumulatedStats()
	s := a.Stats()
	if s.Allocation[StatAll].Allocated != 0 || s.NumDeviceAlloc != 0 || s.DriverTime != 0 || s.Allocation[StatAll].Current != 1 {
		t.Fatalf("ResetAccumulatedStats: %+v", s.Allocation[StatAll])
	}
	a.Free(c)
	check(t, a, sim)
	if s := a.Stats(); s.Allocation[StatAll].Freed != 1 || s.DriverTime != 0 {
		t.Fatalf("after a free: freed %d, driver %v", s.Allocation[StatAll].Freed, s.DriverTime)
	}
}

func TestStatNegativePanics(t *testing.T) {
	var s Stat
	mustPanic(t, "negative stat", func() { s.update(-1) })
	var a StatArray
	mustPanic(t, "negative stat array", func() { a.update(poolLarge, -1) })
}

func TestDriverTimeFollowsCostModel(t *testing.T) {
	a, sim := newTestAllocator(t, "policy:pytorch", 4<<30)
	small := mustAlloc(t, a, mib, 0)    // cuMemAlloc of 2 MiB: 77 µs
	big := mustAlloc(t, a, 2048*mib, 0) // 2 GiB: 175 µs
	if got, want := a.Stats().DriverTime.Microseconds(), int64(77+175); got != want {
		t.Fatalf("driver time %d µs, want %d", got, want)
	}
	a.Free(small)
	a.Free(big)
	a.EmptyCache() // cuMemFree 71 + 122 + 0.36*1024 µs
	if got, want := a.Stats().DriverTime.Microseconds(), int64(77+175+71+122+368); got != want {
		t.Fatalf("driver time %d µs, want %d", got, want)
	}
	if sim.DriverTime() != a.Stats().DriverTime {
		t.Fatal("allocator and arena disagree on driver time")
	}
}

func TestSummary(t *testing.T) {
	a, _ := newTestAllocator(t, "policy:pytorch", 1<<30)
	b := mustAlloc(t, a, 3*mib, 0)
	mustAlloc(t, a, 100, 0)
	a.Free(b)
	s := a.Summary()
	for _, want := range []string{
		"vram memory summary", "policy: pytorch", "Allocated memory", "from large pool", "from small pool",
		"Reserved memory", "Requested memory", "Inactive split memory", "Allocations", "Reserved segments",
		"22.00 MiB", "3.00 MiB", "device allocs: 2", "OOMs: 0",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if len(line) != summaryWidth {
			t.Errorf("line %d is %d wide, want %d: %q", i, len(line), summaryWidth, line)
		}
	}
}

func TestHistoryAndSnapshot(t *testing.T) {
	a, _ := newTestAllocator(t, "policy:pytorch,expandable_segments:True", 1<<30)
	a.SetHistory(true, 0, true)
	x := allocHere(t, a)
	y := mustAlloc(t, a, 25*mib, 0)
	a.Free(y)
	snap := a.Snapshot()
	if err := snap.Validate(); err != nil {
		t.Fatal(err)
	}
	if snap.Truncated {
		t.Fatal("a history started at creation is not truncated")
	}
	var actions []string
	for _, e := range snap.History {
		actions = append(actions, e.Action.String())
	}
	if got := strings.Join(actions, " "); got != "segment_map alloc segment_map alloc free_requested free_completed" {
		t.Fatalf("history: %s", got)
	}
	alloc := snap.History[1]
	if alloc.Region != "forward" || alloc.Size != 5*mib || len(alloc.Frames) == 0 {
		t.Fatalf("alloc event: %+v", alloc)
	}
	if f := alloc.Frames[0]; !strings.HasSuffix(f.Function, "allocHere") || !strings.HasSuffix(f.File, "allocator_test.go") {
		t.Fatalf("first frame is %+v, want the caller allocHere (vram's own frames left out)", f)
	}
	var live int
	for _, seg := range snap.Segments {
		if !seg.Expandable {
			t.Fatal("segment not marked expandable")
		}
		for _, b := range seg.Blocks {
			if b.State == "active_allocated" {
				live++
				if b.Addr != x.Addr() || b.Region != "forward" || b.Requested != 5*mib || len(b.Frames) == 0 {
					t.Fatalf("live block %+v", b)
				}
			}
		}
	}
	if live != 1 || snap.Reserved() != a.Stats().ReservedBytes[StatAll].Current {
		t.Fatalf("%d live blocks, reserved %d", live, snap.Reserved())
	}
	// The snapshot survives package trace's JSON format.
	var buf bytes.Buffer
	if err := trace.WriteJSON(&buf, snap); err != nil {
		t.Fatal(err)
	}
	back, err := trace.ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Segments) != len(snap.Segments) || len(back.History) != len(snap.History) || back.Meta[trace.MetaSource] != "vram" {
		t.Fatalf("JSON round trip lost data: %+v", back)
	}
	// A small ring keeps the newest events and says it dropped some.
	a.SetHistory(true, 2, false)
	a.Free(x)
	snap = a.Snapshot()
	if len(snap.History) != 2 || !snap.Truncated || snap.History[1].Action.String() != "free_completed" || snap.History[1].Frames != nil {
		t.Fatalf("ring of 2: %+v truncated %v", snap.History, snap.Truncated)
	}
	a.SetHistory(false, 0, false)
	if snap := a.Snapshot(); len(snap.History) != 0 || !snap.Truncated {
		t.Fatal("history off still records")
	}
}

func allocHere(t *testing.T, a *Allocator) *Block {
	b, err := a.Alloc(5*mib, 0, "forward")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKeepFrame(t *testing.T) {
	tests := []struct {
		fn, file string
		keep     bool
	}{
		{"main.main", "/x/main.go", true},
		{"github.com/vramgo/vram/memory.(*Allocator).Alloc", "/x/memory/allocator.go", false},
		{"github.com/vramgo/vram.newStorage", "/x/storage.go", false},
		{"github.com/vramgo/vram/memory.TestX", "/x/memory/x_test.go", true},
		{"github.com/vramgo/vramother.F", "/y/f.go", true},
		{"runtime.goexit", "/go/src/runtime/asm.s", false},
	}
	for _, tt := range tests {
		if got := keepFrame(tt.fn, tt.file); got != tt.keep {
			t.Errorf("keepFrame(%q, %q) = %v", tt.fn, tt.file, got)
		}
	}
}
