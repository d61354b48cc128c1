package vram

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram/backend"
)

// Fmod returns the remainder of a divided by b truncated toward zero,
// elementwise (torch.fmod): the result has a's sign, as C's fmod. a and b
// broadcast and promote; integer dtypes stay integer, and a 0-dimensional
// CPU tensor is read as a scalar (see [Tensor.Add]). The gradient is g for
// a and -g·trunc(a/b) for b. Floating-point remainders are exact, which
// needs a remainder kernel of the device ([backend.Modder]; the CPU and
// simulated devices have one): elsewhere it panics with [ErrBackend]
// wrapping backend.ErrNotImplemented rather than round. Integer ones are
// composed and run on every device; an integer zero divisor panics with
// [ErrBackend]. Bool operands panic with [ErrDType].
func (a *Tensor) Fmod(b *Tensor) *Tensor { return modOp("fmod", a, b, false) }

// Remainder returns the remainder of a divided by b rounded down,
// elementwise (torch.remainder, Python's %): the result has b's sign. The
// rules are [Tensor.Fmod]'s; the gradient is g for a and -g·floor(a/b) for
// b.
func (a *Tensor) Remainder(b *Tensor) *Tensor { return modOp("remainder", a, b, true) }

// FmodScalar returns [Tensor.Fmod] of a and s: an integer tensor stays
// integer for a whole s and becomes float32 otherwise, as in PyTorch.
func (a *Tensor) FmodScalar(s float64) *Tensor {
	defer asOp("fmod")
	b := modScalar(a, s)
	defer b.Release()
	return a.Fmod(b)
}

// RemainderScalar returns [Tensor.Remainder] of a and s (x % s in
// Python), with the dtype rules of [Tensor.FmodScalar].
func (a *Tensor) RemainderScalar(s float64) *Tensor {
	defer asOp("remainder")
	b := modScalar(a, s)
	defer b.Release()
	return a.Remainder(b)
}

// FloorDivide returns a / b rounded down, elementwise (torch.floor_divide,
// Python's //), with the rules of [Tensor.Fmod]: integer operands give
// an exact integer quotient on every device, floating-point ones
// PyTorch's result (the quotient of a - fmod(a, b), so that
// a = FloorDivide(a, b)·b + Remainder(a, b) holds as closely as it can),
// which needs the device's remainder kernel. A zero float divisor gives
// ±Inf or NaN. It is not differentiable: the result never requires grad.
func (a *Tensor) FloorDivide(b *Tensor) *Tensor {
	const op = "floor_divide"
	defer asOp(op)
	notNil(op, a, b)
	defer hostScalars(op, &a, &b)()
	defer pin(op, a, b).unpin()
	var out *Tensor
	NoGrad(func() {
		out = composed(op, func() *Tensor {
			a, b, dt := modOperands(op, a, b)
			if !dt.IsFloat() {
				q := binaryRaw(op, backend.Div, a, b)
				m := a.Sub(q.Mul(b))
				return q.Sub(modAdjust(m, b).Cast(dt))
			}
			m := fmodRaw(op, a, b)
			div := a.Sub(m).Div(b)
			div = div.Sub(modAdjust(m, b).Cast(dt))
			f := div.Floor()
			f = Where(div.Sub(f).GtScalar(0.5), f.AddScalar(1), f)
			// A zero quotient keeps the sign of a/b; a zero divisor gives a/b.
			q := a.Div(b)
			f = Where(div.EqScalar(0), q.MulScalar(0), f)
			return Where(b.EqScalar(0), q, f)
		})
	})
	return out
}

// FloorDivideScalar returns [Tensor.FloorDivide] of a and s, with the
// dtype rules of [Tensor.FmodScalar].
func (a *Tensor) FloorDivideScalar(s float64) *Tensor {
	defer asOp("floor_divide")
	b := modScalar(a, s)
	defer b.Release()
	return a.FloorDivide(b)
}

// modScalar returns s as a 0-dimensional tensor on the CPU that promotes
// with a as a Python number does; the caller releases it.
func modScalar(a *Tensor, s float64) *Tensor {
	a.live("remainder")
	if !a.dtype.IsFloat() && s == math.Trunc(s) && !math.IsInf(s, 0) {
		checkValue("remainder", s, Int64)
		return Scalar(s, Int64)
	}
	if !a.dtype.IsFloat() {
		return Scalar(s) // float32, PyTorch's default dtype
	}
	return Scalar(s, Float64) // a's dtype wins
}

// modAdjust returns the bool mask where the truncated remainder m and the
// divisor b have different signs and m is not zero: where the rounded-down
// quotient is one less and the remainder one b more.
func modAdjust(m, b *Tensor) *Tensor {
	return m.EqScalar(0).LogicalNot().LogicalAnd(m.LtScalar(0).Ne(b.LtScalar(0)))
}

// modOperands checks the operands of the remainder ops and returns them in
// their common dtype, with the dtype.
func modOperands(op string, a, b *Tensor) (*Tensor, *Tensor, DType) {
	notNil(op, a, b)
	deviceOf(op, a, b)
	broadcastShapes(op, a.shape, b.shape)
	if a.dtype == Bool && b.dtype == Bool {
		fail(op, ErrDType, "%s of bool tensors is not supported; Cast to a number type first", op)
	}
	dt := resultType(a, b)
	if dt == Bool {
		dt = Int64
	}
	return a.Cast(dt), b.Cast(dt), dt
}

// fmodRaw returns the truncated remainder of float a and b of one dtype,
// broadcast, from the device's kernel, without recording.
func fmodRaw(op string, a, b *Tensor) *Tensor {
	ds := deviceOf(op, a, b)
	m, ok := ds.bd.(backend.Modder)
	if !ok {
		panic(&Error{Op: op, Kind: ErrBackend, Detail: fmt.Sprintf("%s has no remainder kernel for %s", ds.dev, a.dtype),
			Err: backend.ErrNotImplemented})
	}
	shape := broadcastShapes(op, a.shape, b.shape)
	out := newTensorLike(op, ds, a.dtype, shape, a, b)
	check(op, m.Fmod(ds.stream(), out.bv(), expandView(op, a, shape), expandView(op, b, shape)))
	return out
}

// modOp is Fmod (floor false) or Remainder (floor true).
func modOp(op string, a, b *Tensor, floor bool) *Tensor {
	defer asOp(op)
	notNil(op, a, b)
	defer hostScalars(op, &a, &b)()
	defer pin(op, a, b).unpin()
	var out *Tensor
	NoGrad(func() {
		out = composed(op, func() *Tensor {
			x, y, dt := modOperands(op, a, b)
			var m *Tensor
			if dt.IsFloat() {
				m = fmodRaw(op, x, y)
			} else {
				m = x.Sub(binaryRaw(op, backend.Div, x, y).Mul(y))
			}
			if floor {
				m = Where(modAdjust(m, y), m.Add(y), m)
			}
			return m
		})
	})
	if needsGrad(a, b) && out.dtype.IsFloat() {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		// Only b's gradient reads the operands.
		var sv []*Tensor
		if rb {
			sv = save(a, b)
		}
		record(op, out, []*Tensor{a, b}, sv, func(g *Tensor) []*Tensor {
			return []*Tensor{
				gradIf(ra, func() *Tensor { return sumTo(g, as) }),
				gradIf(rb, func() *Tensor {
					q := sv[0].Div(sv[1])
					if floor {
						q = q.Floor()
					} else {
						q = Where(q.LtScalar(0), q.Neg().Floor().Neg(), q.Floor())
					}
					return sumTo(g.Mul(q).Neg(), bs)
				}),
			}
		})
	}
	return out
}
