package trace

import (
	"fmt"
	"math"
)

// Action is what one history [Event] records. The names and meanings are
// those of PyTorch's TraceEntry actions (c10/cuda/CUDACachingAllocator.h), so
// that a history read from a PyTorch snapshot and one recorded by vram read
// the same way. The zero Action is invalid: every reader rejects it, so a
// zero [Event] is never mistaken for an allocation.
type Action uint8

// The actions of a history, in PyTorch's spelling (see [Action.String]).
const (
	// ActionAlloc: a block was handed to a caller. Size is the requested
	// (unrounded) byte count.
	ActionAlloc Action = iota + 1
	// ActionFreeRequested: the caller released the block. With no
	// cross-stream use it is followed at once by ActionFreeCompleted.
	ActionFreeRequested
	// ActionFreeCompleted: the block really returned to the pool, after
	// every stream that used it was done with it. A replay frees here.
	ActionFreeCompleted
	// ActionSegmentAlloc: the allocator reserved a segment from the device
	// (cudaMalloc). Size is the segment's byte count.
	ActionSegmentAlloc
	// ActionSegmentFree: the allocator returned a segment to the device.
	ActionSegmentFree
	// ActionSegmentMap: physical memory was mapped into an expandable
	// segment at Addr (Size bytes).
	ActionSegmentMap
	// ActionSegmentUnmap: physical memory was unmapped from an expandable
	// segment.
	ActionSegmentUnmap
	// ActionOOM: an allocation of Size bytes failed. An OOM has no
	// address: Addr holds the bytes the device reported free at that
	// moment (PyTorch's "device_free").
	ActionOOM
	// ActionSnapshot: a snapshot was taken at this point of the history.
	ActionSnapshot
)

// actionNames maps an Action to its PyTorch spelling; index 0 is invalid.
var actionNames = [...]string{
	"",
	"alloc",
	"free_requested",
	"free_completed",
	"segment_alloc",
	"segment_free",
	"segment_map",
	"segment_unmap",
	"oom",
	"snapshot",
}

// String returns the action's PyTorch name ("alloc", "free_requested", ...),
// or "Action(N)" for a value that is not one of the constants.
func (a Action) String() string {
	if a.Valid() {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Valid reports whether a is one of the Action constants.
func (a Action) Valid() bool {
	return a >= ActionAlloc && a <= ActionSnapshot
}

// ParseAction returns the Action whose PyTorch name is s. The match is exact
// (lowercase, no spaces); an unknown name is an error.
func ParseAction(s string) (Action, error) {
	if a, ok := lookupAction(s); ok {
		return a, nil
	}
	return 0, unknownActionError(s)
}

// unknownActionError is ParseAction's error.
type unknownActionError string

func (e unknownActionError) Error() string  { return "trace: " + e.detail() }
func (e unknownActionError) detail() string { return fmt.Sprintf("unknown action %q", clip([]byte(e))) }

// lookupAction is ParseAction without the error. A switch on the string lets
// the compiler avoid allocating when s is converted from a byte slice.
func lookupAction(s string) (Action, bool) {
	switch s {
	case "alloc":
		return ActionAlloc, true
	case "free_requested":
		return ActionFreeRequested, true
	case "free_completed":
		return ActionFreeCompleted, true
	case "segment_alloc":
		return ActionSegmentAlloc, true
	case "segment_free":
		return ActionSegmentFree, true
	case "segment_map":
		return ActionSegmentMap, true
	case "segment_unmap":
		return ActionSegmentUnmap, true
	case "oom":
		return ActionOOM, true
	case "snapshot":
		return ActionSnapshot, true
	}
	return 0, false
}

// MarshalText returns the action's name; it fails for an invalid Action.
func (a Action) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("trace: invalid action %d", uint8(a))
	}
	return []byte(actionNames[a]), nil
}

// UnmarshalText sets a to the action named by text, as [ParseAction] does.
func (a *Action) UnmarshalText(text []byte) error {
	v, err := ParseAction(string(text))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Event is one entry of an allocation history. Addresses are device
// addresses, sizes are bytes, and Stream identifies the stream the memory is
// used on (PyTorch writes the cudaStream_t value; 0 is the default stream).
type Event struct {
	// Action says what happened.
	Action Action
	// Addr is the block's or segment's address; for ActionOOM, the bytes
	// the device had free.
	Addr uint64
	// Size is in bytes: requested (unrounded) for block actions, the
	// segment's or mapping's size for segment actions, the failed request
	// for ActionOOM; 0 for ActionSnapshot.
	Size int64
	// Stream is the stream the block or segment belongs to.
	Stream uint64
	// TimeUS is the time of the event in microseconds, 0 if unknown. Only
	// differences between events are meaningful.
	TimeUS int64
	// Frames is the call stack that caused the event, innermost first;
	// nil when none was recorded. Readers may share one Frames slice among
	// several events: treat it as read-only.
	Frames []Frame
	// Region is the user's label for the code that caused the event
	// (vram's region labels, PyTorch's user metadata); "" if none.
	Region string
}

// Frame is one entry of a call stack. The struct tags give its keys in the
// vram JSON snapshot format.
type Frame struct {
	Function string `json:"function"` // function name
	File     string `json:"file"`     // source file
	Line     int    `json:"line"`     // line in File, 0 if unknown
}

// Pool names of a [Segment].
const (
	PoolSmall = "small" // segments for requests up to 1 MiB
	PoolLarge = "large" // segments for larger requests
)

// States of a [Block], in PyTorch's spelling.
const (
	// StateActiveAllocated: the block is held by a caller.
	StateActiveAllocated = "active_allocated"
	// StateActivePendingFree: the caller released the block, but a stream
	// that used it has not finished, so it is not yet reusable.
	StateActivePendingFree = "active_pending_free"
	// StateInactive: the block is cached and free for reuse.
	StateInactive = "inactive"
)

// Snapshot is the state of one device's caching allocator at one moment:
// the segments it holds, how each is divided into blocks, and the history of
// events that led there. The zero Snapshot is an empty allocator on device 0
// with no history.
type Snapshot struct {
	// Device is the device index.
	Device int
	// Capacity is the device's total memory in bytes, 0 if unknown.
	Capacity int64
	// Config is the allocator's settings in VRAM_ALLOC_CONF /
	// PYTORCH_CUDA_ALLOC_CONF syntax ("expandable_segments:True,..."), ""
	// if unknown or default. For a PyTorch pickle it is the string PyTorch
	// recorded; see the package documentation, "# PyTorch pickles", for
	// the settings its Meta holds beside it.
	Config string
	// Segments are the reserved segments, sorted by address.
	Segments []Segment
	// History is the recorded event history, oldest first. It may be
	// empty (history was not recorded) or cut at the front (see Truncated).
	History []Event
	// Truncated reports that History does not start at the allocator's
	// creation: events before it were not recorded or were dropped, so
	// History alone does not explain every segment and block. See the
	// package documentation, "# Truncated histories".
	Truncated bool
	// Meta holds free-form facts about the snapshot (the tool that wrote
	// it, the card's name, PyTorch's other allocator settings). Keys are
	// documented in the package documentation, "# Meta keys".
	Meta map[string]string
}

// Segment is one contiguous range of device memory that the allocator
// reserved, carved into blocks.
type Segment struct {
	// Addr is the segment's first byte.
	Addr uint64
	// Size is the segment's byte count (for an expandable segment, the
	// bytes currently mapped).
	Size int64
	// Stream is the stream whose pool owns the segment.
	Stream uint64
	// Pool is PoolSmall or PoolLarge.
	Pool string
	// Expandable reports a segment on CUDA virtual memory that can grow.
	Expandable bool
	// PrivatePool is the id of the private memory pool that owns the
	// segment, PyTorch's segment_pool_id: a CUDA graph's (torch.cuda.graph
	// captures into one) or a torch.cuda.MemPool's. It is zero for the
	// allocator's shared pools. Only that pool's allocations use the
	// segment, and torch.cuda.empty_cache does not return its free memory
	// while the pool is in use.
	PrivatePool [2]uint64
	// Blocks tile the segment: sorted by address, the first at Addr, each
	// starting where the previous one ends, the last ending at Addr+Size.
	Blocks []Block
}

// Block is one piece of a segment: held by a caller, waiting for a stream
// before it can be reused, or cached and free.
type Block struct {
	// Addr is the block's first byte.
	Addr uint64
	// Size is the block's byte count, after the allocator's rounding.
	Size int64
	// Requested is the byte count the caller asked for (at most Size);
	// for an inactive block it is whatever the allocator last recorded,
	// usually 0.
	Requested int64
	// State is StateActiveAllocated, StateActivePendingFree or
	// StateInactive.
	State string
	// Region is the user's label for the code that allocated the block,
	// "" if none.
	Region string
	// Frames is the call stack of the allocation, innermost first; nil if
	// not recorded. It may be shared with other blocks or events.
	Frames []Frame
}

// Reserved returns the bytes of all segments: what the allocator holds from
// the device (PyTorch's reserved_bytes).
func (s *Snapshot) Reserved() int64 {
	var n int64
	for i := range s.Segments {
		n += s.Segments[i].Size
	}
	return n
}

// MixedSegments reports whether s holds both fixed and expandable
// segments outside private pools. PyTorch makes both kinds only when
// expandable_segments changes while it runs (torch.cuda.memory.
// _set_allocator_settings), so no one setting reproduces such a run.
func (s *Snapshot) MixedSegments() bool {
	var fixed, expandable bool
	for i := range s.Segments {
		seg := &s.Segments[i]
		if seg.PrivatePool != [2]uint64{} {
			continue
		}
		if seg.Expandable {
			expandable = true
		} else {
			fixed = true
		}
	}
	return fixed && expandable
}

// Allocated returns the bytes of blocks in state StateActiveAllocated,
// counted at their rounded size (PyTorch's allocated_bytes). Blocks pending
// free are not counted.
func (s *Snapshot) Allocated() int64 {
	var n int64
	for i := range s.Segments {
		for j := range s.Segments[i].Blocks {
			if b := &s.Segments[i].Blocks[j]; b.State == StateActiveAllocated {
				n += b.Size
			}
		}
	}
	return n
}

// Requested returns the bytes callers asked for in blocks of state
// StateActiveAllocated (PyTorch's requested_bytes): Allocated minus the
// rounding.
func (s *Snapshot) Requested() int64 {
	var n int64
	for i := range s.Segments {
		for j := range s.Segments[i].Blocks {
			if b := &s.Segments[i].Blocks[j]; b.State == StateActiveAllocated {
				n += b.Requested
			}
		}
	}
	return n
}

// InvalidSnapshotError reports a [Snapshot] that breaks one of the rules
// [Snapshot.Validate] checks.
type InvalidSnapshotError struct {
	Segment int    // index of the offending segment, -1 if none
	Block   int    // index of the offending block in it, -1 if none
	Event   int    // index of the offending history event, -1 if none
	Reason  string // what is wrong
}

// Error returns "trace: invalid snapshot: " and the detail.
func (e *InvalidSnapshotError) Error() string { return "trace: " + e.detail() }

func (e *InvalidSnapshotError) detail() string {
	s := "invalid snapshot: "
	switch {
	case e.Segment >= 0 && e.Block >= 0:
		s += fmt.Sprintf("segment %d, block %d: ", e.Segment, e.Block)
	case e.Segment >= 0:
		s += fmt.Sprintf("segment %d: ", e.Segment)
	case e.Event >= 0:
		s += fmt.Sprintf("history event %d: ", e.Event)
	}
	return s + e.Reason
}

// Validate checks the rules every reader and writer relies on and returns an
// [*InvalidSnapshotError] for the first one broken:
//   - Device >= 0 and Capacity >= 0; when Capacity > 0, Reserved() <= Capacity;
//   - segments have a positive size, do not wrap around the address space,
//     are sorted by address and do not overlap; Pool is PoolSmall or
//     PoolLarge;
//   - each segment's blocks have a positive size and a known State, are
//     sorted, and tile the segment exactly (no gap, no overlap);
//   - a held block (allocated or pending free) has 0 <= Requested <= Size;
//   - every history event has a valid Action and Size >= 0.
//
// A nil s is invalid too (a device without a caching allocator has no
// snapshot).
func (s *Snapshot) Validate() error {
	bad := func(seg, blk, ev int, format string, args ...any) error {
		return &InvalidSnapshotError{Segment: seg, Block: blk, Event: ev, Reason: fmt.Sprintf(format, args...)}
	}
	if s == nil {
		return bad(-1, -1, -1, "nil snapshot")
	}
	if s.Device < 0 {
		return bad(-1, -1, -1, "negative device %d", s.Device)
	}
	if s.Capacity < 0 {
		return bad(-1, -1, -1, "negative capacity %d", s.Capacity)
	}
	var prevEnd uint64
	var reserved int64
	for i := range s.Segments {
		seg := &s.Segments[i]
		if seg.Size <= 0 {
			return bad(i, -1, -1, "size %d at 0x%x is not positive", seg.Size, seg.Addr)
		}
		end := seg.Addr + uint64(seg.Size)
		if end < seg.Addr {
			return bad(i, -1, -1, "0x%x + %d wraps around the address space", seg.Addr, seg.Size)
		}
		if i > 0 && seg.Addr < prevEnd {
			return bad(i, -1, -1, "at 0x%x starts before the previous segment ends (0x%x): segments must be sorted and disjoint", seg.Addr, prevEnd)
		}
		prevEnd = end
		if seg.Pool != PoolSmall && seg.Pool != PoolLarge {
			return bad(i, -1, -1, "pool %q is neither %q nor %q", seg.Pool, PoolSmall, PoolLarge)
		}
		if reserved > math.MaxInt64-seg.Size {
			return bad(i, -1, -1, "total reserved bytes overflow")
		}
		reserved += seg.Size
		next := seg.Addr
		for j := range seg.Blocks {
			b := &seg.Blocks[j]
			if b.Addr != next {
				return bad(i, j, -1, "starts at 0x%x, want 0x%x: blocks must tile the segment in address order", b.Addr, next)
			}
			if b.Size <= 0 {
				return bad(i, j, -1, "size %d at 0x%x is not positive", b.Size, b.Addr)
			}
			if uint64(b.Size) > end-b.Addr {
				return bad(i, j, -1, "0x%x + %d runs past the segment's end 0x%x", b.Addr, b.Size, end)
			}
			switch b.State {
			case StateActiveAllocated, StateActivePendingFree:
				if b.Requested < 0 || b.Requested > b.Size {
					return bad(i, j, -1, "requested %d bytes of a %d-byte block", b.Requested, b.Size)
				}
			case StateInactive:
			default:
				return bad(i, j, -1, "unknown state %q", b.State)
			}
			next = b.Addr + uint64(b.Size)
		}
		if next != end {
			return bad(i, -1, -1, "blocks cover 0x%x to 0x%x, but the segment ends at 0x%x", seg.Addr, next, end)
		}
	}
	if s.Capacity > 0 && reserved > s.Capacity {
		return bad(-1, -1, -1, "segments reserve %d bytes, more than the capacity %d", reserved, s.Capacity)
	}
	for i := range s.History {
		e := &s.History[i]
		if !e.Action.Valid() {
			return bad(-1, -1, i, "invalid action %d", uint8(e.Action))
		}
		if e.Size < 0 {
			return bad(-1, -1, i, "negative size %d", e.Size)
		}
	}
	return nil
}
