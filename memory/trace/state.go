package trace

import (
	"fmt"
	"sort"
)

// StartsEmpty reports whether history can be the complete history of an
// allocator that started empty and ended holding segments (nil if unknown).
// It is false, meaning the history is truncated, when any of these holds:
//   - a free_requested or free_completed names an address that no earlier
//     alloc in history handed out (or that was already freed);
//   - an alloc lands on an address that is still held, or outside every
//     segment that history allocated or mapped (checked only when history
//     has segment events or segments is not nil);
//   - a segment_free or segment_unmap releases memory that history never
//     allocated or mapped;
//   - segments, at the end, holds memory that history never allocated or
//     mapped.
//
// Readers use it to set [Snapshot.Truncated]; for a text trace, which has
// no segments, call StartsEmpty(events, nil). [StartChecker] decides the
// same for a history read as a stream.
func StartsEmpty(history []Event, segments []Segment) bool {
	c := NewStartChecker(segments)
	for i := range history {
		if c.Add(&history[i]); c.truncated {
			return false
		}
	}
	return c.StartsEmpty()
}

// intervals is a set of disjoint, sorted, non-adjacent address ranges.
type intervals []span

type span struct{ lo, hi uint64 } // [lo, hi)

// add inserts [addr, addr+size); it fails if that overlaps the set or wraps.
func (s *intervals) add(addr uint64, size int64) bool {
	lo, hi := addr, addr+uint64(size)
	if hi <= lo {
		return false
	}
	v := *s
	i := sort.Search(len(v), func(i int) bool { return v[i].hi >= lo })
	if i < len(v) && v[i].lo < hi && v[i].hi > lo {
		return false // overlap
	}
	if i+1 < len(v) && v[i+1].lo < hi {
		return false
	}
	// Merge with a left neighbour ending at lo and a right one starting at hi.
	if i < len(v) && v[i].hi == lo {
		v[i].hi = hi
		if i+1 < len(v) && v[i+1].lo == hi {
			v[i].hi = v[i+1].hi
			v = append(v[:i+1], v[i+2:]...)
		}
		*s = v
		return true
	}
	if i < len(v) && v[i].lo == hi {
		v[i].lo = lo
		*s = v
		return true
	}
	v = append(v, span{})
	copy(v[i+1:], v[i:])
	v[i] = span{lo, hi}
	*s = v
	return true
}

// covers reports whether [addr, addr+size) lies inside one range of the set.
func (s intervals) covers(addr uint64, size int64) bool {
	lo, hi := addr, addr+uint64(size)
	if hi < lo {
		return false
	}
	i := sort.Search(len(s), func(i int) bool { return s[i].hi > lo })
	return i < len(s) && s[i].lo <= lo && hi <= s[i].hi
}

// remove deletes [addr, addr+size), which must be covered.
func (s *intervals) remove(addr uint64, size int64) bool {
	if !s.covers(addr, size) {
		return false
	}
	lo, hi := addr, addr+uint64(size)
	v := *s
	i := sort.Search(len(v), func(i int) bool { return v[i].hi > lo })
	r := v[i]
	switch {
	case r.lo == lo && r.hi == hi:
		v = append(v[:i], v[i+1:]...)
	case r.lo == lo:
		v[i].lo = hi
	case r.hi == hi:
		v[i].hi = lo
	default:
		v = append(v, span{})
		copy(v[i+2:], v[i+1:])
		v[i] = span{r.lo, lo}
		v[i+1] = span{hi, r.hi}
	}
	*s = v
	return true
}

// StateAt returns the blocks held (allocated, or freed but pending) just
// before s.History[n], sorted by address: StateAt(s, len(s.History)) is the
// snapshot's own held blocks, and StateAt(s, 0) is where a replay of a
// truncated history must start instead of from an empty allocator.
//
// It starts from the snapshot's segments and undoes history events from the
// newest back to n: an alloc removes its block, a free_requested makes it
// allocated again, and a free_completed brings back a block pending free.
// A block that exists in the snapshot keeps its rounded Size, Region and
// Frames; a block known only from history has Size equal to Requested (the
// history does not record rounding) and the Frames of its alloc event when
// history has it, else none. Segment events, oom and snapshot do not change
// the held blocks.
//
// It fails if n is out of range, or, with an [*InvalidSnapshotError], for a
// nil s or if the
// history contradicts the segments (an alloc of a block that is not held
// after it, a free_requested of a block that is not pending free after it,
// a free_completed at an address held after it); such a snapshot was not
// taken from one allocator in one go.
func StateAt(s *Snapshot, n int) ([]Block, error) {
	if s == nil {
		return nil, &InvalidSnapshotError{Segment: -1, Block: -1, Event: -1, Reason: "nil snapshot"}
	}
	if n < 0 || n > len(s.History) {
		return nil, fmt.Errorf("trace: StateAt: event %d out of range [0, %d]", n, len(s.History))
	}
	held := make(map[uint64]Block)
	for i := range s.Segments {
		for _, b := range s.Segments[i].Blocks {
			if b.State == StateActiveAllocated || b.State == StateActivePendingFree {
				held[b.Addr] = b
			}
		}
	}
	// allocOf[i] is, for a free_completed at i, the index of the alloc
	// that produced its block, or -1: the frames of blocks brought back by
	// undoing a free come from there.
	allocOf := make([]int, len(s.History))
	lastAlloc := make(map[uint64]int)
	for i := range s.History {
		e := &s.History[i]
		allocOf[i] = -1
		switch e.Action {
		case ActionAlloc:
			lastAlloc[e.Addr] = i
		case ActionFreeCompleted:
			if j, ok := lastAlloc[e.Addr]; ok {
				allocOf[i] = j
				delete(lastAlloc, e.Addr)
			}
		}
	}
	contradiction := func(i int, format string, args ...any) error {
		return &InvalidSnapshotError{Segment: -1, Block: -1, Event: i,
			Reason: fmt.Sprintf("history contradicts the segments: "+format, args...)}
	}
	for i := len(s.History) - 1; i >= n; i-- {
		e := &s.History[i]
		switch e.Action {
		case ActionAlloc:
			if _, ok := held[e.Addr]; !ok {
				return nil, contradiction(i, "alloc at 0x%x, but no block is held there after it", e.Addr)
			}
			delete(held, e.Addr)
		case ActionFreeRequested:
			b, ok := held[e.Addr]
			if !ok || b.State != StateActivePendingFree {
				return nil, contradiction(i, "free_requested at 0x%x, but no block is pending free there after it", e.Addr)
			}
			b.State = StateActiveAllocated
			held[e.Addr] = b
		case ActionFreeCompleted:
			if _, ok := held[e.Addr]; ok {
				return nil, contradiction(i, "free_completed at 0x%x, but a block is held there after it", e.Addr)
			}
			b := Block{Addr: e.Addr, Size: e.Size, Requested: e.Size, State: StateActivePendingFree}
			if j := allocOf[i]; j >= 0 {
				b.Frames, b.Region = s.History[j].Frames, s.History[j].Region
			}
			held[e.Addr] = b
		}
	}
	out := make([]Block, 0, len(held))
	for _, b := range held {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out, nil
}
