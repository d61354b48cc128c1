package memory

// poolKind says which pool a block belongs to: PyTorch keeps requests up to
// kSmallSize apart from larger ones so that small, often long-lived
// tensors do not split the large segments.
type poolKind uint8

const (
	poolSmall poolKind = 0
	poolLarge poolKind = 1
)

func (k poolKind) String() string {
	if k == poolSmall {
		return "small"
	}
	return "large"
}

// btreeDegree is the degree of the B-tree of mappings (expandable.go): 32
// keeps a node's keys in a few cache lines and the tree shallow.
const btreeDegree = 32

// pool holds the free and the unmapped blocks of one pool kind, for every
// stream.
type pool struct {
	kind     poolKind
	free     blockTree // blocks in stateFree, by (stream, size, addr)
	unmapped blockTree // blocks in stateUnmapped, by (stream, addr)
}

func newPool(kind poolKind) *pool {
	return &pool{
		kind:     kind,
		free:     blockTree{bySize: true, rng: 0x9e3779b97f4a7c15},
		unmapped: blockTree{rng: 0x2545f4914f6cdd1d},
	}
}

func (p *pool) insertFree(b *Block)     { p.free.insert(b) }
func (p *pool) removeFree(b *Block)     { p.free.remove(b) }
func (p *pool) insertUnmapped(b *Block) { p.unmapped.insert(b) }
func (p *pool) removeUnmapped(b *Block) { p.unmapped.remove(b) }

// lowerBound returns the smallest free block of stream with at least size
// bytes, or nil.
func (p *pool) lowerBound(stream Stream, size int64) *Block {
	if b := p.free.seek(stream, size, 0); b != nil && b.stream == stream {
		return b
	}
	return nil
}

// firstUnmapped returns the unmapped block of stream with the lowest
// address, or nil; nextIn walks on (check the stream).
func (p *pool) firstUnmapped(stream Stream) *Block {
	if b := p.unmapped.seek(stream, 0, 0); b != nil && b.stream == stream {
		return b
	}
	return nil
}
