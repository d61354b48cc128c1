package vram

import (
	"math"
)

// This file holds the connectionist temporal classification loss. Its
// forward (alpha) and backward (beta) recursions run on the host in
// float64, in log space: log_probs, the targets and both lengths are
// copied from their devices, and the losses and gradients are rounded once
// to log_probs' dtype and copied back to its device, which synchronizes
// with the device's stream, as the linalg decompositions do.

// ctcProblem is a validated call of [CTCLoss], its integer arguments read
// to the host.
type ctcProblem struct {
	t, n, c   int     // time steps, batch size and classes of log_probs
	blank     int     // the blank class
	batched   bool    // log_probs is [T, N, C] rather than [T, C]
	inLen     []int   // the input length of each sample
	tgtLen    []int   // the target length of each sample
	labels    [][]int // the target labels of each sample, blank-free
	valueless bool    // log_probs lives on a shape-only device
}

// CTCLoss returns the connectionist temporal classification loss of each
// sample (torch.nn.functional.ctc_loss with reduction 'none'): the
// negative log of the total probability, under the per-step
// log-probabilities logProbs, of every alignment that collapses (merging
// repeats, then dropping blanks) to the sample's target. logProbs is
// [T, N, C] for N samples of at most T steps over C classes (blank
// included), or [T, C] for one sample; it is usually a LogSoftmax over C.
// targets holds class indices, either padded [N, S] (S at least the
// longest target; entries beyond a sample's length are ignored) or the
// targets concatenated into one dimension [sum of targetLengths]; for
// one sample it is [S]. inputLengths and targetLengths give each sample's
// number of steps (at most T) and labels ([N], or a scalar or [1] for one
// sample). The targets and both lengths are int32 or int64 and may live
// on any device, the CPU included.
//
// The result is [N] (a scalar for one sample) of logProbs' dtype on its
// device. A sample whose target no alignment of its input length can
// produce has loss +Inf and, as in PyTorch, a NaN gradient; with
// zeroInfinity its loss and gradient are 0 instead. The gradient with
// respect to logProbs is the exact derivative of the loss and is zero at
// steps past a sample's input length; PyTorch's own kernel adds
// exp(logProbs) to it, a term that a LogSoftmax before the loss cancels,
// so the gradients reaching the logits agree.
//
// The recursions run on the host in float64 (see the file's comment), so
// the call synchronizes with the devices of its tensors, and so does its
// backward pass. On a shape-only device nothing is computed.
//
// It panics with an [*Error] of kind [ErrArgument] for a nil tensor, a
// blank outside [0, C), a length out of range (negative, an input length
// above T or a padded target length above S) or a target equal to blank;
// of kind [ErrShape] for shapes that do not fit together (including
// concatenated targets whose count differs from the sum of
// targetLengths); of kind [ErrDType] for a logProbs that is not floating
// point or targets or lengths that are not int32 or int64; and of kind
// [ErrIndex] for a target outside [0, C).
func CTCLoss(logProbs, targets, inputLengths, targetLengths *Tensor, blank int, zeroInfinity bool) *Tensor {
	const op = "ctc_loss"
	notNil(op, logProbs, targets, inputLengths, targetLengths)
	defer pin(op, logProbs, targets, inputLengths, targetLengths).unpin()
	p := ctcCheck(op, logProbs, targets, inputLengths, targetLengths, blank)
	shape := []int{p.n}
	if !p.batched {
		shape = nil
	}
	losses := make([]float64, p.n)
	if !p.valueless {
		lp := ctcRead(op, logProbs)
		for b := range p.n {
			losses[b] = p.nll(lp, b)
			if zeroInfinity && math.IsInf(losses[b], 1) {
				losses[b] = 0
			}
		}
	}
	y := fromHost(op, logProbs.ds(), logProbs.dtype, shape, losses)
	if needsGrad(logProbs) {
		sv := save(logProbs)
		record(op, y, []*Tensor{logProbs}, sv, func(g *Tensor) []*Tensor {
			return []*Tensor{p.grad(op, sv[0], g, zeroInfinity)}
		})
	}
	return y
}

// ctcCheck validates the arguments of [CTCLoss] and reads the integer
// ones to the host.
func ctcCheck(op string, logProbs, targets, inputLengths, targetLengths *Tensor, blank int) *ctcProblem {
	if !logProbs.dtype.IsFloat() {
		fail(op, ErrDType, "log_probs must be floating point, got %s", logProbs.dtype)
	}
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"targets", targets}, {"input_lengths", inputLengths}, {"target_lengths", targetLengths}} {
		if a.t.dtype != Int64 && a.t.dtype != Int32 {
			fail(op, ErrDType, "%s must be int64 or int32, got %s", a.name, a.t.dtype)
		}
	}
	p := &ctcProblem{blank: blank}
	ls := logProbs.shape
	switch len(ls) {
	case 3:
		p.t, p.n, p.c, p.batched = ls[0], ls[1], ls[2], true
	case 2:
		p.t, p.n, p.c = ls[0], 1, ls[1]
	default:
		fail(op, ErrShape, "log_probs must be [T, N, C] or [T, C] for one sample, got %v", Shape(ls))
	}
	if blank < 0 || blank >= p.c {
		fail(op, ErrArgument, "blank must be in [0, %d), the classes of log_probs, got %d", p.c, blank)
	}
	for _, a := range []struct {
		name string
		t    *Tensor
	}{{"input_lengths", inputLengths}, {"target_lengths", targetLengths}} {
		s := a.t.shape
		ok := len(s) == 1 && s[0] == p.n
		if !p.batched {
			ok = len(s) == 0 || len(s) == 1 && s[0] == 1
		}
		if !ok {
			want := "[%d]"
			if !p.batched {
				want = "a scalar or [%d]"
			}
			fail(op, ErrShape, "%s must be "+want+" for log_probs %v, got %v", a.name, p.n, Shape(ls), Shape(s))
		}
	}
	ts := targets.shape
	padded := len(ts) == 2 && p.batched && ts[0] == p.n || len(ts) == 1 && !p.batched
	if !padded && !(len(ts) == 1 && p.batched) {
		fail(op, ErrShape, "targets must be padded [%d, S] or concatenated into one dimension for log_probs %v, or [S] for one sample, got %v", p.n, Shape(ls), Shape(ts))
	}
	p.valueless = logProbs.ds().shapeOnly()
	if targets.ds().shapeOnly() || inputLengths.ds().shapeOnly() || targetLengths.ds().shapeOnly() {
		// Their values are unknown: check no more, compute nothing.
		p.valueless = true
		p.inLen, p.tgtLen, p.labels = make([]int, p.n), make([]int, p.n), make([][]int, p.n)
		return p
	}
	p.inLen = ctcInts(inputLengths)
	p.tgtLen = ctcInts(targetLengths)
	tg := ctcInts(targets)
	for b := range p.n {
		if l := p.inLen[b]; l < 0 || l > p.t {
			fail(op, ErrArgument, "input_lengths[%d] is %d, outside [0, %d] (T, the steps of log_probs)", b, l, p.t)
		}
		if l := p.tgtLen[b]; l < 0 {
			fail(op, ErrArgument, "target_lengths[%d] is %d, which is negative", b, l)
		}
	}
	if !padded {
		// Summed with a check at each step: lengths near the top of int64
		// would otherwise wrap around to the number of targets.
		sum := 0
		for b, l := range p.tgtLen {
			if l > len(tg)-sum {
				fail(op, ErrShape, "concatenated targets hold %d labels, but target_lengths[:%d] sum to more", len(tg), b+1)
			}
			sum += l
		}
		if sum != len(tg) {
			fail(op, ErrShape, "concatenated targets hold %d labels, but target_lengths sum to %d", len(tg), sum)
		}
	}
	p.labels = make([][]int, p.n)
	off := 0
	for b := range p.n {
		l := p.tgtLen[b]
		if padded {
			s := ts[len(ts)-1]
			if l > s {
				fail(op, ErrArgument, "target_lengths[%d] is %d, more than the %d targets a row of padded targets %v holds", b, l, s, Shape(ts))
			}
			off = b * s
		}
		p.labels[b] = tg[off : off+l]
		for i, k := range p.labels[b] {
			switch {
			case k < 0 || k >= p.c:
				fail(op, ErrIndex, "target %d of sample %d is %d, outside [0, %d) (C, the classes of log_probs)", i, b, k, p.c)
			case k == blank:
				fail(op, ErrArgument, "target %d of sample %d is the blank class %d; targets must not contain blank", i, b, k)
			}
		}
		off += l
	}
	return p
}

// ctcInts returns the integers of t, which the caller pinned, as ints.
func ctcInts(t *Tensor) []int {
	raw := t.readHost("ctc_loss")
	out := make([]int, t.NumElements())
	for i := range out {
		out[i] = int(load(t.dtype, raw, i))
	}
	return out
}

// ctcRead returns the values of lp, which the caller pinned, in float64.
func ctcRead(op string, lp *Tensor) []float64 {
	raw := lp.readHost(op)
	out := make([]float64, lp.NumElements())
	for i := range out {
		out[i] = load(lp.dtype, raw, i)
	}
	return out
}

// logAdd returns log(e^a + e^b), -Inf when both are.
func logAdd(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(a, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// extended returns sample b's extended target, its labels with a blank
// before, between and after them, and for each position whether a path
// may come to it from two positions back (it is a label unlike the one
// two positions back).
func (p *ctcProblem) extended(b int) (ext []int, skip []bool) {
	sn := 2*p.tgtLen[b] + 1
	ext, skip = make([]int, sn), make([]bool, sn)
	for s := range ext {
		ext[s] = p.blank
		if s%2 == 1 {
			ext[s] = p.labels[b][s/2]
			skip[s] = s >= 2 && ext[s] != ext[s-2]
		}
	}
	return ext, skip
}

// lp returns the log-probability of class k at step t for sample b.
func (p *ctcProblem) lp(v []float64, t, b, k int) float64 { return v[(t*p.n+b)*p.c+k] }

// alpha returns the forward variables of sample b, log α_t(s) for t below
// its input length and s over its extended target, row-major.
func (p *ctcProblem) alpha(v []float64, b int) []float64 {
	tn, sn := p.inLen[b], 2*p.tgtLen[b]+1
	a := make([]float64, tn*sn)
	for i := range a {
		a[i] = math.Inf(-1)
	}
	if tn == 0 {
		return a
	}
	ext, skip := p.extended(b)
	a[0] = p.lp(v, 0, b, p.blank)
	if sn > 1 {
		a[1] = p.lp(v, 0, b, ext[1])
	}
	for t := 1; t < tn; t++ {
		prev, cur := a[(t-1)*sn:t*sn], a[t*sn:(t+1)*sn]
		for s, k := range ext {
			x := prev[s]
			if s >= 1 {
				x = logAdd(x, prev[s-1])
			}
			if skip[s] {
				x = logAdd(x, prev[s-2])
			}
			cur[s] = x + p.lp(v, t, b, k)
		}
	}
	return a
}

// beta returns the backward variables of sample b, log β_t(s), laid out
// as alpha's; like α, β_t(s) includes step t's probability.
func (p *ctcProblem) beta(v []float64, b int) []float64 {
	tn, sn := p.inLen[b], 2*p.tgtLen[b]+1
	bt := make([]float64, tn*sn)
	for i := range bt {
		bt[i] = math.Inf(-1)
	}
	if tn == 0 {
		return bt
	}
	ext, skip := p.extended(b)
	last := bt[(tn-1)*sn:]
	last[sn-1] = p.lp(v, tn-1, b, p.blank)
	if sn > 1 {
		last[sn-2] = p.lp(v, tn-1, b, ext[sn-2])
	}
	for t := tn - 2; t >= 0; t-- {
		next, cur := bt[(t+1)*sn:(t+2)*sn], bt[t*sn:(t+1)*sn]
		for s, k := range ext {
			x := next[s]
			if s+1 < sn {
				x = logAdd(x, next[s+1])
			}
			if s+2 < sn && skip[s+2] {
				x = logAdd(x, next[s+2])
			}
			cur[s] = x + p.lp(v, t, b, k)
		}
	}
	return bt
}

// nll returns the loss of sample b: −log of the summed probability of its
// alignments, +Inf when there is none.
func (p *ctcProblem) nll(v []float64, b int) float64 {
	tn, sn := p.inLen[b], 2*p.tgtLen[b]+1
	if tn == 0 {
		if sn == 1 {
			return 0
		}
		return math.Inf(1)
	}
	return p.nllOf(p.alpha(v, b), b)
}

// nllOf returns the loss of sample b from its forward variables a, for
// an input length above 0.
func (p *ctcProblem) nllOf(a []float64, b int) float64 {
	tn, sn := p.inLen[b], 2*p.tgtLen[b]+1
	last := a[(tn-1)*sn:]
	ll := last[sn-1]
	if sn > 1 {
		ll = logAdd(ll, last[sn-2])
	}
	return -ll
}

// grad returns the gradient of the losses with respect to logProbs, lp,
// for the upstream gradient g of the losses' shape: for each sample at
// steps below its input length, −Σ_{s: l'_s = k} α_t(s)·β_t(s) / (p·y_t(k)),
// scaled by g.
func (p *ctcProblem) grad(op string, lp, g *Tensor, zeroInfinity bool) *Tensor {
	out := make([]float64, p.t*p.n*p.c)
	if !p.valueless && !lp.ds().shapeOnly() {
		func() {
			defer pin(op, lp).unpin()
			v := ctcRead(op, lp)
			for b := range p.n {
				p.sampleGrad(v, b, out, zeroInfinity)
			}
		}()
	}
	gr := fromHost(op, lp.ds(), lp.dtype, lp.shape, out)
	defer gr.Release()
	if p.batched {
		gb := g.Reshape(1, p.n, 1)
		defer gb.Release()
		return gr.Mul(gb)
	}
	return gr.Mul(g)
}

// sampleGrad writes the gradient of sample b's loss with respect to the
// log-probabilities v into out, laid out as v.
func (p *ctcProblem) sampleGrad(v []float64, b int, out []float64, zeroInfinity bool) {
	tn, sn := p.inLen[b], 2*p.tgtLen[b]+1
	if tn == 0 {
		return // no step to differentiate
	}
	a := p.alpha(v, b)
	nll := p.nllOf(a, b)
	if math.IsInf(nll, 1) {
		if zeroInfinity {
			return
		}
		// As in PyTorch, an impossible target makes the gradient NaN at
		// every step of the sample's input.
		for t := range tn {
			for k := range p.c {
				out[(t*p.n+b)*p.c+k] = math.NaN()
			}
		}
		return
	}
	bt := p.beta(v, b)
	ext, _ := p.extended(b)
	lcab := make([]float64, p.c)
	for t := range tn {
		for k := range lcab {
			lcab[k] = math.Inf(-1)
		}
		for s, k := range ext {
			lcab[k] = logAdd(lcab[k], a[t*sn+s]+bt[t*sn+s])
		}
		for k, l := range lcab {
			if math.IsInf(l, -1) {
				continue // no alignment passes through k at t
			}
			out[(t*p.n+b)*p.c+k] = -math.Exp(l + nll - p.lp(v, t, b, k))
		}
	}
}
