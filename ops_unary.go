package vram

import (
	"math"

	"github.com/vramgo/vram/backend"
)

// What a unary op's backward needs saved.
const (
	saveNone = 0
	saveX    = 1 // the input
	saveY    = 2 // the output
)

// unary applies k to t and records grad(x, y, g) as its backward; x and y
// are nil unless asked for with saveX and saveY. A nil grad makes the op
// non-differentiable (a zero gradient).
func unary(op string, k backend.UnaryOp, t *Tensor, param float64, saveWhat int, grad func(x, y, g *Tensor) *Tensor) *Tensor {
	_, held := sameDevice(op, t)
	defer held.unpin()
	src := t
	if !t.dtype.IsFloat() && unaryToFloat(k, param) {
		src = castRaw(t, Float32)
		defer src.Release()
	}
	odt := src.dtype
	if k == backend.LogicalNot || k == backend.IsNaN {
		odt = Bool
	}
	out := newTensorLike(op, t.ds(), odt, t.shape, t)
	check(op, t.ds().bd.Unary(t.ds().stream(), k, out.bv(), src.bv(), param))
	if grad != nil && needsGrad(t) {
		var x, y *Tensor
		var sv []*Tensor
		if saveWhat&saveX != 0 {
			x = t.share()
			sv = append(sv, x)
		}
		if saveWhat&saveY != 0 {
			y = out.share()
			sv = append(sv, y)
		}
		record(op, out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor { return []*Tensor{grad(x, y, g)} })
	}
	return out
}

// unaryToFloat reports whether k computes in float32 on an integer or bool
// input, as PyTorch's does: every op but the exact ones (Neg, Abs, Sign,
// Square, Relu, the roundings, LogicalNot, IsNaN), and PowScalar with an
// exponent that is not a whole number.
func unaryToFloat(k backend.UnaryOp, param float64) bool {
	switch k {
	case backend.Neg, backend.Abs, backend.Sign, backend.Square, backend.Relu,
		backend.Floor, backend.Ceil, backend.Round, backend.LogicalNot, backend.IsNaN:
		return false
	case backend.PowScalar:
		return param != math.Trunc(param)
	}
	return true
}

// Neg returns -t. It panics with [ErrDType] for a bool tensor, as PyTorch's
// does: use LogicalNot to invert a mask.
func (t *Tensor) Neg() *Tensor {
	t.live("neg")
	if t.dtype == Bool {
		fail("neg", ErrDType, "negation of a bool tensor is not supported; use LogicalNot to invert a mask")
	}
	return unary("neg", backend.Neg, t, 0, saveNone, func(_, _, g *Tensor) *Tensor { return g.unaryRaw(backend.Neg) })
}

// unaryRaw applies k without recording.
func (t *Tensor) unaryRaw(k backend.UnaryOp) *Tensor {
	out := newTensorLike(k.String(), t.ds(), t.dtype, t.shape, t)
	check(k.String(), t.ds().bd.Unary(t.ds().stream(), k, out.bv(), t.bv(), 0))
	return out
}

// Abs returns |t|.
func (t *Tensor) Abs() *Tensor {
	return unary("abs", backend.Abs, t, 0, saveX, func(x, _, g *Tensor) *Tensor { return g.Mul(x.Sign()) })
}

// Sign returns -1, 0 or 1 per element: 0 for a zero of either sign and
// for NaN, as torch.sign gives. Its gradient is zero.
func (t *Tensor) Sign() *Tensor { return unary("sign", backend.Sign, t, 0, saveNone, zeroGradient) }

// zeroGradient is the gradient of a piecewise-constant op (Sign and the
// roundings): zero, as PyTorch gives it, so that a loss through one still
// backpropagates to the rest of its graph.
func zeroGradient(_, _, g *Tensor) *Tensor { return g.NewZeros(g.shape) }

// Exp returns e**t.
func (t *Tensor) Exp() *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Exp()
	}
	return unary("exp", backend.Exp, t, 0, saveY, func(_, y, g *Tensor) *Tensor { return g.Mul(y) })
}

// Log returns the natural logarithm of t.
func (t *Tensor) Log() *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Log()
	}
	return unary("log", backend.Log, t, 0, saveX, func(x, _, g *Tensor) *Tensor { return g.Div(x) })
}

// Log1p returns log(1 + t), accurate for small t.
func (t *Tensor) Log1p() *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Log1p()
	}
	return unary("log1p", backend.Log1p, t, 0, saveX, func(x, _, g *Tensor) *Tensor { return g.Div(x.AddScalar(1)) })
}

// Expm1 returns e**t - 1, accurate for small t.
func (t *Tensor) Expm1() *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Expm1()
	}
	return unary("expm1", backend.Expm1, t, 0, saveY, func(_, y, g *Tensor) *Tensor { return g.Mul(y.AddScalar(1)) })
}

// Sqrt returns the square root of t.
func (t *Tensor) Sqrt() *Tensor {
	return unary("sqrt", backend.Sqrt, t, 0, saveY, func(_, y, g *Tensor) *Tensor { return g.Div(y).MulScalar(0.5) })
}

// Rsqrt returns 1/sqrt(t).
func (t *Tensor) Rsqrt() *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Rsqrt()
	}
	return unary("rsqrt", backend.Rsqrt, t, 0, saveY, func(_, y, g *Tensor) *Tensor {
		return g.Mul(y.PowScalar(3)).MulScalar(-0.5)
	})
}

// Square returns t*t.
func (t *Tensor) Square() *Tensor {
	return unary("square", backend.Square, t, 0, saveX, func(x, _, g *Tensor) *Tensor { return g.Mul(x).MulScalar(2) })
}

// Reciprocal returns 1/t.
func (t *Tensor) Reciprocal() *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Reciprocal()
	}
	return unary("reciprocal", backend.Reciprocal, t, 0, saveY, func(_, y, g *Tensor) *Tensor {
		return g.Mul(y.Square()).Neg()
	})
}

// Sin returns sin(t).
func (t *Tensor) Sin() *Tensor {
	return unary("sin", backend.Sin, t, 0, saveX, func(x, _, g *Tensor) *Tensor { return g.Mul(x.Cos()) })
}

// Cos returns cos(t).
func (t *Tensor) Cos() *Tensor {
	return unary("cos", backend.Cos, t, 0, saveX, func(x, _, g *Tensor) *Tensor { return g.Mul(x.Sin()).Neg() })
}

// Tanh returns tanh(t).
func (t *Tensor) Tanh() *Tensor {
	return unary("tanh", backend.Tanh, t, 0, saveY, func(_, y, g *Tensor) *Tensor {
		return g.Mul(y.Square().RSubScalar(1))
	})
}

// Sigmoid returns 1/(1+e**-t).
func (t *Tensor) Sigmoid() *Tensor {
	return unary("sigmoid", backend.Sigmoid, t, 0, saveY, func(_, y, g *Tensor) *Tensor {
		return g.Mul(y.Mul(y.RSubScalar(1)))
	})
}

// Relu returns max(t, 0).
func (t *Tensor) Relu() *Tensor {
	return unary("relu", backend.Relu, t, 0, saveY, func(_, y, g *Tensor) *Tensor {
		if g.dtype == y.dtype && g.dtype.IsFloat() {
			return binaryRaw("relu", backend.ReluBackward, g, y)
		}
		return Where(y.GtScalar(0), g, g.NewZeros(nil))
	})
}

// LeakyRelu returns t where t > 0 and slope*t elsewhere.
func (t *Tensor) LeakyRelu(slope float64) *Tensor {
	return unary("leaky_relu", backend.LeakyRelu, t, slope, saveX, func(x, _, g *Tensor) *Tensor {
		return Where(x.GtScalar(0), g, g.MulScalar(slope))
	})
}

// Gelu returns the exact GELU, t * Phi(t), with Phi the standard normal CDF.
func (t *Tensor) Gelu() *Tensor {
	return unary("gelu", backend.Gelu, t, 0, saveX, func(x, _, g *Tensor) *Tensor {
		if g.dtype == x.dtype {
			return binaryRaw("gelu", backend.GeluBackward, g, x)
		}
		return g.Mul(x.unaryRaw(backend.GeluGrad))
	})
}

// GeluTanh returns GELU with the tanh approximation.
func (t *Tensor) GeluTanh() *Tensor {
	return unary("gelu_tanh", backend.GeluTanh, t, 0, saveX, func(x, _, g *Tensor) *Tensor {
		return wideGrad(x, g, func(x, g *Tensor) *Tensor {
			// u = c*(x + 0.044715 x^3); d/dx = 0.5(1+tanh u) + 0.5 x (1-tanh^2 u) c (1 + 3*0.044715 x^2)
			c := math.Sqrt(2 / math.Pi)
			u := x.Add(x.PowScalar(3).MulScalar(0.044715)).MulScalar(c)
			th := u.Tanh()
			a := th.AddScalar(1).MulScalar(0.5)
			b := x.MulScalar(0.5).Mul(th.Square().RSubScalar(1)).Mul(x.Square().MulScalar(3 * 0.044715 * c).AddScalar(c))
			return g.Mul(a.Add(b))
		})
	})
}

// Silu returns t * sigmoid(t).
func (t *Tensor) Silu() *Tensor {
	return unary("silu", backend.Silu, t, 0, saveX, func(x, _, g *Tensor) *Tensor {
		return wideGrad(x, g, func(x, g *Tensor) *Tensor {
			s := x.Sigmoid()
			return g.Mul(s.Mul(x.Mul(s.RSubScalar(1)).AddScalar(1)))
		})
	})
}

// wideGrad returns grad(x, g), computed in float32 when x is float16 or
// bfloat16 and rounded once to g's dtype, as PyTorch's backward kernels
// for these activations compute in float32: a formula of several 16-bit
// ops rounds at each step, enough to lose every digit where its terms
// cancel (a bfloat16 GELU's gradient near x = -3) and to overflow
// where the float16 input cubed does (|x| > 40 gives 0·Inf = NaN). It
// runs inside the backward pass's Tidy, which releases the temporaries.
func wideGrad(x, g *Tensor, grad func(x, g *Tensor) *Tensor) *Tensor {
	if x.dtype != Float16 && x.dtype != BFloat16 {
		return grad(x, g)
	}
	return grad(x.Cast(Float32), g.Cast(Float32)).Cast(g.dtype)
}

// Erf returns the error function of t.
func (t *Tensor) Erf() *Tensor {
	return unary("erf", backend.Erf, t, 0, saveX, func(x, _, g *Tensor) *Tensor {
		return g.Mul(x.Square().Neg().Exp().MulScalar(2 / math.Sqrt(math.Pi)))
	})
}

// Floor rounds down (a zero gradient). An integer tensor is returned
// unchanged, in its dtype, as PyTorch does. It panics with [ErrDType] for a
// bool tensor, as PyTorch's does.
func (t *Tensor) Floor() *Tensor {
	return unary("floor", backend.Floor, noBoolRounding("floor", t), 0, saveNone, zeroGradient)
}

// Ceil rounds up (a zero gradient); an integer tensor keeps its values and
// dtype. It panics with [ErrDType] for a bool tensor, as PyTorch's does.
func (t *Tensor) Ceil() *Tensor {
	return unary("ceil", backend.Ceil, noBoolRounding("ceil", t), 0, saveNone, zeroGradient)
}

// Round rounds half to even (a zero gradient); an integer tensor keeps its
// values and dtype. It panics with [ErrDType] for a bool tensor, as
// PyTorch's does.
func (t *Tensor) Round() *Tensor {
	return unary("round", backend.Round, noBoolRounding("round", t), 0, saveNone, zeroGradient)
}

// RoundDecimals rounds half to even to the given number of decimal
// places (torch.round with decimals): x·10^d rounded and divided by 10^d,
// or for a negative d x/10^-d rounded and multiplied by 10^-d, computed in
// float32 for float16 and bfloat16 as PyTorch's is; its gradient is zero.
// A decimals of 0 is [Tensor.Round]. It panics with [ErrDType] for a bool
// tensor, and for an integer one with decimals other than 0, as PyTorch's
// does.
func (t *Tensor) RoundDecimals(decimals int) *Tensor {
	const op = "round"
	noBoolRounding(op, t)
	if decimals == 0 {
		return t.Round()
	}
	if !t.dtype.IsFloat() {
		fail(op, ErrDType, "round with decimals = %d needs a floating-point tensor, got %s; Cast it first", decimals, t.dtype)
	}
	defer pin(op, t).unpin()
	return composed(op, func() *Tensor {
		x := t
		if t.dtype == Float16 || t.dtype == BFloat16 {
			x = t.Cast(Float32)
		}
		var r *Tensor
		if decimals > 0 {
			ten := math.Pow(10, float64(decimals))
			r = x.MulScalar(ten).Round().DivScalar(ten)
		} else {
			ten := math.Pow(10, float64(-decimals))
			r = x.DivScalar(ten).Round().MulScalar(ten)
		}
		return r.Cast(t.dtype)
	})
}

// noBoolRounding returns t, panicking with ErrDType when t is bool: PyTorch
// rounds numbers only (torch.floor, ceil, round and trunc raise for bool).
func noBoolRounding(op string, t *Tensor) *Tensor {
	notNil(op, t)
	if t.dtype == Bool {
		fail(op, ErrDType, "%s of a bool tensor is not supported; Cast it to a number type first", op)
	}
	return t
}

// IsNaN returns a bool tensor that is true where t is NaN.
func (t *Tensor) IsNaN() *Tensor { return unary("isnan", backend.IsNaN, t, 0, saveNone, nil) }

// LogicalNot returns a bool tensor that is true where t is zero.
func (t *Tensor) LogicalNot() *Tensor {
	return unary("logical_not", backend.LogicalNot, t, 0, saveNone, nil)
}
