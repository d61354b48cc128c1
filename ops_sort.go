package vram

import (
	"errors"
	"slices"

	"github.com/vramgo/vram/backend"
)

// argSortRaw returns the int64 positions that sort t along axis a (stable;
// NaN greatest), on t's device and without recording. A device without
// a sort kernel ([backend.Sorter]) sorts a host copy.
func argSortRaw(op string, t *Tensor, a int, descending bool) *Tensor {
	ds := t.ds()
	if s, ok := ds.bd.(backend.Sorter); ok {
		out := newTensor(op, ds, Int64, t.shape)
		err := s.ArgSort(ds.stream(), out.bv(), t.bv(), a, descending)
		if err == nil {
			return out
		}
		out.Release()
		if !errors.Is(err, backend.ErrNotImplemented) || ds.dev.Kind == "cpu" {
			check(op, err)
		}
	}
	d := t.Detach()
	defer d.Release()
	h := d.To(CPU)
	defer h.Release()
	hi := argSortRaw(op, h, a, descending)
	defer hi.Release()
	return hi.To(ds.dev)
}

// Sort returns t's elements sorted along dim, ascending or descending, and
// their int64 positions along dim in t (torch.sort with stable=True): equal
// elements keep their order, in either direction, and NaN counts as greater
// than every number, so it comes last ascending and first descending. The
// values pass their gradient back to the positions they came from. Both
// results are laid out as [Tensor.Clone] lays out t (channels-last for a
// channels-last t, transposed for a transposed one), as PyTorch's sort
// gives them t's strides. A 0-dimensional t takes dim 0 or -1. It panics
// with [ErrIndex] for a dim out of range.
func (t *Tensor) Sort(dim int, descending bool) (values, indices *Tensor) {
	const op = "sort"
	defer asOp(op)
	defer pin(op, t).unpin()
	a := t.scalarAxis(op, dim)
	if a < 0 {
		return t.Clone(), t.zeroIndex(op)
	}
	idx := argSortRaw(op, t, a, descending)
	v := t.Gather(a, idx)
	return t.likeInput(op, v), t.likeInput(op, idx)
}

// ArgSort returns the int64 positions that sort t along dim, as the
// indices of [Tensor.Sort] (torch.argsort with stable=True), laid out as
// Sort's are.
func (t *Tensor) ArgSort(dim int, descending bool) *Tensor {
	const op = "argsort"
	defer asOp(op)
	defer pin(op, t).unpin()
	a := t.scalarAxis(op, dim)
	if a < 0 {
		return t.zeroIndex(op)
	}
	return t.likeInput(op, argSortRaw(op, t, a, descending))
}

// likeInput returns r, a row-major result of t's shape, itself when t's
// layout is row-major too, else a copy in the layout Clone gives t
// (PyTorch's preserve_format) that passes r's gradient on, releasing r.
func (t *Tensor) likeInput(op string, r *Tensor) *Tensor {
	out := newTensorPreserving(op, r.ds(), r.dtype, t)
	if slices.Equal(out.strides, r.strides) {
		out.Release()
		return r
	}
	defer r.Release()
	return r.copyInto(op, out)
}

// zeroIndex returns a 0-dimensional int64 0 on t's device.
func (t *Tensor) zeroIndex(op string) *Tensor {
	out := newTensor(op, t.ds(), Int64, nil)
	out.fill(op, 0)
	return out
}

// TopK returns the k largest elements of t along dim (the k smallest when
// largest is false), in order from the most extreme, and their int64
// positions along dim (torch.topk). Ties keep their order in t, and NaN
// counts as greater than every number. The values pass their gradient back
// to the positions they came from. It panics with [ErrArgument] when k is
// negative or more than the size of dim, with [ErrIndex] for a dim out of
// range and with [ErrDType] for a bool t, as PyTorch raises. A
// 0-dimensional t takes dim 0 or -1 and k 0 or 1.
func (t *Tensor) TopK(k, dim int, largest bool) (values, indices *Tensor) {
	const op = "topk"
	defer asOp(op)
	defer pin(op, t).unpin()
	noBoolOrder(op, t)
	a := t.scalarAxis(op, dim)
	n := 1
	if a >= 0 {
		n = t.shape[a]
	}
	if k < 0 || k > n {
		fail(op, ErrArgument, "k = %d is out of range for a dimension of size %d", k, n)
	}
	if a < 0 {
		v := t.Reshape(1)
		defer v.Release()
		vals, idx := v.TopK(k, 0, largest)
		if k == 0 {
			return vals, idx
		}
		defer vals.Release()
		defer idx.Release()
		return vals.Reshape(), idx.Reshape()
	}
	all := argSortRaw(op, t, a, largest)
	defer all.Release()
	first := all.Narrow(a, 0, k)
	defer first.Release()
	indices = first.Contiguous()
	return t.Gather(a, indices), indices
}
