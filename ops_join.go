package vram

import (
	"math"
	"slices"

	"github.com/vramgo/vram/backend"
)

// Cat concatenates tensors along dim. They must share a device and agree
// in every other dimension; dtypes are promoted. As in PyTorch, a 1-D
// empty tensor (shape [0]) among tensors of more dimensions is skipped,
// and the result is channels-last when every other input is
// ([Tensor.SuggestMemoryFormat]), row-major otherwise. It panics with
// [ErrShape] naming the first shape that does not fit.
func Cat(ts []*Tensor, dim int) *Tensor {
	if len(ts) == 0 {
		fail("cat", ErrArgument, "expected a non-empty list of tensors")
	}
	ds, held := sameDevice("cat", ts...)
	defer held.unpin()
	// The tensor that sets the shape: the first that is not a skipped
	// empty one.
	ref := ts[0]
	for _, t := range ts {
		if !isLegacyEmpty(t) {
			ref = t
			break
		}
	}
	skipped := func(t *Tensor) bool { return isLegacyEmpty(t) && len(ref.shape) != 1 }
	for i, t := range ts {
		if len(t.shape) == 0 {
			fail("cat", ErrShape, "tensor %d is 0-dimensional and cannot be concatenated; use Stack, or Unsqueeze(0) it first", i)
		}
	}
	a := ref.axis("cat", dim)
	shape := slices.Clone(ref.shape)
	dt := ts[0].dtype
	total := 0
	for i, t := range ts {
		dt = promote(dt, t.dtype)
		if skipped(t) {
			continue
		}
		if len(t.shape) != len(shape) {
			fail("cat", ErrShape, "tensor %d has shape %v, expected %d dimensions like %v", i, Shape(t.shape), len(shape), Shape(ref.shape))
		}
		for d := range shape {
			if d != a && t.shape[d] != shape[d] {
				fail("cat", ErrShape, "tensor %d has shape %v, which differs from %v outside dimension %d", i, Shape(t.shape), Shape(ref.shape), dim)
			}
		}
		if t.shape[a] > math.MaxInt-total {
			fail("cat", ErrShape, "the sizes of dimension %d add up to more than an int can count (at tensor %d of shape %v)", dim, i, Shape(t.shape))
		}
		total += t.shape[a]
	}
	shape[a] = total
	out := newTensorFormat("cat", ds, dt, shape, catFormat(ts, skipped))
	off := 0
	sizes := make([]int, len(ts))
	for i, t := range ts {
		if skipped(t) {
			sizes[i] = -1
			continue
		}
		sizes[i] = t.shape[a]
		dst := out.bv()
		dst.Shape = slices.Clone(shape)
		dst.Shape[a] = t.shape[a]
		dst.Offset += off * out.strides[a]
		check("cat", ds.bd.Copy(ds.stream(), dst, t.bv()))
		off += t.shape[a]
	}
	if needsGrad(ts...) {
		need := make([]bool, len(ts))
		for i, t := range ts {
			need[i] = t.requiresGrad.Load()
		}
		record("cat", out, ts, nil, func(g *Tensor) []*Tensor {
			gs := make([]*Tensor, len(sizes))
			o := 0
			for i, n := range sizes {
				switch {
				case n < 0: // skipped: an empty gradient of its shape
					if need[i] {
						gs[i] = g.NewZeros(Shape{0})
					}
					continue
				case need[i]:
					gs[i] = g.Narrow(a, o, n).Contiguous()
				}
				o += n
			}
			return gs
		})
	}
	return out
}

// catFormat returns the memory format of Cat's result: channels-last when
// every tensor it joins (those not skipped) has strides ordered
// channels-last, as PyTorch's cat keeps it, else row-major.
func catFormat(ts []*Tensor, skipped func(*Tensor) bool) MemoryFormat {
	for _, t := range ts {
		if !skipped(t) && !stridesLikeChannelsLast(t.shape, t.strides) {
			return ContiguousFormat
		}
	}
	return ChannelsLast
}

// isLegacyEmpty reports whether t has shape [0], which Cat skips among
// tensors of more dimensions.
func isLegacyEmpty(t *Tensor) bool { return t != nil && len(t.shape) == 1 && t.shape[0] == 0 }

// Stack joins tensors of equal shape along a new dimension dim.
func Stack(ts []*Tensor, dim int) *Tensor {
	if len(ts) == 0 {
		fail("stack", ErrArgument, "expected a non-empty list of tensors")
	}
	defer asOp("stack")
	defer pin("stack", ts...).unpin()
	for i, t := range ts {
		if !slices.Equal(t.shape, ts[0].shape) {
			fail("stack", ErrShape, "tensor %d has shape %v, expected %v", i, Shape(t.shape), Shape(ts[0].shape))
		}
	}
	us := make([]*Tensor, len(ts))
	defer func() {
		for _, u := range us {
			u.Release()
		}
	}()
	for i, t := range ts {
		us[i] = t.Unsqueeze(dim)
	}
	return Cat(us, dim)
}

// Repeat returns t repeated reps[i] times along each dimension i, in new
// storage (torch.Tensor.repeat): a [2, 3] t with reps (2, 1, 2) gives
// shape [2, 2, 6]. reps must have at least t's number of dimensions;
// extra leading ones add dimensions. Gradients flow back, summed over
// the copies. It panics with [ErrArgument] for fewer reps than
// dimensions or a negative rep, and with [ErrShape] for a result too
// large for any tensor.
func (t *Tensor) Repeat(reps ...int) *Tensor {
	const op = "repeat"
	defer asOp(op)
	defer pin(op, t).unpin()
	if len(reps) < len(t.shape) {
		fail(op, ErrArgument, "%d repeats for a tensor of %d dimensions (shape %v): give at least one per dimension",
			len(reps), len(t.shape), Shape(t.shape))
	}
	for _, r := range reps {
		if r < 0 {
			fail(op, ErrArgument, "repeats %v must be at least 0", reps)
		}
	}
	lead := len(reps) - len(t.shape)
	padded := append(slices.Repeat([]int{1}, lead), t.shape...)
	// View t as [1, p0, 1, p1, ...], expand that to [r0, p0, r1, p1, ...]
	// and merge each pair, which copies.
	pairs := make([]int, 0, 2*len(reps))
	grown := make([]int, 0, 2*len(reps))
	shape := make([]int, len(reps))
	for i, r := range reps {
		pairs = append(pairs, 1, padded[i])
		grown = append(grown, r, padded[i])
		if padded[i] != 0 && r > math.MaxInt/padded[i] {
			fail(op, ErrShape, "repeating shape %v by %v gives a tensor too large for any device: %d repeats of size %d are more than an int counts",
				Shape(t.shape), reps, r, padded[i])
		}
		shape[i] = r * padded[i]
	}
	if slices.Contains(shape, 0) {
		// Nothing to copy. The expanded view below may hold more
		// elements than an int counts where the result, as PyTorch's,
		// is an empty tensor ([0, 3] repeated 2^62 times along its
		// first dimension).
		checkShape(op, shape, t.dtype)
		out := newTensor(op, t.ds(), t.dtype, shape)
		if needsGrad(t) {
			orig := slices.Clone(t.shape)
			record(op, out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.NewZeros(orig)} })
		}
		return out
	}
	if _, _, err := backend.CheckShape(grown, t.dtype.Size()); err != nil {
		fail(op, ErrShape, "repeating shape %v by %v gives a tensor too large for any device: %v", Shape(t.shape), reps, err)
	}
	v := t.Reshape(pairs...)
	defer v.Release()
	e := v.Expand(grown...)
	defer e.Release()
	// Always new storage, as in PyTorch, even where a view could show
	// the result (nothing to repeat, or one element repeated).
	c := e.copyInto(op, newTensor(op, t.ds(), t.dtype, grown))
	defer c.Release()
	return c.Reshape(shape...)
}

// Tile is Repeat that also takes fewer reps than dimensions, as
// torch.tile: missing leading reps count as 1, so a [2, 3] t with reps
// (2) gives shape [2, 6].
func (t *Tensor) Tile(reps ...int) *Tensor {
	const op = "tile"
	defer asOp(op)
	t.live(op)
	if n := len(t.shape) - len(reps); n > 0 {
		reps = append(slices.Repeat([]int{1}, n), reps...)
	}
	return t.Repeat(reps...)
}
