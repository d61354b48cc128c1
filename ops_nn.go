package vram

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram/backend"
)

// Softmax returns exp(t) normalised to sum to 1 along dim, computed stably.
// float16 and bfloat16 inputs are computed in float32 (the maximum, the
// exponentials and their sum) and the result rounded once; so is the
// gradient. As in PyTorch, a 0-dimensional t takes dim 0 or -1 (the result
// is 1), an empty t gives an empty result, and a t that is not
// floating-point panics with [ErrDType].
func (t *Tensor) Softmax(dim int) *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.Softmax(dim)
	}
	defer asOp("softmax")
	defer pin("softmax", t).unpin()
	axes := t.softmaxAxes("softmax", dim)
	dt := t.dtype
	var out *Tensor
	NoGrad(func() {
		Tidy(func() {
			if t.NumElements() == 0 {
				out = Keep(newTensor("softmax", t.ds(), dt, t.shape))
				return
			}
			x := toOpMath(t)
			m := reduceRaw("softmax", backend.Max, x, axes)
			e := x.Sub(m).Exp()
			out = Keep(fromOpMath(e.Div(e.SumKeepDim(axes...)), dt))
		})
	})
	track(out) // by the caller's Tidy, which Keep took it from
	if needsGrad(t) {
		sv := save(out)
		record("softmax", out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			y, gw := toOpMath(sv[0]), toOpMath(g)
			// dx = y * (g - sum(g*y))
			return []*Tensor{y.Mul(gw.Sub(gw.Mul(y).SumKeepDim(axes...))).Cast(dt)}
		})
	}
	return out
}

// softmaxAxes returns the axis that the softmax family normalises over, as
// a list for the reductions: none for a 0-dimensional t, whose dimension 0
// (or -1) is the tensor itself, as PyTorch takes it. It panics with
// ErrIndex for a dimension out of range and with ErrDType for a tensor that
// is not floating-point (PyTorch's softmax is not defined for integers or
// bool either; Cast first).
func (t *Tensor) softmaxAxes(op string, dim int) []int {
	a := t.scalarAxis(op, dim)
	floatOnly(op, t)
	if a < 0 {
		return nil
	}
	return []int{a}
}

// LogSoftmax returns log(Softmax(t, dim)), computed stably, in float32 for
// float16 and bfloat16 inputs as [Tensor.Softmax] is.
func (t *Tensor) LogSoftmax(dim int) *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return up.LogSoftmax(dim)
	}
	defer asOp("log_softmax")
	defer pin("log_softmax", t).unpin()
	axes := t.softmaxAxes("log_softmax", dim)
	dt := t.dtype
	var out *Tensor
	NoGrad(func() {
		Tidy(func() {
			if t.NumElements() == 0 {
				out = Keep(newTensor("log_softmax", t.ds(), dt, t.shape))
				return
			}
			x := toOpMath(t)
			m := reduceRaw("log_softmax", backend.Max, x, axes)
			sh := x.Sub(m)
			out = Keep(fromOpMath(sh.Sub(sh.Exp().SumKeepDim(axes...).Log()), dt))
		})
	})
	track(out)
	if needsGrad(t) {
		sv := save(out)
		record("log_softmax", out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			gw := toOpMath(g)
			// dx = g - exp(y) * sum(g)
			return []*Tensor{gw.Sub(toOpMath(sv[0]).Exp().Mul(gw.SumKeepDim(axes...))).Cast(dt)}
		})
	}
	return out
}

// Gather picks values along dim: out[i][j] = t[index[i][j]][j] for dim 0
// (torch.gather). index is int64 with t's number of dimensions; its sizes
// may be smaller than t's except along dim. It panics with [ErrIndex] when
// an index is out of range. A 0-dimensional t takes dim 0 or -1 and a
// 0-dimensional index, which must be 0, as in PyTorch.
func (t *Tensor) Gather(dim int, index *Tensor) *Tensor {
	ds, held := sameDevice("gather", t, index)
	defer held.unpin()
	a := t.scalarAxis("gather", dim)
	if index.dtype != Int64 {
		fail("gather", ErrDType, "index must be int64, got %s", index.dtype)
	}
	if len(index.shape) != len(t.shape) {
		fail("gather", ErrShape, "index %v and input %v must have the same number of dimensions", Shape(index.shape), Shape(t.shape))
	}
	if a < 0 {
		// A 0-dimensional t: gather from it as from its one-element
		// vector, through views that record the way back.
		defer asOp("gather")
		tv, iv := t.Reshape(1), index.Reshape(1)
		defer tv.Release()
		defer iv.Release()
		r := tv.Gather(0, iv)
		defer r.Release()
		return r.Reshape()
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
	if err := ds.bd.Gather(ds.stream(), out.bv(), src, index.bv(), a); err != nil {
		out.Release()
		panic(&Error{Op: "gather", Kind: ErrIndex, Detail: "bad index", Err: err})
	}
	if needsGrad(t) {
		shape := slices.Clone(t.shape)
		sv := save(index)
		record("gather", out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
			// Repeated indices (an embedding's common rows) accumulate in
			// float32 for the 16-bit floats, rounded once.
			gw := toOpMath(g)
			z := newTensor("gather", gw.ds(), gw.dtype, shape)
			z.fill("gather", 0)
			zv := z.bv()
			zv.Shape = slices.Clone(sv[0].shape)
			zv.Shape[a] = shape[a]
			gc := gw.contiguous("gather")
			defer gc.Release()
			check("gather", z.ds().bd.ScatterAdd(z.ds().stream(), zv, sv[0].bv(), gc.bv(), a))
			return []*Tensor{z.Cast(g.dtype)}
		})
	}
	return out
}

// Embedding looks up rows of weight [V, D] for int64 indices of any shape,
// returning indices.shape + [D]. Gradients accumulate into the rows used.
func Embedding(indices, weight *Tensor) *Tensor {
	defer asOp("embedding")
	_, held := sameDevice("embedding", indices, weight)
	defer held.unpin()
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
		g := embeddingRows(weight, ex)
		defer g.Release()
		out = g.Reshape(append(slices.Clone(indices.shape), d)...)
	}()
	return out
}

// embeddingRows gathers the rows of weight [V, D] that ex [N, D] names,
// reporting an index outside [0, V) as one of the embedding rather than as
// a bad index of the gather (on CUDA the check is asynchronous, and the
// error comes at a later synchronization).
func embeddingRows(weight, ex *Tensor) *Tensor {
	defer relabelIndex(func() string {
		return fmt.Sprintf("index out of range: the embedding has rows 0 to %d", weight.shape[0]-1)
	})
	return weight.Gather(0, ex)
}

// relabelIndex, deferred, gives a panic of kind ErrIndex in flight the
// detail that detail returns, naming the caller's operand rather than the
// gather that found the bad index; other panics go on as they are.
func relabelIndex(detail func() string) {
	r := recover()
	if r == nil {
		return
	}
	if e, ok := r.(*Error); ok && e.Kind == ErrIndex {
		c := *e
		c.Detail = detail()
		r = &c
	}
	panic(r)
}

// CrossEntropyIgnoreIndex is the target class that CrossEntropy and NLLLoss
// leave out, PyTorch's default ignore_index: padding positions labelled
// -100 add nothing to the loss or its gradient.
const CrossEntropyIgnoreIndex = -100

// CrossEntropy returns the mean negative log-likelihood of integer class
// targets [N] (int64 or int32) under logits [N, C]
// (torch.nn.functional.cross_entropy with mean reduction): NLLLoss of
// logits.LogSoftmax(1). Targets equal to [CrossEntropyIgnoreIndex] are
// left out, and the mean is over the others (NaN when there are none,
// with zero gradients, as in PyTorch). float16 and bfloat16 logits give
// a loss of their dtype, its mean accumulated in float32 and rounded
// once. It panics with [ErrShape] on mismatched sizes, with [ErrDType]
// for targets that are not integers and with [ErrIndex] for any other
// target outside [0, C).
func CrossEntropy(logits, targets *Tensor) *Tensor {
	if up, done := autocastUp(logits); up != logits {
		defer done()
		return CrossEntropy(up, targets)
	}
	defer asOp("cross_entropy")
	checkNLLShapes("cross_entropy", logits, targets)
	lsm := logits.LogSoftmax(1)
	defer lsm.Release()
	return nllLoss(lsm, targets)
}

// NLLLoss returns the mean negative log-likelihood of integer class
// targets [N] (int64 or int32) under log-probabilities [N, C]
// (torch.nn.functional.nll_loss with mean reduction): the mean of
// -logProbs[i, targets[i]], leaving out targets equal to
// [CrossEntropyIgnoreIndex] (NaN when all are, with zero gradients),
// accumulated in float32 for float16 and bfloat16 and rounded once. It
// panics with [ErrShape] on mismatched sizes, with [ErrDType] for targets
// that are not integers and with [ErrIndex] for any other target outside
// [0, C).
func NLLLoss(logProbs, targets *Tensor) *Tensor {
	if up, done := autocastUp(logProbs); up != logProbs {
		defer done()
		return NLLLoss(up, targets)
	}
	defer asOp("nll_loss")
	checkNLLShapes("nll_loss", logProbs, targets)
	return nllLoss(logProbs, targets)
}

// checkNLLShapes panics unless scores is [N, C] and targets [N] of int64
// or int32, on one device: a floating-point target would otherwise be
// truncated to a class silently.
func checkNLLShapes(op string, scores, targets *Tensor) {
	_, held := sameDevice(op, scores, targets)
	defer held.unpin()
	if len(scores.shape) != 2 || len(targets.shape) != 1 || scores.shape[0] != targets.shape[0] {
		fail(op, ErrShape, "expects scores [N, C] and targets [N], got %v and %v", Shape(scores.shape), Shape(targets.shape))
	}
	if targets.dtype != Int64 && targets.dtype != Int32 {
		fail(op, ErrDType, "class targets must be int64 or int32, got %s (class probabilities: nn.CrossEntropyLossWith)", targets.dtype)
	}
}

// gatherTargets picks each row's target column of lsm [N, C], reporting a
// target outside [0, C) as such rather than as a bad index of the gather
// (on CUDA the check is asynchronous, and the error comes at a later
// synchronization).
func gatherTargets(lsm, col *Tensor) *Tensor {
	defer relabelIndex(func() string {
		return fmt.Sprintf("target out of bounds: the targets are classes 0 to %d, or %d for a row left out", lsm.shape[1]-1, CrossEntropyIgnoreIndex)
	})
	return lsm.Gather(1, col)
}

// nllLoss is NLLLoss of checked operands.
func nllLoss(lsm, targets *Tensor) *Tensor {
	var out *Tensor
	func() {
		idx := castRaw(targets, Int64)
		defer idx.Release()
		// Ignored targets pick class 0, weighed 0.
		ignored := idx.EqScalar(CrossEntropyIgnoreIndex)
		defer ignored.Release()
		zero := idx.NewZeros(nil)
		defer zero.Release()
		safe := Where(ignored, zero, idx)
		defer safe.Release()
		col := safe.Unsqueeze(1)
		defer col.Release()
		read := gatherTargets(lsm, col)
		defer read.Release()
		// An ignored row's value is replaced by 0 rather than weighed by
		// 0: it may be −Inf (a class masked out), and 0·−Inf is NaN. The
		// zero is negative, so that the loss, its negation, is +0 as
		// PyTorch's.
		ic := ignored.Unsqueeze(1)
		defer ic.Release()
		z := read.NewFull(nil, math.Copysign(0, -1))
		defer z.Release()
		picked := Where(ic, z, read)
		defer picked.Release()
		kept := ignored.LogicalNot()
		defer kept.Release()
		kw := kept.Cast(picked.dtype)
		defer kw.Release()
		w := kw.Unsqueeze(1)
		defer w.Release()
		pw := picked.Mul(w)
		defer pw.Release()
		// The mean over all N rows, scaled by N over the rows kept:
		// exactly the mean when none is ignored. When all are, the value
		// is NaN (0/0, as PyTorch's) and the gradient zeros, as PyTorch's:
		// the scale is then 1 and NaN is added as a constant. For the
		// 16-bit floats both are computed in float32 and the loss rounded
		// once: a mean over every row rounded to float16 would fall among
		// its subnormals when most rows are ignored.
		pwide := pw
		if w := opMath(pw.dtype); w != pw.dtype {
			pwide = pw.Cast(w)
			defer pwide.Release()
		}
		all := pwide.Mean()
		defer all.Release()
		kf := kept.Cast(Float32)
		defer kf.Release()
		cnt := kf.Sum()
		defer cnt.Release()
		none := cnt.EqScalar(0)
		defer none.Release()
		n := cnt.NewFull(nil, float64(idx.NumElements()))
		defer n.Release()
		kc := Where(none, n, cnt)
		defer kc.Release()
		scale := kc.RDivScalar(float64(idx.NumElements()))
		defer scale.Release()
		nan := cnt.RDivScalar(0) // 0/0 = NaN, or 0
		defer nan.Release()
		scaled := all.Mul(scale)
		defer scaled.Release()
		wide := scaled.Add(nan)
		defer wide.Release()
		m := wide.Cast(picked.dtype)
		defer m.Release()
		out = m.Neg()
	}()
	return out
}

// MSELoss returns the mean squared difference between pred and target
// (broadcasting, as torch.nn.functional.mse_loss; as there, target and
// pred of different shapes get a warning, once per call site, through
// [WarnOnce]). float16 and bfloat16
// inputs are subtracted, squared and averaged in float32 and the loss
// rounded once. Its backward pass is one elementwise product: 2·(pred -
// target)·g/n from the difference kept by the forward pass.
func MSELoss(pred, target *Tensor) *Tensor {
	if up, done := autocastUp(pred); up != pred {
		defer done()
		return MSELoss(up, target)
	}
	if up, done := autocastUp(target); up != target {
		defer done()
		return MSELoss(pred, up)
	}
	const op = "mse_loss"
	defer asOp(op)
	_, held := sameDevice(op, pred, target)
	defer held.unpin()
	dt := promote(pred.dtype, target.dtype)
	w := opMath(dt)
	var dw *Tensor // the difference, in w
	if w == dt {
		dw = binaryRaw(op, backend.Sub, pred, target)
	} else {
		p, t := castRaw(pred, w), castRaw(target, w)
		dw = binaryRaw(op, backend.Sub, p, t)
		p.Release()
		t.Release()
	}
	warnTargetSize(op, pred.shape, target.shape)
	var out *Tensor
	NoGrad(func() {
		sq := dw.unaryRaw(backend.Square)
		defer sq.Release()
		m := sq.Mean()
		defer m.Release()
		out = m.Cast(dt)
	})
	if !needsGrad(pred, target) || !dt.IsFloat() {
		dw.Release()
		return out
	}
	d := dw // kept for backward, in the loss's dtype
	if w != dt {
		d = castRaw(dw, dt)
		dw.Release()
	}
	ps, ts := slices.Clone(pred.shape), slices.Clone(target.shape)
	rp, rt := pred.requiresGrad.Load(), target.requiresGrad.Load()
	n := float64(d.NumElements())
	sv := []*Tensor{Keep(d)} // the graph's, whatever Tidy d was made in
	record(op, out, []*Tensor{pred, target}, sv, func(g *Tensor) []*Tensor {
		gs := scalarRaw(op, backend.Mul, toOpMath(g), 2/n, false)
		gp := binaryRaw(op, backend.Mul, toOpMath(sv[0]), gs).Cast(dt)
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
// The statistics and the normalisation are computed in float32 for
// float16 and bfloat16 tensors, the result rounded once (as PyTorch's
// kernels do); the backward pass recomputes the normalised input from t
// and the saved mean and reciprocal deviation, which are all it keeps
// besides t, weight and bias. It panics with [ErrShape] when
// normalizedShape is empty or does not match the end of t's shape or
// weight's and bias's, with [ErrDType] for integer or bool tensors, and
// with [ErrArgument] for a NaN or infinite eps (every output NaN or 0).
func LayerNorm(t *Tensor, normalizedShape []int, weight, bias *Tensor, eps float64) *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return LayerNorm(up, normalizedShape, weight, bias, eps)
	}
	const op = "layer_norm"
	defer asOp(op)
	t.live(op)
	k := len(normalizedShape)
	if k == 0 || k > len(t.shape) || !slices.Equal(t.shape[len(t.shape)-k:], normalizedShape) {
		fail(op, ErrShape, "normalized shape %v does not match the end of input shape %v", Shape(normalizedShape), Shape(t.shape))
	}
	for _, p := range []*Tensor{weight, bias} {
		if p != nil && !slices.Equal(p.shape, normalizedShape) {
			fail(op, ErrShape, "weight/bias shape %v must equal normalized shape %v", Shape(p.shape), Shape(normalizedShape))
		}
	}
	if math.IsNaN(eps) || math.IsInf(eps, 0) {
		fail(op, ErrArgument, "eps must be finite, got %v", eps)
	}
	_, held := sameDevice(op, compact([]*Tensor{t, weight, bias})...)
	defer held.unpin()
	dt := t.dtype
	for _, p := range []*Tensor{t, weight, bias} {
		if p == nil {
			continue
		}
		if !p.dtype.IsFloat() {
			fail(op, ErrDType, "needs floating-point tensors, got %s", p.dtype)
		}
		dt = promote(dt, p.dtype)
	}
	w := opMath(dt)
	axes := make([]int, k)
	for i := range axes {
		axes[i] = len(t.shape) - k + i
	}
	// in returns p (nil stays nil) converted to w, without recording.
	in := func(p *Tensor) *Tensor {
		if p == nil {
			return nil
		}
		return castRaw(p, w)
	}
	var out, mean, rstd *Tensor
	NoGrad(func() {
		Tidy(func() {
			x := in(t)
			mean = Keep(meanRaw(op, x, axes))
			c := x.Sub(mean)
			rstd = Keep(meanRaw(op, c.Square(), axes).AddScalar(eps).Rsqrt())
			y := c.Mul(rstd)
			if weight != nil {
				y = y.Mul(in(weight))
			}
			if bias != nil {
				y = y.Add(in(bias))
			}
			out = Keep(y.Cast(dt))
		})
	})
	track(out) // by the caller's Tidy, which Keep took it from
	if !needsGrad(t, weight, bias) {
		mean.Release()
		rstd.Release()
		return out
	}
	rx, rw, rb := t.requiresGrad.Load(), weight != nil && weight.requiresGrad.Load(), bias != nil && bias.requiresGrad.Load()
	tdt, wdt, bdt := t.dtype, dt, dt
	if rw {
		wdt = weight.dtype
	}
	if rb {
		bdt = bias.dtype
	}
	ns := slices.Clone(normalizedShape)
	sv := []*Tensor{t.share(), mean, rstd}
	if weight != nil {
		sv = append(sv, weight.share())
	}
	record(op, out, []*Tensor{t, weight, bias}, sv, func(g *Tensor) []*Tensor {
		gw := in(g)
		xhat := in(sv[0]).Sub(sv[1]).Mul(sv[2])
		var gx, gwt, gb *Tensor
		if rb {
			gb = sumTo(gw, ns).Cast(bdt)
		}
		if rw {
			gwt = sumTo(gw.Mul(xhat), ns).Cast(wdt)
		}
		if rx {
			gy := gw
			if len(sv) > 3 {
				gy = gw.Mul(in(sv[3]))
			}
			// dx = rstd·(gy - mean(gy) - xhat·mean(gy·xhat))
			m1 := meanRaw(op, gy, axes)
			m2 := meanRaw(op, gy.Mul(xhat), axes)
			gx = gy.Sub(m1).Sub(xhat.Mul(m2)).Mul(sv[2]).Cast(tdt)
		}
		return []*Tensor{gx, gwt, gb}
	})
	return out
}

// RMSNorm normalises t over its last len(normalizedShape) dimensions by
// their root mean square, as torch.nn.functional.rms_norm:
// y = x·rsqrt(mean(x²) + eps)·weight, the weight (of normalizedShape)
// left out when nil. A negative eps selects PyTorch's default (eps=None):
// the machine epsilon of the dtype it computes in, as PyTorch's kernel
// takes it: 2⁻²³ for float32, float16 and bfloat16, 2⁻⁵² for float64
// (torch.finfo(float32).eps even for 16-bit inputs, which the docs'
// finfo(input.dtype) would make 2⁻¹⁰ or 2⁻⁷). The mean
// and the normalisation are computed in float32 for float16 and bfloat16
// tensors and the result rounded once, as [LayerNorm] does; inside an
// Autocast region a 16-bit t gives float32, as for layer_norm. The
// backward pass recomputes the normalised input from t and the saved
// reciprocal root mean square, which is all it keeps besides t and
// weight. It panics with [ErrShape] when normalizedShape is empty or does
// not match the end of t's shape or weight's, with [ErrDType] for
// integer or bool tensors, with [ErrArgument] for a NaN or infinite eps,
// and with [ErrDevice] when t and weight are on different devices.
func RMSNorm(t *Tensor, normalizedShape []int, weight *Tensor, eps float64) *Tensor {
	if up, done := autocastUp(t); up != t {
		defer done()
		return RMSNorm(up, normalizedShape, weight, eps)
	}
	const op = "rms_norm"
	defer asOp(op)
	t.live(op)
	k := len(normalizedShape)
	if k == 0 || k > len(t.shape) || !slices.Equal(t.shape[len(t.shape)-k:], normalizedShape) {
		fail(op, ErrShape, "normalized shape %v does not match the end of input shape %v", Shape(normalizedShape), Shape(t.shape))
	}
	if weight != nil && !slices.Equal(weight.shape, normalizedShape) {
		fail(op, ErrShape, "weight shape %v must equal normalized shape %v", Shape(weight.shape), Shape(normalizedShape))
	}
	if math.IsNaN(eps) || math.IsInf(eps, 0) {
		fail(op, ErrArgument, "eps must be finite (or negative for the dtype's machine epsilon), got %v", eps)
	}
	_, held := sameDevice(op, compact([]*Tensor{t, weight})...)
	defer held.unpin()
	dt := t.dtype
	for _, p := range []*Tensor{t, weight} {
		if p == nil {
			continue
		}
		if !p.dtype.IsFloat() {
			fail(op, ErrDType, "needs floating-point tensors, got %s", p.dtype)
		}
		dt = promote(dt, p.dtype)
	}
	if eps < 0 {
		eps = machineEps(t.dtype)
	}
	w := opMath(dt)
	axes := make([]int, k)
	for i := range axes {
		axes[i] = len(t.shape) - k + i
	}
	// in returns p (nil stays nil) converted to w, without recording.
	in := func(p *Tensor) *Tensor {
		if p == nil {
			return nil
		}
		return castRaw(p, w)
	}
	var out, rrms *Tensor
	NoGrad(func() {
		Tidy(func() {
			x := in(t)
			rrms = Keep(meanRaw(op, x.Square(), axes).AddScalar(eps).Rsqrt())
			y := x.Mul(rrms)
			if weight != nil {
				y = y.Mul(in(weight))
			}
			out = Keep(y.Cast(dt))
		})
	})
	track(out) // by the caller's Tidy, which Keep took it from
	if !needsGrad(t, weight) {
		rrms.Release()
		return out
	}
	rx, rw := t.requiresGrad.Load(), weight != nil && weight.requiresGrad.Load()
	tdt, wdt := t.dtype, dt
	if rw {
		wdt = weight.dtype
	}
	ns := slices.Clone(normalizedShape)
	sv := []*Tensor{t.share(), rrms}
	if weight != nil {
		sv = append(sv, weight.share())
	}
	record(op, out, []*Tensor{t, weight}, sv, func(g *Tensor) []*Tensor {
		gw := in(g)
		xhat := in(sv[0]).Mul(sv[1])
		var gx, gwt *Tensor
		if rw {
			gwt = sumTo(gw.Mul(xhat), ns).Cast(wdt)
		}
		if rx {
			gy := gw
			if len(sv) > 2 {
				gy = gw.Mul(in(sv[2]))
			}
			// dx = rrms·(gy - xhat·mean(gy·xhat))
			m := meanRaw(op, gy.Mul(xhat), axes)
			gx = gy.Sub(xhat.Mul(m)).Mul(sv[1]).Cast(tdt)
		}
		return []*Tensor{gx, gwt}
	})
	return out
}

// machineEps returns the difference between 1 and the next larger value of
// the dtype that a floating-point dt computes in (float32 for float16 and
// bfloat16): RMSNorm's default eps, as PyTorch's rms_norm takes the
// epsilon of its upcast type.
func machineEps(dt DType) float64 {
	if dt == Float64 {
		return 0x1p-52
	}
	return 0x1p-23
}

// Normalize divides t by its p-norm along dim, as
// torch.nn.functional.normalize: v / max(‖v‖_p, eps) for each vector v
// along dim (negative dim counts from the end; 0 and -1 name a
// 0-dimensional tensor itself). p may be math.Inf(1) for the largest
// absolute value; PyTorch's defaults are p = 2 and eps = 1e-12. The norm
// is that of [Tensor.Norm], with its gradient, and the division
// broadcasts it back, so the result has t's shape and dtype (float32
// for a 16-bit t inside an Autocast region, as norm runs in float32
// there); an empty t gives an empty result. It panics with [ErrDType] for
// integer and bool tensors, with [ErrIndex] for a dim out of range, with
// [ErrArgument] for a NaN p or eps, and with [ErrShape] where Norm does
// (an infinity or negative norm over an empty dimension).
func Normalize(t *Tensor, p float64, dim int, eps float64) *Tensor {
	const op = "normalize"
	defer asOp(op)
	t.live(op)
	floatOnly(op, t)
	t.scalarAxis(op, dim)
	if math.IsNaN(p) {
		fail(op, ErrArgument, "the order p must be a number, got NaN")
	}
	if math.IsNaN(eps) {
		fail(op, ErrArgument, "eps must be a number, got NaN")
	}
	n := t.Norm(p, []int{dim}, true)
	defer n.Release()
	d := n.Clamp(eps, math.Inf(1))
	defer d.Release()
	return t.Div(d)
}

// warnTargetSize warns, once per call site, when a loss's target and input
// have different shapes: they broadcast against each other, which is
// seldom what was meant ([N, 1] predictions against [N] targets give an
// [N, N] difference). PyTorch warns alike.
func warnTargetSize(op string, input, target []int) {
	if slices.Equal(input, target) {
		return
	}
	WarnOnce(fmt.Sprintf("%s: the target's shape %v differs from the input's %v, so they broadcast to %v, which is likely a mistake; give them the same shape",
		op, Shape(target), Shape(input), Shape(broadcastShapes(op, input, target))))
}
