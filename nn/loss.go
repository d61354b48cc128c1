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

// CrossEntropyLoss returns the mean negative log-likelihood of the int64
// class indices targets [N] under logits [N, C]
// (torch.nn.functional.cross_entropy with mean reduction). It is
// [vram.CrossEntropy].
func CrossEntropyLoss(logits, targets *vram.Tensor) *vram.Tensor {
	return vram.CrossEntropy(logits, targets)
}

// NLLLoss returns the mean negative log-likelihood of the class indices
// targets [N] under log-probabilities [N, C]
// (torch.nn.functional.nll_loss with mean reduction, targets of -100
// ignored). It is [vram.NLLLoss].
func NLLLoss(logProbs, targets *vram.Tensor) *vram.Tensor { return vram.NLLLoss(logProbs, targets) }

// temps collects a loss's intermediate tensors, released when it returns
// (a vram.Tidy would release them too, but its Keep would take the loss
// out of the caller's own Tidy as well).
type temps []*vram.Tensor

// add records x and returns it.
func (ts *temps) add(x *vram.Tensor) *vram.Tensor {
	*ts = append(*ts, x)
	return x
}

// release releases every tensor recorded.
func (ts temps) release() {
	for _, x := range ts {
		x.Release()
	}
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
// mean reduction). Half-precision inputs are computed in float32.
func L1Loss(pred, target *vram.Tensor) *vram.Tensor {
	var ts temps
	defer ts.release()
	d := ts.add(ts.operand(pred).Sub(ts.operand(target)))
	return ts.add(d.Abs()).Mean()
}

// SmoothL1Loss returns the mean over elements of 0.5·d²/beta where |d| <
// beta and |d| − 0.5·beta elsewhere, d = pred − target
// (torch.nn.functional.smooth_l1_loss with mean reduction; PyTorch's
// default beta is 1). beta 0 gives L1Loss. It panics with an *vram.Error
// of kind vram.ErrArgument for a negative, infinite or NaN beta.
func SmoothL1Loss(pred, target *vram.Tensor, beta float64) *vram.Tensor {
	checkLossParam("smooth_l1_loss", "beta", beta)
	if beta == 0 {
		return L1Loss(pred, target)
	}
	var ts temps
	defer ts.release()
	d := ts.add(ts.operand(pred).Sub(ts.operand(target)))
	a := ts.add(d.Abs())
	quad := ts.add(ts.add(d.Square()).MulScalar(0.5 / beta))
	lin := ts.add(a.SubScalar(0.5 * beta))
	return ts.add(vram.Where(ts.add(a.LtScalar(beta)), quad, lin)).Mean()
}

// HuberLoss returns the mean over elements of 0.5·d² where |d| <= delta
// and delta·(|d| − 0.5·delta) elsewhere, d = pred − target
// (torch.nn.functional.huber_loss with mean reduction; PyTorch's default
// delta is 1): delta times SmoothL1Loss with beta = delta. It panics with
// an *vram.Error of kind vram.ErrArgument unless delta is positive and
// finite.
func HuberLoss(pred, target *vram.Tensor, delta float64) *vram.Tensor {
	checkLossParam("huber_loss", "delta", delta)
	if delta == 0 {
		panic(&vram.Error{Op: "huber_loss", Kind: vram.ErrArgument, Detail: "delta must be positive, got 0"})
	}
	var ts temps
	defer ts.release()
	d := ts.add(ts.operand(pred).Sub(ts.operand(target)))
	a := ts.add(d.Abs())
	quad := ts.add(ts.add(d.Square()).MulScalar(0.5))
	lin := ts.add(ts.add(a.SubScalar(0.5 * delta)).MulScalar(delta))
	return ts.add(vram.Where(ts.add(a.LeScalar(delta)), quad, lin)).Mean()
}

// BCEWithLogitsLoss returns the mean binary cross entropy between
// sigmoid(logits) and target probabilities in [0, 1] of the same shape
// (torch.nn.functional.binary_cross_entropy_with_logits with mean
// reduction), computed stably from the logits x as PyTorch does, (1 − y)·x
// + m + log(e^−m + e^(−x−m)) with m = max(−x, 0): large logits give no
// infinity, and the gradient is sigmoid(x) − y everywhere, 0 included.
// Half-precision inputs are computed in float32.
func BCEWithLogitsLoss(logits, target *vram.Tensor) *vram.Tensor {
	checkSameShape("binary_cross_entropy_with_logits", logits, target)
	var ts temps
	defer ts.release()
	x, y := ts.operand(logits), ts.operand(target)
	nx := ts.add(x.Neg())
	m := ts.add(nx.Clamp(0, math.Inf(1)))
	e1 := ts.add(ts.add(m.Neg()).Exp())
	e2 := ts.add(ts.add(nx.Sub(m)).Exp())
	s := ts.add(ts.add(e1.Add(e2)).Log())
	l := ts.add(ts.add(ts.add(x.Mul(ts.add(y.RSubScalar(1)))).Add(m)).Add(s))
	return l.Mean()
}

// BCELoss returns the mean binary cross entropy −(y·log p + (1 − y)·
// log(1 − p)) between probabilities p and targets y in [0, 1] of the same
// shape (torch.nn.functional.binary_cross_entropy with mean reduction).
// As in PyTorch, each log is clamped at −100, so that p of exactly 0 or 1
// gives a finite loss; unlike PyTorch's, whose backward pass bounds the
// denominator p·(1 − p) by 1e-12, its gradient there is not finite. Prefer
// BCEWithLogitsLoss on logits: it is exact where sigmoid rounds to 0 or 1.
func BCELoss(probs, target *vram.Tensor) *vram.Tensor {
	checkSameShape("binary_cross_entropy", probs, target)
	var ts temps
	defer ts.release()
	p, y := ts.operand(probs), ts.operand(target)
	logP := ts.add(ts.add(p.Log()).Clamp(-100, math.Inf(1)))
	log1mP := ts.add(ts.add(ts.add(p.RSubScalar(1)).Log()).Clamp(-100, math.Inf(1)))
	l := ts.add(ts.add(y.Mul(logP)).Add(ts.add(ts.add(y.RSubScalar(1)).Mul(log1mP))))
	return ts.add(l.Mean()).Neg()
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
