package memory

// blockState says what a block's bytes are doing.
type blockState uint8

const (
	// stateFree: cached, mapped, and in its pool's free tree.
	stateFree blockState = iota
	// stateAllocated: held by a caller.
	stateAllocated
	// statePending: freed by its caller but used on other streams whose
	// events have not completed (PyTorch's active_pending_free).
	statePending
	// stateUnmapped: address space of a virtual segment with no physical
	// memory behind it; in its pool's unmapped tree.
	stateUnmapped
	// stateDead: merged into a neighbour or released with its segment;
	// the struct belongs to no segment any more.
	stateDead
)

func (s blockState) String() string {
	switch s {
	case stateFree:
		return "free"
	case stateAllocated:
		return "allocated"
	case statePending:
		return "pending"
	case stateUnmapped:
		return "unmapped"
	case stateDead:
		return "dead"
	}
	return "invalid"
}

// Block is a piece of device memory handed out by [Allocator.Alloc]. Its
// address, size and stream do not change while it is allocated. After
// [Allocator.Free] the Block must not be used again. The allocator recycles
// Block structs only after thousands of others have been freed, so freeing
// a Block twice panics rather than freeing someone else's memory (unless
// that many frees came in between).
//
// A Block's methods may be called from any goroutine while the caller holds
// the block.
type Block struct {
	addr      uint64
	size      int64 // bytes, after rounding
	requested int64 // bytes the caller asked for (allocated blocks)
	stream    Stream
	seg       *segment
	prev      *Block // neighbour at lower address in seg, nil at its start
	next      *Block // neighbour at higher address, nil at its end
	state     blockState

	left, right, parent *Block // links in its pool's tree (tree.go)
	prio                uint32 // treap priority

	uses    []Stream // other streams the block was used on (RecordStream)
	pending int      // events still outstanding (statePending)
	region  string   // caller's label (allocated blocks)
	pcs     []uintptr
	freedAt uint64 // allocator tick when the block last became free
	// born, dies and role serve policy:vram's lifetime prediction
	// (vrampolicy.go) on allocated blocks: the tick of the allocation,
	// the tick its free is expected at (0 when unknown) and the hash of
	// its request's role.
	born, dies, role uint64
	// unrel is the part of a free block that releasing the cache would
	// keep, as last accounted in the inactive-split statistics.
	unrel int64
	// hc and tc remember mappings (virtual segments) that held the
	// block's first and last bytes, to spare tree lookups on the cached
	// path; either may be stale or hold another byte of the block.
	hc, tc chunkRef
}

// Addr returns the block's device address, 0 for a zero-byte block.
func (b *Block) Addr() uint64 { return b.addr }

// Size returns the block's size in bytes after the allocator's rounding: at
// least [Block.Requested].
func (b *Block) Size() int64 { return b.size }

// Requested returns the byte count asked of [Allocator.Alloc].
func (b *Block) Requested() int64 { return b.requested }

// Stream returns the stream the block was allocated on.
func (b *Block) Stream() Stream { return b.stream }

// Region returns the region label given to [Allocator.Alloc].
func (b *Block) Region() string { return b.region }

// end returns the first address after the block.
func (b *Block) end() uint64 { return b.addr + uint64(b.size) }

// isSplit reports whether the block shares its segment with other blocks
// (PyTorch's Block::is_split).
func (b *Block) isSplit() bool { return b.prev != nil || b.next != nil }

// blockQuarantine is how many dead Block structs wait before one is
// reused: recycling keeps the cached path free of heap allocations (and so
// of garbage-collector work), and the wait makes a double Free of a
// recently freed block fail loudly instead of hitting a new owner.
const blockQuarantine = 4096

// blockCache makes and recycles Block structs. It is guarded by the
// allocator's lock.
type blockCache struct {
	ring [blockQuarantine]*Block
	head int // oldest entry
	n    int // entries
}

// get returns a zeroed Block, recycled once the quarantine is full.
func (c *blockCache) get() *Block {
	if c.n < blockQuarantine {
		return new(Block)
	}
	b := c.ring[c.head]
	c.ring[c.head] = nil
	c.head = (c.head + 1) % blockQuarantine
	c.n--
	*b = Block{}
	return b
}

// kill marks b dead, unlinks it, and queues it for reuse.
func (c *blockCache) kill(b *Block) {
	b.state = stateDead
	b.prev, b.next, b.seg = nil, nil, nil
	b.left, b.right, b.parent = nil, nil, nil
	b.uses, b.pcs, b.region = nil, nil, ""
	if c.n == blockQuarantine {
		c.head = (c.head + 1) % blockQuarantine // drop the oldest to the GC
		c.n--
	}
	c.ring[(c.head+c.n)%blockQuarantine] = b
	c.n++
}

// newBlock returns a block with the given fields, for a new segment.
func (c *blockCache) newBlock(addr uint64, size int64, stream Stream, seg *segment, state blockState) *Block {
	b := c.get()
	b.addr, b.size, b.stream, b.seg, b.state = addr, size, stream, seg, state
	return b
}

// splitOff cuts b at offset n: b keeps [addr, addr+n) and the returned new
// block, in the same state, takes the rest. Pools and stats are the
// caller's business.
func (c *blockCache) splitOff(b *Block, n int64) *Block {
	rest := c.newBlock(b.addr+uint64(n), b.size-n, b.stream, b.seg, b.state)
	rest.prev, rest.next, rest.freedAt = b, b.next, b.freedAt
	rest.hc, rest.tc = b.hc, b.tc
	if b.next != nil {
		b.next.prev = rest
	}
	b.next = rest
	b.size = n
	return rest
}

// cutFront cuts b at offset n: a new block, in b's state, takes
// [addr, addr+n) and is returned; b keeps the rest. Pools and stats are the
// caller's business.
func (c *blockCache) cutFront(b *Block, n int64) *Block {
	f := c.newBlock(b.addr, n, b.stream, b.seg, b.state)
	f.prev, f.next, f.freedAt = b.prev, b, b.freedAt
	f.hc, f.tc = b.hc, b.tc
	if b.prev != nil {
		b.prev.next = f
	} else {
		b.seg.first = f
	}
	b.prev = f
	b.addr += uint64(n)
	b.size -= n
	return f
}

// replace puts a new struct in old's place in its segment and kills old,
// so that a caller still holding old cannot reach the memory.
func (c *blockCache) replace(old *Block) *Block {
	b := c.newBlock(old.addr, old.size, old.stream, old.seg, old.state)
	b.prev, b.next, b.freedAt = old.prev, old.next, old.freedAt
	b.hc, b.tc = old.hc, old.tc
	if b.prev != nil {
		b.prev.next = b
	} else {
		b.seg.first = b
	}
	if b.next != nil {
		b.next.prev = b
	}
	c.kill(old)
	return b
}

// absorbNext merges b.next into b and kills the neighbour. Pools and stats
// are the caller's business.
func (c *blockCache) absorbNext(b *Block) {
	n := b.next
	b.size += n.size
	b.next = n.next
	if n.next != nil {
		n.next.prev = b
	}
	b.freedAt = max(b.freedAt, n.freedAt)
	b.tc = n.tc
	c.kill(n)
}

// absorbPrev merges b.prev into b (b keeps its struct and takes the lower
// address) and kills the neighbour. Pools and stats are the caller's
// business.
func (c *blockCache) absorbPrev(b *Block) {
	p := b.prev
	b.addr = p.addr
	b.size += p.size
	b.prev = p.prev
	if p.prev != nil {
		p.prev.next = b
	} else {
		b.seg.first = b
	}
	b.freedAt = max(b.freedAt, p.freedAt)
	b.hc = p.hc
	c.kill(p)
}
