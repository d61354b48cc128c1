package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// This file holds the margin, ranking and likelihood losses of torch.nn,
// composed from vram's ops so that every device runs them. Each takes a
// [Reduction] and computes 16-bit inputs in float32, rounding the result
// to their dtype once; the errors of the operations they are built from
// name the loss.

// checkMargin panics with an *vram.Error of kind vram.ErrArgument unless
// margin is finite.
func checkMargin(op string, margin float64) {
	checkFinite(op, "margin", margin)
}

// result returns the elementwise losses l, taken out of ts, combined as
// r says, in dt: the dtype of the inputs, which 16-bit inputs were widened
// from (float32 inside an Autocast region, as PyTorch's autocast runs its
// losses).
func (ts *temps) result(l *vram.Tensor, r Reduction, dt vram.DType) *vram.Tensor {
	out := reduce(ts.keep(l), r)
	if dt = autocastFloat32(dt); out.DType() == dt {
		return out
	}
	defer out.Release()
	return out.Cast(dt)
}

// floatDType returns the dtype PyTorch's type promotion gives the
// floating-point tensors among xs, skipping nil and integer ones (an
// integer tensor meeting a float one takes the float's dtype); with none,
// the first non-nil tensor's dtype.
func floatDType(xs ...*vram.Tensor) vram.DType {
	var dt vram.DType
	found := false
	for _, x := range xs {
		if x == nil || !x.DType().IsFloat() {
			continue
		}
		if !found {
			dt, found = x.DType(), true
			continue
		}
		dt = promoteFloat(dt, x.DType())
	}
	if !found {
		for _, x := range xs {
			if x != nil {
				return x.DType()
			}
		}
	}
	return dt
}

// relu returns max(x, 0) recorded in ts.
func (ts *temps) relu(x *vram.Tensor) *vram.Tensor { return ts.add(x.Clamp(0, math.Inf(1))) }

// MarginRankingLoss returns the loss of ranking x1 above x2 where y is 1
// and below it where y is −1 (torch.nn.functional.margin_ranking_loss):
// max(0, −y·(x1 − x2) + margin) for each element, the three broadcast
// together, combined as r says. It panics with an *vram.Error of kind
// vram.ErrArgument for a nil tensor, a margin that is not finite or an
// unknown r, and of kind vram.ErrShape unless the three have one number
// of dimensions, as PyTorch requires, and broadcast together.
func MarginRankingLoss(x1, x2, y *vram.Tensor, margin float64, r Reduction) *vram.Tensor {
	const op = "margin_ranking_loss"
	defer asOp(op)
	notNil(op, x1)
	notNil(op, x2)
	notNil(op, y)
	r.check(op)
	checkMargin(op, margin)
	dt := lossDType(op, x1, x2, y)
	if x1.Dim() != x2.Dim() || x1.Dim() != y.Dim() {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects x1, x2 and y with one number of dimensions, got %v, %v and %v", x1.Shape(), x2.Shape(), y.Shape())})
	}
	var ts temps
	defer ts.release()
	d := ts.add(ts.operand(x1).Sub(ts.operand(x2)))
	l := ts.relu(ts.add(ts.add(ts.add(ts.operand(y).Neg()).Mul(d)).AddScalar(margin)))
	return ts.result(l, r, dt)
}

// HingeEmbeddingLoss returns the loss of distances x labelled y 1 for
// similar pairs and −1 for dissimilar ones
// (torch.nn.functional.hinge_embedding_loss): x where y is 1 and
// max(0, margin − x) where y is −1 (PyTorch's default margin is 1), x and
// y broadcast together, combined as r says. Like PyTorch's, an element
// labelled neither takes both terms. It panics with an *vram.Error of
// kind vram.ErrArgument for a nil tensor, a margin that is not finite or
// an unknown r.
func HingeEmbeddingLoss(x, y *vram.Tensor, margin float64, r Reduction) *vram.Tensor {
	const op = "hinge_embedding_loss"
	defer asOp(op)
	notNil(op, x)
	notNil(op, y)
	r.check(op)
	checkMargin(op, margin)
	dt := lossDType(op, x)
	var ts temps
	defer ts.release()
	a := ts.operand(x)
	var notPos, notNeg *vram.Tensor
	vram.NoGrad(func() {
		notPos = ts.add(ts.add(y.EqScalar(1)).LogicalNot())
		notNeg = ts.add(ts.add(y.EqScalar(-1)).LogicalNot())
	})
	zero := ts.add(a.NewZeros(nil))
	hinge := ts.relu(ts.add(a.RSubScalar(margin)))
	l := ts.add(ts.add(vram.Where(notPos, hinge, zero)).Add(ts.add(vram.Where(notNeg, a, zero))))
	return ts.result(l, r, dt)
}

// SoftMarginLoss returns the two-class logistic loss log(1 + e^(−y·x)) of
// scores x and labels y of 1 or −1 (torch.nn.functional.soft_margin_loss),
// x and y broadcast together, combined as r says. It panics with an
// *vram.Error of kind vram.ErrArgument for a nil tensor or an unknown r.
func SoftMarginLoss(x, y *vram.Tensor, r Reduction) *vram.Tensor {
	const op = "soft_margin_loss"
	defer asOp(op)
	notNil(op, x)
	notNil(op, y)
	r.check(op)
	dt := lossDType(op, x, y)
	var ts temps
	defer ts.release()
	z := ts.add(ts.add(ts.operand(y).Neg()).Mul(ts.operand(x)))
	// log(1 + e^z) exactly: Softplus with no threshold, as PyTorch's
	// log1p(exp(·)); its default threshold 20 would return z beyond it.
	return ts.result(ts.add(z.Softplus(1, math.Inf(1))), r, dt)
}

// logSigmoid returns log(sigmoid(x)), recorded in ts: −log(1 + e^−x)
// without Softplus's threshold, so exact for every x.
func (ts *temps) logSigmoid(x *vram.Tensor) *vram.Tensor {
	return ts.add(ts.add(ts.add(x.Neg()).Softplus(1, math.Inf(1))).Neg())
}

// MultiLabelSoftMarginLoss returns the multi-label one-versus-all loss of
// scores x [N, C] (or [C]) and targets y of x's shape holding 1 for the
// labels present and 0 for the others
// (torch.nn.functional.multilabel_soft_margin_loss): for each sample, the
// mean over classes of −w·(y·log σ(x) + (1 − y)·log σ(−x)), combined over
// samples as r says (ReductionNone gives [N], or a scalar for [C]).
// weight, which may be nil, weighs the classes and broadcasts to [C]. It
// panics with an *vram.Error of kind vram.ErrArgument for a nil x or y
// or an unknown r, and of kind vram.ErrShape unless x has 1 or 2
// dimensions, y its shape and weight broadcasts to [C].
func MultiLabelSoftMarginLoss(x, y, weight *vram.Tensor, r Reduction) *vram.Tensor {
	const op = "multilabel_soft_margin_loss"
	defer asOp(op)
	notNil(op, x)
	notNil(op, y)
	r.check(op)
	checkSameShape(op, x, y)
	if d := x.Dim(); d < 1 || d > 2 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects input [N, C] or [C], got %v", x.Shape())})
	}
	checkBroadcastsTo(op, "weight", weight, x.Shape()[x.Dim()-1:])
	dt := lossDType(op, x, y, weight)
	var ts temps
	defer ts.release()
	a, t := ts.operand(x), ts.operand(y)
	pos := ts.add(t.Mul(ts.logSigmoid(a)))
	neg := ts.add(ts.add(t.RSubScalar(1)).Mul(ts.logSigmoid(ts.add(a.Neg()))))
	l := ts.add(ts.add(pos.Add(neg)).Neg())
	if weight != nil {
		l = ts.add(l.Mul(ts.operand(weight)))
	}
	return ts.result(ts.add(l.Mean(-1)), r, dt)
}

// MultiMarginLoss returns the multi-class hinge loss of scores x [N, C]
// (or [C]) for the int64 class indices y [N] (or a scalar or [1])
// (torch.nn.functional.multi_margin_loss): for each sample,
// Σ_{i≠y} w[y]·max(0, margin − x[y] + x[i])^p / C, combined over samples
// as r says. p is 1 or 2 and margin PyTorch's default 1; weight, which may
// be nil, holds a weight for each class [C]. It panics with an
// *vram.Error of kind vram.ErrArgument for a nil x or y, a p other than 1
// or 2, a margin that is not finite or an unknown r, of kind
// vram.ErrShape for inconsistent shapes, of kind vram.ErrDType for a y
// that is not int64, and of kind vram.ErrIndex for a class index out of
// range.
func MultiMarginLoss(x, y *vram.Tensor, p int, margin float64, weight *vram.Tensor, r Reduction) *vram.Tensor {
	const op = "multi_margin_loss"
	defer asOp(op)
	notNil(op, x)
	notNil(op, y)
	r.check(op)
	checkMargin(op, margin)
	if p != 1 && p != 2 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("only p == 1 and p == 2 are supported, got %d", p)})
	}
	xs := x.Shape()
	// One sample [C] may come with its class as a scalar or as [1], as
	// in PyTorch; the losses of the latter are [1].
	one := len(xs) == 1 && slices.Equal(y.Shape(), vram.Shape{1})
	if d := len(xs); d < 1 || d > 2 || xs[d-1] == 0 || !(one || slices.Equal(y.Shape(), xs[:d-1])) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects input [N, C] or [C] with C > 0 and target [N] or a scalar ([1] for [C]), got %v and %v", xs, y.Shape())})
	}
	if y.DType() != vram.Int64 {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("target must hold int64 class indices, got %v", y.DType())})
	}
	dt := lossDType(op, x)
	c := xs[len(xs)-1]
	if weight != nil && (weight.Dim() != 1 || weight.Size(0) != c) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects weight [%d], got %v", c, weight.Shape())})
	}
	defer targetBounds(c, nil)
	var ts temps
	defer ts.release()
	a := ts.operand(x)
	if one {
		y = ts.add(y.Reshape())
	}
	idx := ts.add(y.Unsqueeze(-1))
	xy := ts.add(a.Gather(-1, idx))
	h := ts.relu(ts.add(ts.add(a.Sub(xy)).AddScalar(margin)))
	if p == 2 {
		h = ts.add(h.Square())
	}
	var other *vram.Tensor
	vram.NoGrad(func() {
		oneHot := ts.add(ts.add(a.NewZeros(xs)).ScatterValue(-1, idx, 1))
		other = ts.add(oneHot.RSubScalar(1))
	})
	h = ts.add(h.Mul(other))
	if weight != nil {
		w := ts.add(ts.operand(weight).Gather(0, ts.add(idx.Reshape(-1))))
		h = ts.add(h.Mul(ts.add(w.Reshape(idx.Shape()...))))
	}
	l := ts.add(ts.add(h.Sum(-1)).DivScalar(float64(c)))
	if one {
		l = ts.add(l.Reshape(1))
	}
	return ts.result(l, r, dt)
}

// TripletMarginLoss returns the triplet loss of anchors, positives and
// negatives ([N, D], or [D] for one triplet)
// (torch.nn.functional.triplet_margin_loss):
// max(d(a, p) − d(a, n) + margin, 0) with d(u, v) = ‖u − v + eps‖_pNorm
// along the last dimension (PyTorch's pairwise_distance; its defaults are
// margin 1, pNorm 2 and eps 1e-6). A pNorm of math.Inf(1) takes the
// largest |u − v + eps|. With swap, d(a, n) is replaced by
// d(p, n) where that is smaller. The losses are combined as r says. It
// panics with an *vram.Error of kind vram.ErrArgument for a nil tensor, a
// margin that is not finite, a pNorm that is not positive (NaN
// included), a negative eps or an unknown r, and of kind vram.ErrShape unless the three
// share one shape of 1 or 2 dimensions.
func TripletMarginLoss(anchor, positive, negative *vram.Tensor, margin, pNorm, eps float64, swap bool, r Reduction) *vram.Tensor {
	const op = "triplet_margin_loss"
	defer asOp(op)
	notNil(op, anchor)
	notNil(op, positive)
	notNil(op, negative)
	r.check(op)
	checkMargin(op, margin)
	checkDistance(op, pNorm, eps)
	dt := lossDType(op, anchor, positive, negative)
	s := anchor.Shape()
	if d := len(s); d < 1 || d > 2 || !slices.Equal(s, positive.Shape()) || !slices.Equal(s, negative.Shape()) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects anchor, positive and negative of one shape [N, D] or [D], got %v, %v and %v", s, positive.Shape(), negative.Shape())})
	}
	var ts temps
	defer ts.release()
	a, pos, neg := ts.operand(anchor), ts.operand(positive), ts.operand(negative)
	dist := func(u, v *vram.Tensor) *vram.Tensor { return ts.distance(u, v, pNorm, eps, false) }
	dap, dan := dist(a, pos), dist(a, neg)
	if swap {
		dan = ts.add(dan.Minimum(dist(pos, neg)))
	}
	l := ts.relu(ts.add(ts.add(dap.Sub(dan)).AddScalar(margin)))
	return ts.result(l, r, dt)
}

// PairwiseDistance returns ‖x1 − x2 + eps‖_p along the last dimension of
// x1 and x2 broadcast together (torch.nn.functional.pairwise_distance,
// torch.nn.PairwiseDistance; PyTorch's defaults are p 2 and eps 1e-6),
// keeping that dimension with size 1 when keepDim is set. p may be
// math.Inf(1), which takes the largest |x1 − x2 + eps|. 16-bit inputs are
// computed in float32 and the result rounded to their dtype once (float32
// inside an Autocast region). It panics with an *vram.Error of kind
// vram.ErrArgument for a nil tensor, a p that is not positive (NaN
// included) or a negative eps, and of kind vram.ErrShape for 0-dimensional
// inputs or shapes that do not broadcast.
func PairwiseDistance(x1, x2 *vram.Tensor, p, eps float64, keepDim bool) *vram.Tensor {
	const op = "pairwise_distance"
	defer asOp(op)
	notNil(op, x1)
	notNil(op, x2)
	checkDistance(op, p, eps)
	if x1.Dim() == 0 && x2.Dim() == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: "expects inputs of at least 1 dimension, got two scalars"})
	}
	var ts temps
	defer ts.release()
	d := ts.distance(ts.operand(x1), ts.operand(x2), p, eps, keepDim)
	return ts.result(d, ReductionNone, floatDType(x1, x2))
}

// checkDistance panics with an *vram.Error of kind vram.ErrArgument
// unless p is positive (math.Inf(1) included) and eps is finite and not
// negative.
func checkDistance(op string, p, eps float64) {
	if !(p > 0) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("p must be positive, got %v", p)})
	}
	checkLossParam(op, "eps", eps)
}

// distance returns ‖u − v + eps‖_p along the last dimension, recorded in
// ts.
func (ts *temps) distance(u, v *vram.Tensor, p, eps float64, keepDim bool) *vram.Tensor {
	return ts.add(ts.add(ts.add(u.Sub(v)).AddScalar(eps)).Norm(p, []int{-1}, keepDim))
}

// TripletMarginWithDistanceLoss returns the triplet loss of anchors,
// positives and negatives with the distance dist
// (torch.nn.functional.triplet_margin_with_distance_loss):
// max(dist(a, p) − dist(a, n) + margin, 0), with dist(p, n) in place of
// dist(a, n) where that is smaller when swap is set, combined as r says.
// dist takes two tensors and returns a new one of the distances, as
// PyTorch's distance_function does; nil means [PairwiseDistance] with p 2
// and eps 1e-6, PyTorch's default. The inputs must share their number of
// dimensions. It panics with an *vram.Error of kind vram.ErrArgument for
// a nil tensor, a margin that is not positive and finite, as PyTorch
// requires, or an unknown r, and of kind vram.ErrShape for inputs of
// different numbers of dimensions; a panic of dist goes on to the caller,
// a vram error naming this loss.
func TripletMarginWithDistanceLoss(anchor, positive, negative *vram.Tensor, dist func(x1, x2 *vram.Tensor) *vram.Tensor, margin float64, swap bool, r Reduction) *vram.Tensor {
	const op = "triplet_margin_with_distance_loss"
	defer asOp(op)
	notNil(op, anchor)
	notNil(op, positive)
	notNil(op, negative)
	r.check(op)
	if !(margin > 0) || math.IsInf(margin, 1) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("margin must be positive and finite, got %v", margin)})
	}
	if d := anchor.Dim(); d != positive.Dim() || d != negative.Dim() {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects anchor, positive and negative of one number of dimensions, got %v, %v and %v", anchor.Shape(), positive.Shape(), negative.Shape())})
	}
	if dist == nil {
		dist = func(x1, x2 *vram.Tensor) *vram.Tensor { return PairwiseDistance(x1, x2, 2, 1e-6, false) }
	}
	var ts temps
	defer ts.release()
	dap, dan := ts.add(dist(anchor, positive)), ts.add(dist(anchor, negative))
	if swap {
		dan = ts.add(dan.Minimum(ts.add(dist(positive, negative))))
	}
	l := ts.relu(ts.add(ts.add(dap.Sub(dan)).AddScalar(margin)))
	return ts.result(l, r, l.DType())
}

// PoissonNLLLoss returns the negative log-likelihood of target under a
// Poisson distribution with rate input (torch.nn.functional.poisson_nll_loss):
// e^input − target·input with logInput (input is the log of the rate,
// PyTorch's default) and input − target·log(input + eps) without. full
// adds Stirling's approximation of log(target!),
// target·log(target) − target + ½·log(2π·target), where target > 1.
// input and target broadcast together; the losses are combined as r says
// (PyTorch's default eps is 1e-8). It panics with an *vram.Error of kind
// vram.ErrArgument for a nil tensor, a negative or infinite eps or an
// unknown r.
func PoissonNLLLoss(input, target *vram.Tensor, logInput, full bool, eps float64, r Reduction) *vram.Tensor {
	const op = "poisson_nll_loss"
	defer asOp(op)
	notNil(op, input)
	notNil(op, target)
	r.check(op)
	checkLossParam(op, "eps", eps)
	dt := lossDType(op, input, target)
	var ts temps
	defer ts.release()
	x, t := ts.operand(input), ts.operand(target)
	var l *vram.Tensor
	if logInput {
		l = ts.add(ts.add(x.Exp()).Sub(ts.add(t.Mul(x))))
	} else {
		l = ts.add(x.Sub(ts.add(t.Mul(ts.add(ts.add(x.AddScalar(eps)).Log())))))
	}
	if full {
		// Where target <= 1 the term is 0; the logs there are taken of 1
		// rather than of 0 or a negative number, so no NaN reaches the
		// gradient.
		var big *vram.Tensor
		vram.NoGrad(func() { big = ts.add(t.GtScalar(1)) })
		safe := ts.add(vram.Where(big, t, ts.add(t.NewOnes(nil))))
		st := ts.add(ts.add(safe.Mul(ts.add(safe.Log()))).Sub(safe))
		st = ts.add(st.Add(ts.add(ts.add(ts.add(safe.MulScalar(2 * math.Pi)).Log()).MulScalar(0.5))))
		l = ts.add(l.Add(ts.add(vram.Where(big, st, ts.add(st.NewZeros(nil))))))
	}
	return ts.result(l, r, dt)
}

// GaussianNLLLoss returns the negative log-likelihood of target under
// normal distributions with means input and variances variance
// (torch.nn.functional.gaussian_nll_loss): ½·(log v + (input − target)²/v)
// with v = max(variance, eps), plus ½·log(2π) with full (PyTorch's
// default eps is 1e-6). As PyTorch's, the clamp passes the gradient to
// variance unchanged. variance has input's shape, or input's shape with
// one dimension 1 (one variance shared along it: [N, 1, H, W] for input
// [N, C, H, W]), or input's shape without its last dimension (one
// variance shared by the last dimension); input and target broadcast
// together. The losses are
// combined as r says. It panics with an *vram.Error of kind
// vram.ErrArgument for a nil tensor, a negative or infinite eps, a
// negative variance or an unknown r, and of kind vram.ErrShape for a
// variance of another shape.
func GaussianNLLLoss(input, target, variance *vram.Tensor, full bool, eps float64, r Reduction) *vram.Tensor {
	const op = "gaussian_nll_loss"
	defer asOp(op)
	notNil(op, input)
	notNil(op, target)
	notNil(op, variance)
	r.check(op)
	checkLossParam(op, "eps", eps)
	dt := lossDType(op, input, target, variance)
	var ts temps
	defer ts.release()
	is, vs := input.Shape(), variance.Shape()
	v := ts.operand(variance)
	switch {
	case slices.Equal(is, vs):
	case len(is) > 0 && slices.Equal(is[:len(is)-1], vs):
		v = ts.add(v.Unsqueeze(-1))
	case sharesOneDim(is, vs):
	default:
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("variance of shape %v does not fit input of shape %v", vs, is)})
	}
	if variance.NumElements() > 0 {
		var lo float64
		vram.NoGrad(func() {
			m := variance.Min()
			defer m.Release()
			lo = m.Item()
		})
		if lo < 0 {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("variance has a negative entry, %v", lo)})
		}
	}
	// v + (max(v, eps) − v) without a graph for the difference: the
	// value is clamped and the gradient goes to variance unchanged.
	var lift *vram.Tensor
	vram.NoGrad(func() { lift = ts.add(ts.add(v.Clamp(eps, math.Inf(1))).Sub(v)) })
	v = ts.add(v.Add(lift))
	d := ts.add(ts.operand(input).Sub(ts.operand(target)))
	l := ts.add(ts.add(v.Log()).Add(ts.add(ts.add(d.Square()).Div(v))))
	l = ts.add(l.MulScalar(0.5))
	if full {
		l = ts.add(l.AddScalar(0.5 * math.Log(2*math.Pi)))
	}
	return ts.result(l, r, dt)
}

// sharesOneDim reports whether a variance of shape vs differs from the
// input's shape is in exactly one dimension, where it has size 1: one
// variance shared along that dimension, as PyTorch's gaussian_nll_loss
// accepts.
func sharesOneDim(is, vs vram.Shape) bool {
	if len(vs) != len(is) {
		return false
	}
	differ := 0
	for i := range is {
		if is[i] != vs[i] {
			if vs[i] != 1 {
				return false
			}
			differ++
		}
	}
	return differ == 1
}

// MultiLabelMarginLoss returns the multi-class multi-label hinge loss of
// scores x [N, C] (or [C]) for the int64 targets y of x's shape
// (torch.nn.functional.multilabel_margin_loss,
// torch.nn.MultiLabelMarginLoss). Each row of y lists a sample's classes,
// padded with -1: only the entries before the first -1 count, and later
// ones are ignored. A sample's loss is
// Σ_j Σ_{i∉y} max(0, 1 − (x[y_j] − x[i])) / C over its listed classes
// y_j and the classes i it does not list; the losses are combined over
// samples as r says (ReductionNone gives [N], or a scalar for [C]). The
// targets are read to the host to be checked, which synchronizes with
// y's device. It panics with an *vram.Error of kind vram.ErrArgument for
// a nil x or y or an unknown r, of kind vram.ErrShape unless x has 1 or 2
// dimensions, C > 0 and y has x's shape, of kind vram.ErrDType for a y
// that is not int64 or an x that is not floating point, and of kind
// vram.ErrIndex for a listed class outside [0, C) or a negative entry
// other than -1 before the first -1.
func MultiLabelMarginLoss(x, y *vram.Tensor, r Reduction) *vram.Tensor {
	const op = "multilabel_margin_loss"
	defer asOp(op)
	notNil(op, x)
	notNil(op, y)
	r.check(op)
	xs := x.Shape()
	if d := len(xs); d < 1 || d > 2 || xs[d-1] == 0 || !slices.Equal(y.Shape(), xs) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects input [N, C] or [C] with C > 0 and target of its shape, got %v and %v", xs, y.Shape())})
	}
	if y.DType() != vram.Int64 {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("target must hold int64 class indices, got %v", y.DType())})
	}
	if !x.DType().IsFloat() {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("input must be floating point, got %v", x.DType())})
	}
	c := xs[len(xs)-1]
	n := x.NumElements() / c
	// From the listed classes: the longest list k, then for each sample
	// the index to gather for each of k entries (0 past its list),
	// whether the entry counts, and whether each class is not listed.
	// Working on k entries rather than C keeps the pairwise hinges at
	// [N, k, C], small for the usual short lists.
	rows := splitRows(y.Int64s(), c)
	k := 0
	for row, v := range rows {
		for j, cls := range v {
			if cls == -1 {
				break
			}
			if cls < 0 || cls >= int64(c) {
				panic(&vram.Error{Op: op, Kind: vram.ErrIndex, Detail: fmt.Sprintf("target %d of sample %d is %d, outside [0, %d) (or -1, which ends the list)", j, row, cls, c)})
			}
			k = max(k, j+1)
		}
	}
	idx := make([]int64, n*k)
	counts := make([]float64, n*k)
	other := make([]float64, n*c)
	for row, v := range rows {
		for i := range c {
			other[row*c+i] = 1
		}
		for j, cls := range v {
			if cls == -1 {
				break
			}
			idx[row*k+j], counts[row*k+j], other[row*c+int(cls)] = cls, 1, 0
		}
	}
	var ts temps
	defer ts.release()
	a := ts.operand(x)
	if len(xs) == 1 {
		a = ts.add(a.Unsqueeze(0))
	}
	on := []vram.Option{a.Device()}
	mask := func(v []float64, cols int) *vram.Tensor {
		return ts.add(vram.FromSlice(v, vram.Shape{n, cols}, append(on, a.DType())...))
	}
	ix := ts.add(vram.FromSlice(idx, vram.Shape{n, k}, on...))
	// h[s, j, i] = max(0, 1 − x[s, y_j] + x[s, i]), kept where entry j
	// counts and class i is not listed.
	xy := ts.add(ts.add(a.Gather(1, ix)).Unsqueeze(2))
	h := ts.relu(ts.add(ts.add(ts.add(a.Unsqueeze(1)).Sub(xy)).AddScalar(1)))
	w := ts.add(ts.add(mask(counts, k).Unsqueeze(2)).Mul(ts.add(mask(other, c).Unsqueeze(1))))
	l := ts.add(ts.add(ts.add(h.Mul(w)).Sum(1, 2)).DivScalar(float64(c)))
	if len(xs) == 1 {
		l = ts.add(l.Reshape())
	}
	return ts.result(l, r, x.DType())
}

// splitRows returns v cut into rows of c values.
func splitRows(v []int64, c int) [][]int64 {
	rows := make([][]int64, 0, len(v)/c)
	for i := 0; i < len(v); i += c {
		rows = append(rows, v[i:i+c])
	}
	return rows
}
