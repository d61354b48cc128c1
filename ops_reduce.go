package vram

import (
	"slices"

	"github.com/vramgo/vram/backend"
)

// reduceAxes resolves dims (all when empty) to sorted distinct axes.
func (t *Tensor) reduceAxes(op string, dims []int) []int {
	if len(dims) == 0 {
		axes := make([]int, len(t.shape))
		for i := range axes {
			axes[i] = i
		}
		return axes
	}
	axes := make([]int, 0, len(dims))
	for _, d := range dims {
		a := t.axis(op, d)
		if slices.Contains(axes, a) {
			fail(op, ErrArgument, "dimension %d appears twice in %v", d, dims)
		}
		axes = append(axes, a)
	}
	slices.Sort(axes)
	return axes
}

func keptShape(shape, axes []int) []int {
	ks := slices.Clone(shape)
	for _, a := range axes {
		ks[a] = 1
	}
	return ks
}

func squeezedShape(shape, axes []int) []int {
	out := []int{}
	for i, d := range shape {
		if !slices.Contains(axes, i) {
			out = append(out, d)
		}
	}
	return out
}

// reduceRaw reduces t over axes into a keepdim-shaped tensor, without
// recording. Integer and bool sums give int64, like PyTorch.
func reduceRaw(op string, k backend.ReduceOp, t *Tensor, axes []int) *Tensor {
	sameDevice(op, t)
	src := t
	dt := t.dtype
	switch {
	case k == backend.ArgMax || k == backend.ArgMin:
		dt = Int64
	case (k == backend.Sum || k == backend.Prod) && !t.dtype.IsFloat():
		dt = Int64
		src = castRaw(t, Int64)
		defer src.Release()
	}
	if k != backend.Sum && k != backend.Prod {
		for _, a := range axes {
			if t.shape[a] == 0 {
				fail(op, ErrShape, "cannot compute %s over an empty dimension (shape %v)", op, Shape(t.shape))
			}
		}
	}
	out := newTensor(op, t.ds(), dt, keptShape(t.shape, axes))
	check(op, t.ds().bd.Reduce(k, out.bv(), src.bv(), axes))
	return out
}

// finishReduce reshapes a keepdim result to drop the reduced axes unless
// keepDim is set; the result is a new reference and r is released.
func finishReduce(r *Tensor, axes []int, keepDim bool) *Tensor {
	if keepDim {
		return r
	}
	defer r.Release()
	return r.Reshape(squeezedShape(keptShape(r.shape, nil), axes)...)
}

func (t *Tensor) sum(op string, dims []int, keepDim bool) *Tensor {
	t.live(op)
	axes := t.reduceAxes(op, dims)
	r := reduceRaw(op, backend.Sum, t, axes)
	if needsGrad(t) {
		shape := slices.Clone(t.shape)
		record(op, r, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Expand(shape...).Contiguous()} })
	}
	return finishReduce(r, axes, keepDim)
}

// Sum returns the sum over the listed dimensions (all when none), which are
// removed from the shape. Integer and bool tensors sum to int64.
func (t *Tensor) Sum(dims ...int) *Tensor { return t.sum("sum", dims, false) }

// SumKeepDim is Sum that keeps the reduced dimensions with size 1.
func (t *Tensor) SumKeepDim(dims ...int) *Tensor { return t.sum("sum", dims, true) }

func (t *Tensor) mean(dims []int, keepDim bool) *Tensor {
	defer asOp("mean")
	t.live("mean")
	if !t.dtype.IsFloat() {
		fail("mean", ErrDType, "mean needs a floating-point tensor, got %s; Cast it first", t.dtype)
	}
	axes := t.reduceAxes("mean", dims)
	n := 1
	for _, a := range axes {
		n *= t.shape[a]
	}
	s := t.sum("mean", dims, keepDim)
	defer s.Release()
	return s.DivScalar(float64(n))
}

// Mean returns the mean over the listed dimensions (all when none). It
// panics with [ErrDType] for integer tensors.
func (t *Tensor) Mean(dims ...int) *Tensor { return t.mean(dims, false) }

// MeanKeepDim is Mean that keeps the reduced dimensions with size 1.
func (t *Tensor) MeanKeepDim(dims ...int) *Tensor { return t.mean(dims, true) }

func (t *Tensor) extremum(op string, k backend.ReduceOp, dims []int, keepDim bool) *Tensor {
	t.live(op)
	axes := t.reduceAxes(op, dims)
	r := reduceRaw(op, k, t, axes)
	if needsGrad(t) {
		sv := save(t, r)
		record(op, r, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			// The gradient goes to the elements equal to the extremum,
			// split evenly between ties.
			mask := sv[0].Eq(sv[1]).Cast(g.dtype)
			count := mask.SumKeepDim(axes...)
			return []*Tensor{mask.Mul(g.Div(count))}
		})
	}
	return finishReduce(r, axes, keepDim)
}

// Max returns the maximum over the listed dimensions (all when none); NaN
// propagates. It panics with [ErrShape] over an empty dimension.
func (t *Tensor) Max(dims ...int) *Tensor { return t.extremum("max", backend.Max, dims, false) }

// MaxKeepDim is Max that keeps the reduced dimensions with size 1.
func (t *Tensor) MaxKeepDim(dims ...int) *Tensor { return t.extremum("max", backend.Max, dims, true) }

// Min returns the minimum over the listed dimensions (all when none).
func (t *Tensor) Min(dims ...int) *Tensor { return t.extremum("min", backend.Min, dims, false) }

// MinKeepDim is Min that keeps the reduced dimensions with size 1.
func (t *Tensor) MinKeepDim(dims ...int) *Tensor { return t.extremum("min", backend.Min, dims, true) }

// ArgMax returns the int64 index of the largest element along dim (the
// first on ties; NaN counts as largest).
func (t *Tensor) ArgMax(dim int, keepDim bool) *Tensor {
	t.live("argmax")
	a := t.axis("argmax", dim)
	return finishReduce(reduceRaw("argmax", backend.ArgMax, t, []int{a}), []int{a}, keepDim)
}

// ArgMin returns the int64 index of the smallest element along dim.
func (t *Tensor) ArgMin(dim int, keepDim bool) *Tensor {
	t.live("argmin")
	a := t.axis("argmin", dim)
	return finishReduce(reduceRaw("argmin", backend.ArgMin, t, []int{a}), []int{a}, keepDim)
}

// Var returns the variance over dims (all when empty) with the given
// correction (1 for the unbiased estimate, PyTorch's default; 0 for the
// population variance).
func (t *Tensor) Var(dims []int, correction int, keepDim bool) *Tensor {
	defer asOp("var")
	t.live("var")
	axes := t.reduceAxes("var", dims)
	n := 1
	for _, a := range axes {
		n *= t.shape[a]
	}
	var out *Tensor
	func() {
		// Intermediates are released here; the graph keeps what it needs.
		m := t.MeanKeepDim(axes...)
		defer m.Release()
		d := t.Sub(m)
		defer d.Release()
		sq := d.Square()
		defer sq.Release()
		s := sq.sum("var", axes, keepDim)
		defer s.Release()
		out = s.DivScalar(float64(max(n-correction, 0)))
	}()
	return out
}

// Std returns the square root of [Tensor.Var].
func (t *Tensor) Std(dims []int, correction int, keepDim bool) *Tensor {
	defer asOp("std")
	v := t.Var(dims, correction, keepDim)
	defer v.Release()
	return v.Sqrt()
}
