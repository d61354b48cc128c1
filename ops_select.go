package vram

import (
	"math"
	"slices"
)

// Diagonal returns the view of t's diagonal in the plane of dims dim1 and
// dim2 (torch.diagonal): those two dimensions are removed and one of the
// diagonal's length appended. offset 0 is the main diagonal, a positive
// offset one above it (toward larger dim2 indices) and a negative one below;
// an offset past the edge gives an empty diagonal. Writes to t show through
// it, and gradients flow back to the diagonal's positions. It panics with
// [ErrIndex] for a dimension out of range and with [ErrArgument] when dim1
// and dim2 are the same dimension.
func (t *Tensor) Diagonal(offset, dim1, dim2 int) *Tensor {
	const op = "diagonal"
	defer pin(op, t).unpin()
	d1, d2 := t.axis(op, dim1), t.axis(op, dim2)
	if d1 == d2 {
		fail(op, ErrArgument, "dim1 and dim2 must be different dimensions, got %d and %d", dim1, dim2)
	}
	shape, strides, off := diagonalLayout(t.shape, t.strides, offset, d1, d2)
	out := t.view(shape, strides, t.offset+off)
	if needsGrad(t) {
		full := slices.Clone(t.shape)
		record(op, out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor {
			z := g.NewZeros(full)
			s, st, o := diagonalLayout(z.shape, z.strides, offset, d1, d2)
			dst := z.view(s, st, z.offset+o)
			check(op, z.ds().bd.Copy(z.ds().stream(), dst.bv(), g.bv()))
			dst.Release()
			return []*Tensor{z}
		})
	}
	return out
}

// diagonalLayout returns the shape, strides and offset (relative to the
// tensor's own) of the diagonal view described at [Tensor.Diagonal].
func diagonalLayout(shape, strides []int, offset, d1, d2 int) ([]int, []int, int) {
	n := 0
	off := 0
	if offset >= 0 {
		n = max(0, min(shape[d1], shape[d2]-offset))
		if n > 0 {
			off = offset * strides[d2]
		}
	} else {
		n = max(0, min(shape[d1]+offset, shape[d2]))
		if n > 0 {
			off = -offset * strides[d1]
		}
	}
	var ns, nst []int
	for i := range shape {
		if i != d1 && i != d2 {
			ns = append(ns, shape[i])
			nst = append(nst, strides[i])
		}
	}
	return append(ns, n), append(nst, strides[d1]+strides[d2]), off
}

// Take returns the elements of t, read as if flattened in row-major order,
// at the positions in index, in index's shape (torch.take). index is int64
// or int32; a negative position counts from the end. Gradients add up at
// repeated positions. It panics with [ErrIndex] for a position outside
// [-n, n) where n is t's number of elements, and with [ErrDType] for another
// index dtype.
func (t *Tensor) Take(index *Tensor) *Tensor {
	const op = "take"
	notNil(op, t, index)
	defer pin(op, t, index).unpin()
	deviceOf(op, t, index)
	if index.dtype != Int64 && index.dtype != Int32 {
		fail(op, ErrDType, "index must be int64 or int32, got %s", index.dtype)
	}
	n := t.NumElements()
	return composed(op, func() *Tensor {
		idx := index.Cast(Int64).Reshape(-1)
		if idx.NumElements() > 0 {
			lo, hi := positionRange(idx)
			if lo < -int64(n) || hi >= int64(n) {
				fail(op, ErrIndex, "positions from %d to %d out of range for a tensor of %d elements", lo, hi, n)
			}
			if lo < 0 {
				idx = Where(idx.LtScalar(0), idx.AddScalar(float64(n)), idx)
			}
		}
		return t.Reshape(-1).IndexSelect(0, idx).Reshape(index.shape...)
	})
}

// positionRange returns the smallest and largest of the positions in idx,
// a non-empty int64 tensor, exactly: Item's float64 would round those
// beyond 2^53. It reads them from the device.
func positionRange(idx *Tensor) (lo, hi int64) {
	return idx.Min().Int64s()[0], idx.Max().Int64s()[0]
}

// MaskedSelect returns the elements of t where mask is true, as a
// 1-dimensional tensor in row-major order (torch.masked_select); t and mask
// broadcast. Gradients flow back to the selected positions. The number of
// elements depends on mask's values, which are read on the host (a
// synchronization on a GPU, as in PyTorch). It panics with [ErrDType] for
// a mask that is not bool and with [ErrShape] when the shapes do not
// broadcast.
func (t *Tensor) MaskedSelect(mask *Tensor) *Tensor {
	const op = "masked_select"
	notNil(op, t, mask)
	defer hostScalars(op, &t, &mask)()
	defer pin(op, t, mask).unpin()
	deviceOf(op, t, mask)
	if mask.dtype != Bool {
		fail(op, ErrDType, "mask must be bool, got %s", mask.dtype)
	}
	shape := broadcastShapes(op, t.shape, mask.shape)
	return composed(op, func() *Tensor {
		m := mask.Expand(shape...).Bools()
		pos := make([]int64, 0, len(m))
		for i, b := range m {
			if b {
				pos = append(pos, int64(i))
			}
		}
		idx := FromSlice(pos, Shape{len(pos)}, t.Device())
		return t.Expand(shape...).Reshape(-1).IndexSelect(0, idx)
	})
}

// IndexAdd returns a copy of t with alpha·source added at the positions in
// index along dim (torch.index_add): source's slice i along dim goes to
// t's slice index[i]; repeated positions add up. index is an int64 or int32
// vector, source has t's shape but for dim, whose size is index's length,
// and t's dtype. A bool t takes source or'd in for any alpha but 0, as
// PyTorch reads alpha as a bool there. Gradients flow to t and source.
// Under [Autocast], 16-bit
// and float32 operands run in float32. It panics with [ErrShape] for
// mismatched shapes, [ErrDType] for other dtypes, [ErrIndex] for a position
// outside [0, t.Size(dim)), and [ErrArgument] for a fractional alpha with
// an integer t.
func (t *Tensor) IndexAdd(dim int, index, source *Tensor, alpha float64) *Tensor {
	const op = "index_add"
	notNil(op, t, index, source)
	defer pin(op, t, index, source).unpin()
	if pa, pb, done := autocastPromote(t, source); done != nil {
		defer done()
		t, source = pa, pb
	}
	deviceOf(op, t, index, source)
	if index.dtype != Int64 && index.dtype != Int32 {
		fail(op, ErrDType, "index must be int64 or int32, got %s", index.dtype)
	}
	if source.dtype != t.dtype {
		fail(op, ErrDType, "source (%s) must have the dtype of the tensor it is added into (%s); Cast it first", source.dtype, t.dtype)
	}
	if len(index.shape) > 1 {
		fail(op, ErrShape, "index must be a vector or 0-dimensional, got shape %v", Shape(index.shape))
	}
	if !t.dtype.IsFloat() && alpha != math.Trunc(alpha) {
		fail(op, ErrArgument, "a fractional alpha %v with a %s tensor", alpha, t.dtype)
	}
	if len(t.shape) == 0 {
		t.scalarAxis(op, dim)
		if len(source.shape) != 0 || index.NumElements() != 1 {
			fail(op, ErrShape, "a 0-dimensional tensor takes a 0-dimensional source and one index, got source %v and %d", Shape(source.shape), index.NumElements())
		}
		return composed(op, func() *Tensor {
			return t.Reshape(1).IndexAdd(0, index.Reshape(1), source.Reshape(1), alpha).Reshape()
		})
	}
	a := t.axis(op, dim)
	k := index.NumElements()
	want := slices.Clone(t.shape)
	want[a] = k
	if !slices.Equal(source.shape, want) {
		fail(op, ErrShape, "source must have shape %v (the input's %v with dimension %d of the index's length %d), got %v",
			Shape(want), Shape(t.shape), dim, k, Shape(source.shape))
	}
	return composed(op, func() *Tensor {
		idx := index.Cast(Int64).Reshape(k)
		if k > 0 {
			if lo, hi := positionRange(idx); lo < 0 || hi >= int64(t.shape[a]) {
				fail(op, ErrIndex, "positions from %d to %d out of range for dimension %d of size %d", lo, hi, dim, t.shape[a])
			}
		}
		view := make([]int, len(t.shape))
		for i := range view {
			view[i] = 1
		}
		view[a] = k
		src := source
		switch {
		case alpha == 1:
		case t.dtype == Bool:
			// As PyTorch reads alpha as a bool: any other whole alpha
			// ors source in as 1 does, and 0 adds nothing.
			if alpha == 0 {
				src = source.LogicalAnd(Scalar(0, Bool))
			}
		default:
			src = source.MulScalar(alpha)
		}
		return t.ScatterAdd(a, idx.Reshape(view...).Expand(want...), src)
	})
}
