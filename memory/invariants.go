package memory

import (
	"fmt"
	"sort"
)

// checkInvariants verifies the allocator's internal consistency and returns
// the first violation found: segments do not overlap; blocks tile their
// segments with consistent links; no two free (or two unmapped) blocks are
// neighbours; unmapped blocks are granule-aligned and the mappings tile
// exactly the mapped parts of virtual segments; the pools hold exactly the
// free and unmapped blocks; pending blocks match the pending events; and
// every statistic's current value equals its sum over blocks and segments.
// Tests call it after every step; it takes the lock.
func (a *Allocator) checkInvariants() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var want Stats
	segs := make([]*segment, 0, len(a.segs))
	for addr, seg := range a.segs {
		if addr != seg.addr {
			return fmt.Errorf("segment at 0x%x filed under 0x%x", seg.addr, addr)
		}
		segs = append(segs, seg)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].addr < segs[j].addr })
	nFree, nUnmapped, nChunks := 0, 0, 0
	pendingBlocks := map[*Block]int{}
	for i, seg := range segs {
		if i > 0 && segs[i-1].end() > seg.addr {
			return fmt.Errorf("segments at 0x%x and 0x%x overlap", segs[i-1].addr, seg.addr)
		}
		if seg.owner != a {
			return fmt.Errorf("segment 0x%x has another owner", seg.addr)
		}
		want.Segment.update(seg.kind, 1)
		want.ReservedBytes.update(seg.kind, seg.mapped)
		if !seg.virtual && seg.size >= a.cfg.maxSplitSize() {
			want.OversizeSegments.update(1)
		}
		if seg.first == nil || seg.first.prev != nil || seg.first.addr != seg.addr {
			return fmt.Errorf("segment 0x%x: bad first block", seg.addr)
		}
		var mapped int64
		var prev *Block
		at := seg.addr
		for b := seg.first; b != nil; b = b.next {
			switch {
			case b.seg != seg:
				return fmt.Errorf("block 0x%x: wrong segment", b.addr)
			case b.prev != prev:
				return fmt.Errorf("block 0x%x: broken prev link", b.addr)
			case b.addr != at:
				return fmt.Errorf("block 0x%x in segment 0x%x: want address 0x%x (gap or overlap)", b.addr, seg.addr, at)
			case b.size <= 0 || b.size%kMinBlockSize != 0:
				return fmt.Errorf("block 0x%x: size %d", b.addr, b.size)
			case b.stream != seg.stream:
				return fmt.Errorf("block 0x%x: stream %d in a segment of stream %d", b.addr, b.stream, seg.stream)
			case b.state == stateDead:
				return fmt.Errorf("block 0x%x: dead block in a segment", b.addr)
			}
			if prev != nil && prev.state == b.state && (b.state == stateFree || b.state == stateUnmapped) {
				return fmt.Errorf("blocks 0x%x and 0x%x: neighbours both %s, not merged", prev.addr, b.addr, b.state)
			}
			switch b.state {
			case stateFree:
				nFree++
				if !a.pools[seg.kind].free.contains(b) {
					return fmt.Errorf("free block 0x%x missing from its pool", b.addr)
				}
			case stateUnmapped:
				nUnmapped++
				if !seg.virtual {
					return fmt.Errorf("unmapped block 0x%x in a fixed segment", b.addr)
				}
				if (b.addr-seg.addr)%uint64(a.gran) != 0 || b.size%a.gran != 0 {
					return fmt.Errorf("unmapped block 0x%x+%d not aligned to the granularity", b.addr, b.size)
				}
				if !a.pools[seg.kind].unmapped.contains(b) {
					return fmt.Errorf("unmapped block 0x%x missing from its pool", b.addr)
				}
			case stateAllocated:
				if b.requested < 0 || b.requested > b.size {
					return fmt.Errorf("block 0x%x: requested %d of %d", b.addr, b.requested, b.size)
				}
				if b.size >= a.cfg.maxSplitSize() {
					want.OversizeAllocations.update(1)
				}
			case statePending:
				pendingBlocks[b] = b.pending
			}
			if b.state != stateUnmapped {
				mapped += b.size
			}
			want.addBlock(b)
			prev, at = b, b.end()
		}
		if at != seg.end() {
			return fmt.Errorf("segment 0x%x: blocks end at 0x%x, segment at 0x%x", seg.addr, at, seg.end())
		}
		if mapped != seg.mapped {
			return fmt.Errorf("segment 0x%x: blocks map %d bytes, segment says %d", seg.addr, mapped, seg.mapped)
		}
		if seg.virtual {
			n, err := a.checkChunks(seg)
			if err != nil {
				return err
			}
			nChunks += n
		} else if seg.mapped != seg.size {
			return fmt.Errorf("fixed segment 0x%x: %d of %d bytes mapped", seg.addr, seg.mapped, seg.size)
		}
		a.addInactiveSplit(&want, seg)
	}
	if nChunks != a.chunks.Len() {
		return fmt.Errorf("%d mappings recorded, %d inside segments", a.chunks.Len(), nChunks)
	}
	for _, p := range a.pools {
		if err := p.free.check(); err != nil {
			return fmt.Errorf("%s pool, free blocks: %v", p.kind, err)
		}
		if err := p.unmapped.check(); err != nil {
			return fmt.Errorf("%s pool, unmapped blocks: %v", p.kind, err)
		}
	}
	if n := a.pools[0].free.Len() + a.pools[1].free.Len(); n != nFree {
		return fmt.Errorf("pools hold %d free blocks, segments %d", n, nFree)
	}
	if n := a.pools[0].unmapped.Len() + a.pools[1].unmapped.Len(); n != nUnmapped {
		return fmt.Errorf("pools hold %d unmapped blocks, segments %d", n, nUnmapped)
	}
	for _, pe := range a.pendingEvents {
		pendingBlocks[pe.b]--
	}
	for b, n := range pendingBlocks {
		if n != 0 || b.pending <= 0 {
			return fmt.Errorf("pending block 0x%x: %d events recorded, %d more than queued", b.addr, b.pending, n)
		}
	}
	got := &a.stats
	for i, f := range want.families() {
		g := got.families()[i]
		for k := range f.a {
			if f.a[k].Current != g.a[k].Current {
				return fmt.Errorf("stat %s.%s: current %d, blocks say %d", f.name, statNames[k], g.a[k].Current, f.a[k].Current)
			}
			if g.a[k].Peak < g.a[k].Current {
				return fmt.Errorf("stat %s.%s: peak %d below current %d", f.name, statNames[k], g.a[k].Peak, g.a[k].Current)
			}
		}
	}
	for i, f := range want.singles() {
		g := got.singles()[i]
		if f.s.Current != g.s.Current || g.s.Peak < g.s.Current {
			return fmt.Errorf("stat %s: current %d (peak %d), blocks say %d", f.name, g.s.Current, g.s.Peak, f.s.Current)
		}
	}
	return nil
}

// addBlock adds b's contribution to s as account does, for the check.
func (s *Stats) addBlock(b *Block) {
	k := b.seg.kind
	switch b.state {
	case stateAllocated:
		s.Allocation.update(k, 1)
		s.AllocatedBytes.update(k, b.size)
		s.RequestedBytes.update(k, b.requested)
		s.Active.update(k, 1)
		s.ActiveBytes.update(k, b.size)
	case statePending:
		s.Active.update(k, 1)
		s.ActiveBytes.update(k, b.size)
	}
}

// addInactiveSplit adds seg's inactive split memory to s, computed from
// its definition rather than as account does: the free bytes in units of
// release (the whole of a fixed segment; each mapping of a virtual one)
// that are not wholly free, and the number of free blocks holding such
// bytes.
func (a *Allocator) addInactiveSplit(s *Stats, seg *segment) {
	var units []chunk
	if seg.virtual {
		a.chunks.AscendRange(chunk{addr: seg.addr}, chunk{addr: seg.end()}, func(c chunk) bool {
			units = append(units, c)
			return true
		})
	} else {
		units = []chunk{{seg.addr, seg.size}}
	}
	counted := map[*Block]bool{}
	b := seg.first
	for _, u := range units {
		lo, hi := u.addr, u.addr+uint64(u.size)
		for b != nil && b.end() <= lo {
			b = b.next
		}
		whole := true
		for c := b; c != nil && c.addr < hi; c = c.next {
			whole = whole && c.state == stateFree
		}
		if whole {
			continue
		}
		for c := b; c != nil && c.addr < hi; c = c.next {
			if c.state != stateFree {
				continue
			}
			s.InactiveSplitBytes.update(seg.kind, int64(min(c.end(), hi)-max(c.addr, lo)))
			if !counted[c] {
				counted[c] = true
				s.InactiveSplit.update(seg.kind, 1)
			}
		}
	}
}

// checkChunks verifies that the mappings inside seg tile exactly its mapped
// ranges and returns how many there are.
func (a *Allocator) checkChunks(seg *segment) (int, error) {
	var chunks []chunk
	a.chunks.AscendRange(chunk{addr: seg.addr}, chunk{addr: seg.end()}, func(c chunk) bool {
		chunks = append(chunks, c)
		return true
	})
	i := 0
	for b := seg.first; b != nil; {
		if b.state == stateUnmapped {
			b = b.next
			continue
		}
		lo := b.addr
		for b != nil && b.state != stateUnmapped {
			b = b.next
		}
		hi := seg.end()
		if b != nil {
			hi = b.addr
		}
		for at := lo; at < hi; {
			if i >= len(chunks) || chunks[i].addr != at {
				return 0, fmt.Errorf("segment 0x%x: no mapping starts at 0x%x inside mapped range [0x%x, 0x%x)", seg.addr, at, lo, hi)
			}
			at += uint64(chunks[i].size)
			i++
			if at > hi {
				return 0, fmt.Errorf("segment 0x%x: mapping ends at 0x%x past mapped range end 0x%x", seg.addr, at, hi)
			}
		}
	}
	if i != len(chunks) {
		return 0, fmt.Errorf("segment 0x%x: %d mappings outside mapped ranges", seg.addr, len(chunks)-i)
	}
	return len(chunks), nil
}
