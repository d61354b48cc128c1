package nn

import (
	"math"

	"github.com/vramgo/vram"
)

// CTCLoss returns the connectionist temporal classification loss of
// log-probabilities logProbs ([T, N, C], or [T, C] for one sample) for
// the label sequences targets (torch.nn.functional.ctc_loss,
// torch.nn.CTCLoss): the negative log of the total probability of every
// alignment that collapses to a sample's target, computed by
// [vram.CTCLoss], which describes the arguments, the gradient and what
// runs on the host. blank is the blank class (PyTorch's default is 0) and
// zeroInfinity turns the +Inf loss of a target that no alignment of its
// input can produce, and its gradient, into 0 (PyTorch's default is
// false). The samples' losses are combined as r says: ReductionMean
// divides each by its target length (at least 1) and averages over the
// batch, as PyTorch does; ReductionNone returns them, [N] (a scalar for
// one sample). 16-bit log-probabilities give a result of their dtype
// (float32 inside an Autocast region). It panics as [vram.CTCLoss] does,
// its errors naming ctc_loss, and with an *vram.Error of kind
// vram.ErrArgument for an unknown r.
func CTCLoss(logProbs, targets, inputLengths, targetLengths *vram.Tensor, blank int, r Reduction, zeroInfinity bool) *vram.Tensor {
	const op = "ctc_loss"
	defer asOp(op)
	notNil(op, logProbs)
	notNil(op, targets)
	notNil(op, inputLengths)
	notNil(op, targetLengths)
	r.check(op)
	var ts temps
	defer ts.release()
	l := ts.add(vram.CTCLoss(ts.operand(logProbs), targets, inputLengths, targetLengths, blank, zeroInfinity))
	if r == ReductionMean {
		var tl *vram.Tensor
		vram.NoGrad(func() {
			tl = ts.add(targetLengths.To(l.Device()))
			tl = ts.add(tl.Cast(l.DType()))
			tl = ts.add(tl.Clamp(1, math.Inf(1)))
			tl = ts.add(tl.Reshape(l.Shape()...))
		})
		l = ts.add(l.Div(tl))
	}
	return ts.result(l, r, logProbs.DType())
}
