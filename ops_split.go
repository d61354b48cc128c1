package vram

import "math"

// Chunk splits t into at most chunks views along dim, each of
// ceil(t.Size(dim)/chunks) elements but the last, which may be smaller
// (torch.chunk): a dimension of 5 in 3 chunks gives sizes 2, 2, 1, and one
// of 6 in 4 chunks gives 3 chunks of 2. A dimension of size 0 gives chunks
// empty views. It panics with [ErrArgument] for chunks below 1 or views
// more than one call returns (2^24, see [Tensor.Unbind]), and with
// [ErrIndex] for a dim out of range (a 0-dimensional t has none). The
// caller releases every view.
func (t *Tensor) Chunk(chunks, dim int) []*Tensor {
	const op = "chunk"
	defer asOp(op)
	defer pin(op, t).unpin()
	if chunks < 1 {
		fail(op, ErrArgument, "chunks must be at least 1, got %d", chunks)
	}
	a := t.axis(op, dim)
	n := t.shape[a]
	if n == 0 {
		checkViews(op, chunks, a)
		return t.splitSizes(op, make([]int, chunks), a)
	}
	return t.split(op, (n-1)/chunks+1, a) // ceil(n/chunks), without overflow
}

// Split splits t into views of size elements along dim, the last one
// smaller when size does not divide t.Size(dim) (torch.split with an
// int). A dimension of size 0 gives one empty view. It panics with
// [ErrArgument] for a size below 0, of 0 for a dimension that is not
// empty, or that makes more views than one call returns (2^24, see
// [Tensor.Unbind]), and with [ErrIndex] for a dim out of range. The caller
// releases every view.
func (t *Tensor) Split(size, dim int) []*Tensor {
	const op = "split"
	defer asOp(op)
	defer pin(op, t).unpin()
	return t.split(op, size, t.axis(op, dim))
}

func (t *Tensor) split(op string, size, a int) []*Tensor {
	n := t.shape[a]
	switch {
	case size < 0:
		fail(op, ErrArgument, "split size must be at least 0, got %d", size)
	case size == 0 && n != 0:
		fail(op, ErrArgument, "split size 0 can only split a dimension of size 0, not %d", n)
	}
	parts := 1
	if n > 0 {
		parts = (n-1)/size + 1
	}
	checkViews(op, parts, a)
	sizes := make([]int, parts)
	for i := range sizes {
		sizes[i] = min(size, n-i*size)
	}
	return t.splitSizes(op, sizes, a)
}

// SplitSizes splits t into views along dim with the given sizes, which
// must add up to t.Size(dim) (torch.split with a list). It panics with
// [ErrArgument] for a negative size, sizes that add up to another total
// or more of them than one call returns views (2^24, see
// [Tensor.Unbind]), and with [ErrIndex] for a dim out of range. The caller
// releases every view.
func (t *Tensor) SplitSizes(sizes []int, dim int) []*Tensor {
	const op = "split_with_sizes"
	defer asOp(op)
	defer pin(op, t).unpin()
	a := t.axis(op, dim)
	total := 0
	for _, s := range sizes {
		if s < 0 || s > math.MaxInt-total {
			fail(op, ErrArgument, "split sizes %v must be at least 0 and add up to the size %d of dimension %d", sizes, t.shape[a], dim)
		}
		total += s
	}
	if total != t.shape[a] {
		fail(op, ErrArgument, "split sizes %v add up to %d, not to the size %d of dimension %d", sizes, total, t.shape[a], dim)
	}
	checkViews(op, len(sizes), a)
	return t.splitSizes(op, sizes, a)
}

// splitSizes returns the views of t along axis a of the given sizes,
// which add up to t.shape[a]. If one fails, those made are released.
func (t *Tensor) splitSizes(op string, sizes []int, a int) []*Tensor {
	out := make([]*Tensor, 0, len(sizes))
	ok := false
	defer func() {
		if !ok {
			for _, v := range out {
				v.Release()
			}
		}
	}()
	start := 0
	for _, s := range sizes {
		out = append(out, t.Narrow(a, start, s))
		start += s
	}
	ok = true
	return out
}

// Unbind returns the views t.Select(dim, i) for every i, in order
// (torch.unbind). It panics with [ErrIndex] for a dim out of range (a
// 0-dimensional t has none), and with [ErrArgument] for a dimension of
// more than 2^24 elements: one call returns at most that many views,
// whose bookkeeping alone takes gigabytes of host memory, and an empty
// tensor such as one of shape [2^40, 0] would ask for any number. The
// caller releases every view.
func (t *Tensor) Unbind(dim int) []*Tensor {
	const op = "unbind"
	defer asOp(op)
	defer pin(op, t).unpin()
	a := t.axis(op, dim)
	checkViews(op, t.shape[a], a)
	out := make([]*Tensor, 0, t.shape[a])
	ok := false
	defer func() {
		if !ok {
			for _, v := range out {
				v.Release()
			}
		}
	}()
	for i := range t.shape[a] {
		out = append(out, t.Select(a, i))
	}
	ok = true
	return out
}

// maxViews bounds the views that one call of Chunk, Split, SplitSizes or
// Unbind returns: 2^24 of them take gigabytes of host memory for their
// bookkeeping alone. A count past it is refused before any host slice of
// that length is made, since an empty tensor can ask for any number
// (Unbind of a [2^40, 0] tensor, Chunk of an empty dimension) and Go ends
// a process that asks for more memory than the machine has with a fatal
// error that no recover catches.
const maxViews = 1 << 24

// checkViews panics with ErrArgument, naming op, when n views along
// dimension dim are more than maxViews.
func checkViews(op string, n, dim int) {
	if n > maxViews {
		fail(op, ErrArgument, "%d views along dimension %d are more than the %d that one call returns; "+
			"split into fewer parts, or take the parts needed with Narrow or Select", n, dim, maxViews)
	}
}
