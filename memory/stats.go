package memory

import (
	"math"
	"strconv"
	"time"
)

// Stat is one statistic in the shape of PyTorch's Stat: its value now, its
// highest value, and the sums of its increases and decreases. Values are
// bytes or counts, as the field holding the Stat says. The sums saturate at
// math.MaxInt64 rather than wrap around to negative values.
type Stat struct {
	Current   int64 // value now
	Peak      int64 // highest Current since creation or ResetPeakStats
	Allocated int64 // sum of all increases since creation or ResetAccumulatedStats
	Freed     int64 // sum of all decreases, likewise
}

// update adds delta to s. A negative Current is an accounting bug: it
// panics. The cached path uses inc and dec, which leave that check to
// their caller.
func (s *Stat) update(delta int64) {
	if delta >= 0 {
		s.inc(delta)
	} else if s.dec(-delta) < 0 {
		negativeStat(s.Current)
	}
}

// inc adds n >= 0 to s. The cumulative sums saturate at math.MaxInt64
// instead of wrapping around: over a long replay of a trace with huge
// requests they can pass it, while Current and Peak stay below the
// device's capacity.
func (s *Stat) inc(n int64) {
	s.Current += n
	s.Allocated = addSat(s.Allocated, n)
	if s.Current > s.Peak {
		s.Peak = s.Current
	}
}

// dec subtracts n >= 0 from s and returns the new Current, which the
// caller must check is not negative.
func (s *Stat) dec(n int64) int64 {
	s.Current -= n
	s.Freed = addSat(s.Freed, n)
	return s.Current
}

// addSat returns a+n for n >= 0, or math.MaxInt64 if that overflows.
func addSat(a, n int64) int64 {
	if a > math.MaxInt64-n {
		return math.MaxInt64
	}
	return a + n
}

// negativeStat panics: a statistic went below zero, an accounting bug. It
// is kept out of line so that update inlines.
//
//go:noinline
func negativeStat(v int64) {
	panic("vram: internal: memory stat went negative (" + strconv.FormatInt(v, 10) + ")")
}

// Indexes of a [StatArray], PyTorch's StatType.
const (
	StatAll       = 0 // the sum over both pools (PyTorch's "all")
	StatSmallPool = 1 // the pool of requests up to 1 MiB ("small_pool")
	StatLargePool = 2 // the pool of larger requests ("large_pool")
)

// statNames are the PyTorch key components of the StatArray indexes.
var statNames = [3]string{"all", "small_pool", "large_pool"}

// StatArray is one statistic for all pools, the small pool and the large
// pool, indexed by [StatAll], [StatSmallPool] and [StatLargePool].
type StatArray [3]Stat

// update adds delta to the aggregate and to pool kind's entry; it panics
// if a Current goes negative.
func (a *StatArray) update(kind poolKind, delta int64) {
	if delta >= 0 {
		a.inc(kind, delta)
	} else if a.dec(kind, -delta) < 0 {
		negativeStat(-1)
	}
}

// inc adds n >= 0 to the aggregate and to pool kind's entry.
func (a *StatArray) inc(kind poolKind, n int64) {
	a[StatAll].inc(n)
	a[StatSmallPool+int(kind)].inc(n)
}

// dec subtracts n >= 0 from the aggregate and from pool kind's entry and
// returns a negative number if either went negative (the caller checks).
func (a *StatArray) dec(kind poolKind, n int64) int64 {
	return a[StatAll].dec(n) | a[StatSmallPool+int(kind)].dec(n)
}

// Stats are an [Allocator]'s statistics, the families of PyTorch's
// torch.cuda.memory_stats(). Block counts and bytes are in blocks of the
// allocator's rounded sizes, except RequestedBytes. The zero Stats is an
// allocator that did nothing.
type Stats struct {
	// Allocation counts blocks held by callers.
	Allocation StatArray
	// Segment counts segments: ranges obtained with Arena.Alloc, or
	// reserved address ranges of virtual segments.
	Segment StatArray
	// Active counts blocks held by callers or freed but waiting for
	// another stream's events.
	Active StatArray
	// InactiveSplit counts free cached blocks that hold inactive split
	// memory (see InactiveSplitBytes).
	InactiveSplit StatArray
	// AllocatedBytes is the bytes of blocks held by callers.
	AllocatedBytes StatArray
	// ReservedBytes is the physical memory the allocator holds from the
	// device.
	ReservedBytes StatArray
	// ActiveBytes is the bytes of active blocks.
	ActiveBytes StatArray
	// InactiveSplitBytes is the cached memory that releasing the cache
	// ([Allocator.EmptyCache]) cannot give back, because it shares its
	// unit of release with memory in use: free blocks of fixed segments
	// that hold other blocks, and, in virtual segments (expandable
	// segments, policy:vram), the free bytes of mappings that also hold
	// allocated or pending blocks. With nothing allocated it is 0; right
	// after EmptyCache it is all the cached memory left.
	InactiveSplitBytes StatArray
	// RequestedBytes is the bytes callers asked for in blocks they hold,
	// before rounding.
	RequestedBytes StatArray

	// OversizeAllocations counts allocated blocks of max_split_size_mb or
	// more (PyTorch's oversize_allocations; always 0 without the setting).
	OversizeAllocations Stat
	// OversizeSegments counts fixed segments of max_split_size_mb or more
	// (PyTorch's oversize_segments; virtual segments are not counted, as
	// PyTorch does not count expandable ones).
	OversizeSegments Stat

	// NumAllocRetries counts allocations that freed the whole cache and
	// retried after the device refused memory: once per Alloc call, also
	// when the OnOOM hook made the call climb the ladder a second time.
	NumAllocRetries int64
	// NumOOMs counts allocations that failed with an OutOfMemoryError.
	NumOOMs int64
	// NumSyncAllStreams counts releases of the whole cache (EmptyCache and
	// the retry of a failing allocation), each of which first waits for
	// the events of blocks freed while in use on other streams (PyTorch's
	// num_sync_all_streams, its synchronize_and_free_events calls).
	NumSyncAllStreams int64
	// NumDeviceAlloc counts pieces of physical memory taken from the
	// device (Arena.Alloc and VirtualArena.Map calls).
	NumDeviceAlloc int64
	// NumDeviceFree counts pieces given back (Arena.Free and
	// VirtualArena.Unmap calls).
	NumDeviceFree int64
	// NumMaps counts VirtualArena.Map calls.
	NumMaps int64
	// NumUnmaps counts VirtualArena.Unmap calls.
	NumUnmaps int64
	// DriverTime is the time spent in arena calls: as the arena prices it
	// when it is a DriverTimer (SimArena's cost model), measured
	// otherwise.
	DriverTime time.Duration
	// MaxSplitSize is the max_split_size_mb setting in bytes, -1 when
	// unlimited (as PyTorch reports it).
	MaxSplitSize int64
}

// families lists the StatArray fields with their PyTorch names.
func (s *Stats) families() []struct {
	name string
	a    *StatArray
} {
	return []struct {
		name string
		a    *StatArray
	}{
		{"allocation", &s.Allocation},
		{"segment", &s.Segment},
		{"active", &s.Active},
		{"inactive_split", &s.InactiveSplit},
		{"allocated_bytes", &s.AllocatedBytes},
		{"reserved_bytes", &s.ReservedBytes},
		{"active_bytes", &s.ActiveBytes},
		{"inactive_split_bytes", &s.InactiveSplitBytes},
		{"requested_bytes", &s.RequestedBytes},
	}
}

// singles lists the Stat fields without pools with their PyTorch names.
func (s *Stats) singles() []struct {
	name string
	s    *Stat
} {
	return []struct {
		name string
		s    *Stat
	}{
		{"oversize_allocations", &s.OversizeAllocations},
		{"oversize_segments", &s.OversizeSegments},
	}
}

// numMapKeys is the number of keys of [Stats.Map].
const numMapKeys = 9*3*4 + 2*4 + 9

// Map returns the statistics under the key names of PyTorch's
// torch.cuda.memory_stats(), all of them ("allocated_bytes.all.current",
// "reserved_bytes.large_pool.peak", "oversize_segments.freed",
// "num_alloc_retries", "num_sync_all_streams", "max_split_size", ...),
// plus vram's "num_maps", "num_unmaps" and "driver_time_us".
func (s Stats) Map() map[string]int64 {
	m := make(map[string]int64, numMapKeys)
	put := func(p string, st Stat) {
		m[p+"current"] = st.Current
		m[p+"peak"] = st.Peak
		m[p+"allocated"] = st.Allocated
		m[p+"freed"] = st.Freed
	}
	for _, f := range s.families() {
		for i, pool := range statNames {
			put(f.name+"."+pool+".", f.a[i])
		}
	}
	for _, f := range s.singles() {
		put(f.name+".", *f.s)
	}
	m["num_alloc_retries"] = s.NumAllocRetries
	m["num_ooms"] = s.NumOOMs
	m["num_sync_all_streams"] = s.NumSyncAllStreams
	m["num_device_alloc"] = s.NumDeviceAlloc
	m["num_device_free"] = s.NumDeviceFree
	m["num_maps"] = s.NumMaps
	m["num_unmaps"] = s.NumUnmaps
	m["driver_time_us"] = s.DriverTime.Microseconds()
	m["max_split_size"] = s.MaxSplitSize
	return m
}

// resetPeaks sets every Peak to its Current.
func (s *Stats) resetPeaks() {
	for _, f := range s.families() {
		for i := range f.a {
			f.a[i].Peak = f.a[i].Current
		}
	}
	for _, f := range s.singles() {
		f.s.Peak = f.s.Current
	}
}

// resetAccumulated zeroes every Allocated and Freed and the counters.
func (s *Stats) resetAccumulated() {
	for _, f := range s.families() {
		for i := range f.a {
			f.a[i].Allocated, f.a[i].Freed = 0, 0
		}
	}
	for _, f := range s.singles() {
		f.s.Allocated, f.s.Freed = 0, 0
	}
	s.NumAllocRetries, s.NumOOMs, s.NumSyncAllStreams = 0, 0, 0
	s.NumDeviceAlloc, s.NumDeviceFree = 0, 0
	s.NumMaps, s.NumUnmaps = 0, 0
	s.DriverTime = 0
}
