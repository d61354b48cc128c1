package vram

import (
	"errors"
	"math"
	"slices"

	"github.com/vramgo/vram/backend"
)

// Note [16-bit numerics]: reductions and composite ops of float16 and
// bfloat16 tensors compute in float32 (opMath) and round to 16 bits once,
// where PyTorch's kernels do, as the GPU does: a float16 sum of 1<<20 ones
// accumulated in float16 stops at 2048, and a float16 sum of 100000 ones
// overflows (65504 is the largest float16) before a mean could divide it.
// Sums accumulate in float32 or wider on every backend and round once at
// the end; a mean, a variance, a softmax or a norm keeps its intermediates
// (the sum before the division, the shifted exponentials, the statistics)
// in float32 and rounds only its result. Elementwise ops round each result
// to the dtype, as PyTorch's do.

// opMath returns the dtype that reductions and composite ops compute
// values of dt in: float32 for float16 and bfloat16, dt itself otherwise.
func opMath(dt DType) DType { return DType(dt.b().OpMath()) }

// toOpMath returns t converted to opMath(t.dtype), without recording: a
// new reference, a copy only for the 16-bit floats.
func toOpMath(t *Tensor) *Tensor { return castRaw(t, opMath(t.dtype)) }

// fromOpMath returns y, the result of a composite op computed in
// opMath(dt), rounded to dt where dt is a 16-bit float; otherwise y itself.
func fromOpMath(y *Tensor, dt DType) *Tensor {
	if w := opMath(dt); w == dt || y.dtype != w {
		return y
	}
	return y.Cast(dt)
}

// sumWide sums the float tensor t over axes into a keepdim-shaped tensor
// of opMath(t.dtype), without recording: for the 16-bit floats the float32
// accumulator itself, not rounded to 16 bits.
func sumWide(op string, t *Tensor, axes []int) *Tensor {
	w := opMath(t.dtype)
	if w == t.dtype {
		return reduceRaw(op, backend.Sum, t, axes)
	}
	ds, held := sameDevice(op, t)
	defer held.unpin()
	out := newTensor(op, ds, w, keptShape(t.shape, axes))
	err := ds.bd.Reduce(ds.stream(), backend.Sum, out.bv(), t.bv(), axes)
	if errors.Is(err, backend.ErrNotImplemented) {
		// A backend without the widened reduction: convert first.
		x := castRaw(t, w)
		err = ds.bd.Reduce(ds.stream(), backend.Sum, out.bv(), x.bv(), axes)
		x.Release()
	}
	if err != nil {
		out.Release()
		check(op, err)
	}
	return out
}

// meanRaw returns the mean of the float tensor t over axes, keepdim-shaped
// and of t's dtype, without recording: summed and divided in opMath
// precision, rounded once.
func meanRaw(op string, t *Tensor, axes []int) *Tensor {
	s := sumWide(op, t, axes)
	check(op, s.ds().bd.Scalar(s.ds().stream(), backend.Div, s.bv(), s.bv(), float64(axesSize(t.shape, axes)), false))
	if s.dtype == t.dtype {
		return s
	}
	defer s.Release()
	return castRaw(s, t.dtype)
}

// axesSize returns the number of elements of shape along axes.
func axesSize(shape, axes []int) int {
	n := 1
	for _, a := range axes {
		n *= shape[a]
	}
	return n
}

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
		a := t.scalarAxis(op, d)
		if a < 0 {
			continue // a 0-dimensional tensor reduces over nothing
		}
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
	_, held := sameDevice(op, t)
	defer held.unpin()
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
	check(op, t.ds().bd.Reduce(t.ds().stream(), k, out.bv(), src.bv(), axes))
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
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.sum(op, dims, keepDim)
	}
	defer pin(op, t).unpin()
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
	floatOnly("mean", t)
	axes := t.reduceAxes("mean", dims)
	r := meanRaw("mean", t, axes)
	if needsGrad(t) {
		shape := slices.Clone(t.shape)
		n := float64(axesSize(t.shape, axes))
		record("mean", r, []*Tensor{t}, nil, func(g *Tensor) []*Tensor {
			return []*Tensor{scalarRaw("mean", backend.Div, g, n, false).Expand(shape...).Contiguous()}
		})
	}
	return finishReduce(r, axes, keepDim)
}

// floatOnly panics with ErrDType, naming op, unless t is floating-point.
func floatOnly(op string, t *Tensor) {
	if !t.dtype.IsFloat() {
		fail(op, ErrDType, "%s needs a floating-point tensor, got %s; Cast it first", op, t.dtype)
	}
}

// Mean returns the mean over the listed dimensions (all when none). It
// panics with [ErrDType] for integer tensors. float16 and bfloat16 means
// are summed and divided in float32 and rounded once, as on a GPU: the
// mean of 100000 float16 ones is 1, though their float16 sum overflows.
func (t *Tensor) Mean(dims ...int) *Tensor { return t.mean(dims, false) }

// MeanKeepDim is Mean that keeps the reduced dimensions with size 1.
func (t *Tensor) MeanKeepDim(dims ...int) *Tensor { return t.mean(dims, true) }

func (t *Tensor) extremum(op string, k backend.ReduceOp, dims []int, keepDim bool) *Tensor {
	defer pin(op, t).unpin()
	axes := t.reduceAxes(op, dims)
	r := reduceRaw(op, k, t, axes)
	if needsGrad(t) {
		sv := save(t, r)
		record(op, r, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			return []*Tensor{shareAmongTies(g, sv[0], sv[1], axes)}
		})
	}
	return finishReduce(r, axes, keepDim)
}

// shareAmongTies returns the gradient of x for a reduction over axes that
// picks one of x's elements, r (keepdim-shaped), whose gradient is g: the
// elements equal to r share g equally, and where r is NaN the NaN
// elements share it, as PyTorch's evenly_distribute_backward (the
// backward of torch.max(), torch.min(), torch.median() and
// torch.nanmedian()). Axes nil means all of x's. The counting and the
// division run in float32 for the 16-bit floats: a float16 count of
// 100000 ties overflows.
func shareAmongTies(g, x, r *Tensor, axes []int) *Tensor {
	w := opMath(g.dtype)
	eq := x.Eq(r)
	defer eq.Release()
	hit := eq
	if x.dtype.IsFloat() {
		xn, rn := x.IsNaN(), r.IsNaN()
		defer xn.Release()
		defer rn.Release()
		both := xn.LogicalAnd(rn)
		defer both.Release()
		hit = eq.LogicalOr(both)
		defer hit.Release()
	}
	mask := hit.Cast(w)
	defer mask.Release()
	count := mask.SumKeepDim(axes...)
	defer count.Release()
	gw := toOpMath(g)
	defer gw.Release()
	share := gw.Div(count)
	defer share.Release()
	out := mask.Mul(share)
	if out.dtype == g.dtype {
		return out
	}
	defer out.Release()
	return out.Cast(g.dtype)
}

// Max returns the maximum over the listed dimensions (all when none); NaN
// propagates. It panics with [ErrShape] over an empty dimension. It is
// torch.amax: the gradient is shared equally among elements tied for the
// maximum, and a NaN maximum passes it to the NaN elements, as
// torch.max() without a dim does (torch.amax would give NaN gradients).
// For torch.max(dim)'s rule, where the element ArgMax names takes all of
// it, gather with ArgMax's index.
func (t *Tensor) Max(dims ...int) *Tensor { return t.extremum("max", backend.Max, dims, false) }

// MaxKeepDim is Max that keeps the reduced dimensions with size 1.
func (t *Tensor) MaxKeepDim(dims ...int) *Tensor { return t.extremum("max", backend.Max, dims, true) }

// Min returns the minimum over the listed dimensions (all when none), as
// Max does (torch.amin: tied elements share the gradient).
func (t *Tensor) Min(dims ...int) *Tensor { return t.extremum("min", backend.Min, dims, false) }

// MinKeepDim is Min that keeps the reduced dimensions with size 1.
func (t *Tensor) MinKeepDim(dims ...int) *Tensor { return t.extremum("min", backend.Min, dims, true) }

// ArgMax returns the int64 index of the largest element along dim (the
// first on ties; NaN counts as largest). A 0-dimensional t takes dim 0 or
// -1 and gives a 0-dimensional 0, as in PyTorch.
func (t *Tensor) ArgMax(dim int, keepDim bool) *Tensor {
	return t.argExtremum("argmax", backend.ArgMax, dim, keepDim)
}

// ArgMin returns the int64 index of the smallest element along dim (the
// first on ties; NaN counts as smallest), as ArgMax does.
func (t *Tensor) ArgMin(dim int, keepDim bool) *Tensor {
	return t.argExtremum("argmin", backend.ArgMin, dim, keepDim)
}

func (t *Tensor) argExtremum(op string, k backend.ReduceOp, dim int, keepDim bool) *Tensor {
	defer pin(op, t).unpin()
	a := t.scalarAxis(op, dim)
	if a < 0 {
		// The one element of a 0-dimensional tensor is at index 0.
		out := newTensor(op, t.ds(), Int64, nil)
		out.fill(op, 0)
		return out
	}
	return finishReduce(reduceRaw(op, k, t, []int{a}), []int{a}, keepDim)
}

// Var returns the variance over dims (all when empty) with the given
// correction (1 for the unbiased estimate, PyTorch's default; 0 for the
// population variance). float16 and bfloat16 tensors are computed in
// float32 and the result rounded once. It panics with [ErrDType] for
// integer and bool tensors, as Mean does.
func (t *Tensor) Var(dims []int, correction int, keepDim bool) *Tensor {
	defer asOp("var")
	t.live("var")
	floatOnly("var", t)
	if opMath(t.dtype) != t.dtype {
		return t.inOpMath(func(x *Tensor) *Tensor { return x.Var(dims, correction, keepDim) })
	}
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

// Std returns the square root of [Tensor.Var] (for float16 and bfloat16
// taken in float32 before the result is rounded).
func (t *Tensor) Std(dims []int, correction int, keepDim bool) *Tensor {
	defer asOp("std")
	t.live("std")
	floatOnly("std", t)
	if opMath(t.dtype) != t.dtype {
		return t.inOpMath(func(x *Tensor) *Tensor { return x.Std(dims, correction, keepDim) })
	}
	v := t.Var(dims, correction, keepDim)
	defer v.Release()
	return v.Sqrt()
}

// inOpMath returns f of t converted to opMath(t.dtype), converted back to
// t's dtype: a composite op computed in float32 for a 16-bit t, rounded
// once. The conversions are recorded, so gradients flow through f in
// float32 too.
func (t *Tensor) inOpMath(f func(x *Tensor) *Tensor) *Tensor {
	x := t.Cast(opMath(t.dtype))
	defer x.Release()
	y := f(x)
	defer y.Release()
	return y.Cast(t.dtype)
}

func (t *Tensor) prod(dims []int, keepDim bool) *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.prod(dims, keepDim)
	}
	defer pin("prod", t).unpin()
	axes := t.reduceAxes("prod", dims)
	r := reduceRaw("prod", backend.Prod, t, axes)
	if needsGrad(t) {
		sv := save(t)
		record("prod", r, []*Tensor{t}, sv, func(g *Tensor) []*Tensor { return []*Tensor{prodGrad(sv[0], g, axes)} })
	}
	return finishReduce(r, axes, keepDim)
}

// prodGrad returns the gradient of the product of x over axes for the
// keepdim-shaped incoming gradient g, exact when x holds zeros: with none,
// each element gets the product over the others as prod/x; with one zero
// in a slice, only that zero gets the product of the others; with two or
// more, every element of the slice gets 0. It runs inside backward's Tidy.
func prodGrad(x, g *Tensor, axes []int) *Tensor {
	xw, gw := toOpMath(x), toOpMath(g)
	zero := xw.EqScalar(0)
	count := zero.Cast(xw.dtype).SumKeepDim(axes...)
	nonZero := Where(zero, xw.NewOnes(nil), xw)
	p := nonZero.ProdKeepDim(axes...)
	none := p.Div(nonZero)
	one := Where(zero.LogicalAnd(count.EqScalar(1)), p, xw.NewZeros(nil))
	return Where(count.EqScalar(0), none, one).Mul(gw).Cast(x.dtype)
}

// Prod returns the product over the listed dimensions (all when none),
// which are removed from the shape (torch.prod). Integer and bool tensors
// multiply to int64; the product over an empty dimension is 1. The
// gradient is exact where the input holds zeros: an element gets the
// product of the others in its slice.
func (t *Tensor) Prod(dims ...int) *Tensor { return t.prod(dims, false) }

// ProdKeepDim is Prod that keeps the reduced dimensions with size 1.
func (t *Tensor) ProdKeepDim(dims ...int) *Tensor { return t.prod(dims, true) }

// ArgMaxAll returns the int64 index of the largest element of t flattened
// in row-major order, as a 0-dimensional tensor (torch.argmax with no
// dim): the first on ties, NaN counting as largest. It panics with
// [ErrShape] when t has no elements.
func (t *Tensor) ArgMaxAll() *Tensor { return t.argExtremumAll("argmax", backend.ArgMax) }

// ArgMinAll is ArgMaxAll for the smallest element (NaN counting as
// smallest, as in ArgMin).
func (t *Tensor) ArgMinAll() *Tensor { return t.argExtremumAll("argmin", backend.ArgMin) }

func (t *Tensor) argExtremumAll(op string, k backend.ReduceOp) *Tensor {
	defer asOp(op)
	defer pin(op, t).unpin()
	d := t.Detach()
	defer d.Release()
	flat := d.Reshape(-1)
	defer flat.Release()
	return flat.argExtremum(op, k, 0, false)
}

// Norm returns the p-norm of t over dims (all when empty), as
// torch.linalg.vector_norm: p = 2 is the Euclidean norm, 1 the sum of
// absolute values, math.Inf(1) the largest absolute value, math.Inf(-1) the
// smallest, 0 the number of nonzero elements, and any other p
// (sum |x|^p)^(1/p). float16 and bfloat16 tensors are computed in float32
// and the result rounded once. The gradient is PyTorch's: 0 where the norm
// is 0 (rather than NaN), and for the infinity norms split evenly among the
// elements tied for the extremum. It panics with [ErrDType] for integer
// and bool tensors, with [ErrArgument] for a NaN p, and with [ErrShape] for
// an infinity or negative norm over an empty dimension, as PyTorch's does.
func (t *Tensor) Norm(p float64, dims []int, keepDim bool) *Tensor {
	defer asOp("norm")
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Norm(p, dims, keepDim)
	}
	t.live("norm")
	floatOnly("norm", t)
	if math.IsNaN(p) {
		fail("norm", ErrArgument, "the order p must be a number, got NaN")
	}
	if opMath(t.dtype) != t.dtype {
		return t.inOpMath(func(x *Tensor) *Tensor { return x.Norm(p, dims, keepDim) })
	}
	defer pin("norm", t).unpin()
	axes := t.reduceAxes("norm", dims)
	if p < 0 && !math.IsInf(p, -1) {
		// 0^p is infinite for p < 0, and its sum over nothing, 0, has no
		// inverse power: PyTorch refuses it, as it does the infinity norms.
		for _, a := range axes {
			if t.shape[a] == 0 {
				fail("norm", ErrShape, "cannot compute the %v-norm over an empty dimension (shape %v): a negative order has no value there", p, Shape(t.shape))
			}
		}
	}
	n := normRaw(t, p, axes)
	if needsGrad(t) {
		sv := save(t, n)
		record("norm", n, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			return []*Tensor{normGrad(sv[0], sv[1], g, p, axes)}
		})
	}
	return finishReduce(n, axes, keepDim)
}

// normRaw returns the p-norm of the float tensor t over axes,
// keepdim-shaped, without recording.
func normRaw(t *Tensor, p float64, axes []int) *Tensor {
	x := t.Detach()
	defer x.Release()
	if p == 0 {
		nz := x.EqScalar(0).LogicalNot()
		defer nz.Release()
		c := nz.Cast(t.dtype)
		defer c.Release()
		return c.SumKeepDim(axes...)
	}
	if p == 2 {
		sq := x.Square()
		defer sq.Release()
		s := sq.SumKeepDim(axes...)
		defer s.Release()
		return s.Sqrt()
	}
	a := x.Abs()
	defer a.Release()
	switch {
	case math.IsInf(p, 1):
		return reduceRaw("norm", backend.Max, a, axes)
	case math.IsInf(p, -1):
		return reduceRaw("norm", backend.Min, a, axes)
	case p == 1:
		return a.SumKeepDim(axes...)
	}
	ap := a.PowScalar(p)
	defer ap.Release()
	s := ap.SumKeepDim(axes...)
	defer s.Release()
	return s.PowScalar(1 / p)
}

// normGrad returns the gradient of the p-norm n (keepdim-shaped) of x over
// axes for the incoming gradient g. It runs inside backward's Tidy.
func normGrad(x, n, g *Tensor, p float64, axes []int) *Tensor {
	z := x.NewZeros(nil)
	switch {
	case p == 0:
		return x.NewZeros(x.shape)
	case p == 1:
		return x.Sign().Mul(g)
	case p == 2:
		return Where(n.EqScalar(0), z, x.Div(n)).Mul(g)
	case math.IsInf(p, 0):
		mask := x.Abs().Eq(n).Cast(x.dtype)
		count := mask.SumKeepDim(axes...)
		return x.Sign().Mul(mask).Mul(g.Div(count))
	}
	scaled := x.Sign().Mul(Where(x.EqScalar(0), z, x.Abs().PowScalar(p-1)))
	return scaled.Mul(Where(n.EqScalar(0), z, g.Div(n.PowScalar(p-1))))
}
