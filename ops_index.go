package vram

import (
	"slices"

	"github.com/vramgo/vram/backend"
)

// IndexSelect returns the entries of t at the given positions along dim
// (torch.index_select): index is a vector (or a 0-dimensional tensor) of
// int64 or int32 positions, and the result has t's shape with dim's size
// replaced by the number of positions. Repeated positions repeat entries,
// and their gradients add up. It panics with [ErrIndex] for a position
// outside [0, t.Size(dim)) (negative positions are not counted from the
// end, as in PyTorch), with [ErrDType] for another index dtype and with
// [ErrShape] for an index of more than one dimension. A 0-dimensional t
// takes dim 0 or -1 and one position, 0, and gives a 0-dimensional result.
func (t *Tensor) IndexSelect(dim int, index *Tensor) *Tensor {
	const op = "index_select"
	defer asOp(op)
	_, held := sameDevice(op, t, index)
	defer held.unpin()
	a := t.scalarAxis(op, dim)
	if index.dtype != Int64 && index.dtype != Int32 {
		fail(op, ErrDType, "index must be int64 or int32, got %s", index.dtype)
	}
	if len(index.shape) > 1 {
		fail(op, ErrShape, "index must be a vector or 0-dimensional, got shape %v", Shape(index.shape))
	}
	k := index.NumElements()
	idx := castRaw(index, Int64)
	defer idx.Release()
	flat := idx.Reshape(k)
	defer flat.Release()
	if a < 0 {
		if k != 1 {
			fail(op, ErrIndex, "a 0-dimensional tensor takes exactly one index, got %d", k)
		}
		tv := t.Reshape(1)
		defer tv.Release()
		r := tv.Gather(0, flat)
		defer r.Release()
		return r.Reshape()
	}
	shape := slices.Clone(t.shape)
	shape[a] = k
	strides := make([]int, len(shape))
	strides[a] = flat.strides[0]
	ex := flat.view(shape, strides, flat.offset)
	defer ex.Release()
	return t.Gather(a, ex)
}

// checkScatter checks the operands of the scatter ops as PyTorch does and
// returns the resolved axis: t, index and src on one device, index int64,
// src of t's dtype, all three of one rank, index no larger than src in
// any dimension and no larger than t except along dim.
func checkScatter(op string, t *Tensor, dim int, index, src *Tensor) int {
	a := t.axis(op, dim)
	if index.dtype != Int64 {
		fail(op, ErrDType, "index must be int64, got %s", index.dtype)
	}
	if src.dtype != t.dtype {
		fail(op, ErrDType, "src (%s) must have the dtype of the tensor it is scattered into (%s); Cast it first", src.dtype, t.dtype)
	}
	if len(index.shape) != len(t.shape) || len(src.shape) != len(t.shape) {
		fail(op, ErrShape, "index %v, src %v and input %v must have the same number of dimensions",
			Shape(index.shape), Shape(src.shape), Shape(t.shape))
	}
	for i, n := range index.shape {
		if n > src.shape[i] || i != a && n > t.shape[i] {
			fail(op, ErrShape, "index %v is larger than src %v, or than input %v off dimension %d, in dimension %d",
				Shape(index.shape), Shape(src.shape), Shape(t.shape), a, i)
		}
	}
	return a
}

// scatterAddRaw adds src[...i...] into out[...index[...i...]...] along
// axis a, for the window of src that index covers, without recording.
func scatterAddRaw(op string, out, index, src *Tensor, a int) {
	dv := out.bv()
	dv.Shape = slices.Clone(index.shape)
	dv.Shape[a] = out.shape[a]
	sv := src.bv()
	sv.Shape = slices.Clone(index.shape)
	if err := out.ds().bd.ScatterAdd(out.ds().stream(), dv, index.bv(), sv, a); err != nil {
		panic(&Error{Op: op, Kind: ErrIndex, Detail: "bad index", Err: err})
	}
}

// scatterAll turns a scatter op on 0-dimensional operands into one on
// their one-element vectors, through views that record the way back.
func scatterAll(t, index, src *Tensor, f func(t, index, src *Tensor) *Tensor) *Tensor {
	tv, iv, sv := t.Reshape(1), index.Reshape(1), src.Reshape(1)
	defer tv.Release()
	defer iv.Release()
	defer sv.Release()
	r := f(tv, iv, sv)
	defer r.Release()
	return r.Reshape()
}

// srcGrad returns the gradient of src for a scatter along a: g gathered
// at index, placed in the window of src that index covers (zeros
// elsewhere). It runs inside backward's Tidy.
func srcGrad(g, index *Tensor, srcShape []int, a int) *Tensor {
	gi := g.Gather(a, index)
	if slices.Equal(gi.shape, srcShape) {
		return gi
	}
	z := g.NewZeros(srcShape)
	zv := z.bv()
	zv.Shape = slices.Clone(index.shape)
	check("scatter", z.ds().bd.Copy(z.ds().stream(), zv, gi.bv()))
	return z
}

// ScatterAdd returns a copy of t with src added along dim at the positions
// index gives (torch.Tensor.scatter_add): for dim 0,
// out[index[i][j]][j] += src[i][j]. index is int64 with t's number of
// dimensions and no larger than src in any dimension, nor than t except
// along dim; only the part of src that index covers is used. Repeated
// positions add up (bool tensors: logical or). t is left unchanged. It
// panics with [ErrIndex] for a position outside [0, t.Size(dim)), with
// [ErrDType] when index is not int64 or src's dtype is not t's, and with
// [ErrShape] for sizes that break these rules. 0-dimensional operands take
// dim 0 or -1. Inside an [Autocast] region, which puts scatter_add on
// PyTorch's promote list, a float32, float16 or bfloat16 t and src of
// different dtypes are both taken in float32, and so is the result.
func (t *Tensor) ScatterAdd(dim int, index, src *Tensor) *Tensor {
	if a, b, done := autocastPromote(t, src); done != nil {
		defer done()
		return a.scatter("scatter_add", dim, index, b, true, nil)
	}
	return t.scatter("scatter_add", dim, index, src, true, nil)
}

// Scatter returns a copy of t with the elements of src written along dim
// at the positions index gives (torch.Tensor.scatter): for dim 0,
// out[index[i][j]][j] = src[i][j], with ScatterAdd's rules for index and
// src. A position named twice in one scatter is an error of kind
// [ErrIndex] here, where PyTorch picks one of the values arbitrarily; use
// ScatterAdd to combine such values. That check reads one number back
// from the device, so Scatter waits for the work queued before it.
// Positions that receive a value pass no gradient to t.
func (t *Tensor) Scatter(dim int, index, src *Tensor) *Tensor {
	return t.scatter("scatter", dim, index, src, false, nil)
}

// ScatterValue is Scatter with every written element equal to value
// (torch.Tensor.scatter with a scalar), such as 1 for one-hot rows. A
// position named more than once simply gets value, as in PyTorch, so
// multi-hot rows may repeat a label. It panics with [ErrArgument] when
// value does not fit t's dtype.
func (t *Tensor) ScatterValue(dim int, index *Tensor, value float64) *Tensor {
	const op = "scatter"
	defer asOp(op)
	_, held := sameDevice(op, t, index)
	defer held.unpin()
	checkValue(op, value, t.dtype)
	src := newTensor(op, t.ds(), t.dtype, index.shape)
	defer src.Release()
	src.fill(op, value)
	return t.scatter(op, dim, index, src, false, &value)
}

// scatter is ScatterAdd when add is set, else Scatter; value, when not nil,
// is the one value every element of src holds (ScatterValue), so that a
// position named more than once is well defined.
func (t *Tensor) scatter(op string, dim int, index, src *Tensor, add bool, value *float64) *Tensor {
	defer asOp(op)
	ds, held := sameDevice(op, t, index, src)
	defer held.unpin()
	if len(t.shape) == 0 {
		t.scalarAxis(op, dim)
		if len(index.shape) != 0 || len(src.shape) != 0 {
			fail(op, ErrShape, "index %v, src %v and input [] must have the same number of dimensions", Shape(index.shape), Shape(src.shape))
		}
		return scatterAll(t, index, src, func(t, index, src *Tensor) *Tensor { return t.scatter(op, 0, index, src, add, value) })
	}
	a := checkScatter(op, t, dim, index, src)
	out := newTensor(op, ds, t.dtype, t.shape)
	done := false
	defer func() {
		if !done {
			out.Release() // a bad index: nothing is left behind
		}
	}()
	check(op, ds.bd.Copy(ds.stream(), out.bv(), t.bv()))
	var hit *Tensor // where a value was written, for Scatter
	if add {
		scatterAddRaw(op, out, index, src, a)
	} else {
		func() {
			ones := newTensor(op, ds, Int64, index.shape)
			defer ones.Release()
			ones.fill(op, 1)
			count := newTensor(op, ds, Int64, t.shape)
			defer count.Release()
			count.fill(op, 0)
			scatterAddRaw(op, count, index, ones, a)
			if value == nil && index.NumElements() > 0 {
				top := reduceRaw(op, backend.Max, count, t.reduceAxes(op, nil))
				defer top.Release()
				if top.Item() > 1 {
					fail(op, ErrIndex, "index names one position more than once; the result would be undefined (use ScatterAdd to add such values)")
				}
			}
			hit = scalarRaw(op, backend.Gt, count, 0, false)
			// Clear the positions written, then add the values there.
			z := hit.Detach()
			defer z.Release()
			vals := newTensor(op, ds, t.dtype, t.shape)
			defer vals.Release()
			if value != nil {
				vals.fill(op, *value)
			} else {
				vals.fill(op, 0)
				scatterAddRaw(op, vals, index, src, a)
			}
			check(op, ds.bd.Where(ds.stream(), out.bv(), z.bv(), vals.bv(), out.bv()))
		}()
	}
	if needsGrad(t, src) {
		rt, rs := t.requiresGrad.Load(), src.requiresGrad.Load()
		ss := slices.Clone(src.shape)
		sv := save(index)
		if hit != nil {
			sv = append(sv, save(hit)...)
		}
		record(op, out, []*Tensor{t, nil, src}, sv, func(g *Tensor) []*Tensor {
			return []*Tensor{
				gradIf(rt, func() *Tensor {
					if len(sv) == 1 {
						return g.Detach()
					}
					return Where(sv[1], g.NewZeros(nil), g)
				}),
				nil,
				gradIf(rs, func() *Tensor { return srcGrad(g, sv[0], ss, a) }),
			}
		})
	}
	if hit != nil {
		hit.Release()
	}
	done = true
	return out
}

// MaskedFill returns a copy of t with value where mask is true
// (torch.Tensor.masked_fill). mask is bool; t and mask broadcast, and the
// result has their broadcast shape and t's dtype, as PyTorch's out-of-place
// masked_fill expands both: a mask of more dimensions than t, or of size
// where t has 1, repeats t along them. The result keeps t's layout where
// it keeps t's shape. Gradients flow to t where mask is false, summed over
// the repeats. mask is on t's device, or is a 0-dimensional CPU tensor,
// read as a scalar. It panics with [ErrDType] for a mask that is not bool,
// with [ErrShape] for shapes that do not broadcast, and with [ErrArgument]
// for a value that overflows t's dtype, as in [Full].
func (t *Tensor) MaskedFill(mask *Tensor, value float64) *Tensor {
	const op = "masked_fill"
	notNil(op, t, mask)
	t.live(op)
	defer hostScalarsOnto(op, t.ds(), &mask)()
	ds, held := sameDevice(op, t, mask)
	defer held.unpin()
	if mask.dtype != Bool {
		fail(op, ErrDType, "mask must be bool, got %s", mask.dtype)
	}
	shape := broadcastShapes(op, t.shape, mask.shape)
	checkValue(op, value, t.dtype)
	s := newTensor(op, ds, t.dtype, nil)
	defer s.Release()
	s.fill(op, value)
	var out *Tensor
	if slices.Equal(shape, t.shape) {
		out = newTensorLike(op, ds, t.dtype, shape, t)
	} else {
		out = newTensor(op, ds, t.dtype, shape)
	}
	check(op, ds.bd.Where(ds.stream(), out.bv(), expandView(op, mask, shape), expandView(op, s, shape), expandView(op, t, shape)))
	if needsGrad(t) {
		ts := slices.Clone(t.shape)
		sv := save(mask)
		record(op, out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			return []*Tensor{sumTo(Where(sv[0], g.NewZeros(nil), g), ts)}
		})
	}
	return out
}
