package memory

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// bigArena is a plain Arena of any capacity that only counts bytes, so that
// tests can allocate exabytes.
type bigArena struct {
	capacity, used int64
	next           uint64
	allocs         map[uint64]int64
}

func newBigArena(capacity int64) *bigArena {
	return &bigArena{capacity: capacity, next: 1 << 40, allocs: map[uint64]int64{}}
}

func (b *bigArena) Capacity() int64 { return b.capacity }

func (b *bigArena) Alloc(size int64) (uint64, error) {
	if size <= 0 {
		return 0, errors.New("bigArena: bad size")
	}
	if size > b.capacity-b.used {
		return 0, ErrArenaFull
	}
	b.used += size
	addr := b.next
	b.next += uint64(size) + kSmallBuffer
	b.allocs[addr] = size
	return addr, nil
}

func (b *bigArena) Free(addr uint64, size int64) error {
	if b.allocs[addr] != size {
		return errors.New("bigArena: bad free")
	}
	delete(b.allocs, addr)
	b.used -= size
	return nil
}

// divisionConfs are roundup_power2_divisions settings from none to the
// largest number of divisions accepted.
var divisionConfs = []string{
	"",
	"roundup_power2_divisions:2",
	"roundup_power2_divisions:4",
	"roundup_power2_divisions:1048576",
	"roundup_power2_divisions:[1:2,65536:1048576]",
	"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
}

// nearMax are request sizes around the largest ones accepted.
var nearMax = []int64{
	MaxAllocSize, MaxAllocSize - 1, MaxAllocSize - 511, MaxAllocSize - kRoundLarge - 1,
	MaxAllocSize/2 + 1, 3 << 60, 3<<60 + 1, 1<<61 + 1, 1<<61 - 1, 1 << 61,
	MaxAllocSize/3 + 7, 1<<40 + 1,
}

// TestRoundingNearMax checks that every rounding of a request (block size,
// fixed segment size, mapping granularity) stays exact near MaxAllocSize:
// never below the request, aligned, and within MaxAllocSize.
func TestRoundingNearMax(t *testing.T) {
	for _, conf := range divisionConfs {
		a, _ := newTestAllocator(t, conf, 1<<30)
		for _, size := range nearMax {
			t.Run(conf+"/"+strconv.FormatInt(size, 10), func(t *testing.T) {
				r := a.roundSize(size)
				if r < size || r%kMinBlockSize != 0 || r > MaxAllocSize {
					t.Fatalf("roundSize(%d) = %d: below the request, unaligned or above MaxAllocSize", size, r)
				}
				seg := allocationSize(r)
				if seg < r || seg%kRoundLarge != 0 || seg > MaxAllocSize {
					t.Fatalf("allocationSize(%d) = %d", r, seg)
				}
				for _, g := range []int64{kMinBlockSize, SimGranularity, 3 * kMinBlockSize, kLargeBuffer} {
					if m := alignUp(r, g); m < r || m%g != 0 || m-r >= g {
						t.Fatalf("alignUp(%d, %d) = %d", r, g, m)
					}
				}
			})
		}
	}
}

func TestRoundupPower2DivisionNearMax(t *testing.T) {
	for d := int64(2); d <= 1<<20; d *= 2 {
		for _, size := range nearMax {
			r := roundupPower2Division(size, d)
			if r < size || r%kMinBlockSize != 0 || r > MaxAllocSize {
				t.Errorf("roundupPower2Division(%d, %d) = %d", size, d, r)
			}
		}
	}
}

func TestAlignUp(t *testing.T) {
	tests := []struct{ n, m, want int64 }{
		{0, 512, 0},
		{1, 512, 512},
		{512, 512, 512},
		{513, 512, 1024},
		{math.MaxInt64 - 511, 512, math.MaxInt64 - 511},
		{math.MaxInt64 - 1000, 512, math.MaxInt64 - 511},
		{alignDown(math.MaxInt64, 3*512), 3 * 512, alignDown(math.MaxInt64, 3*512)},
		{alignDown(math.MaxInt64, 3*512) - 1, 3 * 512, alignDown(math.MaxInt64, 3*512)},
	}
	for _, tt := range tests {
		if got := alignUp(tt.n, tt.m); got != tt.want {
			t.Errorf("alignUp(%d, %d) = %d, want %d", tt.n, tt.m, got, tt.want)
		}
	}
}

func TestSatAddAndScaleSpan(t *testing.T) {
	if got := satAdd(math.MaxInt64, 1); got != math.MaxInt64 {
		t.Errorf("satAdd(MaxInt64, 1) = %d", got)
	}
	if got := satAdd(1<<62, 1<<62); got != math.MaxInt64 {
		t.Errorf("satAdd(2^62, 2^62) = %d", got)
	}
	if got := satAdd(3, 4); got != 7 {
		t.Errorf("satAdd(3, 4) = %d", got)
	}
	tests := []struct{ capacity, num, den, want int64 }{
		{16 << 30, 2, 1, 32 << 30},
		{16 << 30, 9, 8, 18 << 30},
		{0, 2, 1, 0},
		{maxDefaultSpan / 2, 2, 1, maxDefaultSpan},
		{maxDefaultSpan/2 + 1, 2, 1, maxDefaultSpan},
		{math.MaxInt64, 2, 1, maxDefaultSpan},
		{math.MaxInt64, 9, 8, maxDefaultSpan},
		{math.MaxInt64 / 9 * 8, 9, 8, maxDefaultSpan},
	}
	for _, tt := range tests {
		if got := scaleSpan(tt.capacity, tt.num, tt.den); got != tt.want {
			t.Errorf("scaleSpan(%d, %d, %d) = %d, want %d", tt.capacity, tt.num, tt.den, got, tt.want)
		}
	}
}

// policies are the three ways the allocator gets memory.
var policies = []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", "policy:vram"}

// TestAllocTooLarge checks that requests above MaxAllocSize fail with
// ErrTooLarge, change nothing and leave the allocator working.
func TestAllocTooLarge(t *testing.T) {
	for _, conf := range policies {
		for _, size := range []int64{MaxAllocSize + 1, MaxAllocSize + 512, 1 << 62 * 1.5, math.MaxInt64 - kRoundLarge, math.MaxInt64 - 511, math.MaxInt64} {
			t.Run(conf+"/"+strconv.FormatInt(size, 10), func(t *testing.T) {
				a, sim := newTestAllocator(t, conf, 64*mib)
				keep := mustAlloc(t, a, mib, 0)
				before := a.Stats()
				b, err := a.Alloc(size, 0, "huge")
				if !errors.Is(err, ErrTooLarge) || b != nil {
					t.Fatalf("Alloc(%d) = %v, %v; want ErrTooLarge", size, b, err)
				}
				var oom *OutOfMemoryError
				if errors.As(err, &oom) {
					t.Fatalf("Alloc(%d) is an OutOfMemoryError: %v", size, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, strconv.FormatInt(size, 10)) || !strings.Contains(msg, "MaxAllocSize") || strings.Contains(msg, "\n") {
					t.Fatalf("message %q should be one line naming the size and the limit", msg)
				}
				if after := a.Stats(); after != before {
					t.Fatalf("stats changed:\nbefore %+v\nafter  %+v", before, after)
				}
				check(t, a, sim)
				a.Free(mustAlloc(t, a, 2*mib, 0))
				a.Free(keep)
				check(t, a, sim)
			})
		}
	}
}

// TestAllocAtMax allocates MaxAllocSize itself on an arena that has it.
func TestAllocAtMax(t *testing.T) {
	arena := newBigArena(math.MaxInt64)
	a := New(arena, Config{Policy: PolicyPyTorch}, withQuickOOM())
	b := mustAlloc(t, a, MaxAllocSize, 0)
	if b.Size() != MaxAllocSize || arena.used != MaxAllocSize {
		t.Fatalf("block of %d bytes, arena %d used; want %d", b.Size(), arena.used, int64(MaxAllocSize))
	}
	small := mustAlloc(t, a, 3*mib+1, 0)
	if err := a.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	// A second one does not fit: an OOM, not a wrapped size.
	_, err := a.Alloc(MaxAllocSize, 0, "")
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || oom.Requested != MaxAllocSize || oom.Rounded != MaxAllocSize {
		t.Fatalf("second Alloc(MaxAllocSize) = %v, want an OutOfMemoryError for exactly that size", err)
	}
	if s := a.Stats(); s.AllocatedBytes[StatAll].Current != MaxAllocSize+alignUp(3*mib+1, kMinBlockSize) || s.ReservedBytes[StatAll].Current < 0 {
		t.Fatalf("stats after the OOM: allocated %d, reserved %d", s.AllocatedBytes[StatAll].Current, s.ReservedBytes[StatAll].Current)
	}
	a.Free(small)
	a.Free(b)
	a.EmptyCache()
	if arena.used != 0 {
		t.Fatalf("arena still has %d bytes in use", arena.used)
	}
	if err := a.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestHugeCapacity runs each policy, with and without a per-process
// fraction, on a device whose capacity is MaxInt64: the limit and the
// address ranges must not wrap.
func TestHugeCapacity(t *testing.T) {
	for _, conf := range policies {
		for _, frac := range []string{"", ",per_process_memory_fraction:1", ",per_process_memory_fraction:0.999"} {
			t.Run(conf+frac, func(t *testing.T) {
				cfg, err := ParseConfig(conf + frac)
				if err != nil {
					t.Fatal(err)
				}
				sim := NewSimArena(math.MaxInt64)
				a := New(sim, cfg, withQuickOOM())
				if a.limit <= 0 {
					t.Fatalf("limit %d for a capacity of MaxInt64", a.limit)
				}
				var held []*Block
				for _, size := range []int64{1, mib, 30 * mib, 1 << 30} {
					held = append(held, mustAlloc(t, a, size, 0))
				}
				check(t, a, sim)
				for _, seg := range a.segs {
					if seg.size <= 0 || seg.virtual && seg.size > maxDefaultSpan+kLargeBuffer {
						t.Fatalf("segment of %d bytes", seg.size)
					}
				}
				for _, b := range held {
					a.Free(b)
				}
				a.EmptyCache()
				check(t, a, sim)
			})
		}
	}
}

func TestSetMemoryFractionHugeCapacity(t *testing.T) {
	a := New(newBigArena(math.MaxInt64), Config{Policy: PolicyPyTorch}, withQuickOOM())
	if err := a.SetMemoryFraction(1); err != nil {
		t.Fatal(err)
	}
	if a.limit != math.MaxInt64 {
		t.Fatalf("limit %d, want MaxInt64", a.limit)
	}
	a.Free(mustAlloc(t, a, mib, 0))
	for _, f := range []float64{-0.5, 1.5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if err := a.SetMemoryFraction(f); err == nil {
			t.Errorf("SetMemoryFraction(%v) accepted", f)
		}
	}
	if err := a.SetMemoryFraction(0); err != nil || a.Limit() != 0 {
		t.Errorf("SetMemoryFraction(0) = %v, limit %d; want nil, 0", err, a.Limit())
	}
}

// TestRequestsBeyondTheDeviceReserveNothing: a request larger than the
// device, or than the per-process limit, fails as out of memory without
// reserving address space for it, whatever the policy. Reserving such a
// range first (as large as the request, up to 4 EiB) used up the 64-bit
// address space of a SimArena within a few requests once other ranges
// were reserved after it, and on a GPU it asks the driver for a range it
// cannot give.
func TestRequestsBeyondTheDeviceReserveNothing(t *testing.T) {
	const capacity = 256 * mib
	for _, conf := range []string{"", "policy:pytorch", "policy:pytorch,expandable_segments:True", "per_process_memory_fraction:0.5"} {
		for _, tt := range []struct {
			name  string
			size  int64
			cause error
		}{
			{"MaxAllocSize", MaxAllocSize, ErrArenaFull},
			{"a byte over the device", capacity + 1, ErrArenaFull},
			{"twice the device", 2 * capacity, ErrArenaFull},
		} {
			t.Run(conf+"/"+tt.name, func(t *testing.T) {
				a, sim := newTestAllocator(t, conf, capacity, withQuickOOM())
				// A live block of another stream, reserved after each
				// failure, so that the failed ranges cannot be handed
				// back as the latest ones.
				var held []*Block
				for i := range 8 {
					_, err := a.Alloc(tt.size, 0, "")
					var oom *OutOfMemoryError
					if !errors.As(err, &oom) || !errors.Is(err, tt.cause) {
						t.Fatalf("request %d: %v, want an out-of-memory error caused by %v", i, err, tt.cause)
					}
					held = append(held, mustAlloc(t, a, 4*mib, Stream(1+i)))
				}
				if n := sim.Counts().Reserve; n > int64(len(held)) {
					t.Errorf("%d address ranges reserved for %d blocks of 4 MiB", n, len(held))
				}
				for _, b := range held {
					a.Free(b)
				}
				a.EmptyCache()
				check(t, a, sim)
			})
		}
	}
	// Over the per-process limit but within the device: the limit's error.
	a, sim := newTestAllocator(t, "per_process_memory_fraction:0.25", capacity, withQuickOOM())
	if _, err := a.Alloc(capacity/2, 0, ""); !errors.Is(err, errLimit) {
		t.Fatalf("half the device under a limit of a quarter: %v", err)
	}
	if n := sim.Counts().Reserve; n != 0 {
		t.Errorf("%d address ranges reserved for a request over the limit", n)
	}
}
