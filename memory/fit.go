package memory

import (
	"errors"
	"fmt"
	"math"

	"github.com/vramgo/vram/memory/trace"
)

// FitResolution is the precision, in bytes, to which [SmallestCapacity]
// finds a capacity: 2 MiB, the mapping granularity of an H200 and the
// unit of PyTorch's small segments.
const FitResolution = 2 << 20

// maxFitReplays bounds the replays of one [SmallestCapacity] search: a
// bisection to FitResolution between the peak allocated and the peak
// reserved of any real trace takes at most about 20 (4 TiB in 2 MiB steps
// is 2^21), and the upper bound may double a few times first.
const maxFitReplays = 40

// Fit is what [SmallestCapacity] found for one setting.
type Fit struct {
	// Capacity is the smallest device capacity, in bytes and a multiple of
	// FitResolution, on which the replay had no out-of-memory error; 0
	// when none up to the search's upper bound had none.
	Capacity int64 `json:"capacity_bytes"`
	// Result is the replay on Capacity (on the upper bound when Capacity
	// is 0).
	Result Result `json:"result"`
	// Replays counts the replays the search made.
	Replays int `json:"replays"`
}

// SmallestCapacity finds the smallest device capacity on which replay,
// called with a capacity in bytes, runs without an out-of-memory error, by
// bisection to [FitResolution] bytes. free is a replay on a device large
// enough that nothing ran out (its NumOOMs must be 0): below its
// PeakAllocated nothing fits, and on its PeakReserved the replay is the same
// run, so the search lies between the two; when a capacity of PeakReserved
// still fails, the bound doubles, up to limit rounded down to a multiple
// of FitResolution (0 or less: no limit). An allocator
// does not fail on every smaller capacity once it failed on one (a smaller
// device releases its cache sooner), so the answer is the bisection's,
// checked by a replay on it. The search makes at most 40 replays. The
// error is replay's.
func SmallestCapacity(replay func(capacity int64) (Result, error), free Result, limit int64) (Fit, error) {
	if free.NumOOMs != 0 {
		return Fit{}, errors.New("memory: SmallestCapacity: the reference replay ran out of memory; give one on a larger device")
	}
	var fit Fit
	try := func(c int64) (bool, Result, error) {
		fit.Replays++
		r, err := replay(c)
		return err == nil && r.NumOOMs == 0, r, err
	}
	lo := alignDown(free.PeakAllocated, FitResolution) // fails (or is 0)
	if lo >= free.PeakAllocated {
		lo -= FitResolution
	}
	lo = max(lo, 0)
	// top is the largest capacity tried: a multiple of FitResolution, so
	// that rounding the bound up never overflows.
	top := alignDown(math.MaxInt64, FitResolution)
	if limit > 0 {
		top = alignDown(limit, FitResolution)
	}
	hi := max(alignUp(min(max(free.PeakReserved, FitResolution), top), FitResolution), lo)
	ok, best, err := try(hi)
	if err != nil {
		return fit, err
	}
	for !ok {
		if fit.Replays >= maxFitReplays || hi >= top {
			fit.Result = best
			return fit, nil
		}
		lo = hi
		hi = min(satAdd(hi, hi), top)
		if ok, best, err = try(hi); err != nil {
			return fit, err
		}
	}
	for hi-lo > FitResolution && fit.Replays < maxFitReplays {
		mid := lo + alignDown((hi-lo)/2, FitResolution)
		ok, r, err := try(mid)
		if err != nil {
			return fit, err
		}
		if ok {
			hi, best = mid, r
		} else {
			lo = mid
		}
	}
	fit.Capacity, fit.Result = hi, best
	return fit, nil
}

// Recorded is what a history says about the recorded allocator's own
// decisions: its segment_* and oom events, which a replay skips.
type Recorded struct {
	// SegmentAllocs and SegmentFrees count segment_alloc (cudaMalloc) and
	// segment_free (cudaFree) events.
	SegmentAllocs int64 `json:"segment_allocs"`
	SegmentFrees  int64 `json:"segment_frees"`
	// Maps and Unmaps count segment_map and segment_unmap events
	// (expandable segments).
	Maps   int64 `json:"segment_maps"`
	Unmaps int64 `json:"segment_unmaps"`
	// MidRunFrees counts segment_free and segment_unmap events followed by
	// a later alloc: memory given back while the program still ran.
	MidRunFrees int64 `json:"mid_run_frees"`
	// RoomBursts counts runs of frees that made room: right before an
	// oom event, or right before a new segment_alloc or segment_map that
	// would have taken the reserve past its peak had the frees not come
	// first: what PyTorch does when cudaMalloc fails (a device or a
	// set_per_process_memory_fraction cap full). OtherBursts counts the
	// other mid-run runs of frees: with no allocation waiting
	// (empty_cache), or before a segment that the reserve had room for,
	// as it held as much at its peak (garbage_collection_threshold, the
	// empty_cache of a CUDA graph's capture).
	RoomBursts  int64 `json:"room_bursts"`
	OtherBursts int64 `json:"other_bursts"`
	// OOMs counts oom events.
	OOMs int64 `json:"ooms"`
	// PeakReserved is the peak of the memory the segment events add up
	// to, in bytes: what the recorded allocator reserved at most, when the
	// history starts with the process.
	PeakReserved int64 `json:"peak_reserved_bytes"`
	// Expandable reports segment_map events: the run used expandable
	// segments.
	Expandable bool `json:"expandable"`
}

// ReadRecorded reads what h's segment and oom events say; h is read once.
func ReadRecorded(h trace.History) (Recorded, error) {
	var r Recorded
	var cur int64
	var pending int64 // frees in the current run, not yet known to be mid-run
	inBurst := false
	var before int64 // the reserve when the current run of frees started
	// needs holds, per run of frees before new segments, the reserve
	// those segments (one, or the mappings of one growth) would have
	// made without them: the run made room if that is more than the
	// peak, which is known at the end only.
	var needs []int64
	growing := false // the last event took a segment after a run of frees
	endBurst := func(room bool) {
		if !inBurst {
			return
		}
		if room {
			r.RoomBursts++
		} else {
			r.OtherBursts++
		}
		inBurst = false
	}
	err := h.Each(func(e *trace.Event) error {
		if e.Action != trace.ActionSegmentAlloc && e.Action != trace.ActionSegmentMap {
			growing = false
		}
		switch e.Action {
		case trace.ActionSegmentAlloc, trace.ActionSegmentMap:
			if e.Action == trace.ActionSegmentAlloc {
				r.SegmentAllocs++
			} else {
				r.Maps++
				r.Expandable = true
			}
			r.MidRunFrees += pending
			pending = 0
			switch {
			case inBurst:
				needs = append(needs, satAdd(before, max(e.Size, 0)))
				inBurst, growing = false, true
			case growing:
				needs[len(needs)-1] = satAdd(needs[len(needs)-1], max(e.Size, 0))
			}
			cur = satAdd(cur, max(e.Size, 0))
			r.PeakReserved = max(r.PeakReserved, cur)
		case trace.ActionSegmentFree, trace.ActionSegmentUnmap:
			if e.Action == trace.ActionSegmentFree {
				r.SegmentFrees++
			} else {
				r.Unmaps++
			}
			pending++
			if !inBurst {
				before = cur
			}
			inBurst = true
			cur = max(cur-max(e.Size, 0), 0)
		case trace.ActionAlloc:
			r.MidRunFrees += pending
			pending = 0
			endBurst(false)
		case trace.ActionOOM:
			r.OOMs++
			endBurst(true)
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("memory: reading the recorded segments: %w", err)
	}
	for _, n := range needs {
		if n > r.PeakReserved {
			r.RoomBursts++
		} else {
			r.OtherBursts++
		}
	}
	return r, nil
}

// failedRequestAddr is the address of the first failed request that
// [WithFailedRequests] replays; later ones count down from it, skipping
// any address a block of the history holds then.
const failedRequestAddr = math.MaxUint64

// failedRequestFloor bounds the addresses a failed request may take from
// below, far past any count of oom events and blocks a history can hold:
// only blocks at or above it are looked at for a clash.
const failedRequestFloor = failedRequestAddr - 1<<40

// WithFailedRequests returns h with the request of each of its oom events
// replayed: an alloc of the failed Size on the event's stream, at an
// address no block of h holds then, freed right after with the action h
// frees on. A replay skips oom events (they record what PyTorch's
// allocator did), so a history that ends in an OOM replays as if the
// failed request had never been made; the smallest capacity on which the returned history runs is
// one on which the recorded run would have gone on past its OOM. An oom
// event without a size adds nothing.
func WithFailedRequests(h trace.History) (trace.History, error) {
	if h == nil {
		return nil, errors.New("memory: WithFailedRequests: nil history")
	}
	freeAction, err := freeActionOf(h)
	if err != nil {
		return nil, err
	}
	return failedRequests{h: h, free: freeAction}, nil
}

// SnapshotWithFailedRequests is [WithFailedRequests] of a snapshot's
// history: a copy of s whose History has the failed requests added, for
// [ReplayFrom]. It returns nil for a nil s.
func SnapshotWithFailedRequests(s *trace.Snapshot) *trace.Snapshot {
	if s == nil {
		return nil
	}
	c := *s
	freeAction, _ := freeActionOf(trace.Events(s.History))
	c.History = nil
	// The blocks held before the history starts, which ReplayFrom
	// allocates first, are among the segments' and the history's.
	avoid := map[uint64]bool{}
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if b.Addr >= failedRequestFloor {
				avoid[b.Addr] = true
			}
		}
	}
	for _, e := range s.History {
		if e.Action == freeAction && e.Addr >= failedRequestFloor {
			avoid[e.Addr] = true
		}
	}
	failedRequests{h: trace.Events(s.History), free: freeAction, avoid: avoid}.Each(func(e *trace.Event) error {
		c.History = append(c.History, *e)
		return nil
	})
	return &c
}

// failedRequests is the history of [WithFailedRequests].
type failedRequests struct {
	h     trace.History
	free  trace.Action
	avoid map[uint64]bool // addresses a failed request never takes; may be nil
}

func (f failedRequests) Each(fn func(e *trace.Event) error) error {
	addr := uint64(failedRequestAddr)
	live := map[uint64]bool{} // addresses the history holds a block at
	return f.h.Each(func(e *trace.Event) error {
		if err := fn(e); err != nil {
			return err
		}
		if e.Addr >= failedRequestFloor {
			switch e.Action {
			case trace.ActionAlloc:
				live[e.Addr] = true
			case f.free:
				delete(live, e.Addr)
			}
		}
		if e.Action != trace.ActionOOM || e.Size <= 0 {
			return nil
		}
		for live[addr] || f.avoid[addr] {
			addr--
		}
		req := trace.Event{Action: trace.ActionAlloc, Addr: addr, Size: e.Size, Stream: e.Stream, Region: e.Region}
		addr--
		if err := fn(&req); err != nil {
			return err
		}
		req.Action = f.free
		return fn(&req)
	})
}
