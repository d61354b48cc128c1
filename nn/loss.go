package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// MSELoss returns the mean squared error between pred and target, which
// broadcast against each other (torch.nn.functional.mse_loss with mean
// reduction). It is [vram.MSELoss].
func MSELoss(pred, target *vram.Tensor) *vram.Tensor { return vram.MSELoss(pred, target) }

// MSELossWith returns the squared differences between pred and target,
// which broadcast against each other, combined as r says
// (torch.nn.functional.mse_loss with reduction): their mean, as [MSELoss]
// gives, their sum, or each of them, of the broadcast shape. The result
// has the inputs' promoted dtype (float32 inside an Autocast region, as
// in PyTorch); 16-bit inputs are computed in float32 and the result
// rounded once. It panics with an *vram.Error of kind
// vram.ErrArgument for an unknown r.
func MSELossWith(pred, target *vram.Tensor, r Reduction) *vram.Tensor {
	const op = "mse_loss"
	defer asOp(op)
	r.check(op)
	notNil(op, pred)
	notNil(op, target)
	dt := autocastFloat32(lossDType(op, pred, target))
	if r == ReductionMean {
		return vram.MSELoss(pred, target)
	}
	var ts temps
	defer ts.release()
	d := ts.add(ts.operand(pred).Sub(ts.operand(target)))
	warnTargetSize(op, pred, target)
	l := d.Square()
	if l.DType() == dt {
		return reduce(l, r)
	}
	return ts.add(reduce(l, r)).Cast(dt)
}

// promoteFloat returns the dtype of an elementwise op of two
// floating-point dtypes a and b (and of two equal dtypes).
func promoteFloat(a, b vram.DType) vram.DType {
	switch {
	case a == b:
		return a
	case a == vram.Float64 || b == vram.Float64:
		return vram.Float64
	default:
		return vram.Float32
	}
}

// lossDType returns the dtype of a loss of the operands xs, as
// floatDType gives it, and panics with an *vram.Error of kind
// vram.ErrDType when none of them is floating point: computed in
// integers, every element's loss would be truncated.
func lossDType(op string, xs ...*vram.Tensor) vram.DType {
	dt := floatDType(xs...)
	if !dt.IsFloat() {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("%s needs a floating-point input, got %s; Cast it first", op, dt)})
	}
	return dt
}

// autocastFloat32 returns dt, or float32 for a 16-bit dt inside an
// Autocast region: PyTorch's autocast runs the norms, losses and
// similarities of its float32 list in float32 and returns float32.
func autocastFloat32(dt vram.DType) vram.DType {
	if _, ac := vram.AutocastDType(); ac && (dt == vram.Float16 || dt == vram.BFloat16) {
		return vram.Float32
	}
	return dt
}

// Reduction says how a loss combines the losses of its elements:
// PyTorch's reduction argument. The zero value is PyTorch's default,
// ReductionMean.
type Reduction int

const (
	// ReductionMean averages the elements' losses ('mean'); the losses
	// of classes with weights ([CrossEntropyLossWith], [NLLLossWith])
	// divide by the sum of the weights of the targets counted.
	ReductionMean Reduction = iota
	// ReductionSum adds the elements' losses up ('sum').
	ReductionSum
	// ReductionNone returns each element's loss ('none'), of the
	// elementwise shape: the input's for the regression and binary
	// losses, the targets' for the class losses.
	ReductionNone
	// ReductionBatchMean divides the sum of the elements' losses by the
	// size of the input's first dimension ('batchmean'), the mathematically
	// correct KL divergence per sample; only [KLDivLoss] takes it.
	ReductionBatchMean
)

// String returns PyTorch's name of r: "mean", "sum", "none" or
// "batchmean".
func (r Reduction) String() string {
	switch r {
	case ReductionMean:
		return "mean"
	case ReductionSum:
		return "sum"
	case ReductionNone:
		return "none"
	case ReductionBatchMean:
		return "batchmean"
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

// check panics with an *vram.Error of kind vram.ErrArgument unless r is
// one of the three reductions that every loss takes.
func (r Reduction) check(op string) {
	if r < ReductionMean || r > ReductionNone {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("unknown reduction %d; use ReductionMean, ReductionSum or ReductionNone", int(r))})
	}
}

// reduce returns the elementwise losses l combined as r says: their mean
// or their sum, releasing l, or l itself.
func reduce(l *vram.Tensor, r Reduction) *vram.Tensor {
	switch r {
	case ReductionSum:
		defer l.Release()
		return l.Sum()
	case ReductionNone:
		return l
	}
	defer l.Release()
	return l.Mean()
}

// CrossEntropyLoss returns the mean cross entropy between logits and
// targets (torch.nn.functional.cross_entropy with its defaults): targets
// are int64 or int32 class indices of logits' shape without the class
// dimension ([N] for logits [N, C], [N, d1, ...] for [N, C, d1, ...], a
// scalar for [C]), targets of -100 left out, or floating-point class
// probabilities of logits' shape. It is [CrossEntropyLossWith] with the
// zero options, and [vram.CrossEntropy] for logits [N, C] and class
// indices.
func CrossEntropyLoss(logits, targets *vram.Tensor) *vram.Tensor {
	return CrossEntropyLossWith(logits, targets, CrossEntropyOptions{})
}

// NLLLoss returns the mean negative log-likelihood of the class indices
// targets under log-probabilities logProbs (torch.nn.functional.nll_loss
// with its defaults, targets of -100 left out), of the shapes of class
// indices in [CrossEntropyLoss]. It is [NLLLossWith] with the zero
// options, and [vram.NLLLoss] for logProbs [N, C].
func NLLLoss(logProbs, targets *vram.Tensor) *vram.Tensor {
	return NLLLossWith(logProbs, targets, NLLLossOptions{})
}

// operand returns x in the dtype a loss computes in, recorded in ts:
// float16 and bfloat16 are widened to float32, as PyTorch's autocast runs
// its losses in float32.
func (ts *temps) operand(x *vram.Tensor) *vram.Tensor {
	if dt := x.DType(); dt == vram.Float16 || dt == vram.BFloat16 {
		return ts.add(x.Cast(vram.Float32))
	}
	return x
}

// L1Loss returns the mean absolute difference between pred and target,
// which broadcast against each other (torch.nn.functional.l1_loss with
// mean reduction). Half-precision inputs are computed in float32 and the
// result rounded to their dtype once (float32 inside an Autocast region).
func L1Loss(pred, target *vram.Tensor) *vram.Tensor {
	return L1LossWith(pred, target, ReductionMean)
}

// L1LossWith returns the absolute differences between pred and target
// combined as r says (torch.nn.functional.l1_loss with reduction): their
// mean, as [L1Loss] gives, their sum, or each of them, of the broadcast
// shape. It panics with an *vram.Error of kind vram.ErrArgument for an
// unknown r.
func L1LossWith(pred, target *vram.Tensor, r Reduction) *vram.Tensor {
	defer asOp("l1_loss")
	r.check("l1_loss")
	notNil("l1_loss", pred)
	notNil("l1_loss", target)
	dt := lossDType("l1_loss", pred, target)
	var ts temps
	defer ts.release()
	d := ts.add(ts.operand(pred).Sub(ts.operand(target)))
	warnTargetSize("l1_loss", pred, target)
	return ts.result(d.Abs(), r, dt)
}

// SmoothL1Loss returns the mean over elements of 0.5·d²/beta where |d| <
// beta and |d| − 0.5·beta elsewhere, d = pred − target
// (torch.nn.functional.smooth_l1_loss with mean reduction; PyTorch's
// default beta is 1). beta 0 gives L1Loss. It panics with an *vram.Error
// of kind vram.ErrArgument for a negative, infinite or NaN beta.
func SmoothL1Loss(pred, target *vram.Tensor, beta float64) *vram.Tensor {
	return SmoothL1LossWith(pred, target, beta, ReductionMean)
}

// SmoothL1LossWith returns the elements' losses of [SmoothL1Loss]
// combined as r says (torch.nn.functional.smooth_l1_loss with reduction):
// their mean, their sum, or each of them, of the broadcast shape. It
// panics as SmoothL1Loss does, and for an unknown r.
func SmoothL1LossWith(pred, target *vram.Tensor, beta float64, r Reduction) *vram.Tensor {
	defer asOp("smooth_l1_loss")
	checkLossParam("smooth_l1_loss", "beta", beta)
	r.check("smooth_l1_loss")
	notNil("smooth_l1_loss", pred)
	notNil("smooth_l1_loss", target)
	dt := lossDType("smooth_l1_loss", pred, target)
	if beta == 0 {
		return L1LossWith(pred, target, r)
	}
	var ts temps
	defer ts.release()
	d := ts.add(ts.operand(pred).Sub(ts.operand(target)))
	warnTargetSize("smooth_l1_loss", pred, target)
	a := ts.add(d.Abs())
	quad := ts.add(ts.add(d.Square()).MulScalar(0.5 / beta))
	lin := ts.add(a.SubScalar(0.5 * beta))
	return ts.result(vram.Where(ts.add(a.LtScalar(beta)), quad, lin), r, dt)
}

// HuberLoss returns the mean over elements of 0.5·d² where |d| <= delta
// and delta·(|d| − 0.5·delta) elsewhere, d = pred − target
// (torch.nn.functional.huber_loss with mean reduction; PyTorch's default
// delta is 1): delta times SmoothL1Loss with beta = delta. It panics with
// an *vram.Error of kind vram.ErrArgument unless delta is positive and
// finite.
func HuberLoss(pred, target *vram.Tensor, delta float64) *vram.Tensor {
	return HuberLossWith(pred, target, delta, ReductionMean)
}

// HuberLossWith returns the elements' losses of [HuberLoss] combined as r
// says (torch.nn.functional.huber_loss with reduction): their mean, their
// sum, or each of them, of the broadcast shape. It panics as HuberLoss
// does, and for an unknown r.
func HuberLossWith(pred, target *vram.Tensor, delta float64, r Reduction) *vram.Tensor {
	defer asOp("huber_loss")
	checkLossParam("huber_loss", "delta", delta)
	if delta == 0 {
		panic(&vram.Error{Op: "huber_loss", Kind: vram.ErrArgument, Detail: "delta must be positive, got 0"})
	}
	r.check("huber_loss")
	notNil("huber_loss", pred)
	notNil("huber_loss", target)
	dt := lossDType("huber_loss", pred, target)
	var ts temps
	defer ts.release()
	d := ts.add(ts.operand(pred).Sub(ts.operand(target)))
	warnTargetSize("huber_loss", pred, target)
	a := ts.add(d.Abs())
	quad := ts.add(ts.add(d.Square()).MulScalar(0.5))
	lin := ts.add(ts.add(a.SubScalar(0.5 * delta)).MulScalar(delta))
	return ts.result(vram.Where(ts.add(a.LeScalar(delta)), quad, lin), r, dt)
}

// BCEWithLogitsLoss returns the mean binary cross entropy between
// sigmoid(logits) and target probabilities in [0, 1] of the same shape
// (torch.nn.functional.binary_cross_entropy_with_logits with mean
// reduction), computed stably from the logits x as PyTorch does, (1 − y)·x
// + m + log(e^−m + e^(−x−m)) with m = max(−x, 0): large logits give no
// infinity, and the gradient is sigmoid(x) − y everywhere, 0 included.
// Half-precision inputs are computed in float32 and the result rounded
// to their dtype once (float32 inside an Autocast region).
func BCEWithLogitsLoss(logits, target *vram.Tensor) *vram.Tensor {
	return BCEWithLogitsLossWith(logits, target, BCEOptions{})
}

// BCEOptions are the settings of [BCEWithLogitsLossWith] and
// [BCELossWith]. The zero value is PyTorch's default: no weights, the
// mean.
type BCEOptions struct {
	// Weight, if not nil, multiplies each element's loss (weight); it
	// must broadcast to the input's shape. The mean stays the plain
	// average of the weighted losses, as in PyTorch.
	Weight *vram.Tensor
	// PosWeight, if not nil, multiplies the positive term y·log σ(x) of
	// each element's loss (pos_weight of
	// binary_cross_entropy_with_logits; BCELossWith refuses it); it must
	// broadcast to the input's shape, as a [C] tensor does for inputs
	// [..., C] with C classes. Values above 1 raise recall.
	PosWeight *vram.Tensor
	// Reduction combines the elements' losses.
	Reduction Reduction
}

// BCEWithLogitsLossWith returns the binary cross entropy of
// [BCEWithLogitsLoss] with the settings o
// (torch.nn.functional.binary_cross_entropy_with_logits with weight,
// pos_weight and reduction): element i's loss is
//
//	w·((1 − y)·x + (1 + (p − 1)·y)·log(1 + e^−x))
//
// computed stably, with w the weight and p the positive weight (1 where
// nil). ReductionNone gives the input's shape. It panics with an
// *vram.Error of kind vram.ErrShape when target's shape is not the
// input's or a weight does not broadcast to it, and of kind
// vram.ErrArgument for an unknown reduction.
func BCEWithLogitsLossWith(logits, target *vram.Tensor, o BCEOptions) *vram.Tensor {
	const op = "binary_cross_entropy_with_logits"
	defer asOp(op)
	checkSameShape(op, logits, target)
	o.Reduction.check(op)
	checkBroadcastsTo(op, "weight", o.Weight, logits.Shape())
	checkBroadcastsTo(op, "pos_weight", o.PosWeight, logits.Shape())
	dt := lossDType(op, logits, target, o.Weight, o.PosWeight)
	var ts temps
	defer ts.release()
	x, y := ts.operand(logits), ts.operand(target)
	nx := ts.add(x.Neg())
	m := ts.add(nx.Clamp(0, math.Inf(1)))
	e1 := ts.add(ts.add(m.Neg()).Exp())
	e2 := ts.add(ts.add(nx.Sub(m)).Exp())
	// sp = log(1 + e^−x), stably
	sp := ts.add(ts.add(ts.add(e1.Add(e2)).Log()).Add(m))
	if o.PosWeight != nil {
		pw := ts.operand(o.PosWeight)
		lw := ts.add(ts.add(ts.add(pw.SubScalar(1)).Mul(y)).AddScalar(1))
		sp = ts.add(lw.Mul(sp))
	}
	l := ts.add(x.Mul(ts.add(y.RSubScalar(1)))).Add(sp)
	if o.Weight != nil {
		ts.add(l)
		l = l.Mul(ts.operand(o.Weight))
	}
	return ts.result(l, o.Reduction, dt)
}

// BCELoss returns the mean binary cross entropy −(y·log p + (1 − y)·
// log(1 − p)) between probabilities p and targets y in [0, 1] of the same
// shape (torch.nn.functional.binary_cross_entropy with mean reduction).
// As in PyTorch, each log is clamped at −100, so that p of exactly 0 or 1
// gives a finite loss, and the gradient is PyTorch's, (p − y)/max(p·(1 −
// p), 1e-12), finite there too. Prefer BCEWithLogitsLoss on logits: it is
// exact where sigmoid rounds to 0 or 1 (and it is the form Autocast
// accepts: see [BCELossWith]).
func BCELoss(probs, target *vram.Tensor) *vram.Tensor {
	return BCELossWith(probs, target, BCEOptions{})
}

// BCELossWith returns the binary cross entropy of [BCELoss] with the
// settings o (torch.nn.functional.binary_cross_entropy with weight and
// reduction): each element's loss multiplied by the weight, then
// combined. ReductionNone gives the input's shape. It panics with an
// *vram.Error of kind vram.ErrShape when target's shape is not the
// input's or the weight does not broadcast to it, and of kind
// vram.ErrArgument for a PosWeight (take BCEWithLogitsLossWith), an
// unknown reduction or, for a CPU input, an element outside [0, 1] or
// NaN, as PyTorch's does (inputs on other devices are not checked, which
// would wait for the device on every call). Inside a vram.Autocast region
// it panics with an *vram.Error of kind vram.ErrArgument whatever the
// dtypes, as PyTorch's autocast refuses binary_cross_entropy: the
// probabilities usually come from a sigmoid, which rounds to 0 or 1 in 16
// bits; take [BCEWithLogitsLoss] on the logits, which autocast runs in
// float32, or compute this loss under vram.NoAutocast.
func BCELossWith(probs, target *vram.Tensor, o BCEOptions) *vram.Tensor {
	const op = "binary_cross_entropy"
	defer asOp(op)
	if _, ac := vram.AutocastDType(); ac {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "BCELoss is unsafe to autocast: the probabilities usually come from a sigmoid just before it, " +
			"whose 16-bit result rounds to 0 or 1; drop the sigmoid and take BCEWithLogitsLoss (binary_cross_entropy_with_logits), which is safe to autocast, " +
			"or compute this loss under NoAutocast"})
	}
	checkSameShape(op, probs, target)
	o.Reduction.check(op)
	if o.PosWeight != nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "pos_weight needs logits: use BCEWithLogitsLossWith"})
	}
	checkBroadcastsTo(op, "weight", o.Weight, probs.Shape())
	dt := lossDType(op, probs, target, o.Weight)
	checkProbabilities(op, probs)
	var ts temps
	defer ts.release()
	p, y := ts.operand(probs), ts.operand(target)
	// The value, and PyTorch's gradients: (p − y)/max(p·(1 − p), 1e-12)
	// for p, log(1 − p) − log p (both clamped) for y. Differentiating the
	// clamped logs instead gives 0·∞ = NaN where p is 0 or 1.
	var l, gp, gy *vram.Tensor
	vram.NoGrad(func() {
		logP := ts.add(ts.add(p.Log()).Clamp(-100, math.Inf(1)))
		log1mP := ts.add(ts.add(ts.add(p.RSubScalar(1)).Log()).Clamp(-100, math.Inf(1)))
		l = ts.add(ts.add(ts.add(y.Mul(logP)).Add(ts.add(ts.add(y.RSubScalar(1)).Mul(log1mP)))).Neg())
		if p.RequiresGrad() {
			den := ts.add(ts.add(ts.add(p.RSubScalar(1)).Mul(p)).Clamp(1e-12, math.Inf(1)))
			gp = ts.add(ts.add(p.Sub(y)).Div(den))
		}
		if y.RequiresGrad() {
			gy = ts.add(log1mP.Sub(logP))
		}
	})
	// l + (x·g − x·g without a graph) has l's value and gradient g in x.
	// The two products are the same numbers, so their difference is
	// exactly 0: adding x·g to l first would round l to the precision of
	// x·g, which is up to 1e12 where p is 0 or 1, losing all of it.
	for _, d := range []struct{ x, g *vram.Tensor }{{p, gp}, {y, gy}} {
		if d.g == nil {
			continue
		}
		var c *vram.Tensor
		vram.NoGrad(func() { c = ts.add(d.x.Mul(d.g)) })
		l = ts.add(l.Add(ts.add(ts.add(d.x.Mul(d.g)).Sub(c))))
	}
	if o.Weight != nil {
		l = ts.add(l.Mul(ts.operand(o.Weight)))
	}
	return ts.result(l, o.Reduction, dt)
}

// checkProbabilities panics with an *vram.Error of kind vram.ErrArgument
// unless every element of p is in [0, 1] (NaN is not), as PyTorch's
// binary_cross_entropy checks on the CPU: outside, the clamped logs would
// give a finite but meaningless loss, or NaN. Only CPU tensors are
// checked: on a GPU the check would read two values back and so wait for
// the device on every loss, where PyTorch's CUDA kernel asserts without
// waiting.
func checkProbabilities(op string, p *vram.Tensor) {
	if p.NumElements() == 0 || p.Device() != vram.CPU {
		return
	}
	var lo, hi float64
	vram.NoGrad(func() {
		mn, mx := p.Min(), p.Max()
		defer mn.Release()
		defer mx.Release()
		lo, hi = mn.Item(), mx.Item()
	})
	if !(lo >= 0 && hi <= 1) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("all elements of input must be probabilities in [0, 1], got values from %v to %v", lo, hi)})
	}
}

// checkBroadcastsTo panics with an *vram.Error of kind vram.ErrShape
// unless w is nil or broadcasts to shape (without growing it).
func checkBroadcastsTo(op, name string, w *vram.Tensor, shape vram.Shape) {
	if w == nil {
		return
	}
	ws := w.Shape()
	ok := len(ws) <= len(shape)
	for i := 1; ok && i <= len(ws); i++ {
		d := ws[len(ws)-i]
		ok = d == 1 || d == shape[len(shape)-i]
	}
	if !ok {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("%s shape %v does not broadcast to input shape %v", name, ws, shape)})
	}
}

// checkLossParam panics with an *vram.Error of kind vram.ErrArgument
// unless v is finite and not negative.
func checkLossParam(op, name string, v float64) {
	if !(v >= 0) || math.IsInf(v, 1) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("%s must be finite and not negative, got %v", name, v)})
	}
}

// checkSameShape panics with an *vram.Error of kind vram.ErrShape unless
// a and b have one shape, as PyTorch's binary cross entropies require.
func checkSameShape(op string, a, b *vram.Tensor) {
	if a == nil || b == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil tensor"})
	}
	if !slices.Equal(a.Shape(), b.Shape()) {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("target shape %v differs from input shape %v", b.Shape(), a.Shape())})
	}
}

// warnTargetSize warns, once per call site, when a loss's target and pred
// have different shapes: they broadcast against each other, which is
// seldom what was meant ([N, 1] predictions against [N] targets give an
// [N, N] difference). PyTorch warns alike.
func warnTargetSize(op string, pred, target *vram.Tensor) {
	if slices.Equal(pred.Shape(), target.Shape()) {
		return
	}
	vram.WarnOnce(fmt.Sprintf("%s: the target's shape %v differs from the input's %v, so they broadcast to %v, which is likely a mistake; give them the same shape",
		op, target.Shape(), pred.Shape(), broadcastShape(pred.Shape(), target.Shape())))
}

// broadcastShape returns the shape that a and b, which broadcast, broadcast to.
func broadcastShape(a, b vram.Shape) vram.Shape {
	n := max(len(a), len(b))
	out := make(vram.Shape, n)
	for i := range n {
		da, db := 1, 1
		if k := len(a) - n + i; k >= 0 {
			da = a[k]
		}
		if k := len(b) - n + i; k >= 0 {
			db = b[k]
		}
		out[i] = da
		if da == 1 {
			out[i] = db
		}
	}
	return out
}
