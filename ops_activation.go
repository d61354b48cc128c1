package vram

import "math"

// The activations in this file are composed of other ops. Each computes its
// value in float32 for a float16 or bfloat16 input (in the input's dtype
// otherwise) and rounds it once, and records one backward step with the
// derivative PyTorch's kernel uses, also in float32 for 16-bit inputs, so
// that kinks get PyTorch's one-sided gradients and no intermediate
// overflows or cancels in 16 bits.

// composite returns value(x) for t, computed as the comment above says,
// recording deriv(x, g) as its backward. Both run with gradients off, on
// tensors they may leave to the caller: their temporaries are released.
func composite(op string, t *Tensor, value func(x *Tensor, ts *temps) *Tensor, deriv func(x, g *Tensor, ts *temps) *Tensor) *Tensor {
	t.live(op)
	if !t.dtype.IsFloat() {
		fail(op, ErrDType, "%s needs a floating-point tensor, got %s; Cast it first", op, t.dtype)
	}
	var out *Tensor
	NoGrad(func() {
		var ts temps
		defer ts.release()
		x := t
		if t.dtype == Float16 || t.dtype == BFloat16 {
			x = ts.add(t.Cast(Float32))
		}
		out = value(x, &ts)
		if out.dtype != t.dtype {
			out = ts.add(out).Cast(t.dtype)
		}
	})
	if needsGrad(t) {
		x := t.share()
		record(op, out, []*Tensor{t}, []*Tensor{x}, func(g *Tensor) []*Tensor {
			return []*Tensor{wideGrad(x, g, func(x, g *Tensor) *Tensor {
				var ts temps
				defer ts.release()
				return deriv(x, g, &ts)
			})}
		})
	}
	return out
}

// temps collects intermediate tensors for release.
type temps []*Tensor

// add records x and returns it.
func (ts *temps) add(x *Tensor) *Tensor {
	*ts = append(*ts, x)
	return x
}

// release releases every tensor recorded. Its receiver is a pointer so
// that "defer ts.release()" releases what was recorded after the defer
// statement, not the (empty) slice it saw.
func (ts *temps) release() {
	for _, x := range *ts {
		x.Release()
	}
	*ts = nil
}

// softplusRaw returns log(1 + e^x) computed stably, max(x, 0) + log1p(e^−|x|).
func softplusRaw(x *Tensor, ts *temps) *Tensor {
	pos := ts.add(x.Relu())
	e := ts.add(ts.add(ts.add(x.Abs()).Neg()).Exp())
	return pos.Add(ts.add(e.Log1p()))
}

// Softplus returns log(1 + e^(beta·t))/beta, and t itself where beta·t >
// threshold (torch.nn.functional.softplus; PyTorch's defaults are beta 1
// and threshold 20). Its gradient is sigmoid(beta·t), and 1 above the
// threshold. It panics with an *Error of kind [ErrArgument] for a beta
// of 0, an infinite or NaN beta or a NaN threshold, and of kind [ErrDType]
// for a tensor that is not floating-point.
func (t *Tensor) Softplus(beta, threshold float64) *Tensor {
	const op = "softplus"
	t.live(op)
	if beta == 0 || math.IsInf(beta, 0) || math.IsNaN(beta) || math.IsNaN(threshold) {
		fail(op, ErrArgument, "beta must be finite and not 0 and threshold not NaN, got beta %v, threshold %v", beta, threshold)
	}
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Softplus(beta, threshold)
	}
	return composite(op, t, func(x *Tensor, ts *temps) *Tensor {
		bx := ts.add(x.MulScalar(beta))
		sp := ts.add(ts.add(softplusRaw(bx, ts)).DivScalar(beta))
		return Where(ts.add(bx.GtScalar(threshold)), x, sp)
	}, func(x, g *Tensor, ts *temps) *Tensor {
		bx := ts.add(x.MulScalar(beta))
		return Where(ts.add(bx.GtScalar(threshold)), g, ts.add(g.Mul(ts.add(bx.Sigmoid()))))
	})
}

// Elu returns t where t > 0 and alpha·(e^t − 1) elsewhere
// (torch.nn.functional.elu; PyTorch's default alpha is 1). Its gradient is
// 1 where t > 0 and alpha·e^t elsewhere, alpha at 0 as in PyTorch. It
// panics with an *Error of kind [ErrDType] for a tensor that is not
// floating-point.
func (t *Tensor) Elu(alpha float64) *Tensor {
	return composite("elu", t, func(x *Tensor, ts *temps) *Tensor {
		neg := ts.add(ts.add(x.Expm1()).MulScalar(alpha))
		return Where(ts.add(x.GtScalar(0)), x, neg)
	}, func(x, g *Tensor, ts *temps) *Tensor {
		neg := ts.add(g.Mul(ts.add(ts.add(x.Exp()).MulScalar(alpha))))
		return Where(ts.add(x.GtScalar(0)), g, neg)
	})
}

// Mish returns t·tanh(log(1 + e^t)) (torch.nn.functional.mish). It panics
// with an *Error of kind [ErrDType] for a tensor that is not
// floating-point.
func (t *Tensor) Mish() *Tensor {
	return composite("mish", t, func(x *Tensor, ts *temps) *Tensor {
		return x.Mul(ts.add(ts.add(softplusRaw(x, ts)).Tanh()))
	}, func(x, g *Tensor, ts *temps) *Tensor {
		// tanh(sp) + x·sigmoid(x)·(1 − tanh²(sp))
		th := ts.add(ts.add(softplusRaw(x, ts)).Tanh())
		sech2 := ts.add(ts.add(th.Square()).RSubScalar(1))
		d := ts.add(th.Add(ts.add(ts.add(x.Mul(ts.add(x.Sigmoid()))).Mul(sech2))))
		return g.Mul(d)
	})
}

// Hardswish returns t·min(max(t + 3, 0), 6)/6
// (torch.nn.functional.hardswish). Its gradient is PyTorch's: 0 below −3,
// t/3 + 1/2 on [−3, 3] and 1 above. It panics with an *Error of kind
// [ErrDType] for a tensor that is not floating-point.
func (t *Tensor) Hardswish() *Tensor {
	return composite("hardswish", t, func(x *Tensor, ts *temps) *Tensor {
		r := ts.add(ts.add(x.AddScalar(3)).Clamp(0, 6))
		return ts.add(x.Mul(r)).DivScalar(6)
	}, func(x, g *Tensor, ts *temps) *Tensor {
		mid := ts.add(g.Mul(ts.add(ts.add(x.DivScalar(3)).AddScalar(0.5))))
		inner := ts.add(Where(ts.add(x.LeScalar(3)), mid, g))
		return Where(ts.add(x.LtScalar(-3)), ts.add(g.NewZeros(nil)), inner)
	})
}

// Hardtanh returns t clamped to [lo, hi] (torch.nn.functional.hardtanh;
// PyTorch's defaults are −1 and 1, and relu6 is Hardtanh(0, 6)). Unlike
// [Tensor.Clamp]'s, its gradient is 0 at the bounds themselves, as
// PyTorch's is. It panics with an *Error of kind [ErrArgument] when lo >
// hi or either is NaN, and of kind [ErrDType] for a tensor that is not
// floating-point.
func (t *Tensor) Hardtanh(lo, hi float64) *Tensor {
	const op = "hardtanh"
	t.live(op)
	if !(lo <= hi) {
		fail(op, ErrArgument, "min %v must not be greater than max %v", lo, hi)
	}
	return composite(op, t, func(x *Tensor, _ *temps) *Tensor {
		return x.Clamp(lo, hi)
	}, func(x, g *Tensor, ts *temps) *Tensor {
		out := ts.add(ts.add(x.LeScalar(lo)).LogicalOr(ts.add(x.GeScalar(hi))))
		return Where(out, ts.add(g.NewZeros(nil)), g)
	})
}
