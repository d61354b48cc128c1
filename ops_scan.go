package vram

import "github.com/vramgo/vram/backend"

// CumSum returns the cumulative sum along dim (torch.cumsum): element i
// is the sum of elements 0..i. The result has t's shape; integer and bool
// tensors sum to int64, and float16 and bfloat16 ones are summed in
// float32 and rounded once. A 0-dimensional t takes dim 0 or -1. It panics
// with [ErrIndex] for a dim out of range.
func (t *Tensor) CumSum(dim int) *Tensor { return t.scan("cumsum", backend.Add, dim) }

// CumProd returns the cumulative product along dim (torch.cumprod), with
// CumSum's shape and dtype rules. The gradient is exact where the input
// holds zeros, as it is built from products and never divides.
func (t *Tensor) CumProd(dim int) *Tensor { return t.scan("cumprod", backend.Mul, dim) }

// scan computes the inclusive scan of op along dim in about log2(n)
// recorded passes of n elements (Hillis and Steele): pass s combines each
// element with the one s before it, for s = 1, 2, 4, ... Built from
// Narrow, an elementwise op and Cat, it runs on every backend and is
// differentiated by the engine.
func (t *Tensor) scan(op string, k backend.BinaryOp, dim int) *Tensor {
	defer asOp(op)
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.scan(op, k, dim)
	}
	defer pin(op, t).unpin()
	a := t.scalarAxis(op, dim)
	dt := t.dtype
	if !dt.IsFloat() {
		dt = Int64
	}
	if w := opMath(dt); w != dt {
		return t.inOpMath(func(x *Tensor) *Tensor { return x.scan(op, k, dim) })
	}
	var x *Tensor
	if dt == t.dtype {
		x = t.Clone()
	} else {
		x = t.Cast(dt)
	}
	if a < 0 {
		return x
	}
	if k == backend.Mul {
		return hillisSteele(x, a, (*Tensor).Mul)
	}
	return hillisSteele(x, a, (*Tensor).Add)
}

// hillisSteele returns the inclusive scan of x along axis a under combine
// (combine(later, earlier) of two slices of x), releasing x: pass s
// combines each element with the one s before it, for s = 1, 2, 4, ...
func hillisSteele(x *Tensor, a int, combine func(cur, prev *Tensor) *Tensor) *Tensor {
	n := x.shape[a]
	for s := 1; s < n; s *= 2 {
		func() {
			head := x.Narrow(a, 0, s)
			defer head.Release()
			prev := x.Narrow(a, 0, n-s)
			defer prev.Release()
			cur := x.Narrow(a, s, n-s)
			defer cur.Release()
			both := combine(cur, prev)
			defer both.Release()
			defer x.Release()
			x = Cat([]*Tensor{head, both}, a)
		}()
	}
	return x
}
