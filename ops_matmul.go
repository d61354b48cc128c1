package vram

import (
	"slices"

	"github.com/vramgo/vram/backend"
)

// matmulRaw multiplies a [.., M, K] by b [.., K, N] with broadcast batch
// dimensions, without recording.
func matmulRaw(op string, a, b *Tensor) *Tensor {
	ds, held := sameDevice(op, a, b)
	defer held.unpin()
	if !a.dtype.IsFloat() || !b.dtype.IsFloat() {
		fail(op, ErrDType, "matmul needs floating-point tensors, got %s and %s", a.dtype, b.dtype)
	}
	if a.dtype != b.dtype {
		fail(op, ErrDType, "matmul of %s and %s; Cast one of them", a.dtype, b.dtype)
	}
	m, k := a.shape[len(a.shape)-2], a.shape[len(a.shape)-1]
	k2, n := b.shape[len(b.shape)-2], b.shape[len(b.shape)-1]
	if k != k2 {
		fail(op, ErrShape, "shapes %v and %v cannot be multiplied (%d != %d)", Shape(a.shape), Shape(b.shape), k, k2)
	}
	batch := broadcastShapes(op, a.shape[:len(a.shape)-2], b.shape[:len(b.shape)-2])
	out := newTensor(op, ds, a.dtype, append(slices.Clone(batch), m, n))
	nb := backend.NumElements(batch) // checked with the output's shape

	av, at := batched(op, a, batch, nb, m, k)
	bv, bt := batched(op, b, batch, nb, k, n)
	ov := out.bv()
	ov.Shape, ov.Strides = []int{nb, m, n}, []int{m * n, n, 1}
	err := ds.bd.MatMul(ds.stream(), ov, av, bv)
	at.Release()
	bt.Release()
	check(op, err)
	return out
}

// batched returns t's view as [nb, r, c], broadcasting its batch
// dimensions; when they cannot be merged into one stride, it copies them
// into a temporary tensor, returned for the caller to release (else nil).
func batched(op string, t *Tensor, batch []int, nb, r, c int) (backend.View, *Tensor) {
	full := append(slices.Clone(batch), r, c)
	v := expandView(op, t, full)
	bs := v.Strides[:len(batch)]
	stride := 0
	ok := true
	// The batch dimensions merge when they step evenly through memory.
	for i := len(batch) - 1; i >= 0; i-- {
		if batch[i] == 1 {
			continue
		}
		if stride == 0 && bs[i] != 0 {
			stride = bs[i]
			for j := i + 1; j < len(batch); j++ {
				if batch[j] != 1 {
					ok = false
				}
			}
			continue
		}
		ok = false
	}
	if len(batch) == 0 || nb <= 1 || ok {
		return backend.View{Buf: v.Buf, DType: v.DType, Shape: []int{nb, r, c},
			Strides: []int{stride, v.Strides[len(batch)], v.Strides[len(batch)+1]}, Offset: v.Offset}, nil
	}
	// Materialise the broadcast batch.
	tmp := newTensor(op, t.ds(), t.dtype, full)
	check(op, t.ds().bd.Copy(t.ds().stream(), tmp.bv(), v))
	out := tmp.bv()
	out.Shape, out.Strides = []int{nb, r, c}, []int{r * c, c, 1}
	return out, tmp
}

// MatMul returns the matrix product of a and b with torch.matmul's rules:
// 1-D operands are promoted to a row or column and the added dimension
// removed afterwards (two 1-D operands give their dot product, of shape
// []); batch dimensions broadcast. It panics with [ErrShape]
// when the inner sizes differ and with [ErrDType] for non-float operands.
func (a *Tensor) MatMul(b *Tensor) *Tensor {
	defer asOp("matmul")
	if g := current(); g != nil && g.autocast != nil {
		notNil("matmul", a, b)
		ops, done := autocastLow("matmul", a, b)
		defer done()
		a, b = ops[0], ops[1]
	}
	_, held := sameDevice("matmul", a, b)
	defer held.unpin()
	if len(a.shape) == 0 || len(b.shape) == 0 {
		fail("matmul", ErrShape, "both arguments need at least 1 dimension, got shapes %v and %v", Shape(a.shape), Shape(b.shape))
	}
	// The inner sizes are checked here, so that the error names the
	// shapes given rather than those of a promoted 1-D operand.
	k, k2 := a.shape[len(a.shape)-1], b.shape[max(len(b.shape)-2, 0)]
	if k != k2 {
		fail("matmul", ErrShape, "shapes %v and %v cannot be multiplied (%d != %d)", Shape(a.shape), Shape(b.shape), k, k2)
	}
	if len(a.shape) == 1 && len(b.shape) == 1 {
		// A dot product: [1, K] @ [K, 1], both added dimensions removed.
		a2 := a.Unsqueeze(0)
		defer a2.Release()
		r := a2.MatMul(b) // [1]
		defer r.Release()
		return r.Squeeze(0)
	}
	if len(a.shape) == 1 {
		a2 := a.Unsqueeze(0)
		defer a2.Release()
		r := a2.MatMul(b)
		defer r.Release()
		return r.Squeeze(-2)
	}
	if len(b.shape) == 1 {
		b2 := b.Unsqueeze(1)
		defer b2.Release()
		r := a.MatMul(b2)
		defer r.Release()
		return r.Squeeze(-1)
	}
	out := matmulRaw("matmul", a, b)
	if needsGrad(a, b) {
		as, bs := slices.Clone(a.shape), slices.Clone(b.shape)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		// a's gradient reads b and b's reads a (a linear layer's input
		// is kept for the weight's gradient only): keep only what is read.
		sa, sb := saveIf(rb, a), saveIf(ra, b)
		record("matmul", out, []*Tensor{a, b}, compact([]*Tensor{sa, sb}), func(g *Tensor) []*Tensor {
			return []*Tensor{
				gradIf(ra, func() *Tensor { return sumTo(matmulRaw("matmul", g, sb.MT()), as) }),
				gradIf(rb, func() *Tensor { return sumTo(matmulRaw("matmul", sa.MT(), g), bs) }),
			}
		})
	}
	return out
}

// BMM multiplies batches of matrices: a [B, M, K] by b [B, K, N]. Unlike
// MatMul it does not broadcast; other shapes panic with [ErrShape].
func (a *Tensor) BMM(b *Tensor) *Tensor {
	_, held := sameDevice("bmm", a, b)
	defer held.unpin()
	if len(a.shape) != 3 || len(b.shape) != 3 || a.shape[0] != b.shape[0] {
		fail("bmm", ErrShape, "expects [B,M,K] and [B,K,N] with equal B, got %v and %v", Shape(a.shape), Shape(b.shape))
	}
	defer asOp("bmm")
	return a.MatMul(b)
}
