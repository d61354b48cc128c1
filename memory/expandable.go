package memory

// Virtual segments and PyTorch's expandable segments.
//
// A virtual segment is an address range reserved from a VirtualArena, far
// larger than the memory behind it. Its blocks tile the whole range: free
// and allocated blocks where memory is mapped, unmapped blocks (kept in the
// pool's unmapped tree) where it is not. Unmapped blocks always start and
// end on granule boundaries; every granule that a free or allocated block
// touches is mapped. Physical memory comes in mappings ("chunks"), each one
// VirtualArena.Map call; a chunk is only ever unmapped whole, so the
// allocator remembers every chunk (Allocator.chunks) and can give back only
// the chunks lying entirely inside free blocks.
//
// Under policy:pytorch with expandable_segments:True the allocator follows
// PyTorch's Note [Expandable Segments]: one virtual segment per stream and
// pool kind, 9/8 of the device's capacity in size, grown at its end in units
// of the pool's segment size (kSmallBuffer or kLargeBuffer), one chunk per
// unit; a request that no free block fits goes to the lowest unmapped block
// of its stream that, with the free block before it, spans enough address
// space; EmptyCache unmaps the whole units inside free blocks. Each unit is
// one mapping; the units of one growth are mapped with one
// [RangeMapper.MapRange] where the arena has it, one cuMemSetAccess for
// the range as PyTorch does. vram's policy (vrampolicy.go) uses the same
// machinery with other choices.

import (
	"github.com/google/btree"

	"github.com/vramgo/vram/memory/trace"
)

// expandableSpanNum/expandableSpanDen is the address space of one of
// PyTorch's expandable segments as a fraction of the device's capacity: 9/8
// (PyTorch reserves totalGlobalMem + totalGlobalMem/8), so that pages
// unmapped early in the segment can be mapped again at its end; at most
// maxDefaultSpan.
const (
	expandableSpanNum = 9
	expandableSpanDen = 8
)

// maxRunChunks is the most chunks the allocator maps with one
// [RangeMapper.MapRange] call (one cuMemSetAccess).
const maxRunChunks = 64

// chunk is one mapping of a virtual segment: [addr, addr+size).
type chunk struct {
	addr uint64
	size int64
}

// holds reports whether the byte at addr lies in c.
func (c chunk) holds(addr uint64) bool { return addr >= c.addr && addr-c.addr < uint64(c.size) }

// chunkRef is a mapping as it was when the allocator's chunkGen was gen; it
// is current while chunkGen has not changed.
type chunkRef struct {
	chunk
	gen uint64
}

func chunkLess(x, y chunk) bool { return x.addr < y.addr }

func newChunkTree() *btree.BTreeG[chunk] { return btree.NewG(btreeDegree, chunkLess) }

// chunker splits the granule-aligned range [lo, hi) of seg into the chunks
// to map, calling emit for each in address order until emit returns false.
type chunker func(seg *segment, lo, hi uint64, emit func(lo uint64, size int64) bool)

// unitChunker maps one chunk per unit bytes, units counted from the
// segment's base (PyTorch's expandable segments).
func unitChunker(unit int64) chunker {
	return func(seg *segment, lo, hi uint64, emit func(uint64, int64) bool) {
		for ; lo < hi; lo += uint64(unit) {
			if !emit(lo, unit) {
				return
			}
		}
	}
}

// newVirtualSegment reserves size bytes of address space for stream's pool
// p and returns the segment, covered by one unmapped block.
func (a *Allocator) newVirtualSegment(p *pool, stream Stream, size int64) (*segment, error) {
	size = alignUp(size, a.gran)
	base, err := a.varena.Reserve(size)
	if err != nil {
		return nil, err
	}
	seg := &segment{owner: a, addr: base, size: size, stream: stream, kind: p.kind, virtual: true}
	u := a.blocks.newBlock(base, size, stream, seg, stateUnmapped)
	seg.first = u
	a.segs[base] = seg
	a.stats.Segment.update(p.kind, 1)
	p.insertUnmapped(u)
	return seg, nil
}

// releaseVirtualSegment gives back the address space of seg, which must be
// one unmapped block.
func (a *Allocator) releaseVirtualSegment(seg *segment) error {
	if a.keeps(seg) {
		return errKept
	}
	u := seg.first
	if err := a.varena.Unreserve(seg.addr, seg.size); err != nil {
		return err
	}
	a.pools[seg.kind].removeUnmapped(u)
	a.blocks.kill(u)
	delete(a.segs, seg.addr)
	a.stats.Segment.update(seg.kind, -1)
	return nil
}

// mapBlock maps the first length bytes (a multiple of the granularity, at
// most u.size) of the unmapped block u, in the chunks that split chooses,
// and merges them with free neighbours. It returns the resulting free block,
// in its pool and accounted. It is all or nothing: when the limit or the
// arena refuses, chunks mapped by this call are unmapped again and the error
// is returned.
func (a *Allocator) mapBlock(u *Block, length int64, split chunker) (*Block, error) {
	if err := a.checkLimit(length); err != nil {
		return nil, err
	}
	seg := u.seg
	// Chunks go to the arena in runs of at most maxRunChunks, so that a
	// request far beyond the device fails at the first run the arena
	// refuses rather than after listing every chunk it would take.
	var mapped, run []chunk
	var mapErr error
	flush := func() bool {
		if len(run) == 0 {
			return true
		}
		if mapErr = a.arenaMapRange(run); mapErr != nil {
			return false
		}
		mapped = append(mapped, run...)
		run = run[:0]
		return true
	}
	split(seg, u.addr, u.addr+uint64(length), func(lo uint64, size int64) bool {
		run = append(run, chunk{lo, size})
		return len(run) < maxRunChunks || flush()
	})
	if mapErr == nil {
		flush()
	}
	if mapErr != nil {
		for _, c := range mapped {
			a.arenaUnmap(c.addr, c.size) // best effort; the error is the map failure
		}
		return nil, mapErr
	}
	for _, c := range mapped {
		a.chunks.ReplaceOrInsert(c)
		a.chunkGen++
		a.record(trace.ActionSegmentMap, c.addr, c.size, seg.stream, "")
	}
	p := a.pools[seg.kind]
	p.removeUnmapped(u)
	if length < u.size {
		p.insertUnmapped(a.blocks.splitOff(u, length))
	}
	u.state = stateFree
	u.freedAt = a.tick
	if pr := u.prev; pr != nil && pr.state == stateFree {
		p.removeFree(pr)
		a.account(pr, -1)
		a.blocks.absorbPrev(u)
	}
	if nx := u.next; nx != nil && nx.state == stateFree {
		p.removeFree(nx)
		a.account(nx, -1)
		a.blocks.absorbNext(u)
	}
	p.insertFree(u)
	a.account(u, 1)
	seg.mapped += length
	a.addReserved(seg.kind, length)
	return u, nil
}

// hasWholeChunk reports whether a chunk lies entirely inside [lo, hi).
func (a *Allocator) hasWholeChunk(lo, hi uint64) bool {
	found := false
	a.chunks.AscendGreaterOrEqual(chunk{addr: lo}, func(c chunk) bool {
		found = c.addr+uint64(c.size) <= hi
		return false
	})
	return found
}

// unmapFree unmaps the chunks lying entirely inside [lo, hi), a part of the
// free block b of a virtual segment, and returns the bytes given back and
// the free block now holding what was b's below the unmapped part (b itself
// when nothing was unmapped, nil when nothing is left below). The unmapped
// middle becomes an unmapped block (merged with unmapped neighbours); the
// free ends stay free blocks. An arena error stops it after the chunks
// unmapped so far.
func (a *Allocator) unmapFree(b *Block, lo, hi uint64) (int64, *Block) {
	if a.keeps(b.seg) {
		return 0, b
	}
	var inside []chunk
	a.chunks.AscendGreaterOrEqual(chunk{addr: lo}, func(c chunk) bool {
		if c.addr+uint64(c.size) > hi {
			return false
		}
		inside = append(inside, c)
		return true
	})
	if len(inside) == 0 {
		return 0, b
	}
	seg := b.seg
	c0 := inside[0].addr
	c1 := c0
	for _, c := range inside {
		if a.arenaUnmap(c.addr, c.size) != nil {
			break
		}
		a.chunks.Delete(c)
		a.chunkGen++
		a.record(trace.ActionSegmentUnmap, c.addr, c.size, seg.stream, "")
		c1 = c.addr + uint64(c.size)
	}
	if c1 == c0 {
		return 0, b
	}
	n := int64(c1 - c0)
	p := a.pools[seg.kind]
	p.removeFree(b)
	a.account(b, -1)
	var front *Block
	if c0 > b.addr {
		front = a.blocks.cutFront(b, int64(c0-b.addr))
		p.insertFree(front)
		a.account(front, 1)
	}
	if b.end() > c1 {
		rest := a.blocks.splitOff(b, n)
		p.insertFree(rest)
		a.account(rest, 1)
	}
	b.state = stateUnmapped
	b.requested, b.region, b.pcs = 0, "", nil
	p.insertUnmapped(b)
	a.mergeUnmapped(b)
	seg.mapped -= n
	a.addReserved(seg.kind, -n)
	return n, front
}

// mergeUnmapped merges the unmapped block b, in its pool, with unmapped
// neighbours.
func (a *Allocator) mergeUnmapped(b *Block) {
	p := a.pools[b.seg.kind]
	pr, nx := b.prev, b.next
	if (pr == nil || pr.state != stateUnmapped) && (nx == nil || nx.state != stateUnmapped) {
		return
	}
	p.removeUnmapped(b)
	if pr != nil && pr.state == stateUnmapped {
		p.removeUnmapped(pr)
		a.blocks.absorbPrev(b)
	}
	if nx != nil && nx.state == stateUnmapped {
		p.removeUnmapped(nx)
		a.blocks.absorbNext(b)
	}
	p.insertUnmapped(b)
}

// expandableUnit is the mapping unit of PyTorch's expandable segments for a
// pool: its segment size, rounded up to the granularity.
func (a *Allocator) expandableUnit(kind poolKind) int64 {
	if kind == poolSmall {
		return alignUp(kSmallBuffer, a.gran)
	}
	return alignUp(kLargeBuffer, a.gran)
}

// runBytes returns the address space of the run of free and unmapped
// blocks starting at b, counting no further than need.
func runBytes(b *Block, need int64) int64 {
	var n int64
	for ; b != nil && n < need && (b.state == stateFree || b.state == stateUnmapped); b = b.next {
		n += b.size
	}
	return n
}

// growExpandable finds or maps memory for a request of size bytes on stream
// in pool p, as PyTorch's expandable segments do, and returns a free block
// of at least size bytes, in the pool.
func (a *Allocator) growExpandable(p *pool, stream Stream, size int64) (*Block, error) {
	var cand *Block
	for u := p.firstUnmapped(stream); u != nil && u.stream == stream; u = nextIn(u) {
		c := u
		if c.prev != nil && c.prev.state == stateFree {
			c = c.prev
		}
		if runBytes(c, size) >= size {
			cand = c
			break
		}
	}
	if cand == nil {
		span := scaleSpan(a.arena.Capacity(), expandableSpanNum, expandableSpanDen)
		seg, err := a.newVirtualSegment(p, stream, alignUp(max(span, size), a.expandableUnit(p.kind)))
		if err != nil {
			return nil, err
		}
		cand = seg.first
	}
	unit := a.expandableUnit(p.kind)
	split := unitChunker(unit)
	if cand.state == stateUnmapped {
		b, err := a.mapBlock(cand, min(cand.size, alignUp(size, unit)), split)
		if err != nil {
			return nil, err
		}
		cand = b
	}
	for cand.size < size {
		next := cand.next
		b, err := a.mapBlock(next, min(next.size, alignUp(size-cand.size, unit)), split)
		if err != nil {
			return nil, err
		}
		cand = b
	}
	return cand, nil
}

// releaseVirtualFree unmaps every chunk inside the free blocks of virtual
// segments and gives back segments left with nothing mapped.
func (a *Allocator) releaseVirtualFree() {
	var free []*Block
	for _, p := range a.pools {
		p.free.each(func(b *Block) bool {
			if b.seg.virtual {
				free = append(free, b)
			}
			return true
		})
	}
	for _, b := range free {
		a.unmapFree(b, b.addr, b.end())
	}
	var empty []*segment
	for _, seg := range a.segs {
		if seg.virtual && seg.mapped == 0 {
			empty = append(empty, seg)
		}
	}
	for _, seg := range empty {
		a.releaseVirtualSegment(seg) // on failure the segment stays, empty
	}
}
