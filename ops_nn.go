package vram

import (
	"slices"

	"github.com/vramgo/vram/backend"
)

// Softmax returns exp(t) normalised to sum to 1 along dim, computed stably.
func (t *Tensor) Softmax(dim int) *Tensor {
	t.live("softmax")
	a := t.axis("softmax", dim)
	var out *Tensor
	NoGrad(func() {
		Tidy(func() {
			m := reduceRaw("softmax", backend.Max, t, []int{a})
			e := t.Sub(m).Exp()
			out = Keep(e.Div(e.SumKeepDim(a)))
		})
	})
	if needsGrad(t) {
		sv := save(out)
		record("softmax", out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			y := sv[0]
			// dx = y * (g - sum(g*y))
			return []*Tensor{y.Mul(g.Sub(g.Mul(y).SumKeepDim(a)))}
		})
	}
	return out
}

// LogSoftmax returns log(Softmax(t, dim)), computed stably.
func (t *Tensor) LogSoftmax(dim int) *Tensor {
	t.live("log_softmax")
	a := t.axis("log_softmax", dim)
	var out *Tensor
	NoGrad(func() {
		Tidy(func() {
			m := reduceRaw("log_softmax", backend.Max, t, []int{a})
			sh := t.Sub(m)
			out = Keep(sh.Sub(sh.Exp().SumKeepDim(a).Log()))
		})
	})
	if needsGrad(t) {
		sv := save(out)
		record("log_softmax", out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			// dx = g - exp(y) * sum(g)
			return []*Tensor{g.Sub(sv[0].Exp().Mul(g.SumKeepDim(a)))}
		})
	}
	return out
}

// Gather picks values along dim: out[i][j] = t[index[i][j]][j] for dim 0
// (torch.gather). index is int64 with t's number of dimensions; its sizes
// may be smaller than t's except along dim. It panics with [ErrIndex] when
// an index is out of range.
func (t *Tensor) Gather(dim int, index *Tensor) *Tensor {
	ds := sameDevice("gather", t, index)
	a := t.axis("gather", dim)
	if index.dtype != Int64 {
		fail("gather", ErrDType, "index must be int64, got %s", index.dtype)
	}
	if len(index.shape) != len(t.shape) {
		fail("gather", ErrShape, "index %v and input %v must have the same number of dimensions", Shape(index.shape), Shape(t.shape))
	}
	for i := range t.shape {
		if i != a && index.shape[i] > t.shape[i] {
			fail("gather", ErrShape, "index %v is larger than input %v in dimension %d", Shape(index.shape), Shape(t.shape), i)
		}
	}
	out := newTensor("gather", ds, t.dtype, index.shape)
	src := t.bv()
	src.Shape = slices.Clone(index.shape)
	src.Shape[a] = t.shape[a]
	if err := ds.bd.Gather(out.bv(), src, index.bv(), a); err != nil {
		out.Release()
		panic(&Error{Op: "gather", Kind: ErrIndex, Detail: "bad index", Err: err})
	}
	if needsGrad(t) {
		shape := slices.Clone(t.shape)
		sv := save(index)
		record("gather", out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			z := g.NewZeros(shape)
			zv := z.bv()
			zv.Shape = slices.Clone(sv[0].shape)
			zv.Shape[a] = shape[a]
			gc := g.contiguous("gather")
			defer gc.Release()
			check("gather", z.ds().bd.ScatterAdd(zv, sv[0].bv(), gc.bv(), a))
			return []*Tensor{z}
		})
	}
	return out
}

// Embedding looks up rows of weight [V, D] for int64 indices of any shape,
// returning indices.shape + [D]. Gradients accumulate into the rows used.
func Embedding(indices, weight *Tensor) *Tensor {
	sameDevice("embedding", indices, weight)
	if len(weight.shape) != 2 {
		fail("embedding", ErrShape, "weight must be [num_embeddings, dim], got %v", Shape(weight.shape))
	}
	if indices.dtype != Int64 && indices.dtype != Int32 {
		fail("embedding", ErrDType, "indices must be int64 or int32, got %s", indices.dtype)
	}
	n, d := indices.NumElements(), weight.shape[1]
	var out *Tensor
	func() {
		idx := castRaw(indices, Int64)
		defer idx.Release()
		flat := idx.Reshape(n, 1)
		defer flat.Release()
		ex := flat.view([]int{n, d}, []int{flat.strides[0], 0}, flat.offset)
		defer ex.Release()
		g := weight.Gather(0, ex)
		defer g.Release()
		out = g.Reshape(append(slices.Clone(indices.shape), d)...)
	}()
	return out
}

// CrossEntropy returns the mean negative log-likelihood of integer class
// targets [N] (int64) under logits [N, C] (torch.nn.functional.cross_entropy
// with mean reduction). It panics with [ErrShape] on mismatched sizes and
// with [ErrIndex] for a target outside [0, C).
func CrossEntropy(logits, targets *Tensor) *Tensor {
	sameDevice("cross_entropy", logits, targets)
	if len(logits.shape) != 2 || len(targets.shape) != 1 || logits.shape[0] != targets.shape[0] {
		fail("cross_entropy", ErrShape, "expects logits [N, C] and targets [N], got %v and %v", Shape(logits.shape), Shape(targets.shape))
	}
	var out *Tensor
	func() {
		lsm := logits.LogSoftmax(1)
		defer lsm.Release()
		idx := castRaw(targets, Int64)
		defer idx.Release()
		col := idx.Unsqueeze(1)
		defer col.Release()
		picked := lsm.Gather(1, col)
		defer picked.Release()
		m := picked.Mean()
		defer m.Release()
		out = m.Neg()
	}()
	return out
}

// MSELoss returns the mean squared difference between pred and target
// (broadcasting, as torch.nn.functional.mse_loss). Its backward pass is one
// elementwise kernel: 2·(pred - target)·g/n from the difference kept by the
// forward pass.
func MSELoss(pred, target *Tensor) *Tensor {
	const op = "mse_loss"
	sameDevice(op, pred, target)
	d := binaryRaw(op, backend.Sub, pred, target)
	var out *Tensor
	NoGrad(func() {
		sq := d.unaryRaw(backend.Square)
		defer sq.Release()
		out = sq.Mean()
	})
	if !needsGrad(pred, target) || !d.dtype.IsFloat() {
		d.Release()
		return out
	}
	ps, ts := slices.Clone(pred.shape), slices.Clone(target.shape)
	rp, rt := pred.requiresGrad, target.requiresGrad
	n := float64(d.NumElements())
	sv := []*Tensor{d}
	record(op, out, []*Tensor{pred, target}, sv, func(g *Tensor) []*Tensor {
		gs := scalarRaw(op, backend.Mul, g, 2/n, false)
		gp := binaryRaw(op, backend.Mul, sv[0], gs)
		return []*Tensor{
			gradIf(rp, func() *Tensor { return sumTo(gp, ps) }),
			gradIf(rt, func() *Tensor { return sumTo(gp.unaryRaw(backend.Neg), ts) }),
		}
	})
	return out
}

// LayerNorm normalises t over its last len(normalizedShape) dimensions to
// zero mean and unit variance (population variance plus eps), then scales
// by weight and adds bias when they are not nil (both of normalizedShape).
func LayerNorm(t *Tensor, normalizedShape []int, weight, bias *Tensor, eps float64) *Tensor {
	t.live("layer_norm")
	k := len(normalizedShape)
	if k == 0 || k > len(t.shape) || !slices.Equal(t.shape[len(t.shape)-k:], normalizedShape) {
		fail("layer_norm", ErrShape, "normalized shape %v does not match the end of input shape %v", Shape(normalizedShape), Shape(t.shape))
	}
	for _, p := range []*Tensor{weight, bias} {
		if p != nil && !slices.Equal(p.shape, normalizedShape) {
			fail("layer_norm", ErrShape, "weight/bias shape %v must equal normalized shape %v", Shape(p.shape), Shape(normalizedShape))
		}
	}
	sameDevice("layer_norm", t, weight, bias)
	axes := make([]int, k)
	for i := range axes {
		axes[i] = len(t.shape) - k + i
	}
	var out *Tensor
	Tidy(func() {
		m := t.MeanKeepDim(axes...)
		c := t.Sub(m)
		v := c.Square().MeanKeepDim(axes...)
		y := c.Mul(v.AddScalar(eps).Rsqrt())
		if weight != nil {
			y = y.Mul(weight)
		}
		if bias != nil {
			y = y.Add(bias)
		}
		out = Keep(y)
	})
	return out
}
