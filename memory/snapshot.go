package memory

import (
	"sort"

	"github.com/vramgo/vram/memory/trace"
)

// Snapshot returns the allocator's state: its segments with their blocks
// (state, requested size, region, allocation stack) and, when history is on,
// the recorded events, as a [trace.Snapshot] that package trace writes as
// vram JSON (torch.cuda.memory._snapshot). A virtual segment appears as one
// trace.Segment per contiguous mapped range, as PyTorch reports expandable
// segments. The result shares nothing with the allocator.
func (a *Allocator) Snapshot() *trace.Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.snapshotLocked()
}

// snapshotLocked is Snapshot with the lock held.
func (a *Allocator) snapshotLocked() *trace.Snapshot {
	s := &trace.Snapshot{
		Device:   a.device,
		Capacity: a.arena.Capacity(),
		Config:   a.configLocked().String(),
		Meta:     map[string]string{trace.MetaSource: "vram", "vram.policy": a.effectivePolicy()},
	}
	var sym symbolizer
	segs := make([]*segment, 0, len(a.segs))
	for _, seg := range a.segs {
		segs = append(segs, seg)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].addr < segs[j].addr })
	for _, seg := range segs {
		var cur *trace.Segment
		for b := seg.first; b != nil; b = b.next {
			if b.state == stateUnmapped {
				cur = nil
				continue
			}
			if cur == nil {
				s.Segments = append(s.Segments, trace.Segment{
					Addr: b.addr, Stream: uint64(seg.stream), Pool: poolName(seg.kind), Expandable: seg.virtual,
				})
				cur = &s.Segments[len(s.Segments)-1]
			}
			cur.Size += b.size
			cur.Blocks = append(cur.Blocks, snapshotBlock(b, &sym))
		}
	}
	if a.hist != nil {
		s.History = a.hist.events(&sym)
		s.Truncated = a.hist.dropped
	} else {
		s.Truncated = a.tick != 0 || len(a.segs) != 0
	}
	return s
}

// effectivePolicy names the policy in force: the configured one, or the
// fallback when the arena has no virtual memory.
func (a *Allocator) effectivePolicy() string {
	switch a.mode {
	case modeVRAM:
		return "vram"
	case modeExpandable:
		return "pytorch+expandable_segments"
	}
	if a.cfg.Policy == PolicyVRAM {
		return "pytorch (vram's fallback without virtual memory)"
	}
	return "pytorch"
}

func poolName(k poolKind) string {
	if k == poolSmall {
		return trace.PoolSmall
	}
	return trace.PoolLarge
}

func snapshotBlock(b *Block, sym *symbolizer) trace.Block {
	tb := trace.Block{Addr: b.addr, Size: b.size}
	switch b.state {
	case stateAllocated:
		tb.State = trace.StateActiveAllocated
	case statePending:
		tb.State = trace.StateActivePendingFree
	default:
		tb.State = trace.StateInactive
	}
	if b.state == stateAllocated || b.state == statePending {
		tb.Requested = b.requested
		tb.Region = b.region
		tb.Frames = sym.frames(b.pcs)
	}
	return tb
}
