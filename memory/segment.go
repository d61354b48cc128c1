package memory

import "github.com/vramgo/vram/memory/trace"

// segment is a contiguous range of device addresses that one pool of one
// stream carves blocks from. A fixed segment is one Arena.Alloc, all of it
// physical memory. A virtual segment is a range from VirtualArena.Reserve
// whose pieces are mapped and unmapped as needed (expandable.go). Blocks
// tile a segment from first to last, in address order.
type segment struct {
	owner   *Allocator
	addr    uint64
	size    int64 // fixed: bytes allocated; virtual: bytes of address space
	mapped  int64 // physical bytes behind the segment (fixed: size)
	stream  Stream
	kind    poolKind
	virtual bool
	first   *Block
}

func (s *segment) end() uint64 { return s.addr + uint64(s.size) }

// allocSegment takes a fixed segment of size bytes from the arena for
// stream's pool p and returns its single free block, in the pool and
// accounted. It fails with errLimit above the memory limit, or with the
// arena's error.
func (a *Allocator) allocSegment(p *pool, stream Stream, size int64) (*Block, error) {
	if err := a.checkLimit(size); err != nil {
		return nil, err
	}
	addr, err := a.arenaAlloc(size)
	if err != nil {
		return nil, err
	}
	seg := &segment{owner: a, addr: addr, size: size, mapped: size, stream: stream, kind: p.kind}
	b := a.blocks.newBlock(addr, size, stream, seg, stateFree)
	b.freedAt = a.tick
	seg.first = b
	a.segs[addr] = seg
	a.stats.Segment.update(p.kind, 1)
	if size >= a.oversize {
		a.stats.OversizeSegments.inc(1)
	}
	a.addReserved(p.kind, size)
	a.record(trace.ActionSegmentAlloc, addr, size, stream, "")
	p.insertFree(b)
	a.account(b, 1)
	return b, nil
}

// releaseSegment gives the fixed segment whose only block is the free
// block b back to the arena. An arena error leaves everything as it was and
// is returned.
func (a *Allocator) releaseSegment(b *Block) error {
	seg := b.seg
	if a.keeps(seg) {
		return errKept
	}
	if err := a.arenaFree(seg.addr, seg.size); err != nil {
		return err
	}
	p := a.pools[seg.kind]
	p.removeFree(b)
	a.account(b, -1)
	a.blocks.kill(b)
	delete(a.segs, seg.addr)
	a.stats.Segment.update(seg.kind, -1)
	if seg.size >= a.oversize {
		a.stats.OversizeSegments.update(-1)
	}
	a.addReserved(seg.kind, -seg.size)
	a.record(trace.ActionSegmentFree, seg.addr, seg.size, seg.stream, "")
	return nil
}

// releasable reports whether the free block b can be given back to the
// device: it is a whole fixed segment, or a virtual segment's free block
// that contains at least one whole mapping.
func (a *Allocator) releasable(b *Block) bool {
	if !b.seg.virtual {
		return b.prev == nil && b.next == nil
	}
	return a.hasWholeChunk(b.addr, b.end())
}

// release gives back what it can of the free block b: the whole fixed
// segment, or the mappings entirely inside a virtual segment's block. It
// returns the bytes given back. Arena errors stop it; what was released so
// far stays released.
func (a *Allocator) release(b *Block) int64 {
	if !b.seg.virtual {
		if b.prev != nil || b.next != nil {
			return 0
		}
		size := b.seg.size
		if a.releaseSegment(b) != nil {
			return 0
		}
		return size
	}
	n, _ := a.unmapFree(b, b.addr, b.end())
	return n
}
