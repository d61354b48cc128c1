package memory

import (
	"errors"
	"fmt"

	"github.com/vramgo/vram/memory/trace"
)

// Result is what a replay measured. Byte counts are peaks over the whole
// replay; device calls and driver time are what the allocator asked of the
// arena (priced by the arena's cost model when it is a [DriverTimer], such
// as [SimArena]). The JSON keys are those of `vram replay --json`.
type Result struct {
	// Events is the number of events read, of every action.
	Events int64 `json:"events"`
	// PeakRequested is the peak of the bytes the trace asked for.
	PeakRequested int64 `json:"peak_requested_bytes"`
	// PeakAllocated is the peak of the bytes in allocated blocks.
	PeakAllocated int64 `json:"peak_allocated_bytes"`
	// PeakReserved is the peak of the memory the allocator held.
	PeakReserved int64 `json:"peak_reserved_bytes"`
	// DeviceAllocs counts pieces of physical memory taken (cuMemAlloc,
	// cuMemCreate).
	DeviceAllocs int64 `json:"device_allocs"`
	// DeviceFrees counts pieces given back (cuMemFree, cuMemRelease).
	DeviceFrees int64 `json:"device_frees"`
	// DeviceMaps counts mappings made in virtual segments.
	DeviceMaps int64 `json:"device_maps"`
	// DeviceUnmaps counts mappings undone.
	DeviceUnmaps int64 `json:"device_unmaps"`
	// DriverTimeUS is the driver time of all those calls, microseconds;
	// a SimArena's saturates at 2^63-1 nanoseconds (292 years).
	DriverTimeUS int64 `json:"driver_time_us"`
	// NumAllocRetries counts allocations that freed the cache and retried.
	NumAllocRetries int64 `json:"num_alloc_retries"`
	// NumOOMs counts allocations that failed, requests above
	// [MaxAllocSize] included (no device serves them); the replay goes on
	// without them and ignores their frees.
	NumOOMs int64 `json:"num_ooms"`
	// UnmatchedFrees counts frees of addresses with no live allocation in
	// the replay.
	UnmatchedFrees int64 `json:"unmatched_frees"`
	// RecordedOOMs counts the oom events of the history: requests that
	// failed in the recorded run, which have no alloc event and so are not
	// replayed (see [WithFailedRequests]).
	RecordedOOMs int64 `json:"recorded_ooms,omitempty"`
}

// Replay runs the allocation history events through a new [Allocator] with
// settings cfg over arena (usually a fresh [SimArena]) and returns what it
// measured. An alloc event allocates its Size (the requested bytes) on its
// stream; a free_completed event frees the block allocated at its address,
// or free_requested when the trace has no free_completed events at all;
// segment, OOM and snapshot events are PyTorch's own decisions and are
// skipped. A free of an address not live in the replay is counted in
// UnmatchedFrees. An alloc at an address still live frees the earlier block
// first. The error is a [*ConfigError] when cfg does not suit arena, or an
// arena failure other than running out of memory; a nil arena is an error
// before anything is replayed.
func Replay(events []trace.Event, arena Arena, cfg Config) (Result, error) {
	return ReplayHistory(trace.Events(events), arena, cfg)
}

// ReplayHistory is [Replay] of a history read as a stream, such as a text
// trace opened with [trace.OpenStream]: its memory grows with the blocks
// live at once, not with the length of the history. It reads h twice: a
// first pass, which stops at the first free_completed event, decides which
// action frees, and the second replays. An error reading h ends the replay
// with that error and the result so far.
func ReplayHistory(h trace.History, arena Arena, cfg Config) (Result, error) {
	if err := replayArgs(h, arena); err != nil {
		return Result{}, err
	}
	freeAction, err := freeActionOf(h)
	if err != nil {
		return Result{}, err
	}
	r := newReplayer(arena, cfg)
	return r.run(h, freeAction)
}

// ReplayFrom is [Replay] of state.History starting from the allocator state
// that state implies rather than from empty: when the history is truncated,
// the blocks held before its first event ([trace.StateAt](state, 0): those
// held in state's segments that the history does not allocate, and those
// the history frees without having allocated them) are allocated first, in
// address order, with their requested sizes. Those allocations count toward
// the peaks but not toward Events. A snapshot whose history contradicts its
// segments is an error.
func ReplayFrom(state *trace.Snapshot, arena Arena, cfg Config) (Result, error) {
	if state == nil {
		return Result{}, fmt.Errorf("memory: replay: %w", state.Validate())
	}
	if err := replayArgs(trace.Events(state.History), arena); err != nil {
		return Result{}, err
	}
	r := newReplayer(arena, cfg)
	if state.Truncated {
		held, err := trace.StateAt(state, 0)
		if err != nil {
			return Result{}, fmt.Errorf("memory: replay: %w", err)
		}
		streams := map[uint64]uint64{} // block address -> its stream
		for i := len(state.History) - 1; i >= 0; i-- {
			streams[state.History[i].Addr] = state.History[i].Stream
		}
		for _, seg := range state.Segments {
			for _, b := range seg.Blocks {
				streams[b.Addr] = seg.Stream
			}
		}
		for _, b := range held {
			size := b.Requested
			if size == 0 {
				size = b.Size
			}
			if err := r.alloc(b.Addr, size, streams[b.Addr], b.Region); err != nil {
				return r.result(), err
			}
		}
	}
	freeAction, _ := freeActionOf(trace.Events(state.History))
	return r.run(trace.Events(state.History), freeAction)
}

// replayer holds one replay's state.
type replayer struct {
	al     *Allocator
	live   map[uint64]*Block
	failed map[uint64]bool // addresses whose alloc failed
	huge   int64           // allocs refused as above MaxAllocSize
	res    Result
}

func newReplayer(arena Arena, cfg Config) *replayer {
	return &replayer{
		al:     New(arena, cfg, withQuickOOM()),
		live:   make(map[uint64]*Block),
		failed: make(map[uint64]bool),
	}
}

// replayArgs returns the error of a replay of h over arena when either is
// nil, which would otherwise fail at the first event.
func replayArgs(h trace.History, arena Arena) error {
	switch {
	case h == nil:
		return errors.New("memory: replay: nil history")
	case arena == nil:
		return errors.New("memory: replay: nil arena")
	}
	return nil
}

// errStop ends a pass over a history early.
var errStop = errors.New("stop")

// freeActionOf returns the action a replay frees on: free_completed, or
// free_requested for a history that has no free_completed event.
func freeActionOf(h trace.History) (trace.Action, error) {
	err := h.Each(func(e *trace.Event) error {
		if e.Action == trace.ActionFreeCompleted {
			return errStop
		}
		return nil
	})
	switch err {
	case errStop:
		return trace.ActionFreeCompleted, nil
	case nil:
		return trace.ActionFreeRequested, nil
	}
	return 0, err
}

func (r *replayer) alloc(addr uint64, size int64, stream uint64, region string) error {
	if old, ok := r.live[addr]; ok {
		r.al.Free(old)
		delete(r.live, addr)
	}
	b, err := r.al.Alloc(size, Stream(stream), region)
	if err != nil {
		if _, ok := err.(*OutOfMemoryError); ok {
			r.failed[addr] = true
			return nil
		}
		if errors.Is(err, ErrTooLarge) {
			// A recorded request no device could serve: it failed in the
			// recorded run too, so the replay counts it as out of memory.
			r.failed[addr] = true
			r.huge++
			return nil
		}
		return fmt.Errorf("memory: replay: alloc of %d bytes at 0x%x: %w", size, addr, err)
	}
	delete(r.failed, addr)
	r.live[addr] = b
	return nil
}

func (r *replayer) run(h trace.History, freeAction trace.Action) (Result, error) {
	err := h.Each(func(e *trace.Event) error {
		r.res.Events++
		switch e.Action {
		case trace.ActionAlloc:
			return r.alloc(e.Addr, e.Size, e.Stream, e.Region)
		case trace.ActionOOM:
			r.res.RecordedOOMs++
		case freeAction:
			if b, ok := r.live[e.Addr]; ok {
				r.al.Free(b)
				delete(r.live, e.Addr)
			} else if r.failed[e.Addr] {
				delete(r.failed, e.Addr)
			} else {
				r.res.UnmatchedFrees++
			}
		}
		return nil
	})
	return r.result(), err
}

func (r *replayer) result() Result {
	s := r.al.Stats()
	res := r.res
	res.PeakRequested = s.RequestedBytes[StatAll].Peak
	res.PeakAllocated = s.AllocatedBytes[StatAll].Peak
	res.PeakReserved = s.ReservedBytes[StatAll].Peak
	res.DeviceAllocs = s.NumDeviceAlloc
	res.DeviceFrees = s.NumDeviceFree
	res.DeviceMaps = s.NumMaps
	res.DeviceUnmaps = s.NumUnmaps
	res.DriverTimeUS = s.DriverTime.Microseconds()
	res.NumAllocRetries = s.NumAllocRetries
	res.NumOOMs = s.NumOOMs + r.huge
	return res
}
