package vram

import (
	"math"
	"slices"
)

// This file holds elementwise and reduction ops that PyTorch code uses and
// that are composed from other ops, each of which runs on every device, so
// that they run on every device too.

// composed returns fn's result, made inside a [Tidy] that releases its
// intermediates, and left in the caller's own Tidy ([tidyOut]); a vram
// error raised inside names op. fn must return a new
// tensor, never one of its inputs.
func composed(op string, fn func() *Tensor) (out *Tensor) {
	defer asOp(op)
	return tidyOut(fn)
}

// deviceOf panics as sameDevice does unless ts are on one device, which it
// returns; it leaves the pinning to the caller.
func deviceOf(op string, ts ...*Tensor) *devState {
	ds, p := sameDevice(op, ts...)
	p.unpin()
	return ds
}

// floatResult returns the dtype of a floating-point op's result on an
// input of dtype dt: dt itself for a float, float32 (PyTorch's default
// dtype) for an integer or bool, and float32 for a 16-bit float when
// autocast runs the op in float32 (fp32 says so).
func floatResult(dt DType, fp32 bool) DType {
	switch {
	case !dt.IsFloat():
		return Float32
	case fp32 && (dt == Float16 || dt == BFloat16):
		if _, on := AutocastDType(); on {
			return Float32
		}
	}
	return dt
}

// viaFloat64 returns f(t) computed in float64 and rounded once to the
// result dtype (see floatResult), so that a formula of several steps gives
// a float32 or 16-bit result as close as a single kernel's; gradients flow
// through f.
func (t *Tensor) viaFloat64(op string, fp32 bool, f func(x *Tensor) *Tensor) *Tensor {
	return composed(op, func() *Tensor {
		t.live(op)
		dt := floatResult(t.dtype, fp32)
		return f(t.Cast(Float64)).Cast(dt)
	})
}

// Log10 returns the base-10 logarithm of t (torch.log10). Integer and
// bool tensors give float32, as in PyTorch; the result is computed in
// float64 and rounded once, so exact powers of ten give exact results in
// float32. Under [Autocast] a 16-bit input gives float32.
func (t *Tensor) Log10() *Tensor {
	return t.viaFloat64("log10", true, func(x *Tensor) *Tensor { return x.Log().DivScalar(math.Ln10) })
}

// Log2 returns the base-2 logarithm of t (torch.log2), with the dtype rules of
// [Tensor.Log10].
func (t *Tensor) Log2() *Tensor {
	return t.viaFloat64("log2", true, func(x *Tensor) *Tensor { return x.Log().DivScalar(math.Ln2) })
}

// Sinh returns the hyperbolic sine of t (torch.sinh), with the dtype rules of
// [Tensor.Log10]; it keeps full relative precision near zero.
func (t *Tensor) Sinh() *Tensor {
	return t.viaFloat64("sinh", true, func(x *Tensor) *Tensor {
		return x.Expm1().Sub(x.Neg().Expm1()).MulScalar(0.5)
	})
}

// Cosh returns the hyperbolic cosine of t (torch.cosh), with the dtype rules of
// [Tensor.Log10].
func (t *Tensor) Cosh() *Tensor {
	return t.viaFloat64("cosh", true, func(x *Tensor) *Tensor {
		return x.Exp().Add(x.Neg().Exp()).MulScalar(0.5)
	})
}

// Tan returns the tangent of t (torch.tan), with the dtype rules of
// [Tensor.Log10].
func (t *Tensor) Tan() *Tensor {
	return t.viaFloat64("tan", true, func(x *Tensor) *Tensor { return x.Sin().Div(x.Cos()) })
}

// The coefficients of the rational approximation of atan on [0, 0.66]
// from the Cephes library: atan(x) = x + x·z·P(z)/Q(z) with z = x², good to
// about one unit in the last place of a float64.
var (
	atanP = [...]float64{-8.750608600031904122785e-01, -1.615753718733365076637e+01,
		-7.500855792314704667340e+01, -1.228866684490136173410e+02, -6.485021904942025371773e+01}
	atanQ = [...]float64{2.485846490142306297962e+01, 1.650270098316988542046e+02,
		4.328810604912902668951e+02, 4.853903996359136964868e+02, 1.945506571482613964425e+02}
)

const (
	tan3Pi8  = 2.41421356237309504880      // tan(3π/8)
	piO2Lost = 6.123233995736765886130e-17 // π/2 less its float64 rounding
)

// atanRaw returns atan(x) for a float64 x, composed without recording:
// |x| is reduced to [0, 0.66] by atan(a) = π/2 - atan(1/a) above tan(3π/8)
// and atan(a) = π/4 + atan((a-1)/(a+1)) between 0.66 and there.
func atanRaw(x *Tensor) *Tensor {
	var out *Tensor
	NoGrad(func() {
		out = composed("atan", func() *Tensor {
			a := x.Abs()
			big, mid := a.GtScalar(tan3Pi8), a.GtScalar(0.66)
			u := Where(big, a.RDivScalar(-1), Where(mid, a.SubScalar(1).Div(a.AddScalar(1)), a))
			// π/2 and π/4 rounded to float64, and what the rounding lost,
			// added last.
			pi2, pi4 := float64(math.Pi/2), float64(math.Pi/4)
			base := Where(big, Scalar(pi2, Float64), Where(mid, Scalar(pi4, Float64), Scalar(0, Float64)))
			lost := Where(big, Scalar(piO2Lost, Float64), Where(mid, Scalar(piO2Lost/2, Float64), Scalar(0, Float64)))
			z := u.Square()
			p := z.MulScalar(atanP[0])
			for _, c := range atanP[1:] {
				p = p.AddScalar(c).Mul(z)
			}
			q := z
			for i, c := range atanQ {
				q = q.AddScalar(c)
				if i < len(atanQ)-1 {
					q = q.Mul(z)
				}
			}
			r := base.Add(u.Mul(p.Div(q)).Add(u)).Add(lost)
			// A zero keeps its sign.
			return Where(x.EqScalar(0), x, Where(x.LtScalar(0), r.Neg(), r))
		})
	})
	return out
}

// inverseTrig returns the result of an inverse trigonometric op computed
// in float64 by value without recording, and records deriv(x, g), given
// the float64 input, as its backward.
func (t *Tensor) inverseTrig(op string, value func(x *Tensor) *Tensor, deriv func(x, g *Tensor) *Tensor) *Tensor {
	defer asOp(op)
	t.live(op)
	dt := floatResult(t.dtype, op != "atan")
	var out *Tensor
	NoGrad(func() {
		out = composed(op, func() *Tensor { return value(t.Cast(Float64)).Cast(dt) })
	})
	if needsGrad(t) && t.dtype.IsFloat() {
		x := t.share()
		record(op, out, []*Tensor{t}, []*Tensor{x}, func(g *Tensor) []*Tensor {
			return []*Tensor{composed(op, func() *Tensor {
				return deriv(x.Cast(Float64), g.Cast(Float64)).Cast(x.dtype)
			})}
		})
	}
	return out
}

// Atan returns the arctangent of t (torch.atan), in (-π/2, π/2). Integer and bool
// tensors give float32; the result is computed in float64 and rounded
// once.
func (t *Tensor) Atan() *Tensor {
	return t.inverseTrig("atan", atanRaw, func(x, g *Tensor) *Tensor { return g.Div(x.Square().AddScalar(1)) })
}

// Asin returns the arcsine of t (torch.asin), in [-π/2, π/2], and NaN outside [-1, 1],
// with the dtype rules of [Tensor.Log10].
func (t *Tensor) Asin() *Tensor {
	return t.inverseTrig("asin", func(x *Tensor) *Tensor {
		return atanRaw(x.Div(x.RSubScalar(1).Mul(x.AddScalar(1)).Sqrt()))
	}, func(x, g *Tensor) *Tensor { return g.Div(x.RSubScalar(1).Mul(x.AddScalar(1)).Sqrt()) })
}

// Acos returns the arccosine of t (torch.acos), in [0, π], and NaN outside [-1, 1],
// with the dtype rules of [Tensor.Log10].
func (t *Tensor) Acos() *Tensor {
	return t.inverseTrig("acos", func(x *Tensor) *Tensor {
		return atanRaw(x.RSubScalar(1).Div(x.AddScalar(1)).Sqrt()).MulScalar(2)
	}, func(x, g *Tensor) *Tensor { return g.Div(x.RSubScalar(1).Mul(x.AddScalar(1)).Sqrt()).Neg() })
}

// Atan2 returns the angle of the point (x, y) = (b, a) elementwise
// (torch.atan2(a, b)), in [-π, π], with C's rules for zeros of either
// sign and infinities. a and b broadcast; integer and bool operands give
// float32, float ones promote. Under [Autocast] 16-bit operands of
// different dtypes run in float32. Gradients flow to both.
func (a *Tensor) Atan2(b *Tensor) *Tensor {
	const op = "atan2"
	defer asOp(op)
	defer hostScalars(op, &a, &b)()
	defer pin(op, a, b).unpin()
	if pa, pb, done := autocastPromote(a, b); done != nil {
		defer done()
		a, b = pa, pb
	}
	deviceOf(op, a, b)
	broadcastShapes(op, a.shape, b.shape)
	dt := floatResult(resultType(a, b), false)
	var out *Tensor
	NoGrad(func() {
		out = composed(op, func() *Tensor {
			y, x := a.Cast(Float64), b.Cast(Float64)
			neg := func(v *Tensor) *Tensor { return v.LtScalar(0).LogicalOr(v.RDivScalar(1).LtScalar(0)) }
			xneg, yneg := neg(x), neg(y)
			q := atanRaw(y.Div(x))
			zero := y.EqScalar(0).LogicalAnd(x.EqScalar(0))
			q = Where(zero, y.Mul(x.Abs().AddScalar(1)), q) // ±0, shaped as the broadcast
			inf := y.Abs().EqScalar(math.Inf(1)).LogicalAnd(x.Abs().EqScalar(math.Inf(1)))
			q = Where(inf, Where(xneg.Ne(yneg), Scalar(-math.Pi/4, Float64), Scalar(math.Pi/4, Float64)), q)
			turn := Where(yneg, Scalar(-math.Pi, Float64), Scalar(math.Pi, Float64))
			return Where(xneg, q.Add(turn), q).Cast(dt)
		})
	})
	if needsGrad(a, b) && a.dtype.IsFloat() && b.dtype.IsFloat() {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		sv := save(a, b)
		record(op, out, []*Tensor{a, b}, sv, func(g *Tensor) []*Tensor {
			// d/dy = x/(x²+y²), d/dx = -y/(x²+y²)
			s := sv[0].Square().Add(sv[1].Square())
			return []*Tensor{
				gradIf(ra, func() *Tensor { return sumTo(g.Mul(sv[1]).Div(s), as) }),
				gradIf(rb, func() *Tensor { return sumTo(g.Mul(sv[0]).Div(s).Neg(), bs) }),
			}
		})
	}
	return out
}

// Logsumexp returns log(sum(exp(t))) over dims (torch.logsumexp; all of
// them when dims is empty), computed stably: each slice is shifted by its maximum first, so
// large values do not overflow, and a slice of -Inf only gives -Inf
// (not NaN); +Inf gives +Inf and NaN propagates. Integer and bool tensors
// give float32; 16-bit floats are computed in float32 and rounded once, and
// under [Autocast] give float32. The gradient is softmax(t) over dims.
func (t *Tensor) Logsumexp(dims []int, keepDim bool) *Tensor {
	const op = "logsumexp"
	defer asOp(op)
	defer pin(op, t).unpin()
	dt := floatResult(t.dtype, true)
	axes := t.reduceAxes(op, dims)
	var out *Tensor
	NoGrad(func() {
		out = composed(op, func() *Tensor {
			x := t.Cast(opMath(dt))
			if x.NumElements() == 0 {
				return x.Exp().SumKeepDim(axes...).Log().Cast(dt)
			}
			m := x.MaxKeepDim(axes...)
			m = Where(m.Abs().EqScalar(math.Inf(1)), m.NewZeros(nil), m)
			return x.Sub(m).Exp().SumKeepDim(axes...).Log().Add(m).Cast(dt)
		})
	})
	if needsGrad(t) && t.dtype.IsFloat() {
		sv := save(t, out)
		record(op, out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			return []*Tensor{composed(op, func() *Tensor {
				w := opMath(sv[0].dtype)
				return g.Cast(w).Mul(sv[0].Cast(w).Sub(sv[1].Cast(w)).Exp()).Cast(sv[0].dtype)
			})}
		})
	}
	return finishReduce(out, axes, keepDim)
}

// Addcmul returns t + value·t1·t2 (torch.addcmul), broadcasting all three
// and promoting their dtypes; under [Autocast] 16-bit operands of different
// dtypes run in float32. It panics with [ErrArgument] for a fractional
// value with integer operands, as PyTorch's does.
func (t *Tensor) Addcmul(t1, t2 *Tensor, value float64) *Tensor {
	return t.addc("addcmul", t1, t2, value, (*Tensor).Mul)
}

// Addcdiv returns t + value·t1/t2 (torch.addcdiv), broadcasting and
// promoting as [Tensor.Addcmul]. It panics with [ErrDType] when t1 and t2
// are both integer or bool, as PyTorch's does (its integer division would
// truncate): Cast one of them first.
func (t *Tensor) Addcdiv(t1, t2 *Tensor, value float64) *Tensor {
	notNil("addcdiv", t, t1, t2)
	if !t1.dtype.IsFloat() && !t2.dtype.IsFloat() {
		fail("addcdiv", ErrDType, "integer division with addcdiv is not supported (t1 %s, t2 %s); Cast one of them to a float type first", t1.dtype, t2.dtype)
	}
	return t.addc("addcdiv", t1, t2, value, (*Tensor).Div)
}

func (t *Tensor) addc(op string, t1, t2 *Tensor, value float64, f func(a, b *Tensor) *Tensor) *Tensor {
	notNil(op, t, t1, t2)
	defer hostScalars(op, &t, &t1, &t2)()
	defer pin(op, t, t1, t2).unpin()
	deviceOf(op, t, t1, t2)
	broadcastShapes(op, t.shape, t1.shape, t2.shape)
	return composed(op, func() *Tensor {
		a, b, c := autocastPromote3(t, t1, t2)
		dt := promote(promote(a.dtype, b.dtype), c.dtype)
		if !dt.IsFloat() && value != math.Trunc(value) {
			fail(op, ErrArgument, "a fractional value %v with %s operands; Cast them to a float type first", value, dt)
		}
		p := f(b, c)
		if value != 1 {
			p = p.MulScalar(value)
		}
		return a.Add(p)
	})
}

// autocastPromote3 is autocastPromote for three operands: under an
// Autocast region, float32 when their floating-point dtypes differ.
func autocastPromote3(a, b, c *Tensor) (*Tensor, *Tensor, *Tensor) {
	if _, on := AutocastDType(); !on {
		return a, b, c
	}
	low := func(t *Tensor) bool { return t.dtype == Float16 || t.dtype == BFloat16 }
	mixed := false
	var first DType
	for _, x := range []*Tensor{a, b, c} {
		if x.dtype == Float32 || low(x) {
			if first == 0 && !mixed {
				first = x.dtype
			}
			if x.dtype != first {
				mixed = true
			}
		}
	}
	if !mixed {
		return a, b, c
	}
	up := func(t *Tensor) *Tensor {
		if low(t) {
			return t.Cast(Float32)
		}
		return t
	}
	return up(a), up(b), up(c)
}

// Dot returns the dot product of two vectors of one length and one dtype
// (torch.dot), a 0-dimensional tensor of that dtype; float16 and bfloat16
// accumulate in float32, and integers wrap around in their dtype, as on
// PyTorch's CPU. It panics with [ErrShape] unless both are 1-dimensional
// of one length, and with [ErrDType] for bool vectors and when their
// dtypes differ, as PyTorch's does
// (under [Autocast], PyTorch's promote rule: mixed 16-bit and float32
// operands run in float32, two of one 16-bit dtype keep it).
func (a *Tensor) Dot(b *Tensor) *Tensor {
	const op = "dot"
	notNil(op, a, b)
	defer pin(op, a, b).unpin()
	if pa, pb, done := autocastPromote(a, b); done != nil {
		defer done()
		a, b = pa, pb
	}
	deviceOf(op, a, b)
	if len(a.shape) != 1 || len(b.shape) != 1 || a.shape[0] != b.shape[0] {
		fail(op, ErrShape, "expected two vectors of one length, got shapes %v and %v", Shape(a.shape), Shape(b.shape))
	}
	if a.dtype != b.dtype {
		fail(op, ErrDType, "expected both vectors to have the same dtype, got %s and %s; Cast one first", a.dtype, b.dtype)
	}
	if a.dtype == Bool {
		fail(op, ErrDType, "dot is not defined for bool vectors, as in PyTorch; Cast them to an integer or float dtype first")
	}
	// The sum is part of the product, not an op of the float32 list: two
	// 16-bit vectors give their dtype under Autocast, as PyTorch's dot.
	var out *Tensor
	withoutAutocast(func() {
		out = composed(op, func() *Tensor {
			s := a.Mul(b).Sum()
			if s.dtype == a.dtype {
				return s
			}
			// Sum counts integers in int64; torch.dot keeps their dtype
			// and wraps as it does, which the cast back gives.
			return s.Cast(a.dtype)
		})
	})
	return out
}

// Cross returns the cross product of a and b along dim, which must have
// size 3 in both (torch.linalg.cross); the other dimensions broadcast and
// the dtypes promote. Under [Autocast] 16-bit and float32 operands run in
// float32. It panics with [ErrShape] when dim's size is not 3 or the
// shapes do not broadcast, and with [ErrIndex] for a dim out of range.
func (a *Tensor) Cross(b *Tensor, dim int) *Tensor {
	const op = "cross"
	notNil(op, a, b)
	defer pin(op, a, b).unpin()
	if pa, pb, done := autocastPromote(a, b); done != nil {
		defer done()
		a, b = pa, pb
	}
	deviceOf(op, a, b)
	if len(a.shape) != len(b.shape) {
		fail(op, ErrShape, "a %v and b %v must have the same number of dimensions", Shape(a.shape), Shape(b.shape))
	}
	d := a.axis(op, dim)
	if a.shape[d] != 3 || b.shape[d] != 3 {
		fail(op, ErrShape, "dimension %d must have size 3 in both, got %v and %v", dim, Shape(a.shape), Shape(b.shape))
	}
	broadcastShapes(op, a.shape, b.shape)
	return composed(op, func() *Tensor {
		a1, a2 := a.Roll([]int{-1}, []int{d}), a.Roll([]int{-2}, []int{d})
		b1, b2 := b.Roll([]int{-1}, []int{d}), b.Roll([]int{-2}, []int{d})
		return a1.Mul(b2).Sub(a2.Mul(b1))
	})
}

// Cdist returns the p-norm distances between the rows of x1 (…, P, M)
// and those of x2 (…, R, M), a (…, P, R) tensor (torch.cdist); the batch
// dimensions broadcast. p is as in [Tensor.Norm] (p >= 0, math.Inf(1)
// included); as there, the gradient is 0 where a distance is 0. It runs in
// float32 under [Autocast]. It panics with [ErrShape] for operands of fewer
// than 2 dimensions or of different row sizes, with [ErrArgument] for a
// negative or NaN p, and with [ErrDType] for integer operands.
func Cdist(x1, x2 *Tensor, p float64) *Tensor {
	const op = "cdist"
	notNil(op, x1, x2)
	defer pin(op, x1, x2).unpin()
	deviceOf(op, x1, x2)
	if len(x1.shape) < 2 || len(x2.shape) < 2 || x1.shape[len(x1.shape)-1] != x2.shape[len(x2.shape)-1] {
		fail(op, ErrShape, "expected (..., P, M) and (..., R, M) operands, got %v and %v", Shape(x1.shape), Shape(x2.shape))
	}
	if !(p >= 0) {
		fail(op, ErrArgument, "p must be a nonnegative number, got %v", p)
	}
	floatOnly(op, x1)
	floatOnly(op, x2)
	return composed(op, func() *Tensor {
		a, b := x1, x2
		if up, _ := autocastUp(a); up != a {
			a = up
		}
		if up, _ := autocastUp(b); up != b {
			b = up
		}
		diff := a.Unsqueeze(-2).Sub(b.Unsqueeze(-3))
		return diff.Norm(p, []int{-1}, false)
	})
}
