package vram

import (
	"math"
	"slices"
	"strings"
)

// This file holds the logical reductions, the tests of values (IsInf,
// IsClose, Equal, ...) and the small math that PyTorch code uses (Trunc,
// Frac, Lerp, NanToNum, Outer, OneHot, Nonzero). Each is composed from
// other ops, so it runs on every device.

// The tolerances torch.isclose and torch.allclose use by default, for
// [Tensor.IsClose] and [Tensor.AllClose].
const (
	IsCloseRTol = 1e-5 // relative tolerance
	IsCloseATol = 1e-8 // absolute tolerance
)

// nonzeroMask returns a bool tensor that is true where t is not zero (NaN
// included), as PyTorch's truth value of an element.
func nonzeroMask(t *Tensor) *Tensor { return t.LogicalNot().LogicalNot() }

// LogicalXor returns a bool tensor that is true where exactly one of a and
// b is nonzero (torch.logical_xor); they broadcast and may have any dtypes,
// NaN counting as nonzero. A 0-dimensional CPU operand is read as a scalar
// on any device (see [Tensor.Add]). It panics with [ErrShape] when the
// shapes do not broadcast.
func (a *Tensor) LogicalXor(b *Tensor) *Tensor {
	const op = "logical_xor"
	notNil(op, a, b)
	defer hostScalars(op, &a, &b)()
	defer pin(op, a, b).unpin()
	deviceOf(op, a, b)
	broadcastShapes(op, a.shape, b.shape)
	return composed(op, func() *Tensor { return nonzeroMask(a).Ne(nonzeroMask(b)) })
}

// Any returns a bool tensor that is true where some element over dims (all
// of them when none) is nonzero, the reduced dimensions removed
// (torch.any). It takes any dtype; NaN counts as nonzero, and an empty
// slice gives false. It panics with [ErrIndex] for a dimension out of
// range and with [ErrArgument] for one listed twice.
func (t *Tensor) Any(dims ...int) *Tensor { return t.anyAll("any", dims, false, false) }

// AnyKeepDim is [Tensor.Any] that keeps the reduced dimensions with size 1.
func (t *Tensor) AnyKeepDim(dims ...int) *Tensor { return t.anyAll("any", dims, true, false) }

// All returns a bool tensor that is true where every element over dims (all
// of them when none) is nonzero, the reduced dimensions removed
// (torch.all). It takes any dtype; NaN counts as nonzero, and an empty
// slice gives true. It panics as [Tensor.Any].
func (t *Tensor) All(dims ...int) *Tensor { return t.anyAll("all", dims, false, true) }

// AllKeepDim is [Tensor.All] that keeps the reduced dimensions with size 1.
func (t *Tensor) AllKeepDim(dims ...int) *Tensor { return t.anyAll("all", dims, true, true) }

func (t *Tensor) anyAll(op string, dims []int, keepDim, all bool) *Tensor {
	notNil(op, t)
	defer pin(op, t).unpin()
	axes := t.reduceAxes(op, dims)
	return composed(op, func() *Tensor {
		if all {
			// No element over axes is zero.
			return t.LogicalNot().sum(op, axes, keepDim).EqScalar(0)
		}
		return nonzeroMask(t).sum(op, axes, keepDim).GtScalar(0)
	})
}

// CountNonzero returns the number of nonzero elements over dims (all of
// them when none), an int64 tensor with the reduced dimensions removed
// (torch.count_nonzero). NaN counts as nonzero. It panics as [Tensor.Any].
func (t *Tensor) CountNonzero(dims ...int) *Tensor {
	const op = "count_nonzero"
	notNil(op, t)
	defer pin(op, t).unpin()
	axes := t.reduceAxes(op, dims)
	return composed(op, func() *Tensor { return nonzeroMask(t).sum(op, axes, false) })
}

// Equal reports whether a and b have the same shape and equal elements
// (torch.equal); their dtypes promote, as PyTorch's do, so an int64 1 equals
// a float32 1. NaN equals nothing, so a tensor holding NaN is not equal to
// itself. Tensors of different shapes are not equal; no broadcasting takes
// place. It synchronizes with the device. It panics with
// [*DeviceMismatchError] when a and b are on different devices (a
// 0-dimensional CPU tensor included, as in PyTorch).
func (a *Tensor) Equal(b *Tensor) bool {
	const op = "equal"
	notNil(op, a, b)
	defer pin(op, a, b).unpin()
	deviceOf(op, a, b)
	if !slices.Equal(a.shape, b.shape) {
		return false
	}
	var equal bool
	Tidy(func() {
		var r *Tensor
		NoGrad(func() { r = composed(op, func() *Tensor { return a.Ne(b).Any() }) })
		equal = r.Item() == 0
	})
	return equal
}

// IsClose returns a bool tensor that is true where a and b are close
// (torch.isclose): equal, or both finite with |a - b| <= atol + rtol·|b|;
// with equalNaN, NaN is close to NaN. a and b broadcast; the test is
// computed in float64, so integer and 16-bit operands lose nothing to
// rounding. [IsCloseRTol] and [IsCloseATol] are PyTorch's defaults. It
// panics with [ErrDType] when the dtypes differ (Cast one first), with
// [ErrArgument] for a negative or NaN tolerance and with [ErrShape] when the
// shapes do not broadcast. A 0-dimensional CPU b is read as a scalar on any
// device (see [Tensor.Add]).
func (a *Tensor) IsClose(b *Tensor, rtol, atol float64, equalNaN bool) *Tensor {
	return isClose("isclose", a, b, rtol, atol, equalNaN)
}

// AllClose reports whether every element of a is close to b's, as
// [Tensor.IsClose] tests them (torch.allclose); it panics as IsClose does.
// It synchronizes with the device.
func (a *Tensor) AllClose(b *Tensor, rtol, atol float64, equalNaN bool) bool {
	const op = "allclose"
	var all bool
	Tidy(func() {
		var r *Tensor
		NoGrad(func() {
			r = composed(op, func() *Tensor { return isClose(op, a, b, rtol, atol, equalNaN).All() })
		})
		all = r.Item() != 0
	})
	return all
}

func isClose(op string, a, b *Tensor, rtol, atol float64, equalNaN bool) *Tensor {
	notNil(op, a, b)
	defer hostScalars(op, &a, &b)()
	defer pin(op, a, b).unpin()
	deviceOf(op, a, b)
	if a.dtype != b.dtype {
		fail(op, ErrDType, "a is %s but b is %s; Cast one of them first", a.dtype, b.dtype)
	}
	if !(rtol >= 0) || !(atol >= 0) {
		fail(op, ErrArgument, "rtol and atol must be nonnegative, got %v and %v", rtol, atol)
	}
	broadcastShapes(op, a.shape, b.shape)
	return composed(op, func() *Tensor {
		close := a.Eq(b)
		if equalNaN && a.dtype.IsFloat() {
			close = close.LogicalOr(a.IsNaN().LogicalAnd(b.IsNaN()))
		}
		if rtol == 0 && atol == 0 {
			return close
		}
		x, y := a.Cast(Float64), b.Cast(Float64)
		diff := x.Sub(y).Abs()
		allowed := y.Abs().MulScalar(rtol).AddScalar(atol)
		return close.LogicalOr(diff.LtScalar(math.Inf(1)).LogicalAnd(diff.Le(allowed)))
	})
}

// IsInf returns a bool tensor that is true where t is +Inf or -Inf
// (torch.isinf); integer and bool tensors give false everywhere.
func (t *Tensor) IsInf() *Tensor {
	return t.valueTest("isinf", false, func(x *Tensor) *Tensor { return x.Abs().EqScalar(math.Inf(1)) })
}

// IsPosInf returns a bool tensor that is true where t is +Inf
// (torch.isposinf); integer and bool tensors give false everywhere.
func (t *Tensor) IsPosInf() *Tensor {
	return t.valueTest("isposinf", false, func(x *Tensor) *Tensor { return x.EqScalar(math.Inf(1)) })
}

// IsNegInf returns a bool tensor that is true where t is -Inf
// (torch.isneginf); integer and bool tensors give false everywhere.
func (t *Tensor) IsNegInf() *Tensor {
	return t.valueTest("isneginf", false, func(x *Tensor) *Tensor { return x.EqScalar(math.Inf(-1)) })
}

// IsFinite returns a bool tensor that is true where t is neither infinite
// nor NaN (torch.isfinite); integer and bool tensors give true everywhere.
func (t *Tensor) IsFinite() *Tensor {
	return t.valueTest("isfinite", true, func(x *Tensor) *Tensor { return x.Abs().LtScalar(math.Inf(1)) })
}

// valueTest returns f(t) for a floating-point t and a bool tensor of t's
// shape filled with intWant for another.
func (t *Tensor) valueTest(op string, intWant bool, f func(x *Tensor) *Tensor) *Tensor {
	notNil(op, t)
	defer pin(op, t).unpin()
	return composed(op, func() *Tensor {
		if !t.dtype.IsFloat() {
			v := 0.0
			if intWant {
				v = 1
			}
			return t.NewFull(t.shape, v, Bool)
		}
		var out *Tensor
		NoGrad(func() { out = f(t) })
		return out
	})
}

// maxFinite returns the largest finite value of the floating-point dtype dt.
func maxFinite(dt DType) float64 {
	switch dt {
	case Float16:
		return 65504
	case BFloat16:
		return bfloat16Max
	case Float32:
		return math.MaxFloat32
	}
	return math.MaxFloat64
}

// NanToNum returns a copy of t with NaN replaced by nan, +Inf by posinf and
// -Inf by neginf (torch.nan_to_num). A posinf of +Inf (math.Inf(1)) stands
// for PyTorch's default, the largest finite value of t's dtype, and a
// neginf of -Inf for the lowest; torch.nan_to_num(x) is
// x.NanToNum(0, math.Inf(1), math.Inf(-1)). A replacement is rounded to t's
// dtype (1e6 becomes +Inf in float16, as in PyTorch). Integer and bool
// tensors are copied unchanged. The gradient passes where t is finite and
// is zero where an element was replaced.
func (t *Tensor) NanToNum(nan, posinf, neginf float64) *Tensor {
	const op = "nan_to_num"
	notNil(op, t)
	defer pin(op, t).unpin()
	return composed(op, func() *Tensor {
		if !t.dtype.IsFloat() {
			return t.Clone()
		}
		dt := t.dtype
		if math.IsInf(posinf, 1) {
			posinf = maxFinite(dt)
		}
		if math.IsInf(neginf, -1) {
			neginf = -maxFinite(dt)
		}
		with := func(v float64) *Tensor { return Scalar(v, Float64).Cast(dt) }
		var nanAt, posAt, negAt *Tensor
		NoGrad(func() { nanAt, posAt, negAt = t.IsNaN(), t.IsPosInf(), t.IsNegInf() })
		r := Where(negAt, with(neginf), t)
		r = Where(posAt, with(posinf), r)
		return Where(nanAt, with(nan), r)
	})
}

// Trunc rounds every element toward zero (torch.trunc, torch.fix), keeping
// NaN, infinities and the sign of zero; its gradient is zero. An integer
// tensor is copied unchanged, in its dtype. It panics with [ErrDType] for a
// bool tensor, as PyTorch's does.
func (t *Tensor) Trunc() *Tensor {
	const op = "trunc"
	noBoolRounding(op, t)
	defer pin(op, t).unpin()
	return composed(op, func() *Tensor {
		if !t.dtype.IsFloat() {
			return t.Floor()
		}
		return Where(t.LtScalar(0), t.Ceil(), t.Floor())
	})
}

// Frac returns the fractional part of every element, t - Trunc(t), with
// t's sign (torch.frac); infinities give NaN. Its gradient is one. It
// panics with [ErrDType] for an integer or bool tensor, as PyTorch's does.
func (t *Tensor) Frac() *Tensor {
	const op = "frac"
	notNil(op, t)
	floatOnly(op, t)
	defer pin(op, t).unpin()
	return composed(op, func() *Tensor {
		var tr *Tensor
		NoGrad(func() { tr = t.Trunc() })
		return t.Sub(tr)
	})
}

// Lerp returns the linear interpolation start + weight·(end - start)
// elementwise (torch.lerp), with start the receiver; the three broadcast.
// As in PyTorch, where |weight| >= 0.5 it is computed as end - (end -
// start)·(1 - weight), so that weight 1 gives end exactly, and 16-bit
// floats are computed in float32 and rounded once. Gradients flow to all
// three: 1 - weight to start, weight to end and end - start to weight. It
// panics with [ErrDType] for integer or bool operands or when their dtypes
// differ (Cast one first) and with [ErrShape] when the shapes do not
// broadcast. A 0-dimensional CPU weight is read as a scalar on any device
// (see [Tensor.Add]).
func (t *Tensor) Lerp(end, weight *Tensor) *Tensor {
	notNil("lerp", t, end, weight)
	return lerp(t, end, weight, 0)
}

// LerpScalar is [Tensor.Lerp] with a number for the weight; gradients flow
// to start and end.
func (t *Tensor) LerpScalar(end *Tensor, weight float64) *Tensor {
	return lerp(t, end, nil, weight)
}

// lerp is Lerp with a tensor weight w, or, when w is nil, the number ws.
func lerp(s, e, w *Tensor, ws float64) *Tensor {
	const op = "lerp"
	defer asOp(op)
	ops := []*Tensor{s, e}
	if w != nil {
		notNil(op, s, e, w)
		defer hostScalars(op, &s, &e, &w)()
		ops = []*Tensor{s, e, w}
	} else {
		notNil(op, s, e)
		defer hostScalars(op, &s, &e)()
		ops = []*Tensor{s, e}
	}
	defer pin(op, ops...).unpin()
	deviceOf(op, ops...)
	for _, x := range ops {
		if !x.dtype.IsFloat() || x.dtype != s.dtype {
			fail(op, ErrDType, "start, end and weight must share one floating-point dtype, got %v", dtypesOf(ops))
		}
	}
	shapes := make([][]int, len(ops))
	for i, x := range ops {
		shapes[i] = slices.Clone(x.shape)
	}
	broadcastShapes(op, shapes...)
	dt := s.dtype
	var out *Tensor
	NoGrad(func() {
		out = composed(op, func() *Tensor {
			wide := opMath(dt)
			a, b := s.Cast(wide), e.Cast(wide)
			d := b.Sub(a)
			if w == nil {
				if math.Abs(ws) < 0.5 {
					return a.Add(d.MulScalar(ws)).Cast(dt)
				}
				return b.Sub(d.MulScalar(1 - ws)).Cast(dt)
			}
			x := w.Cast(wide)
			low := a.Add(d.Mul(x))
			high := b.Sub(d.Mul(x.RSubScalar(1)))
			return Where(x.Abs().LtScalar(0.5), low, high).Cast(dt)
		})
	})
	if needsGrad(ops...) {
		req := make([]bool, len(ops))
		for i, x := range ops {
			req[i] = x.requiresGrad.Load()
		}
		// A number weight needs nothing saved; a tensor weight is read
		// by the gradients of start and end, which the weight's reads.
		var ss, se, sw *Tensor
		if w != nil {
			ss, se, sw = saveIf(req[2], s), saveIf(req[2], e), saveIf(req[0] || req[1], w)
		}
		record(op, out, ops, compact([]*Tensor{ss, se, sw}), func(g *Tensor) []*Tensor {
			if len(req) == 2 {
				return []*Tensor{
					gradIf(req[0], func() *Tensor { return sumTo(g.MulScalar(1-ws), shapes[0]) }),
					gradIf(req[1], func() *Tensor { return sumTo(g.MulScalar(ws), shapes[1]) }),
				}
			}
			return []*Tensor{
				gradIf(req[0], func() *Tensor { return sumTo(g.Mul(sw.RSubScalar(1)), shapes[0]) }),
				gradIf(req[1], func() *Tensor { return sumTo(g.Mul(sw), shapes[1]) }),
				gradIf(req[2], func() *Tensor { return sumTo(g.Mul(se.Sub(ss)), shapes[2]) }),
			}
		})
	}
	return out
}

// dtypesOf lists the dtypes of ts for an error message, as "float32,
// int64". (A []DType would print as raw bytes under %s, DType being a
// byte.)
func dtypesOf(ts []*Tensor) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.dtype.String()
	}
	return strings.Join(names, ", ")
}

// Outer returns the outer product of the vectors a (n) and b (m), an
// (n, m) tensor whose element (i, j) is a[i]·b[j] (torch.outer, torch.ger);
// the dtypes promote and gradients flow to both. It panics with [ErrShape]
// unless both are 1-dimensional.
func (a *Tensor) Outer(b *Tensor) *Tensor {
	const op = "outer"
	notNil(op, a, b)
	defer pin(op, a, b).unpin()
	if len(a.shape) != 1 || len(b.shape) != 1 {
		fail(op, ErrShape, "expected two 1-dimensional tensors, got shapes %v and %v", Shape(a.shape), Shape(b.shape))
	}
	deviceOf(op, a, b)
	return composed(op, func() *Tensor { return a.Unsqueeze(1).Mul(b.Unsqueeze(0)) })
}

// OneHot returns the one-hot encoding of the int64 class indices t, an
// int64 tensor of t's shape with one more dimension of size numClasses,
// holding 1 at each index and 0 elsewhere (torch.nn.functional.one_hot). A
// numClasses of -1 stands for the largest index plus one. The indices are
// checked on the host (a synchronization on a GPU). It panics with
// [ErrDType] for another dtype, with [ErrIndex] for a negative index or one
// not below numClasses, and with [ErrArgument] for a numClasses below -1 or
// of -1 with an empty t (nothing to infer it from) or with the largest int64
// (one more does not fit), and with [ErrShape] for a result no tensor can
// have. An empty t gives an empty result for any numClasses, as in PyTorch.
func (t *Tensor) OneHot(numClasses int) *Tensor {
	const op = "one_hot"
	notNil(op, t)
	defer pin(op, t).unpin()
	if t.dtype != Int64 {
		fail(op, ErrDType, "class indices must be int64, got %s; Cast them with Long", t.dtype)
	}
	if numClasses < -1 {
		fail(op, ErrArgument, "numClasses must be -1 (inferred) or nonnegative, got %d", numClasses)
	}
	if numClasses == -1 && t.NumElements() == 0 {
		fail(op, ErrArgument, "cannot infer the number of classes from an empty tensor; give numClasses")
	}
	return composed(op, func() *Tensor {
		if t.NumElements() > 0 {
			lo, hi := t.Min().Int64s()[0], t.Max().Int64s()[0]
			if lo < 0 {
				fail(op, ErrIndex, "class values must be nonnegative, got %d", lo)
			}
			if numClasses == -1 {
				if hi >= math.MaxInt {
					fail(op, ErrArgument, "cannot infer the number of classes from the class value %d; give numClasses", hi)
				}
				numClasses = int(hi) + 1
			} else if hi >= int64(numClasses) {
				fail(op, ErrIndex, "class values must be smaller than numClasses %d, got %d", numClasses, hi)
			}
		}
		shape := append(slices.Clone(t.shape), numClasses)
		checkShape(op, shape, Int64)
		if t.NumElements() == 0 {
			// No class to compare: the table of numClasses classes,
			// which may be larger than any device, is not made.
			return t.NewZeros(shape)
		}
		classes := Arange(0, float64(numClasses), 1, Int64, t.Device())
		if numClasses == 0 {
			classes = t.NewZeros(Shape{0})
		}
		return t.Unsqueeze(-1).Eq(classes).Cast(Int64)
	})
}

// Nonzero returns the indices of t's nonzero elements (NaN included), an
// int64 tensor of shape (n, t.Dim()) whose rows are the indices in
// row-major order (torch.nonzero, torch.argwhere). The number of rows
// depends on t's values, which are read on the host (a synchronization on
// a GPU, as in PyTorch).
func (t *Tensor) Nonzero() *Tensor {
	const op = "nonzero"
	notNil(op, t)
	defer pin(op, t).unpin()
	return composed(op, func() *Tensor {
		nd := len(t.shape)
		idx := []int64{}
		at := make([]int64, nd)
		n := 0
		for _, nz := range t.Bools() {
			if nz {
				idx = append(idx, at...)
				n++
			}
			for d := nd - 1; d >= 0; d-- {
				at[d]++
				if at[d] < int64(t.shape[d]) {
					break
				}
				at[d] = 0
			}
		}
		return FromSlice(idx, Shape{n, nd}, t.Device())
	})
}

// NonzeroTuple returns the indices of t's nonzero elements as one int64
// vector per dimension, the columns of [Tensor.Nonzero]
// (torch.nonzero(as_tuple=True)). A 0-dimensional t is taken as a vector of one element, as in
// PyTorch. It synchronizes with the device as Nonzero does.
func (t *Tensor) NonzeroTuple() []*Tensor {
	const op = "nonzero"
	notNil(op, t)
	defer pin(op, t).unpin()
	var cols []*Tensor
	Tidy(func() {
		x := t
		if len(t.shape) == 0 {
			x = t.Reshape(1)
		}
		idx := x.Nonzero()
		cols = make([]*Tensor, len(x.shape))
		for d := range cols {
			cols[d] = Keep(idx.Select(1, d).Contiguous())
		}
	})
	for _, c := range cols {
		track(c) // into the caller's own Tidy, as tidyOut does
	}
	return cols
}

// Argwhere is [Tensor.Nonzero] (torch.argwhere).
func (t *Tensor) Argwhere() *Tensor {
	defer asOp("argwhere")
	return t.Nonzero()
}

// ClampMin limits every element to at least lo (torch.clamp_min,
// torch.clamp(min=lo)), as [Tensor.Clamp] does; for a tensor bound use
// [Tensor.ClampTensor] with a nil hi.
func (a *Tensor) ClampMin(lo float64) *Tensor {
	defer asOp("clamp_min")
	return a.Clamp(lo, math.Inf(1))
}

// ClampMax limits every element to at most hi (torch.clamp_max,
// torch.clamp(max=hi)), as [Tensor.Clamp] does; for a tensor bound use
// [Tensor.ClampTensor] with a nil lo.
func (a *Tensor) ClampMax(hi float64) *Tensor {
	defer asOp("clamp_max")
	return a.Clamp(math.Inf(-1), hi)
}
