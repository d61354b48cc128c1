package memory

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/vramgo/vram/internal/units"
)

// Driver cost model of [SimArena]: the time one driver call takes, on
// average. Fitted on 2026-12-06 to a replay of the 19 traces then in
// testdata under the three policies on an H100 80GB HBM3 (driver
// 580.159.04; `vram replay --device cuda:0 --compare`, 25,000 calls): each
// figure is the mean of the calls measured in its size classes, so that
// the model's total for a run is what the card spent on such calls, tails
// included (the first cuMemAlloc calls of a process and a few others take
// ten to forty times the median). How the calls scale was checked apart on
// the same kind of machine (scripts/vmm_probe.py, BENCHMARKS.md): a
// cuMemSetAccess costs the same for each mapping its range covers, however
// many it grants at once, and a cuMemRelease costs more for larger
// allocations.
//
// Earlier fits (2026-12-01, H200s: medians of run 3's replay for
// cuMemAlloc, cycles of one size for the rest) gave every call 13 to 45 µs
// and priced a cuMemSetAccess by its range's size rather than its
// mappings; BENCHMARKS.md keeps the figures modelled with them.
const (
	// costAllocSmall is cuMemAlloc of up to costTier1 bytes: 77 µs (means
	// 89.6, 61.2 and 87.8 µs up to 2, 20 and 128 MiB; medians 56 to 65).
	costAllocSmall = 77 * time.Microsecond
	// costAllocMedium is cuMemAlloc of more than costTier1 and up to
	// costTier2 bytes: 143 µs (median 95).
	costAllocMedium = 143 * time.Microsecond
	// costAllocLarge is cuMemAlloc of more than costTier2 bytes: 175 µs
	// (25 calls up to 8 GiB; beyond, unmeasured, the model keeps it flat).
	costAllocLarge = 175 * time.Microsecond
	// costFreeSmall is cuMemFree of up to costFreeTier1 bytes: 71 µs.
	costFreeSmall = 71 * time.Microsecond
	// costFreeMedium is cuMemFree of up to costFreeTier2 bytes: 122 µs.
	costFreeMedium = 122 * time.Microsecond
	// costFreePerMiB is added to costFreeMedium per MiB above
	// costFreeTier2: 360 ns (842 µs for frees of 1 to 8 GiB).
	costFreePerMiB = 360 * time.Nanosecond
	// costTier1 and costTier2 are where cuMemAlloc becomes slower: 128
	// MiB and 1 GiB.
	costTier1 = 128 << 20
	costTier2 = 1 << 30
	// costFreeTier1 is where cuMemFree becomes slower: 20 MiB;
	// costFreeTier2 where its cost starts to grow with size: 1 GiB.
	costFreeTier1 = 20 << 20
	costFreeTier2 = 1 << 30
	// costCreate is one cuMemCreate, whatever its size: 21 µs (means
	// 19.4 to 25.7 µs in every class up to 128 MiB).
	costCreate = 21 * time.Microsecond
	// costMap is one cuMemMap: 3.7 µs.
	costMap = 3700 * time.Nanosecond
	// costSetAccess is cuMemSetAccess for each mapping in its range: 42
	// µs (the mean of calls over one mapping). Granting access to a run of
	// mappings with one call saves nothing: one call over 8 adjacent
	// mappings took 167 to 188 µs against 21 µs for one, whether they
	// held 2 or 64 MiB each (scripts/vmm_probe.py). The replays' figures that
	// seemed to grow with a range's size grew with the mappings it held.
	costSetAccess = 42 * time.Microsecond
	// costUnmap is one cuMemUnmap: 29 µs, whatever its size.
	costUnmap = 29 * time.Microsecond
	// costRelease and costReleasePerMiB are one cuMemRelease: 20 µs and
	// 450 ns a MiB of the allocation (means 21.2, 28.7 and 50.7 µs up to
	// 2, 20 and 128 MiB).
	costRelease       = 20 * time.Microsecond
	costReleasePerMiB = 450 * time.Nanosecond
)

// SimGranularity is the mapping granularity of a [SimArena] made by
// [NewSimArena]: 2 MiB, what cuMemGetAllocationGranularity reports on an
// H200.
const SimGranularity = 2 << 20

// simBase is the first address a SimArena hands out; it mimics the
// addresses the CUDA driver returns on Linux.
const simBase = 0x7f0000000000

// MaxSimCapacity is the largest simulated device, in bytes, that
// [CheckSimCapacity] accepts by default and `vram replay` simulates unless
// --max-capacity says otherwise: 4 TiB, fourteen times the memory of the
// largest GPUs shipping in 2026 (288 GB: NVIDIA B300, AMD Instinct MI355X).
// A simulation keeps a record of every mapping it makes, so its memory and
// time grow with the memory it maps (up to 1 GiB per mapping under the vram
// policy, 20 MiB under PyTorch's expandable segments), and a capacity no
// device has would let a few bytes of input claim gigabytes of it; at 4
// TiB the records take a few megabytes.
const MaxSimCapacity = 4 << 40

// CapacityError reports a simulated device capacity above the limit that
// [CheckSimCapacity] was given.
type CapacityError struct {
	// Capacity is the capacity asked for, in bytes.
	Capacity int64
	// Limit is the largest accepted, in bytes.
	Limit int64
	// Source says where the capacity came from, such as "--capacity" or
	// "the snapshot's capacity_bytes"; "" if not known.
	Source string
}

// Error returns a one-line message that names the limit and how to raise it.
func (e *CapacityError) Error() string {
	src := ""
	if e.Source != "" {
		src = " (" + e.Source + ")"
	}
	why := "larger than any real one"
	if e.Limit < MaxSimCapacity {
		// A limit lowered below the default's: the device may be real.
		why = "over the limit on simulated devices"
	}
	return fmt.Sprintf("memory: a simulated device of %s%s is %s: the limit is %s (memory.MaxSimCapacity is %s; vram replay --max-capacity raises it)",
		units.Bytes(e.Capacity), src, why, units.Bytes(e.Limit), units.Bytes(MaxSimCapacity))
}

// CheckSimCapacity returns a [*CapacityError] naming source when capacity
// is above limit, or above [MaxSimCapacity] when limit is 0, an error
// naming source when capacity is negative (NewSimArena panics on one), and
// nil otherwise. Callers that take a capacity from a file or a flag check
// it before [NewSimArena], whose memory grows with what it maps.
func CheckSimCapacity(capacity, limit int64, source string) error {
	if capacity < 0 {
		if source != "" {
			source = " (" + source + ")"
		}
		return fmt.Errorf("memory: a simulated device of %d bytes%s: the capacity cannot be negative", capacity, source)
	}
	if limit <= 0 {
		limit = MaxSimCapacity
	}
	if capacity > limit {
		return &CapacityError{Capacity: capacity, Limit: limit, Source: source}
	}
	return nil
}

// SimCounts counts the driver calls a [SimArena] has simulated.
type SimCounts struct {
	Alloc     int64 // cuMemAlloc calls that succeeded
	Free      int64 // cuMemFree calls
	Reserve   int64 // cuMemAddressReserve calls
	Unreserve int64 // cuMemAddressFree calls
	Create    int64 // cuMemCreate calls that succeeded
	Map       int64 // cuMemMap calls
	SetAccess int64 // cuMemSetAccess calls
	Unmap     int64 // cuMemUnmap calls
	Release   int64 // cuMemRelease calls
	Refused   int64 // Alloc and Map calls refused for lack of memory
}

// SimArena is a simulated device of a fixed capacity: a fake address space
// with exact accounting of physical memory, reserved ranges and mappings,
// counts of every driver call, and their cost by the cost model of
// [ModelledCost] (see [SimArena.DriverTime]). It refuses physical memory beyond its
// capacity with an error wrapping [ErrArenaFull]. It implements
// [VirtualArena], [RangeMapper], [DeviceInfo] and [DriverTimer], and is
// safe for concurrent use. Misuse (freeing an unknown address, mapping outside a reservation,
// unmapping part of a mapping) returns an error and changes nothing.
//
// Costs: Alloc and Free as cuMemAlloc and cuMemFree; Map as one cuMemCreate,
// one cuMemMap and one cuMemSetAccess (66.7 µs); MapRange of n pieces as n
// cuMemCreate and cuMemMap and one cuMemSetAccess priced per piece (66.7n
// µs); Unmap as one cuMemUnmap and one cuMemRelease (49 µs and 450 ns a
// MiB); Reserve and Unreserve are free (the model has no figure for them).
// Refused calls cost nothing.
type SimArena struct {
	capacity    int64
	granularity int64

	mu        sync.Mutex
	used      int64                // physical bytes in use
	peak      int64                // peak of used
	next      uint64               // next unused address
	allocs    map[uint64]int64     // Alloc'd ranges
	reserves  *btree.BTreeG[chunk] // reserved ranges, by address
	maps      *btree.BTreeG[chunk] // mappings, by address
	counts    SimCounts            // calls so far
	cost      time.Duration        // modelled driver time so far
	others    []ProcessMemory      // memory held by simulated other processes
	otherUsed int64                // sum of others
}

// NewSimArena returns a simulated device with capacity bytes of memory and
// the H200's 2 MiB mapping granularity. It panics if capacity is negative.
// The arena's memory grows with the mappings made in it, and so with the
// capacity an allocator can fill: check a capacity that comes from input
// with [CheckSimCapacity] first.
func NewSimArena(capacity int64) *SimArena {
	return NewSimArenaGranularity(capacity, SimGranularity)
}

// NewSimArenaGranularity is [NewSimArena] with another mapping granularity,
// which must be a positive multiple of 512 bytes; it panics otherwise.
func NewSimArenaGranularity(capacity, granularity int64) *SimArena {
	if capacity < 0 {
		panic(fmt.Sprintf("memory: NewSimArena: negative capacity %d", capacity))
	}
	if granularity <= 0 || granularity%kMinBlockSize != 0 {
		panic(fmt.Sprintf("memory: NewSimArena: granularity %d is not a positive multiple of %d", granularity, kMinBlockSize))
	}
	return &SimArena{
		capacity:    capacity,
		granularity: granularity,
		next:        simBase,
		allocs:      make(map[uint64]int64),
		reserves:    newChunkTree(),
		maps:        newChunkTree(),
	}
}

// Capacity returns the simulated device's total memory in bytes.
func (s *SimArena) Capacity() int64 { return s.capacity }

// Granularity returns the mapping granularity in bytes.
func (s *SimArena) Granularity() int64 { return s.granularity }

// Used returns the physical bytes allocated or mapped now.
func (s *SimArena) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// PeakUsed returns the highest value of [SimArena.Used] so far.
func (s *SimArena) PeakUsed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Counts returns the number of each driver call simulated so far.
func (s *SimArena) Counts() SimCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// DriverTime returns the modelled time of all driver calls so far.
func (s *SimArena) DriverTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cost
}

// SetOtherProcesses makes the simulated device hold memory for other
// processes: it is unavailable to this one, and [SimArena.MemoryInfo]
// reports it. It returns an error, and changes nothing, if the total does
// not fit beside what is in use now.
func (s *SimArena) SetOtherProcesses(procs []ProcessMemory) error {
	var total int64
	for _, p := range procs {
		if p.Bytes < 0 {
			return fmt.Errorf("memory: SimArena: process %d holds negative memory", p.PID)
		}
		if p.Bytes > math.MaxInt64-total {
			return fmt.Errorf("memory: SimArena: other processes hold more than 2^63-1 bytes in all: %w", ErrArenaFull)
		}
		total += p.Bytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if total > s.capacity-s.used {
		return fmt.Errorf("memory: SimArena: other processes' %d bytes do not fit beside %d in use (capacity %d): %w",
			total, s.used, s.capacity, ErrArenaFull)
	}
	s.others = append([]ProcessMemory(nil), procs...)
	sort.SliceStable(s.others, func(i, j int) bool { return s.others[i].Bytes > s.others[j].Bytes })
	s.otherUsed = total
	return nil
}

// MemoryInfo reports the simulated device: its capacity, the bytes not in
// use by this process or the simulated others, this process's use (what
// the arena holds) and the other processes that
// [SimArena.SetOtherProcesses] set, largest first (an empty list when
// there are none: a simulated device sees every process).
func (s *SimArena) MemoryInfo() (DeviceMemory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return DeviceMemory{
		Total:       s.capacity,
		Free:        s.capacity - s.used - s.otherUsed,
		ThisProcess: s.used,
		Others:      append([]ProcessMemory{}, s.others...),
	}, nil
}

// take claims size physical bytes, or fails with ErrArenaFull.
func (s *SimArena) take(size int64, what string) error {
	if size > s.capacity-s.used-s.otherUsed {
		s.counts.Refused++
		return fmt.Errorf("memory: SimArena: %s of %d bytes with %d of %d free: %w",
			what, size, s.capacity-s.used-s.otherUsed, s.capacity, ErrArenaFull)
	}
	s.used += size
	if s.used > s.peak {
		s.peak = s.used
	}
	return nil
}

// carve returns a fresh range of size bytes of fake address space, aligned
// to the granularity and followed by a guard gap so that ranges never touch.
// It fails when the 64-bit address space is used up.
func (s *SimArena) carve(size int64) (uint64, error) {
	addr := s.next
	span := uint64(alignUp(size, s.granularity)) + uint64(s.granularity)
	if span > math.MaxUint64-addr {
		return 0, fmt.Errorf("memory: SimArena: the simulated address space is used up (0x%x of 2^64 bytes handed out)", addr)
	}
	s.next += span
	return addr, nil
}

// uncarve gives back the range carve returned last, so that a range taken
// and returned again and again (a failed allocation, say) does not use up
// the address space; it does nothing for an earlier range.
func (s *SimArena) uncarve(addr uint64, size int64) {
	if addr+uint64(alignUp(size, s.granularity))+uint64(s.granularity) == s.next {
		s.next = addr
	}
}

// Alloc takes size bytes of physical memory, as cuMemAlloc.
func (s *SimArena) Alloc(size int64) (uint64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("memory: SimArena: Alloc of %d bytes", size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	addr, err := s.carve(size)
	if err != nil {
		return 0, err
	}
	if err := s.take(size, "cuMemAlloc"); err != nil {
		s.uncarve(addr, size)
		return 0, err
	}
	s.allocs[addr] = size
	s.counts.Alloc++
	s.addCost(allocCost(size))
	return addr, nil
}

// Free returns memory taken by Alloc, as cuMemFree.
func (s *SimArena) Free(addr uint64, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.allocs[addr]
	if !ok {
		return fmt.Errorf("memory: SimArena: Free of 0x%x, which Alloc did not return", addr)
	}
	if got != size {
		return fmt.Errorf("memory: SimArena: Free of 0x%x with size %d, allocated with %d", addr, size, got)
	}
	delete(s.allocs, addr)
	s.uncarve(addr, size)
	s.used -= size
	s.counts.Free++
	s.addCost(freeCost(size))
	return nil
}

// Reserve reserves size bytes of address space.
func (s *SimArena) Reserve(size int64) (uint64, error) {
	if size <= 0 || size%s.granularity != 0 {
		return 0, fmt.Errorf("memory: SimArena: Reserve of %d bytes, not a positive multiple of the granularity %d", size, s.granularity)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	base, err := s.carve(size)
	if err != nil {
		return 0, err
	}
	s.reserves.ReplaceOrInsert(chunk{addr: base, size: size})
	s.counts.Reserve++
	return base, nil
}

// Unreserve gives back a reserved range with nothing mapped in it.
func (s *SimArena) Unreserve(base uint64, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.reserves.Get(chunk{addr: base})
	if !ok || got.size != size {
		return fmt.Errorf("memory: SimArena: Unreserve of [0x%x, +%d), which is not a reserved range", base, size)
	}
	if c, ok := s.mappingFrom(base); ok && c.addr < base+uint64(size) {
		return fmt.Errorf("memory: SimArena: Unreserve of [0x%x, +%d) with 0x%x still mapped", base, size, c.addr)
	}
	s.reserves.Delete(chunk{addr: base})
	s.uncarve(base, size)
	s.counts.Unreserve++
	return nil
}

// mappingFrom returns the mapping with the lowest address at or above addr.
func (s *SimArena) mappingFrom(addr uint64) (chunk, bool) {
	var next chunk
	found := false
	s.maps.AscendGreaterOrEqual(chunk{addr: addr}, func(c chunk) bool {
		next, found = c, true
		return false
	})
	return next, found
}

// inReservation reports whether [addr, addr+size) lies in one reserved range.
func (s *SimArena) inReservation(addr uint64, size int64) bool {
	// The reservation with the highest base at or below addr is the only
	// one that can hold it: reservations never overlap.
	in := false
	s.reserves.DescendLessOrEqual(chunk{addr: addr}, func(r chunk) bool {
		in = addr+uint64(size) <= r.addr+uint64(r.size)
		return false
	})
	return in
}

// Map backs [addr, addr+size) with a new piece of physical memory.
func (s *SimArena) Map(addr uint64, size int64) error {
	return s.MapRange(addr, []int64{size})
}

// MapRange backs adjacent ranges, the first at addr, with one new piece of
// physical memory each, granting access once for the whole run (see
// [RangeMapper]): each piece costs a cuMemCreate, a cuMemMap and its share
// of the run's cuMemSetAccess, which the card charges per mapping. It is
// all or nothing.
func (s *SimArena) MapRange(addr uint64, sizes []int64) error {
	if len(sizes) == 0 {
		return fmt.Errorf("memory: SimArena: MapRange at 0x%x of no ranges", addr)
	}
	g := uint64(s.granularity)
	s.mu.Lock()
	defer s.mu.Unlock()
	var total int64
	at := addr
	for _, size := range sizes {
		if err := s.checkMap(at, size, g); err != nil {
			return err
		}
		if at+uint64(size) < at {
			return fmt.Errorf("memory: SimArena: Map of [0x%x, +%d) passes the end of the address space", at, size)
		}
		total = satAdd(total, size)
		at += uint64(size)
	}
	if err := s.take(total, "cuMemCreate"); err != nil {
		return err
	}
	at = addr
	for _, size := range sizes {
		s.maps.ReplaceOrInsert(chunk{addr: at, size: size})
		at += uint64(size)
	}
	n := int64(len(sizes))
	s.counts.Create += n
	s.counts.Map += n
	s.counts.SetAccess++
	s.addCost(time.Duration(n) * (costCreate + costMap + costSetAccess))
	return nil
}

// checkMap returns an error if [addr, addr+size) cannot be mapped: not
// aligned to g, outside every reservation or overlapping a mapping.
func (s *SimArena) checkMap(addr uint64, size int64, g uint64) error {
	if size <= 0 || addr%g != 0 || uint64(size)%g != 0 {
		return fmt.Errorf("memory: SimArena: Map of [0x%x, +%d) is not aligned to the granularity %d", addr, size, g)
	}
	if !s.inReservation(addr, size) {
		return fmt.Errorf("memory: SimArena: Map of [0x%x, +%d) outside any reserved range", addr, size)
	}
	if c, ok := s.mappingFrom(addr); ok && c.addr < addr+uint64(size) {
		return fmt.Errorf("memory: SimArena: Map of [0x%x, +%d) overlaps the mapping at 0x%x", addr, size, c.addr)
	}
	var prev chunk
	found := false
	s.maps.DescendLessOrEqual(chunk{addr: addr}, func(c chunk) bool {
		prev, found = c, true
		return false
	})
	if found && prev.addr+uint64(prev.size) > addr {
		return fmt.Errorf("memory: SimArena: Map of [0x%x, +%d) overlaps the mapping at 0x%x", addr, size, prev.addr)
	}
	return nil
}

// Unmap undoes one earlier Map(addr, size).
func (s *SimArena) Unmap(addr uint64, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.maps.Get(chunk{addr: addr})
	if !ok || got.size != size {
		return fmt.Errorf("memory: SimArena: Unmap of [0x%x, +%d), which is not one earlier mapping", addr, size)
	}
	s.maps.Delete(got)
	s.used -= size
	s.counts.Unmap++
	s.counts.Release++
	s.addCost(costUnmap + releaseCost(size))
	return nil
}

// addCost adds d to the modelled driver time, saturating at the largest
// Duration (292 years) rather than wrapping around.
func (s *SimArena) addCost(d time.Duration) {
	if s.cost > math.MaxInt64-d {
		s.cost = math.MaxInt64
		return
	}
	s.cost += d
}

// releaseCost is the modelled time of one cuMemRelease of an allocation of
// size bytes.
func releaseCost(size int64) time.Duration {
	return costRelease + durationOf(float64(costReleasePerMiB)*float64(size)/(1<<20))
}

// allocCost is the modelled time of one cuMemAlloc of size bytes.
func allocCost(size int64) time.Duration {
	switch {
	case size <= costTier1:
		return costAllocSmall
	case size <= costTier2:
		return costAllocMedium
	}
	return costAllocLarge
}

// freeCost is the modelled time of one cuMemFree of size bytes.
func freeCost(size int64) time.Duration {
	switch {
	case size <= costFreeTier1:
		return costFreeSmall
	case size <= costFreeTier2:
		return costFreeMedium
	default:
		return costFreeMedium + durationOf(float64(costFreePerMiB)*float64(size-costFreeTier2)/(1<<20))
	}
}

// durationOf converts nanoseconds to a Duration, saturating at a year: the
// conversion of a float64 beyond the int64 range is undefined in Go, and
// no single driver call of the model takes that long on a device of
// MaxSimCapacity or less (6.3 s).
func durationOf(ns float64) time.Duration {
	const year = float64(365 * 24 * time.Hour)
	return time.Duration(min(ns, year))
}
