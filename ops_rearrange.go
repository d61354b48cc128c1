package vram

import "slices"

// Flip returns a copy of t with the order of its entries reversed along
// each of dims (torch.flip); negative dims count from the end. The result
// is new storage, channels-last when t is, as in PyTorch, and the
// gradient flows back reversed. A
// 0-dimensional t takes dim 0 or -1, as torch.flip does, and is copied. It
// panics with [ErrIndex] for a dimension out of range, with [ErrArgument]
// for a dimension named twice, and with [ErrShape] for a flipped dimension
// of more than 2^29 entries (a non-empty one is a view, such as an
// expanded one, or on a device that keeps no data): the reversed positions
// are written on the host, as for [Tensor.Tril].
func (t *Tensor) Flip(dims ...int) *Tensor {
	const op = "flip"
	defer asOp(op)
	t.live(op)
	if len(t.shape) == 0 {
		for i, d := range dims {
			t.scalarAxis(op, d)
			if i > 0 {
				fail(op, ErrArgument, "dimension %d appears twice in %v", d, dims)
			}
		}
		return t.Clone()
	}
	axes := t.distinctAxes(op, dims)
	if t.NumElements() > 0 {
		// An empty t has nothing to move, and no position table for a
		// side of any size.
		for _, a := range axes {
			if n := t.shape[a]; n > maxIndexEntries {
				fail(op, ErrShape, "flip of dimension %d of %v needs a host index of %d positions, more than the %d it allows",
					a, Shape(t.shape), n, maxIndexEntries)
			}
		}
	}
	out := t.Clone()
	if out.NumElements() == 0 {
		return out
	}
	for _, a := range axes {
		n := t.shape[a]
		pos := make([]int64, n)
		for i := range pos {
			pos[i] = int64(n - 1 - i)
		}
		out = out.releasing(func(x *Tensor) *Tensor { return x.selectPositions(a, pos) })
	}
	return keptFormat(t, out)
}

// Roll returns a copy of t with its entries shifted along dims by shifts,
// wrapping around at the end (torch.roll): the entry at position i moves
// to (i + shift) mod size. shifts and dims pair up and must have the same
// length; with no dims, t is rolled as if flattened, and shifts must hold
// one shift. The result is new storage, channels-last when t is and dims
// are given, as PyTorch's roll keeps it. It panics with [ErrArgument] when the lengths do not match
// and with [ErrIndex] for a dimension out of range.
func (t *Tensor) Roll(shifts, dims []int) *Tensor {
	const op = "roll"
	defer asOp(op)
	t.live(op)
	if len(dims) == 0 {
		if len(shifts) != 1 {
			fail(op, ErrArgument, "without dims, roll takes one shift, got %v", shifts)
		}
		flat := t.Reshape(-1)
		defer flat.Release()
		r := flat.Roll(shifts, []int{0})
		defer r.Release()
		return r.Reshape(t.shape...)
	}
	if len(shifts) != len(dims) {
		fail(op, ErrArgument, "shifts %v and dims %v must have the same length", shifts, dims)
	}
	axes := make([]int, len(dims))
	for j, d := range dims {
		axes[j] = t.axis(op, d)
	}
	out := t.Clone()
	if out.NumElements() == 0 {
		return out // nothing to move
	}
	for j, a := range axes {
		n := t.shape[a]
		s := shifts[j] % n
		if s < 0 {
			s += n
		}
		if s == 0 {
			continue
		}
		out = out.releasing(func(x *Tensor) *Tensor { return x.rolled(a, s) })
	}
	return keptFormat(t, out)
}

// rolled returns t rolled by s along axis a, for s in (0, t.shape[a]): its
// last s entries there, then the others, concatenated. Unlike a gather of
// rolled positions it writes nothing on the host, whatever the side.
func (t *Tensor) rolled(a, s int) *Tensor {
	n := t.shape[a]
	tail := t.Narrow(a, n-s, s)
	defer tail.Release()
	head := t.Narrow(a, 0, n-s)
	defer head.Release()
	return Cat([]*Tensor{tail, head}, a)
}

// Tril returns a copy of t with the entries above the diagonal-th diagonal
// of its last two dimensions set to zero (torch.tril): entry (i, j) is kept
// where j - i <= diagonal. diagonal 0 is the main diagonal, a positive one
// lies above it and a negative one below. Leading dimensions are a batch.
// The gradient is passed where entries are kept. It panics with [ErrShape]
// for a tensor of fewer than 2 dimensions, or for matrices with a side of
// more than 2^29 entries (a non-empty one is a view, such as an expanded
// one, or on a device that keeps no data): the positions it compares are
// written on the host.
func (t *Tensor) Tril(diagonal int) *Tensor { return t.triangle("tril", diagonal, true) }

// Triu returns a copy of t with the entries below the diagonal-th diagonal
// of its last two dimensions set to zero (torch.triu): entry (i, j) is kept
// where j - i >= diagonal. See [Tensor.Tril].
func (t *Tensor) Triu(diagonal int) *Tensor { return t.triangle("triu", diagonal, false) }

func (t *Tensor) triangle(op string, diagonal int, lower bool) *Tensor {
	defer asOp(op)
	t.live(op)
	nd := len(t.shape)
	if nd < 2 {
		fail(op, ErrShape, "%s needs a tensor of at least 2 dimensions, got shape %v", op, Shape(t.shape))
	}
	if t.NumElements() == 0 {
		return t.Clone() // nothing to zero, and no mask for matrices of any size
	}
	rows, cols := t.shape[nd-2], t.shape[nd-1]
	if max(rows, cols) > maxIndexEntries {
		fail(op, ErrShape, "%s of matrices of %d×%d needs a host index of %d positions, more than the %d it allows",
			op, rows, cols, max(rows, cols), maxIndexEntries)
	}
	// Entry (i, j) is kept where j <= i + diagonal (j >= i + diagonal for
	// triu): a column of i + diagonal and a row of j, compared on the
	// device, make the mask, so the host writes rows + cols positions
	// rather than a rows×cols table. A diagonal beyond [-rows, cols]
	// keeps or drops what the nearest bound does, and the clamp keeps
	// i + diagonal within an int.
	d := min(max(diagonal, -rows), cols)
	ri := make([]int64, rows)
	for i := range ri {
		ri[i] = int64(i + d)
	}
	rj := make([]int64, cols)
	for j := range rj {
		rj[j] = int64(j)
	}
	ic := tableOn(t.ds(), ri, Shape{rows, 1}, Int64)
	defer ic.Release()
	jr := tableOn(t.ds(), rj, Shape{cols}, Int64)
	defer jr.Release()
	var mask *Tensor
	if lower {
		mask = jr.Le(ic)
	} else {
		mask = jr.Ge(ic)
	}
	defer mask.Release()
	zero := Scalar(0, t.dtype)
	defer zero.Release()
	return Where(mask, t, zero)
}

// keptFormat returns out laid out channels-last when t is, as PyTorch's
// flip and roll keep their input's memory format, releasing out when it
// copies it.
func keptFormat(t, out *Tensor) *Tensor {
	y := keepFormat(t, out)
	if y != out {
		out.Release()
	}
	return y
}

// distinctAxes resolves dims to axes of t, refusing a repeated one.
func (t *Tensor) distinctAxes(op string, dims []int) []int {
	axes := make([]int, 0, len(dims))
	for _, d := range dims {
		a := t.axis(op, d)
		if slices.Contains(axes, a) {
			fail(op, ErrArgument, "dimension %d appears twice in %v", d, dims)
		}
		axes = append(axes, a)
	}
	return axes
}

// selectPositions returns t's entries at pos along axis a, recording the
// gradient as IndexSelect does.
func (t *Tensor) selectPositions(a int, pos []int64) *Tensor {
	idx := tableOn(t.ds(), pos, Shape{len(pos)}, Int64)
	defer idx.Release()
	return t.IndexSelect(a, idx)
}

// releasing returns f(t) and releases t.
func (t *Tensor) releasing(f func(*Tensor) *Tensor) *Tensor {
	defer t.Release()
	return f(t)
}
