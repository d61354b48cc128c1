package vram

import (
	"math"
	"slices"
	"weak"

	"github.com/vramgo/vram/backend"
)

// sameDevice pins every tensor (see pin; a nil one is an error, so callers leave optional tensors such as a missing bias out) and checks that
// they are on one device, which it returns. The caller unpins: ds, p :=
// sameDevice(op, a, b); defer p.unpin().
func sameDevice(op string, ts ...*Tensor) (*devState, pins) {
	var ds *devState
	var p pins
	for i, t := range ts {
		if absent(t) {
			p.unpin()
			nilTensor(op, t, i, len(ts))
		}
		if ds == nil {
			ds = t.ds()
		} else if t.ds() != ds {
			p.unpin()
			panic(&DeviceMismatchError{Op: op, Expected: ds.dev, Got: t.Device()})
		}
		p.add(op, t)
	}
	return ds, p
}

// A 0-dimensional CPU tensor is read as a scalar by the elementwise
// operations (binary ops, comparisons, Where, the in-place ops and CopyFrom),
// as PyTorch reads it: x.Mul(vram.Scalar(2)) works for x on any device, the
// scalar being copied to x's device first. Only 0-d CPU tensors are
// special: a 0-d tensor on a GPU, or a CPU tensor of any other shape,
// combined with a tensor of another device is a device mismatch.

// isHostScalar reports whether t is a 0-dimensional CPU tensor.
func isHostScalar(t *Tensor) bool {
	return !absent(t) && len(t.shape) == 0 && t.ref.st.ds.dev.Kind == "cpu"
}

func noRelease() {}

// hostScalars replaces each 0-d CPU operand *p by its copy on the device of
// the first operand that is not one, when that device is not the CPU, and
// returns a function that releases the copies (defer it). The copies are
// made with To, so gradients flow back to the CPU tensor. Other operands
// are left for sameDevice to check.
func hostScalars(op string, ps ...**Tensor) func() {
	for _, p := range ps {
		if t := *p; !absent(t) && !isHostScalar(t) {
			return hostScalarsOnto(op, t.ref.st.ds, ps...)
		}
	}
	return noRelease
}

// hostScalarsOnto is hostScalars with the destination device given: the
// device of the tensor that an in-place operation writes.
func hostScalarsOnto(op string, dst *devState, ps ...**Tensor) func() {
	if dst.dev.Kind == "cpu" {
		return noRelease
	}
	var moved []*Tensor
	for _, p := range ps {
		if t := *p; isHostScalar(t) {
			t.live(op)
			m := scalarOnto(t, dst)
			moved = append(moved, m)
			*p = m
		}
	}
	if moved == nil {
		return noRelease
	}
	return func() {
		for _, m := range moved {
			m.Release()
		}
	}
}

// scalarOnto returns the host scalar t on dst. A value that float64 holds
// exactly, of a scalar that needs no gradient, is filled in by a kernel
// rather than copied from the host, which a graph capture could not
// record; a scalar that requires grad is moved, so that its gradient flows
// back to it.
func scalarOnto(t *Tensor, dst *devState) *Tensor {
	if t.RequiresGrad() {
		return t.To(dst.dev)
	}
	if v := t.Item(); t.dtype.IsFloat() || math.Abs(v) <= 1<<53 {
		return Full(Shape{}, v, t.dtype, dst.dev)
	}
	return t.To(dst.dev)
}

// castIfNeeded returns t converted to dt (a new reference either way).
func castIfNeeded(t *Tensor, dt DType) *Tensor {
	if t.dtype == dt {
		return t.identity("cast")
	}
	return t.Cast(dt)
}

// Cast returns t converted to dtype dt (a copy; a new reference when dt is
// already t's dtype). Gradients flow back, converted to t's dtype.
// Conversion to an integer type truncates toward zero.
func (t *Tensor) Cast(dt DType) *Tensor {
	defer pin("cast", t).unpin()
	if !dt.b().Valid() {
		fail("cast", ErrDType, "invalid dtype %v", dt)
	}
	if dt == t.dtype {
		return t.identity("cast")
	}
	out := newTensorLike("cast", t.ds(), dt, t.shape, t)
	check("cast", t.ds().bd.Copy(t.ds().stream(), out.bv(), t.bv()))
	if needsGrad(t) && dt.IsFloat() {
		src := t.dtype
		record("cast", out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Cast(src)} })
	}
	return out
}

// Float returns t as float32 (PyTorch's .float()).
func (t *Tensor) Float() *Tensor {
	defer asOp("float")
	return t.Cast(Float32)
}

// Half returns t as float16.
func (t *Tensor) Half() *Tensor {
	defer asOp("half")
	return t.Cast(Float16)
}

// BFloat16 returns t as bfloat16.
func (t *Tensor) BFloat16() *Tensor {
	defer asOp("bfloat16")
	return t.Cast(BFloat16)
}

// Long returns t as int64.
func (t *Tensor) Long() *Tensor {
	defer asOp("long")
	return t.Cast(Int64)
}

// fill sets every element in place; nothing is recorded.
func (t *Tensor) fill(op string, v float64) {
	check(op, t.ds().bd.Fill(t.ds().stream(), t.bv(), v))
}

// binaryRaw computes op(a, b) with broadcasting and type promotion and
// without recording.
func binaryRaw(op string, k backend.BinaryOp, a, b *Tensor) *Tensor {
	defer hostScalars(op, &a, &b)()
	ds, held := sameDevice(op, a, b)
	defer held.unpin()
	shape := broadcastShapes(op, a.shape, b.shape)
	refuseBool(op, k, a, b)
	dt := resultType(a, b)
	if (k == backend.LogicalAnd || k == backend.LogicalOr) && dt != Bool {
		ac, bc := castRaw(a, Bool), castRaw(b, Bool)
		defer ac.Release()
		defer bc.Release()
		a, b, dt = ac, bc, Bool
	} else if a.dtype != dt || b.dtype != dt {
		ac, bc := castRaw(a, dt), castRaw(b, dt)
		defer ac.Release()
		defer bc.Release()
		a, b = ac, bc
	}
	odt := dt
	if k.IsComparison() {
		odt = Bool
	}
	out := newTensorLike(op, ds, odt, shape, a, b)
	check(op, ds.bd.Binary(ds.stream(), k, out.bv(), expandView(op, a, shape), expandView(op, b, shape)))
	return out
}

// castRaw converts without recording; the result is a new reference.
func castRaw(t *Tensor, dt DType) *Tensor {
	if t.dtype == dt {
		return t.view(t.shape, t.strides, t.offset)
	}
	out := newTensorLike("cast", t.ds(), dt, t.shape, t)
	check("cast", t.ds().bd.Copy(t.ds().stream(), out.bv(), t.bv()))
	return out
}

func scalarRaw(op string, k backend.BinaryOp, a *Tensor, s float64, reversed bool) *Tensor {
	_, held := sameDevice(op, a)
	defer held.unpin()
	refuseBool(op, k, a)
	dt := a.dtype
	if !dt.IsFloat() && (!integral(s) || k == backend.Div) && !k.IsComparison() {
		dt = Float32 // int / 2, int + 0.5 and int + Inf are float, as in PyTorch
	}
	if dt == Bool && !k.IsComparison() && k != backend.LogicalAnd && k != backend.LogicalOr {
		dt = Int64
	}
	if !dt.IsFloat() && k != backend.LogicalAnd && k != backend.LogicalOr && integral(s) && !inRange(s, dt) {
		// An integral s that dt cannot hold would wrap inside the kernel.
		switch {
		case k.IsComparison():
			// Every element compares with s as with an infinity of
			// its sign, which the kernels compare exactly.
			s = math.Copysign(math.Inf(1), s)
		case k == backend.Maximum && s < 0, k == backend.Minimum && s > 0:
			// s lies beyond every element: the result is a itself.
			v := castRaw(a, dt)
			defer v.Release()
			return v.clone()
		default:
			checkValue(op, s, dt)
		}
	}
	src := a
	if dt != a.dtype {
		src = castRaw(a, dt)
		defer src.Release()
	}
	odt := dt
	if k.IsComparison() {
		odt = Bool
	}
	out := newTensorLike(op, a.ds(), odt, a.shape, a)
	check(op, a.ds().bd.Scalar(a.ds().stream(), k, out.bv(), src.bv(), s, reversed))
	return out
}

// Add returns a + b, broadcasting shapes and promoting dtypes. It panics
// with a [*DeviceMismatchError] when a and b live on different devices,
// unless one of them is a 0-dimensional CPU tensor, which is read as a
// scalar on the other's device as in PyTorch; it panics with [ErrShape]
// when their shapes do not broadcast.
func (a *Tensor) Add(b *Tensor) *Tensor {
	defer hostScalars("add", &a, &b)()
	defer pin("add", a, b).unpin()
	out := binaryRaw("add", backend.Add, a, b)
	if needsGrad(a, b) {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		record("add", out, []*Tensor{a, b}, nil, func(g *Tensor) []*Tensor {
			return []*Tensor{gradIf(ra, func() *Tensor { return sumTo(g, as) }), gradIf(rb, func() *Tensor { return sumTo(g, bs) })}
		})
	}
	return out
}

func gradIf(need bool, f func() *Tensor) *Tensor {
	if !need {
		return nil
	}
	return f()
}

// Sub returns a - b (broadcasting; see [Tensor.Add]). It panics with
// [ErrDType] when a or b is a bool tensor, as PyTorch's does: use
// LogicalNot to invert a mask.
func (a *Tensor) Sub(b *Tensor) *Tensor {
	defer hostScalars("sub", &a, &b)()
	defer pin("sub", a, b).unpin()
	out := binaryRaw("sub", backend.Sub, a, b)
	if needsGrad(a, b) {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		record("sub", out, []*Tensor{a, b}, nil, func(g *Tensor) []*Tensor {
			return []*Tensor{gradIf(ra, func() *Tensor { return sumTo(g, as) }), gradIf(rb, func() *Tensor {
				n := g.Neg()
				defer n.Release()
				return sumTo(n, bs)
			})}
		})
	}
	return out
}

// Mul returns a * b elementwise (broadcasting; see [Tensor.Add]).
func (a *Tensor) Mul(b *Tensor) *Tensor {
	defer hostScalars("mul", &a, &b)()
	defer pin("mul", a, b).unpin()
	out := binaryRaw("mul", backend.Mul, a, b)
	if needsGrad(a, b) {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		// a's gradient reads b and b's reads a: keep only what is read.
		sa, sb := saveIf(rb, a), saveIf(ra, b)
		record("mul", out, []*Tensor{a, b}, compact([]*Tensor{sa, sb}), func(g *Tensor) []*Tensor {
			return []*Tensor{
				gradIf(ra, func() *Tensor { return sumTo(g.Mul(sb), as) }),
				gradIf(rb, func() *Tensor { return sumTo(g.Mul(sa), bs) }),
			}
		})
	}
	return out
}

// Div returns a / b elementwise (true division; broadcasting).
func (a *Tensor) Div(b *Tensor) *Tensor {
	defer hostScalars("div", &a, &b)()
	defer pin("div", a, b).unpin()
	if !a.dtype.IsFloat() && !b.dtype.IsFloat() {
		defer asOp("div")
		ac := a.Cast(Float32)
		defer ac.Release()
		return ac.Div(b)
	}
	out := binaryRaw("div", backend.Div, a, b)
	if needsGrad(a, b) {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		// The result is read only by b's gradient.
		sb, so := save(b)[0], saveIf(rb, out)
		record("div", out, []*Tensor{a, b}, compact([]*Tensor{sb, so}), func(g *Tensor) []*Tensor {
			return []*Tensor{
				gradIf(ra, func() *Tensor { return sumTo(g.Div(sb), as) }),
				// d(a/b)/db = -out/b
				gradIf(rb, func() *Tensor { return sumTo(g.Mul(so).Div(sb).Neg(), bs) }),
			}
		})
	}
	return out
}

// Pow returns a ** b elementwise (broadcasting).
func (a *Tensor) Pow(b *Tensor) *Tensor {
	if up, done := autocastUp(a); up != a {
		defer done()
		return up.Pow(b)
	}
	if up, done := autocastUp(b); up != b {
		defer done()
		return a.Pow(up)
	}
	defer hostScalars("pow", &a, &b)()
	defer pin("pow", a, b).unpin()
	out := binaryRaw("pow", backend.Pow, a, b)
	if needsGrad(a, b) {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		// The result is read only by b's gradient.
		sv := []*Tensor{save(a)[0], save(b)[0], saveIf(rb, out)}
		record("pow", out, []*Tensor{a, b}, compact(sv), func(g *Tensor) []*Tensor {
			// As in PyTorch, a zero exponent passes no gradient to the base
			// (not 0 * a^-1, NaN at a = 0), and a zero base with an exponent
			// of at least 0 passes none to the exponent (not 0 * log 0).
			z := g.NewZeros(nil)
			return []*Tensor{
				// b * a^(b-1)
				gradIf(ra, func() *Tensor {
					d := g.Mul(sv[1]).Mul(sv[0].Pow(sv[1].SubScalar(1)))
					return sumTo(Where(sv[1].EqScalar(0), z, d), as)
				}),
				// out * log(a)
				gradIf(rb, func() *Tensor {
					d := g.Mul(sv[2]).Mul(sv[0].Log())
					return sumTo(Where(sv[0].EqScalar(0).LogicalAnd(sv[1].GeScalar(0)), z, d), bs)
				}),
			}
		})
	}
	return out
}

// Maximum returns the elementwise maximum of a and b (NaN propagates).
func (a *Tensor) Maximum(b *Tensor) *Tensor { return minmax("maximum", backend.Maximum, a, b) }

// Minimum returns the elementwise minimum of a and b (NaN propagates).
func (a *Tensor) Minimum(b *Tensor) *Tensor { return minmax("minimum", backend.Minimum, a, b) }

func minmax(op string, k backend.BinaryOp, a, b *Tensor) *Tensor {
	defer hostScalars(op, &a, &b)()
	defer pin(op, a, b).unpin()
	out := binaryRaw(op, k, a, b)
	if needsGrad(a, b) {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		sv := save(a, b)
		cmp := backend.Gt
		if k == backend.Minimum {
			cmp = backend.Lt
		}
		record(op, out, []*Tensor{a, b}, sv, func(g *Tensor) []*Tensor {
			// The winner takes the gradient; ties split it evenly.
			win := binaryRaw(op, cmp, sv[0], sv[1]).Cast(g.dtype)
			tie := binaryRaw(op, backend.Eq, sv[0], sv[1]).Cast(g.dtype).MulScalar(0.5)
			wa := win.Add(tie)
			wb := win.RSubScalar(1).Sub(tie)
			return []*Tensor{
				gradIf(ra, func() *Tensor { return sumTo(g.Mul(wa), as) }),
				gradIf(rb, func() *Tensor { return sumTo(g.Mul(wb), bs) }),
			}
		})
	}
	return out
}

// Comparisons return bool tensors and are not differentiable.

// Eq returns a == b elementwise.
func (a *Tensor) Eq(b *Tensor) *Tensor { return binaryRaw("eq", backend.Eq, a, b) }

// Ne returns a != b elementwise.
func (a *Tensor) Ne(b *Tensor) *Tensor { return binaryRaw("ne", backend.Ne, a, b) }

// Lt returns a < b elementwise.
func (a *Tensor) Lt(b *Tensor) *Tensor { return binaryRaw("lt", backend.Lt, a, b) }

// Le returns a <= b elementwise.
func (a *Tensor) Le(b *Tensor) *Tensor { return binaryRaw("le", backend.Le, a, b) }

// Gt returns a > b elementwise.
func (a *Tensor) Gt(b *Tensor) *Tensor { return binaryRaw("gt", backend.Gt, a, b) }

// Ge returns a >= b elementwise.
func (a *Tensor) Ge(b *Tensor) *Tensor { return binaryRaw("ge", backend.Ge, a, b) }

// LogicalAnd returns a && b elementwise (nonzero is true).
func (a *Tensor) LogicalAnd(b *Tensor) *Tensor {
	return binaryRaw("logical_and", backend.LogicalAnd, a, b)
}

// LogicalOr returns a || b elementwise.
func (a *Tensor) LogicalOr(b *Tensor) *Tensor {
	return binaryRaw("logical_or", backend.LogicalOr, a, b)
}

// EqScalar returns a == s elementwise.
func (a *Tensor) EqScalar(s float64) *Tensor { return scalarRaw("eq", backend.Eq, a, s, false) }

// GtScalar returns a > s elementwise.
func (a *Tensor) GtScalar(s float64) *Tensor { return scalarRaw("gt", backend.Gt, a, s, false) }

// LtScalar returns a < s elementwise.
func (a *Tensor) LtScalar(s float64) *Tensor { return scalarRaw("lt", backend.Lt, a, s, false) }

// GeScalar returns a >= s elementwise.
func (a *Tensor) GeScalar(s float64) *Tensor { return scalarRaw("ge", backend.Ge, a, s, false) }

// LeScalar returns a <= s elementwise.
func (a *Tensor) LeScalar(s float64) *Tensor { return scalarRaw("le", backend.Le, a, s, false) }

// AddScalar returns a + s. With an integer or bool a, as in all the
// Scalar methods, a whole s keeps a's integer dtype (bool becomes int64)
// and a fraction, an infinity or NaN gives float32; a whole s that the
// integer dtype cannot hold panics with [ErrArgument] rather than wrap,
// except in a bound of [Tensor.Clamp] beyond every value, which changes
// nothing. Comparisons (EqScalar, LtScalar, ...) answer exactly for s
// itself, whatever its size or fraction.
func (a *Tensor) AddScalar(s float64) *Tensor {
	defer pin("add", a).unpin()
	out := scalarRaw("add", backend.Add, a, s, false)
	if needsGrad(a) {
		record("add", out, []*Tensor{a}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Detach()} })
	}
	return out
}

// SubScalar returns a - s. Like every subtraction it panics with
// [ErrDType] for a bool a, as PyTorch's does: use LogicalNot to invert a
// mask.
func (a *Tensor) SubScalar(s float64) *Tensor {
	defer asOp("sub")
	a.live("sub")
	refuseBool("sub", backend.Sub, a)
	return a.AddScalar(-s)
}

// refuseBool panics with ErrDType, as PyTorch does, for a subtraction
// where one of ts is a bool tensor and for a power where all are; other
// arithmetic promotes bool (true is 1).
func refuseBool(op string, k backend.BinaryOp, ts ...*Tensor) {
	bools := 0
	for _, t := range ts {
		if t.dtype == Bool {
			bools++
		}
	}
	switch {
	case k == backend.Sub && bools > 0:
		fail(op, ErrDType, "subtraction with a bool tensor is not supported; "+
			"use LogicalNot to invert a mask, Ne for the exclusive or of two, or Cast to a number type first")
	case k == backend.Pow && bools == len(ts):
		fail(op, ErrDType, "a power of bool tensors is not supported; Cast to a number type first")
	}
}

// RSubScalar returns s - a.
func (a *Tensor) RSubScalar(s float64) *Tensor {
	defer pin("rsub", a).unpin()
	out := scalarRaw("rsub", backend.Sub, a, s, true)
	if needsGrad(a) {
		record("rsub", out, []*Tensor{a}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.Neg()} })
	}
	return out
}

// MulScalar returns a * s.
func (a *Tensor) MulScalar(s float64) *Tensor {
	defer pin("mul", a).unpin()
	out := scalarRaw("mul", backend.Mul, a, s, false)
	if needsGrad(a) {
		record("mul", out, []*Tensor{a}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.MulScalar(s)} })
	}
	return out
}

// DivScalar returns a / s.
func (a *Tensor) DivScalar(s float64) *Tensor {
	defer pin("div", a).unpin()
	out := scalarRaw("div", backend.Div, a, s, false)
	if needsGrad(a) {
		record("div", out, []*Tensor{a}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.DivScalar(s)} })
	}
	return out
}

// RDivScalar returns s / a. Under [Autocast] a 16-bit a is divided in
// float32 and gives float32, as PyTorch's s / a, which is a.reciprocal()
// times s and reciprocal is on autocast's float32 list.
func (a *Tensor) RDivScalar(s float64) *Tensor {
	if up, done := autocastUp(a); up != a {
		defer done()
		return up.RDivScalar(s)
	}
	defer pin("rdiv", a).unpin()
	out := scalarRaw("rdiv", backend.Div, a, s, true)
	if needsGrad(a) {
		sv := save(out)
		record("rdiv", out, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
			// d(s/a)/da = -out^2/s
			return []*Tensor{g.Mul(sv[0].Square()).DivScalar(-s)}
		})
	}
	return out
}

// PowScalar returns a ** p. An integer tensor gives float32 when p is not a
// whole number, as in PyTorch, and keeps its dtype otherwise; a bool tensor
// counts as int64. An integer or bool tensor with a negative whole p panics
// with [ErrArgument], as PyTorch's does (the result would be 0 for every
// element but 1 and -1).
func (a *Tensor) PowScalar(p float64) *Tensor {
	if up, done := autocastUp(a); up != a {
		defer done()
		return up.PowScalar(p)
	}
	a.live("pow")
	if !a.dtype.IsFloat() && p == math.Trunc(p) {
		if p < 0 {
			fail("pow", ErrArgument, "integers to negative integer powers are not allowed (%s tensor to the power %v); Cast to a float type first", a.dtype, p)
		}
		if a.dtype == Bool {
			defer asOp("pow")
			i := a.Cast(Int64)
			defer i.Release()
			return i.PowScalar(p)
		}
	}
	return unary("pow", backend.PowScalar, a, p, saveX, func(x, _, g *Tensor) *Tensor {
		if p == 0 {
			return g.NewZeros(g.shape)
		}
		return g.Mul(x.PowScalar(p - 1)).MulScalar(p)
	})
}

// Clamp limits every element to [lo, hi]; use math.Inf for a missing bound.
// Elements outside [lo, hi] pass no gradient; those equal to a bound pass
// it, as in PyTorch.
func (a *Tensor) Clamp(lo, hi float64) *Tensor {
	_, held := sameDevice("clamp", a)
	defer held.unpin()
	x := a
	if !math.IsInf(lo, -1) {
		l := scalarRaw("clamp", backend.Maximum, x, lo, false)
		x = l
		defer l.Release()
	}
	out := x
	if !math.IsInf(hi, 1) {
		out = scalarRaw("clamp", backend.Minimum, x, hi, false)
	} else {
		out = x.view(x.shape, x.strides, x.offset)
	}
	if needsGrad(a) {
		sv := save(a)
		record("clamp", out, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
			in := sv[0].GeScalar(lo).LogicalAnd(sv[0].LeScalar(hi))
			return []*Tensor{Where(in, g, g.NewZeros(nil))}
		})
	}
	return out
}

// ClampTensor limits every element of a to [lo, hi] elementwise, as
// torch.clamp with tensor bounds: max(a, lo) and then min(·, hi), all three
// broadcast together and promoted to a common dtype; a nil bound is
// missing, and where lo > hi the result is hi. NaN in a propagates. The
// gradient goes to a where lo <= a <= hi, to lo where a < lo <= hi, and to
// hi where a > hi or lo > hi, as in PyTorch. Bounds may be 0-dimensional
// CPU tensors (see [Tensor.Add]). It panics with [ErrArgument] when both
// bounds are nil and with [ErrShape] when the shapes do not broadcast.
func (a *Tensor) ClampTensor(lo, hi *Tensor) *Tensor {
	const op = "clamp"
	defer asOp(op)
	if lo == nil && hi == nil {
		fail(op, ErrArgument, "at least one of the bounds lo and hi must not be nil")
	}
	defer hostScalars(op, &a, &lo, &hi)()
	ops := []*Tensor{a}
	for _, b := range []*Tensor{lo, hi} {
		if b != nil {
			ops = append(ops, b)
		}
	}
	_, held := sameDevice(op, ops...)
	defer held.unpin()
	out := a.view(a.shape, a.strides, a.offset)
	if lo != nil {
		m := binaryRaw(op, backend.Maximum, out, lo)
		out.Release()
		out = m
	}
	if hi != nil {
		m := binaryRaw(op, backend.Minimum, out, hi)
		out.Release()
		out = m
	}
	if needsGrad(ops...) {
		req := make([]bool, len(ops))
		shapes := make([][]int, len(ops))
		for i, t := range ops {
			req[i], shapes[i] = t.requiresGrad.Load(), slices.Clone(t.shape)
		}
		sv := save(ops...)
		hasLo, hasHi := lo != nil, hi != nil
		record(op, out, ops, sv, func(g *Tensor) []*Tensor {
			x := sv[0]
			var l, h *Tensor
			i := 1
			if hasLo {
				l, i = sv[i], i+1
			}
			if hasHi {
				h = sv[i]
			}
			z := g.NewZeros(nil)
			in := x.Eq(x) // true but for NaN
			if l != nil {
				in = in.LogicalAnd(x.Ge(l))
			}
			if h != nil {
				in = in.LogicalAnd(x.Le(h))
			}
			grads := []*Tensor{gradIf(req[0], func() *Tensor { return sumTo(Where(in, g, z), shapes[0]) })}
			if l != nil {
				toLo := x.Lt(l)
				if h != nil {
					toLo = toLo.LogicalAnd(l.Le(h))
				}
				grads = append(grads, gradIf(req[1], func() *Tensor { return sumTo(Where(toLo, g, z), shapes[1]) }))
			}
			if h != nil {
				toHi := x.Gt(h)
				if l != nil {
					toHi = toHi.LogicalOr(l.Gt(h))
				}
				k := len(grads)
				grads = append(grads, gradIf(req[k], func() *Tensor { return sumTo(Where(toHi, g, z), shapes[k]) }))
			}
			return grads
		})
	}
	return out
}

// Where returns a where cond is true and b elsewhere, broadcasting all three
// (torch.where). cond must be bool; a and b are promoted to a common dtype.
// All three are on one device, except 0-dimensional CPU tensors, which are
// read as scalars (see [Tensor.Add]).
func Where(cond, a, b *Tensor) *Tensor {
	defer hostScalars("where", &cond, &a, &b)()
	ds, held := sameDevice("where", cond, a, b)
	defer held.unpin()
	if cond.dtype != Bool {
		fail("where", ErrDType, "condition must be bool, got %s", cond.dtype)
	}
	shape := broadcastShapes("where", cond.shape, a.shape, b.shape)
	dt := resultType(a, b)
	ac, bc := castRaw(a, dt), castRaw(b, dt)
	defer ac.Release()
	defer bc.Release()
	out := newTensorLike("where", ds, dt, shape, a, b)
	check("where", ds.bd.Where(ds.stream(), out.bv(), expandView("where", cond, shape), expandView("where", ac, shape), expandView("where", bc, shape)))
	if needsGrad(a, b) {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		sv := save(cond)
		record("where", out, []*Tensor{nil, a, b}, sv, func(g *Tensor) []*Tensor {
			z := g.NewZeros(nil)
			return []*Tensor{nil,
				gradIf(ra, func() *Tensor { return sumTo(Where(sv[0], g, z), as) }),
				gradIf(rb, func() *Tensor { return sumTo(Where(sv[0], z, g), bs) }),
			}
		})
	}
	return out
}

// In-place operations write into t's storage (PyTorch's add_, mul_, ...).
// Under autograd they follow PyTorch's rules. Inside [NoGrad] (as in an
// optimizer's step) nothing is recorded. Outside it, an in-place operation
// on a tensor computed by recorded operations, or one whose operand
// requires grad, is recorded as the out-of-place operation would be: t
// keeps its storage, which takes the new values, and stands from then on
// for the new node of the graph (h := w.MulScalar(3); h.MulScalarInPlace(2)
// gives w the gradient 6; t.AddInPlace(w) passes w its gradient). The write
// counts in t's version counter, so a graph that saved t's old values (as
// Exp saves its result) refuses to run backward through them. They panic
// with [ErrAutograd], outside NoGrad, on a leaf that requires grad, and
// when recording is due on a tensor that shares its storage with another
// tensor other than a [Tensor.Detach] view or one a graph saved: a view of
// it (Narrow, Reshape, Transpose, ...) or the tensor it is a view of, and
// when recording is due on a Detach view that has views of its own.
// PyTorch records such writes through views (CopySlices); vram does not
// yet. They panic with [ErrAutograd] on an inference tensor outside
// [InferenceMode] too, and with [ErrArgument] on a tensor whose elements
// share memory (a view made by Expand). They compute
// in the dtype the out-of-place operation would give and round the result
// once into t's dtype; they panic with [ErrDType] when that dtype cannot be written into
// t's, as PyTorch does: a floating-point result (an integer tensor divided,
// or added a fraction) into an integer or bool tensor, an integer result
// into a bool one. A refused operation writes nothing. An in-place
// operation changes t's graph: like any other write to t, it must not run
// while another goroutine uses t.

// inPlaceCheck checks an in-place write that is never recorded (SetRawBytes,
// the fused optimizer steps): t and its operands must not require grad
// outside NoGrad.
func (t *Tensor) inPlaceCheck(op string, operands ...*Tensor) {
	if t.requiresGrad.Load() && GradEnabled() {
		fail(op, ErrAutograd, "a tensor that requires grad is being used in an in-place operation; wrap it in vram.NoGrad")
	}
	if needsGrad(operands...) {
		fail(op, ErrAutograd, "an operand requires grad, but in-place operations are not recorded, so its gradient would miss this use; "+
			"use the out-of-place operation (t = t.Add(w)), pass w.Detach(), or wrap the update in vram.NoGrad")
	}
	t.inPlaceWritable(op)
}

// inPlaceWritable panics unless t may be written in place at all: an
// inference tensor only inside InferenceMode, and never a layout whose
// elements share memory.
func (t *Tensor) inPlaceWritable(op string) {
	t.inferenceWritable(op)
	if sharedElements(t.shape, t.strides) {
		fail(op, ErrArgument, "more than one element of the written tensor (shape %v, strides %v) is one memory location, "+
			"as after Expand; write into a Clone() or Contiguous() copy", t.shape, t.strides)
	}
}

// inferenceWritable panics unless t may be written in place as far as
// InferenceMode goes: an inference tensor only inside it.
func (t *Tensor) inferenceWritable(op string) {
	if t.inference && !InferenceModeEnabled() {
		fail(op, ErrAutograd, "in-place update of an inference tensor (made inside vram.InferenceMode) outside it; "+
			"do it inside InferenceMode, or update a Clone() made outside")
	}
}

// inPlaceRecords checks an in-place operation on t that reads operands
// and reports whether it must be recorded for autograd (see "In-place
// operations" above): gradients are enabled, t has a floating-point dtype
// and t or an operand requires grad. It panics with ErrAutograd where it cannot be recorded.
func (t *Tensor) inPlaceRecords(op string, operands ...*Tensor) bool {
	t.inPlaceWritable(op)
	return t.recordsInPlace(op, operands...)
}

// recordsInPlace is inPlaceRecords without the check of t's layout, for
// an operation that may write a tensor whose elements share memory.
func (t *Tensor) recordsInPlace(op string, operands ...*Tensor) bool {
	if !t.dtype.IsFloat() || !needsGrad(append(operands, t)...) {
		// An integer or bool tensor is not differentiable: a value
		// written into it (copy_ of a tensor that requires grad) leaves
		// it outside every graph, as Cast to its dtype would.
		return false
	}
	if t.ref.node == nil && t.requiresGrad.Load() {
		fail(op, ErrAutograd, "a leaf tensor that requires grad is being used in an in-place operation; "+
			"update it inside vram.NoGrad (as an optimizer step does), or compute a new tensor (t.Add(w))")
	}
	if t.ref.apart && t.ref.st.detached.Load() > 0 {
		fail(op, ErrAutograd, "the %v %s tensor written in place is a Detach view that has views of its own "+
			"(made by Narrow, Reshape, Transpose, ...), whose graphs would not see the change. "+
			"vram does not record in-place operations through views yet (PyTorch does, with CopySlices); "+
			"use the out-of-place operation, write into a Clone(), or release the views first", Shape(t.shape), t.dtype)
	}
	if !t.ref.apart && t.ref.st.refs.Load()-t.ref.st.apart.Load() > 1 {
		fail(op, ErrAutograd, "the %v %s tensor written in place shares its storage with another tensor: it is a view "+
			"(made by Narrow, Reshape, Transpose, ...) or has one, and the other's graph would not see the change. "+
			"vram does not record in-place operations through views yet (PyTorch does, with CopySlices); "+
			"use the out-of-place operation, write into a Clone(), or release the view first", Shape(t.shape), t.dtype)
	}
	return true
}

// recordInPlace makes t the result of compute(t), recorded: compute runs
// the out-of-place operation with recording, its result (rounded to t's
// dtype) is copied into t's storage, and t takes its graph node in place of
// its own. With savesSelf, compute gets a copy of t in place of t, for an
// operation that saves its input for backward, whose values the write
// replaces (PyTorch saves a clone of self then). The caller has checked
// everything the out-of-place operation could refuse that the in-place
// one must (the result has t's shape), so that a refusal writes nothing.
func (t *Tensor) recordInPlace(op string, savesSelf bool, compute func(self *Tensor) *Tensor) {
	self := t
	if savesSelf {
		self = t.Clone()
		defer self.Release()
	}
	r := compute(self)
	if r.dtype != t.dtype {
		c := r.Cast(t.dtype)
		r.Release()
		r = c
	}
	defer r.Release()
	if !slices.Equal(r.shape, t.shape) {
		panic("vram: internal: in-place result of shape " + Shape(r.shape).String() + " for a tensor of shape " + Shape(t.shape).String())
	}
	check(op, t.ds().bd.Copy(t.ds().stream(), t.bv(), r.bv()))
	t.wrote()
	t.takeNode(r.ref.node)
	r.ref.node = nil
}

// takeNode makes n, a node whose reference the caller gives away, the node
// of t, which then requires grad. t drops its reference to its old node
// (which n reaches through its inputs, where t read its old value); a
// RetainGrad of t moves to n, as PyTorch's moves to the new version of an
// in-place-modified tensor, while hooks registered on t stay with the old
// node and see the gradient with respect to the old values.
func (t *Tensor) takeNode(n *node) {
	if n == nil {
		return
	}
	old := t.ref.node
	t.ref.node = n
	t.requiresGrad.Store(true)
	if old == nil {
		return
	}
	old.mu.Lock()
	retained := old.retain.Value() == t
	if retained {
		old.retain = weak.Pointer[Tensor]{}
	}
	old.mu.Unlock()
	if retained {
		n.mu.Lock()
		n.retain = weak.Make(t)
		n.mu.Unlock()
	}
	old.decref()
}

// recordOver records an in-place operation that has written t: a node with
// the given inputs (t, as it was, among them) and backward bw becomes t's
// node.
func (t *Tensor) recordOver(op string, inputs []*Tensor, bw func(g *Tensor) []*Tensor) {
	old := t.ref.node
	record(op, t, inputs, nil, bw) // the new node takes a reference to old
	n := t.ref.node
	t.ref.node = old
	t.takeNode(n)
}

// sharedElements reports whether a layout puts more than one element at
// one memory location, as Expand does (a stride of 0 along a dimension of
// size above 1); an empty tensor has no element to share.
func sharedElements(shape, strides []int) bool {
	if slices.Contains(shape, 0) {
		return false
	}
	for i, n := range shape {
		if n > 1 && strides[i] == 0 {
			return true
		}
	}
	return false
}

// wrote counts an in-place write to t's storage, so that a graph that
// saved the storage before it refuses to use it in a backward pass. It is
// called once the write has been made: an in-place operation refused
// (a dtype it cannot write, a shape that does not broadcast) changed
// nothing, as in PyTorch, and leaves the graphs that saved t usable.
func (t *Tensor) wrote() { t.ref.st.version.Add(1) }

func (t *Tensor) binaryInPlace(op string, k backend.BinaryOp, b *Tensor) *Tensor {
	t.live(op)
	defer hostScalarsOnto(op, t.ds(), &b)()
	_, held := sameDevice(op, t, b)
	defer held.unpin()
	rec := t.inPlaceRecords(op, b)
	refuseBool(op, k, t, b)
	dt := resultType(t, b)
	if k == backend.Div && !dt.IsFloat() {
		dt = Float32 // true division, as Div
	}
	inPlaceCast(op, dt, t.dtype)
	if rec {
		expandView(op, b, t.shape) // b broadcasts to t's shape
		// Mul saves each operand for the other's gradient.
		t.recordInPlace(op, k == backend.Mul && needsGrad(b), func(self *Tensor) *Tensor {
			switch k {
			case backend.Add:
				return self.Add(b)
			case backend.Sub:
				return self.Sub(b)
			case backend.Mul:
				return self.Mul(b)
			case backend.Div:
				return self.Div(b)
			}
			panic("vram: internal: no recorded in-place form of " + op)
		})
		return t
	}
	if dt != t.dtype {
		// A wider operand: compute in its dtype, then round once into t.
		expandView(op, b, t.shape) // b broadcasts to t's shape
		r := binaryRaw(op, k, t, b)
		defer r.Release()
		check(op, t.ds().bd.Copy(t.ds().stream(), t.bv(), r.bv()))
		t.wrote()
		return t
	}
	bc := castRaw(b, t.dtype)
	defer bc.Release()
	src := expandView(op, bc, t.shape)
	if partialOverlap(t.SharesStorage(bc), t.bv(), src) {
		// b reads memory that t writes, elsewhere than where t writes
		// it: read b's values before the write.
		c := bc.clone()
		defer c.Release()
		src = expandView(op, c, t.shape)
	}
	check(op, t.ds().bd.Binary(t.ds().stream(), k, t.bv(), t.bv(), src))
	t.wrote()
	return t
}

// partialOverlap reports whether a kernel writing dst while it reads src
// (of dst's shape, as broadcast) could read an element it has already
// written: the two share storage (shared) and their memory spans meet,
// though they are not the same elements in the same places. Kernels need the source
// read first then (backend.Kernels promises nothing for a partial
// overlap), which a copy of it gives. Disjoint views of one storage that
// interleave (every other row each) count as overlapping, which costs a
// copy and is never wrong.
func partialOverlap(shared bool, dst, src backend.View) bool {
	if !shared {
		return false
	}
	same := dst.Offset == src.Offset
	dlo, dhi := dst.Offset, dst.Offset
	slo, shi := src.Offset, src.Offset
	for i, n := range dst.Shape {
		if n == 0 {
			return false // nothing is written
		}
		if n > 1 && dst.Strides[i] != src.Strides[i] {
			same = false
		}
		for _, r := range []struct {
			lo, hi *int
			stride int
		}{{&dlo, &dhi, dst.Strides[i]}, {&slo, &shi, src.Strides[i]}} {
			if r.stride >= 0 {
				*r.hi += (n - 1) * r.stride
			} else {
				*r.lo += (n - 1) * r.stride
			}
		}
	}
	return !same && dlo <= shi && slo <= dhi
}

// inPlaceCast panics with ErrDType when an in-place operation's result of
// dtype dt cannot be written into its tensor of dtype to.
func inPlaceCast(op string, dt, to DType) {
	if !canCast(dt, to) {
		fail(op, ErrDType, "result type %s cannot be written in place into a tensor of dtype %s; use the out-of-place operation, or Cast first", dt, to)
	}
}

// addInPlace adds g without checks or recording.
func (t *Tensor) addInPlace(op string, g *Tensor) {
	check(op, t.ds().bd.Binary(t.ds().stream(), backend.Add, t.bv(), t.bv(), expandView(op, g, t.shape)))
}

// AddInPlace adds b (broadcast to t's shape) to t and returns t. As for
// every in-place operation, b must be on t's device or be a 0-dimensional
// CPU tensor (a scalar). Like the other in-place operations, it is
// recorded for autograd on a computed tensor or when b requires grad,
// and refused on a leaf that requires grad or a view (outside [NoGrad]);
// see the package documentation.
func (t *Tensor) AddInPlace(b *Tensor) *Tensor { return t.binaryInPlace("add_", backend.Add, b) }

// SubInPlace subtracts b from t and returns t.
func (t *Tensor) SubInPlace(b *Tensor) *Tensor { return t.binaryInPlace("sub_", backend.Sub, b) }

// MulInPlace multiplies t by b and returns t.
func (t *Tensor) MulInPlace(b *Tensor) *Tensor { return t.binaryInPlace("mul_", backend.Mul, b) }

// DivInPlace divides t by b and returns t.
func (t *Tensor) DivInPlace(b *Tensor) *Tensor { return t.binaryInPlace("div_", backend.Div, b) }

// AddScaledInPlace adds alpha*b to t (PyTorch's add_(b, alpha=...)).
func (t *Tensor) AddScaledInPlace(b *Tensor, alpha float64) *Tensor {
	t.live("add_")
	defer hostScalarsOnto("add_", t.ds(), &b)()
	_, held := sameDevice("add_", t, b)
	defer held.unpin()
	var s *Tensor
	if t.inPlaceRecords("add_", b) {
		s = b.MulScalar(alpha)
	} else {
		s = scalarRaw("add_", backend.Mul, b, alpha, false)
	}
	defer s.Release()
	return t.binaryInPlace("add_", backend.Add, s)
}

func (t *Tensor) scalarInPlace(op string, k backend.BinaryOp, s float64) *Tensor {
	_, held := sameDevice(op, t)
	defer held.unpin()
	rec := t.inPlaceRecords(op)
	dt := t.dtype
	if !dt.IsFloat() && !integral(s) {
		dt = Float32 // as scalarRaw: int + 0.5 is float
	}
	if dt == Bool {
		dt = Int64 // bool + 1 is int64
	}
	inPlaceCast(op, dt, t.dtype)
	if !dt.IsFloat() {
		checkValue(op, s, dt) // an s that dt cannot hold would wrap
	}
	if rec {
		t.recordInPlace(op, false, func(self *Tensor) *Tensor {
			if k == backend.Mul {
				return self.MulScalar(s)
			}
			return self.AddScalar(s)
		})
		return t
	}
	check(op, t.ds().bd.Scalar(t.ds().stream(), k, t.bv(), t.bv(), s, false))
	t.wrote()
	return t
}

// copyOnto replaces *src, on another device than t, by its copy on t's
// device for CopyFrom, and returns a function that releases the copy
// (defer it). It checks first what CopyFrom would refuse, so that a
// refused copy moves nothing. With rec the move is recorded, so that
// src's gradient goes back to its device.
func copyOnto(t *Tensor, src **Tensor, rec bool) func() {
	s := *src
	s.live("copy_")
	if !broadcastsTo(s.shape, t.shape) {
		fail("copy_", ErrShape, "cannot broadcast shape %v to %v", Shape(s.shape), Shape(t.shape))
	}
	var moved *Tensor
	if rec {
		moved = s.To(t.Device())
	} else {
		NoGrad(func() { moved = s.To(t.Device()) })
	}
	*src = moved
	return moved.Release
}

// AddScalarInPlace adds s to every element of t and returns t.
func (t *Tensor) AddScalarInPlace(s float64) *Tensor { return t.scalarInPlace("add_", backend.Add, s) }

// MulScalarInPlace multiplies every element of t by s and returns t.
func (t *Tensor) MulScalarInPlace(s float64) *Tensor { return t.scalarInPlace("mul_", backend.Mul, s) }

// FillInPlace sets every element of t to v and returns t. A v that
// overflows t's dtype panics with [ErrArgument], as in [Full], and leaves
// t unchanged. Unlike the other in-place operations it writes a tensor
// whose elements share memory (an Expand view), as PyTorch's fill_ does:
// all of them get the one value, so the memory they share does too.
func (t *Tensor) FillInPlace(v float64) *Tensor {
	_, held := sameDevice("fill_", t)
	defer held.unpin()
	t.inferenceWritable("fill_")
	rec := t.recordsInPlace("fill_")
	checkValue("fill_", v, t.dtype)
	dst := t.bv()
	if sharedElements(t.shape, t.strides) {
		// Each memory location once: a repeated dimension as its one
		// element.
		dst.Shape = slices.Clone(dst.Shape)
		for i, st := range dst.Strides {
			if st == 0 {
				dst.Shape[i] = 1
			}
		}
	}
	check("fill_", t.ds().bd.Fill(t.ds().stream(), dst, v))
	t.wrote()
	if rec {
		// The old values are lost: their gradient is zero (PyTorch's
		// FillBackward).
		t.recordOver("fill_", []*Tensor{t}, func(g *Tensor) []*Tensor { return []*Tensor{ZerosLike(g)} })
	}
	return t
}

// CopyFrom copies src (broadcast to t's shape, converted to t's dtype) into
// t and returns t (copy_). src may be on another device: it is moved to
// t's device first, through the same transfer as [Tensor.To], and the copy
// lands in t as if it had been there. A src that shares memory with t (a
// shifted view of the same tensor) is read whole before t is written, so
// the result is src's values as they were; PyTorch refuses such a partial
// overlap. Under autograd it follows the in-place operations' rules (see
// [Tensor.AddInPlace]): outside [NoGrad], when t or src requires grad it is
// recorded (src gets t's gradient, summed over the broadcast dimensions and
// moved back to its device; t's old values get zero) or, on a leaf that
// requires grad or a view, refused with [ErrAutograd]. An integer or bool
// t is not differentiable: a copy into it is not recorded and t does not
// come to require grad, as in PyTorch. It panics with [ErrShape] when src does not broadcast to t's shape. A refused copy moves
// nothing and leaves t as it was.
func (t *Tensor) CopyFrom(src *Tensor) *Tensor {
	t.live("copy_")
	notNil("copy_", t, src)
	defer hostScalarsOnto("copy_", t.ds(), &src)()
	rec := t.inPlaceRecords("copy_", src)
	if src != nil && src.ds() != t.ds() {
		defer copyOnto(t, &src, rec)()
	}
	_, held := sameDevice("copy_", t, src)
	defer held.unpin()
	if rec {
		// Recorded as src converted to t's dtype, broadcast: src's
		// gradient is t's summed over the broadcast dimensions, and t's
		// old values get none (PyTorch's CopyBackwards).
		c := src.Cast(t.dtype)
		defer c.Release()
		src = c
	}
	from := expandView("copy_", src, t.shape)
	if partialOverlap(t.SharesStorage(src), t.bv(), from) {
		// src shares memory with t elsewhere than element for element:
		// read it all before t is written.
		c := src.clone()
		defer c.Release()
		from = expandView("copy_", c, t.shape)
	}
	check("copy_", t.ds().bd.Copy(t.ds().stream(), t.bv(), from))
	t.wrote()
	if rec {
		ss := slices.Clone(src.shape)
		rt, rs := t.requiresGrad.Load(), src.requiresGrad.Load()
		t.recordOver("copy_", []*Tensor{t, src}, func(g *Tensor) []*Tensor {
			return []*Tensor{
				gradIf(rt, func() *Tensor { return ZerosLike(g) }),
				gradIf(rs, func() *Tensor { return sumTo(g, ss) }),
			}
		})
	}
	return t
}
