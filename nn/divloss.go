package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// KLDivLoss returns the Kullback-Leibler divergence of target from input
// (torch.nn.functional.kl_div): input holds log-probabilities, and target
// probabilities, or log-probabilities when logTarget is set. Element i's
// loss is target·(log target − input), 0 where target is 0, or
// e^target·(target − input) with logTarget; input and target broadcast
// against each other. r combines them: ReductionBatchMean divides their
// sum by the size of input's first dimension (the divergence per sample,
// what PyTorch recommends), ReductionMean by their number (PyTorch's
// default, which warns, once per call site through vram.WarnOnce, as
// PyTorch's does). 16-bit inputs are computed in float32
// and the result rounded to their dtype once (float32 inside an Autocast
// region).
// It panics with an *vram.Error of kind vram.ErrArgument for a nil tensor
// or an unknown reduction.
func KLDivLoss(input, target *vram.Tensor, logTarget bool, r Reduction) *vram.Tensor {
	const op = "kl_div"
	defer asOp(op)
	notNil(op, input)
	notNil(op, target)
	if r < ReductionMean || r > ReductionBatchMean {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("unknown reduction %d; use ReductionBatchMean, ReductionMean, ReductionSum or ReductionNone", int(r))})
	}
	dt := lossDType(op, input, target)
	if r == ReductionMean {
		vram.WarnOnce(fmt.Sprintf("kl_div: reduction 'mean' divides the sum of the losses by all %d elements of the input %v, not by the batch size; "+
			"'batchmean' (ReductionBatchMean) divides by the batch size, which gives the KL divergence per sample", input.NumElements(), input.Shape()))
	}
	var ts temps
	defer ts.release()
	x, y := ts.operand(input), ts.operand(target)
	var l *vram.Tensor
	if logTarget {
		l = ts.add(ts.add(y.Exp()).Mul(ts.add(y.Sub(x))))
	} else {
		// log of 1 where target is 0, so that 0·log 0 is 0, with a
		// gradient, and not NaN.
		var zero *vram.Tensor
		vram.NoGrad(func() { zero = ts.add(y.EqScalar(0)) })
		safe := ts.add(vram.Where(zero, ts.add(y.NewOnes(nil)), y))
		l = ts.add(y.Mul(ts.add(ts.add(safe.Log()).Sub(x))))
	}
	if r != ReductionBatchMean {
		return ts.result(l, r, dt)
	}
	s := ts.add(l.Sum())
	if input.Dim() > 0 {
		s = ts.add(s.DivScalar(float64(input.Size(0))))
	}
	return ts.result(s, ReductionNone, dt)
}

// CosineSimilarity returns the cosine of the angle between x1 and x2 along
// dim (torch.nn.functional.cosine_similarity): Σ x1·x2 over dim divided by
// max(‖x1‖, eps)·max(‖x2‖, eps), of the broadcast shape without dim
// (PyTorch's default eps is 1e-8). A negative dim counts from the end.
// 16-bit inputs are computed in float32 and the result rounded once;
// integer and bool inputs are taken as float32, as PyTorch takes them in
// its default dtype. It
// panics with an *vram.Error of kind vram.ErrArgument for a nil tensor or
// a negative or NaN eps, and as vram's ops do for shapes that do not
// broadcast or a dim out of range.
func CosineSimilarity(x1, x2 *vram.Tensor, dim int, eps float64) *vram.Tensor {
	const op = "cosine_similarity"
	defer asOp(op)
	notNil(op, x1)
	notNil(op, x2)
	if !(eps >= 0) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("eps must not be negative, got %v", eps)})
	}
	var ts temps
	defer ts.release()
	// Integer and bool inputs are taken as float32, as PyTorch's are
	// taken in its default dtype.
	float := func(x *vram.Tensor) *vram.Tensor {
		if !x.DType().IsFloat() {
			return ts.add(x.Cast(vram.Float32))
		}
		return ts.operand(x)
	}
	a, b := float(x1), float(x2)
	unit := func(v *vram.Tensor) *vram.Tensor {
		n := ts.add(v.Norm(2, []int{dim}, true))
		return ts.add(v.Div(ts.add(n.Clamp(eps, math.Inf(1)))))
	}
	c := ts.add(ts.add(unit(a).Mul(unit(b))).Sum(dim))
	// Inside Autocast it stays float32, as PyTorch's autocast runs
	// cosine_similarity in float32.
	dt := floatDType(x1, x2)
	if !dt.IsFloat() {
		dt = vram.Float32
	}
	if dt = autocastFloat32(dt); c.DType() != dt {
		return c.Cast(dt)
	}
	return ts.keep(c)
}

// CosineEmbeddingLoss returns the loss of pairs x1, x2 ([N, D], or [D] for
// one pair) labelled y ([N], or a scalar) 1 for similar and −1 for
// dissimilar (torch.nn.functional.cosine_embedding_loss): 1 − cos(x1, x2)
// where y is 1, max(0, cos(x1, x2) − margin) where it is −1, and 0 for
// other labels, combined as r says. The cosine is PyTorch's for this
// loss, Σ x1·x2/sqrt((‖x1‖² + 1e-12)·(‖x2‖² + 1e-12)). 16-bit inputs are
// computed in float32 and the result rounded to their dtype once (float32
// inside an Autocast region). It panics with an *vram.Error of kind
// vram.ErrArgument for a nil tensor or an unknown r, and of kind
// vram.ErrShape unless x1 and x2 have one shape of 1 or 2 dimensions and
// y that shape without its last dimension.
func CosineEmbeddingLoss(x1, x2, y *vram.Tensor, margin float64, r Reduction) *vram.Tensor {
	const op = "cosine_embedding_loss"
	defer asOp(op)
	notNil(op, x1)
	notNil(op, x2)
	notNil(op, y)
	r.check(op)
	dt := lossDType(op, x1, x2)
	s1 := x1.Shape()
	if d := len(s1); d < 1 || d > 2 || !slices.Equal(s1, x2.Shape()) || !slices.Equal(s1[:d-1], y.Shape()) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects x1 and x2 of one shape [N, D] or [D] and y [N] or a scalar, got %v, %v and %v", s1, x2.Shape(), y.Shape())})
	}
	const eps = 1e-12
	var ts temps
	defer ts.release()
	a, b := ts.operand(x1), ts.operand(x2)
	dim := -1
	dot := ts.add(ts.add(a.Mul(b)).Sum(dim))
	m1 := ts.add(ts.add(ts.add(a.Square()).Sum(dim)).AddScalar(eps))
	m2 := ts.add(ts.add(ts.add(b.Square()).Sum(dim)).AddScalar(eps))
	cos := ts.add(dot.Div(ts.add(ts.add(m1.Mul(m2)).Sqrt())))
	pos := ts.add(cos.RSubScalar(1))
	neg := ts.add(ts.add(cos.SubScalar(margin)).Clamp(0, math.Inf(1)))
	var isPos, isNeg *vram.Tensor
	vram.NoGrad(func() {
		isPos = ts.add(y.EqScalar(1))
		isNeg = ts.add(y.EqScalar(-1))
	})
	zero := ts.add(cos.NewZeros(nil))
	l := ts.add(vram.Where(isPos, pos, ts.add(vram.Where(isNeg, neg, zero))))
	return ts.result(l, r, dt)
}
