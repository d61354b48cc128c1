package vram

import (
	"slices"

	"github.com/vramgo/vram/backend"
)

// BatchNorm2d normalizes x [N, C, H, W] per channel over the N, H and W
// axes (torch.nn.functional.batch_norm): y = (x - mean)/sqrt(var + eps)·
// weight + bias. In training mode mean and var are the batch's (biased
// variance), and the running statistics runMean and runVar ([C], or both
// nil) are updated in place: running = (1-momentum)·running +
// momentum·batch, with the unbiased variance for runVar, as PyTorch does,
// except in the recompute of a [Checkpoint] ([Recomputing]), whose forward
// updated them already. In evaluation mode (training false) the running statistics normalize
// and must be given. weight and bias ([C]) may be nil (no affine map).
//
// The statistics and the arithmetic are float32 (or float64 for float64
// input) whatever x's dtype, and the result has x's dtype and memory
// format: a float16 or bfloat16 x with float32 parameters, what a model
// converted to 16 bits or run under [Autocast] gives it, is normalized in
// float32 and rounded once. A device with native batch normalization
// ([backend.BatchNormer]: cuDNN) runs it when the per-channel tensors are
// float32; elsewhere it is composed, with the same results up to rounding.
// An empty batch (no values per channel) gives an empty result and leaves
// the running statistics as they are, as in PyTorch. Shapes that do not
// fit, and training on one value per channel, panic with [ErrShape];
// evaluation without running statistics, momentum outside [0, 1] or eps
// not above 0 with [ErrArgument].
func BatchNorm2d(x, weight, bias, runMean, runVar *Tensor, training bool, momentum, eps float64) *Tensor {
	return BatchNorm2dTracked(x, weight, bias, runMean, runVar, nil, training, momentum, eps)
}

// BatchNorm2dTracked is [BatchNorm2d] that, in training mode, also adds 1
// to numBatches, an int64 scalar on x's device, as torch.nn.BatchNorm2d
// counts its batches in num_batches_tracked (nil counts nothing), except
// in the recompute of a [Checkpoint]. A device
// whose batch-norm kernels can count ([backend.BatchNormCounter]: CUDA,
// channels-last) does it in them, without a launch of its own. A
// numBatches that is not an int64 scalar panics with [ErrArgument], one on
// another device with [ErrDevice].
func BatchNorm2dTracked(x, weight, bias, runMean, runVar, numBatches *Tensor, training bool, momentum, eps float64) *Tensor {
	const op = "batch_norm2d"
	defer asOp(op)
	ds, held := checkBatchNorm(op, x, nil, weight, bias, runMean, runVar, training, momentum, eps)
	defer held.unpin()
	if !training {
		numBatches = nil
	} else if Recomputing() {
		var done func()
		runMean, runVar, done = scratchStatistics(runMean, runVar)
		defer done()
		numBatches = nil
	}
	counter, done := checkBatchCounter(op, x, numBatches)
	defer done()
	n, c := x.shape[0], x.shape[1]
	count := n * x.shape[2] * x.shape[3]
	if count > 0 {
		if y, counted := batchNormNative(op, ds, x, weight, bias, runMean, runVar, counter, training, momentum, eps); y != nil {
			if !counted {
				countBatch(counter)
			}
			return y
		}
	}
	w := opMath(x.dtype)
	shape4 := []int{1, c, 1, 1}
	var out, mean, rstd *Tensor
	NoGrad(func() {
		Tidy(func() {
			xw := x.Cast(w)
			var m, r *Tensor
			if training {
				m = xw.MeanKeepDim(0, 2, 3)
				v := xw.Sub(m).Square().MeanKeepDim(0, 2, 3)
				r = v.AddScalar(eps).Rsqrt()
				if runMean != nil && count > 0 {
					updateRunning(runMean, m.Reshape(c), momentum)
					updateRunning(runVar, v.Reshape(c).MulScalar(float64(count)/float64(count-1)), momentum)
				}
			} else {
				// A copy, as runningStatistics makes: the backward pass
				// needs the mean that normalized this input, and later
				// training steps update the running mean in place.
				m = runMean.Cast(w).Clone().Reshape(shape4...)
				r = runVar.Cast(w).AddScalar(eps).Rsqrt().Reshape(shape4...)
			}
			y := xw.Sub(m).Mul(r)
			if weight != nil {
				y = y.Mul(weight.Cast(w).Reshape(shape4...))
			}
			if bias != nil {
				y = y.Add(bias.Cast(w).Reshape(shape4...))
			}
			mean, rstd = Keep(m.Reshape(c).Contiguous()), Keep(r.Reshape(c).Contiguous())
			out = Keep(inputFormat(op, x, y.Cast(x.dtype)))
		})
	})
	track(out) // by the caller's Tidy, which Keep took it from
	countBatch(counter)
	if !needsGrad(x, weight, bias) {
		mean.Release()
		rstd.Release()
		return out
	}
	recordBatchNorm(op, out, x, x, weight, bias, mean, rstd, training, nil)
	return out
}

// scratchStatistics returns copies of the running statistics (nil for
// none) for a batch normalization in the recompute of a [Checkpoint],
// whose forward updated the statistics already, and the function that
// releases them: the recompute updates the copies, and runs the same
// kernels as the forward did (the native ones take running statistics).
func scratchStatistics(runMean, runVar *Tensor) (m, v *Tensor, done func()) {
	if runMean == nil {
		return nil, nil, func() {}
	}
	NoGrad(func() { m, v = Keep(runMean.Clone()), Keep(runVar.Clone()) })
	return m, v, func() {
		m.Release()
		v.Release()
	}
}

// checkBatchCounter checks a batch counter (nil: none) against x and
// returns it pinned, with the function that unpins it.
func checkBatchCounter(op string, x, counter *Tensor) (*Tensor, func()) {
	if counter == nil {
		return nil, func() {}
	}
	notNil(op, counter)
	if counter.dtype != Int64 || counter.NumElements() != 1 {
		fail(op, ErrArgument, "the batch counter must be an int64 scalar, got %s %v", counter.dtype, counter.shape)
	}
	_, held := sameDevice(op, x, counter)
	return counter, held.unpin
}

// countBatch adds 1 to counter, unless it is nil.
func countBatch(counter *Tensor) {
	if counter != nil {
		NoGrad(func() { counter.AddScalarInPlace(1) })
	}
}

// checkBatchNorm checks the operands of a batch normalization (and of its
// residual r, when not nil) as BatchNorm2d documents, pins them and
// returns their device; the caller unpins.
func checkBatchNorm(op string, x, r, weight, bias, runMean, runVar *Tensor, training bool, momentum, eps float64) (*devState, pins) {
	notNil(op, x)
	ds, held := sameDevice(op, compact([]*Tensor{x, r, weight, bias, runMean, runVar})...)
	ok := false
	defer func() {
		if !ok {
			held.unpin()
		}
	}()
	if len(x.shape) != 4 {
		fail(op, ErrShape, "input must be [N, C, H, W], got shape %v", Shape(x.shape))
	}
	c := x.shape[1]
	count := x.shape[0] * x.shape[2] * x.shape[3]
	for _, t := range []*Tensor{x, r, weight, bias, runMean, runVar} {
		if t == nil {
			continue
		}
		if !t.dtype.IsFloat() {
			fail(op, ErrDType, "needs floating-point tensors, got %s", t.dtype)
		}
		if t != x && t != r && (len(t.shape) != 1 || t.shape[0] != c) {
			fail(op, ErrShape, "per-channel tensors must be [%d] for input %v, got shape %v", c, Shape(x.shape), Shape(t.shape))
		}
	}
	switch {
	case r != nil && !slices.Equal(r.shape, x.shape):
		fail(op, ErrShape, "the residual must have the input's shape %v, got %v", Shape(x.shape), Shape(r.shape))
	case (runMean == nil) != (runVar == nil):
		fail(op, ErrArgument, "give both running statistics or neither")
	case !training && runMean == nil:
		fail(op, ErrArgument, "evaluation mode normalizes with the running statistics; give runMean and runVar, or use training mode")
	case training && count == 1:
		fail(op, ErrShape, "expected more than 1 value per channel when training, got input %v", Shape(x.shape))
	case !(momentum >= 0 && momentum <= 1):
		fail(op, ErrArgument, "momentum %v must be in [0, 1]", momentum)
	case !(eps > 0):
		fail(op, ErrArgument, "eps %v must be above 0", eps)
	}
	ok = true
	return ds, held
}

// updateRunning sets run = (1-momentum)·run + momentum·batch in place.
// The statistics are buffers: no gradient flows into them.
func updateRunning(run, batch *Tensor, momentum float64) {
	d := batch.Detach()
	defer d.Release()
	b := d.Cast(run.dtype)
	defer b.Release()
	run.MulScalarInPlace(1-momentum).AddScaledInPlace(b, momentum)
}

// nativeBackward computes batch normalization's gradients with a device
// kernel from the saved tensors (the input, the mean, the reciprocal
// deviation and the weight), or returns false to compose them.
type nativeBackward func(g *Tensor, sv []*Tensor) (gx, gw, gb *Tensor, ok bool)

// recordBatchNorm records the backward pass of out = BatchNorm2d(x, ...),
// where xs is x's data as normalized (x itself or a copy in another
// layout), and mean and rstd ([C], given away to the graph) the
// statistics that normalized it. native, when not nil, is tried first.
func recordBatchNorm(op string, out, x, xs, weight, bias, mean, rstd *Tensor, training bool, native nativeBackward) {
	rx, rw, rb := x.requiresGrad.Load(), weight != nil && weight.requiresGrad.Load(), bias != nil && bias.requiresGrad.Load()
	sv := []*Tensor{xs.share(), mean, rstd}
	if weight != nil {
		sv = append(sv, weight.share())
	}
	var wdt, bdt DType
	if rw {
		wdt = weight.dtype
	}
	if rb {
		bdt = bias.dtype
	}
	xdt := x.dtype
	record(op, out, []*Tensor{x, weight, bias}, sv, func(g *Tensor) []*Tensor {
		if native != nil {
			if gx, gw, gb, ok := native(g, sv); ok {
				for _, drop := range []struct {
					need bool
					t    **Tensor
				}{{rx, &gx}, {rw, &gw}, {rb, &gb}} {
					if !drop.need {
						(*drop.t).Release()
						*drop.t = nil
					}
				}
				return []*Tensor{gx, gw, gb}
			}
		}
		gx, gw, gb := batchNormGrads(g, sv, training, rx, rw, rb, xdt, wdt, bdt)
		return []*Tensor{gx, gw, gb}
	})
}

// batchNormGrads composes the gradients of a batch normalization from the
// output's gradient g and the saved tensors sv (the input as normalized,
// the mean, the reciprocal deviation and, when there are four, the
// weight), those not needed (rx, rw, rb) nil; xdt, wdt and bdt are the
// dtypes of the input, the weight and the bias.
func batchNormGrads(g *Tensor, sv []*Tensor, training, rx, rw, rb bool, xdt, wdt, bdt DType) (gx, gwt, gb *Tensor) {
	shape4 := []int{1, sv[0].shape[1], 1, 1}
	w := opMath(xdt)
	gw := g.Cast(w)
	m4, r4 := sv[1].Cast(w).Reshape(shape4...), sv[2].Cast(w).Reshape(shape4...)
	xhat := sv[0].Cast(w).Sub(m4).Mul(r4)
	if rb {
		gb = gw.Sum(0, 2, 3).Cast(bdt)
	}
	if rw {
		gwt = gw.Mul(xhat).Sum(0, 2, 3).Cast(wdt)
	}
	if rx {
		gy := gw
		if len(sv) > 3 {
			gy = gw.Mul(sv[3].Cast(w).Reshape(shape4...))
		}
		if training {
			// dx = rstd·(gy - mean(gy) - xhat·mean(gy·xhat))
			m1 := gy.MeanKeepDim(0, 2, 3)
			m2 := gy.Mul(xhat).MeanKeepDim(0, 2, 3)
			gx = gy.Sub(m1).Sub(xhat.Mul(m2)).Mul(r4).Cast(xdt)
		} else {
			gx = gy.Mul(r4).Cast(xdt)
		}
	}
	return gx, gwt, gb
}

// nativeBatchNormOperands reports whether a device's native batch norm may
// take these operands: native kernels on, x of a dtype they take, and
// weight, bias and both running statistics given as contiguous float32.
func nativeBatchNormOperands(x, weight, bias, runMean, runVar *Tensor) bool {
	if noNativeConv.Load() || !nativeFloat(x.dtype) || weight == nil || bias == nil || runMean == nil {
		return false
	}
	for _, t := range []*Tensor{weight, bias, runMean, runVar} {
		if t.dtype != Float32 || !t.IsContiguous() {
			return false
		}
	}
	return true
}

// runningStatistics returns copies of the mean and 1/sqrt(var + eps) that
// the running statistics hold now, for the backward pass of an evaluation:
// later training steps change the running statistics themselves.
func runningStatistics(runMean, runVar *Tensor, eps float64) (mean, rstd *Tensor) {
	NoGrad(func() {
		mean = Keep(runMean.Clone())
		v := runVar.AddScalar(eps)
		rstd = Keep(v.Rsqrt())
		v.Release()
	})
	return mean, rstd
}

// batchNormNative runs the batch normalization with the device's
// [backend.BatchNormer], recording its backward pass, or returns nil when
// the device has none, or none for these operands. counted reports
// whether the device also added 1 to counter ([backend.BatchNormCounter]).
func batchNormNative(op string, ds *devState, x, weight, bias, runMean, runVar, counter *Tensor, training bool, momentum, eps float64) (_ *Tensor, counted bool) {
	bn, ok := ds.bd.(backend.BatchNormer)
	if !ok || !nativeBatchNormOperands(x, weight, bias, runMean, runVar) {
		return nil, false
	}
	c := x.shape[1]
	f := x.SuggestMemoryFormat()
	xc := x.inFormat(op, f)
	defer xc.Release()
	y := newTensorFormat(op, ds, x.dtype, x.shape, f)
	s := ds.stream()
	var mean, rstd *Tensor
	var err error
	if training {
		mean, rstd = newTensor(op, ds, Float32, []int{c}), newTensor(op, ds, Float32, []int{c})
		counted, err = trainCounted(ds, counter, func(bc backend.BatchNormCounter) error {
			return bc.BatchNormTrainCount(s, y.bv(), xc.bv(), backend.View{}, weight.bv(), bias.bv(), runMean.bv(), runVar.bv(), mean.bv(), rstd.bv(), counter.bv(), momentum, eps, false)
		})
		if !counted {
			err = bn.BatchNormTrain(s, y.bv(), xc.bv(), weight.bv(), bias.bv(), runMean.bv(), runVar.bv(), mean.bv(), rstd.bv(), momentum, eps)
		}
	} else {
		err = bn.BatchNormInfer(s, y.bv(), xc.bv(), weight.bv(), bias.bv(), runMean.bv(), runVar.bv(), eps)
	}
	if err != nil {
		y.Release()
		mean.Release()
		rstd.Release()
		if notImplemented(err) {
			return nil, false
		}
		check(op, err)
	}
	if !needsGrad(x, weight, bias) {
		mean.Release()
		rstd.Release()
		return y, counted
	}
	var native nativeBackward
	if training {
		xShape := slices.Clone(x.shape)
		native = func(g *Tensor, sv []*Tensor) (gx, gw, gb *Tensor, ok bool) {
			gc := g.inFormat(op, f)
			defer gc.Release()
			gx = newTensorFormat(op, ds, g.dtype, xShape, f)
			gw, gb = newTensor(op, ds, Float32, []int{c}), newTensor(op, ds, Float32, []int{c})
			err := bn.BatchNormBackward(ds.stream(), gx.bv(), gw.bv(), gb.bv(), gc.bv(), sv[0].bv(), sv[3].bv(), sv[1].bv(), sv[2].bv(), eps)
			if err != nil {
				gx.Release()
				gw.Release()
				gb.Release()
				if notImplemented(err) {
					return nil, nil, nil, false
				}
				check(op, err)
			}
			return gx, gw, gb, true
		}
	} else {
		// The running statistics change with later training steps: the
		// backward pass uses those that normalized this input.
		mean, rstd = runningStatistics(runMean, runVar, eps)
	}
	recordBatchNorm(op, y, x, xc, weight, bias, mean, rstd, training, native)
	return y, counted
}

// trainCounted runs a counting training pass with the device's
// [backend.BatchNormCounter] when there is a counter and the device has
// one, and reports whether it ran (or failed, with its error); an operand
// its kernels do not take (ErrNotImplemented) leaves the uncounted pass to
// the caller.
func trainCounted(ds *devState, counter *Tensor, run func(backend.BatchNormCounter) error) (bool, error) {
	bc, ok := ds.bd.(backend.BatchNormCounter)
	if counter == nil || !ok {
		return false, nil
	}
	err := run(bc)
	if notImplemented(err) {
		return false, nil
	}
	return true, err
}

// BatchNorm2dReLU returns relu(BatchNorm2d(x, ...) + residual), the way a
// ResNet block ends, or relu(BatchNorm2d(x, ...)) when residual is nil.
// On a device with a fused batch norm ([backend.FusedBatchNormer]) the
// normalization, the addition and the ReLU are one pass over the data, and the backward
// pass folds the ReLU's mask into the batch norm's two passes, so neither
// the normalized tensor nor the sum is ever stored; elsewhere the three
// ops are composed, with the same results up to rounding. The result has
// x's dtype and memory format.
//
// The operands and their errors are BatchNorm2d's; residual must have x's
// shape ([ErrShape] otherwise) and be on its device. A residual of another
// dtype is added as [Tensor.Add] adds, composed.
func BatchNorm2dReLU(x, residual, weight, bias, runMean, runVar *Tensor, training bool, momentum, eps float64) *Tensor {
	return BatchNorm2dReLUTracked(x, residual, weight, bias, runMean, runVar, nil, training, momentum, eps)
}

// BatchNorm2dReLUTracked is [BatchNorm2dReLU] that, in training mode, also
// adds 1 to numBatches, as [BatchNorm2dTracked] does.
func BatchNorm2dReLUTracked(x, residual, weight, bias, runMean, runVar, numBatches *Tensor, training bool, momentum, eps float64) *Tensor {
	const op = "batch_norm2d_relu"
	defer asOp(op)
	ds, held := checkBatchNorm(op, x, residual, weight, bias, runMean, runVar, training, momentum, eps)
	defer held.unpin()
	if !training {
		numBatches = nil
	} else if Recomputing() {
		var done func()
		runMean, runVar, done = scratchStatistics(runMean, runVar)
		defer done()
		numBatches = nil
	}
	counter, done := checkBatchCounter(op, x, numBatches)
	defer done()
	if x.shape[0]*x.shape[2]*x.shape[3] > 0 { // an empty batch is composed
		if y, counted := batchNormReLUNative(op, ds, x, residual, weight, bias, runMean, runVar, counter, training, momentum, eps); y != nil {
			if !counted {
				countBatch(counter)
			}
			return y
		}
	}
	y := BatchNorm2dTracked(x, weight, bias, runMean, runVar, counter, training, momentum, eps)
	if residual != nil {
		s := y.Add(residual)
		y.Release()
		y = s
	}
	defer y.Release()
	return y.Relu()
}

// batchNormReLUNative runs BatchNorm2dReLU with the device's
// [backend.FusedBatchNormer] and records its backward pass, or returns nil
// when the device has none, or none for these operands.
func batchNormReLUNative(op string, ds *devState, x, r, weight, bias, runMean, runVar, counter *Tensor, training bool, momentum, eps float64) (_ *Tensor, counted bool) {
	fb, ok := ds.bd.(backend.FusedBatchNormer)
	if !ok || !nativeBatchNormOperands(x, weight, bias, runMean, runVar) {
		return nil, false
	}
	f := x.SuggestMemoryFormat()
	if r != nil && (r.dtype != x.dtype || r.SuggestMemoryFormat() != f) {
		return nil, false
	}
	c := x.shape[1]
	xc := x.inFormat(op, f)
	defer xc.Release()
	var rv backend.View
	if r != nil {
		rc := r.inFormat(op, f)
		defer rc.Release()
		rv = rc.bv()
	}
	y := newTensorFormat(op, ds, x.dtype, x.shape, f)
	s := ds.stream()
	var mean, rstd *Tensor
	var err error
	if training {
		mean, rstd = newTensor(op, ds, Float32, []int{c}), newTensor(op, ds, Float32, []int{c})
		counted, err = trainCounted(ds, counter, func(bc backend.BatchNormCounter) error {
			return bc.BatchNormTrainCount(s, y.bv(), xc.bv(), rv, weight.bv(), bias.bv(), runMean.bv(), runVar.bv(), mean.bv(), rstd.bv(), counter.bv(), momentum, eps, true)
		})
		if !counted {
			err = fb.BatchNormTrainReLU(s, y.bv(), xc.bv(), rv, weight.bv(), bias.bv(), runMean.bv(), runVar.bv(), mean.bv(), rstd.bv(), momentum, eps)
		}
	} else {
		err = fb.BatchNormInferReLU(s, y.bv(), xc.bv(), rv, weight.bv(), bias.bv(), runMean.bv(), runVar.bv(), eps)
	}
	if err != nil {
		y.Release()
		mean.Release()
		rstd.Release()
		if notImplemented(err) {
			return nil, false
		}
		check(op, err)
	}
	if !needsGrad(x, r, weight, bias) {
		mean.Release()
		rstd.Release()
		return y, counted
	}
	if !training {
		// The running statistics change with later training steps: the
		// backward pass uses those that normalized this input.
		mean, rstd = runningStatistics(runMean, runVar, eps)
	}
	recordBatchNormReLU(op, ds, fb, y, x, xc, r, weight, bias, mean, rstd, training, f, eps)
	return y, counted
}

// recordBatchNormReLU records the backward pass of y = relu(bn(x) + r): the
// fused kernels of fb in training mode, else (or when they decline the
// gradient's layout) the ReLU's mask and the composed gradients of
// batchNormGrads. xs is x's data in format f; mean and rstd are given away
// to the graph.
func recordBatchNormReLU(op string, ds *devState, fb backend.FusedBatchNormer, y, x, xs, r, weight, bias, mean, rstd *Tensor, training bool, f MemoryFormat, eps float64) {
	rx, rr := x.requiresGrad.Load(), r != nil && r.requiresGrad.Load()
	rw, rb := weight.requiresGrad.Load(), bias.requiresGrad.Load()
	sv := []*Tensor{xs.share(), mean, rstd, weight.share(), y.share()}
	out := sv[4]
	xdt, wdt, bdt := x.dtype, weight.dtype, bias.dtype
	c := x.shape[1]
	bw := func(g, g2 *Tensor) []*Tensor {
		if training && g.dtype == xdt && (g2 == nil || g2.dtype == xdt) {
			gc := g.inFormat(op, f)
			defer gc.Release()
			var g2v backend.View
			if g2 != nil {
				g2c := g2.inFormat(op, f)
				defer g2c.Release()
				g2v = g2c.bv()
			}
			gx := newTensorFormat(op, ds, xdt, x.shape, f)
			var gr *Tensor
			var grv backend.View
			if rr {
				gr = newTensorFormat(op, ds, xdt, x.shape, f)
				grv = gr.bv()
			}
			gw, gb := newTensor(op, ds, Float32, []int{c}), newTensor(op, ds, Float32, []int{c})
			err := fb.BatchNormBackwardReLU(ds.stream(), gx.bv(), grv, gw.bv(), gb.bv(), gc.bv(), g2v, out.bv(), sv[0].bv(), sv[3].bv(), sv[1].bv(), sv[2].bv(), eps)
			if err == nil {
				if !rx {
					gx.Release()
					gx = nil
				}
				if !rw {
					gw.Release()
					gw = nil
				}
				if !rb {
					gb.Release()
					gb = nil
				}
				return []*Tensor{gx, gr, gw, gb}
			}
			gx.Release()
			gr.Release()
			gw.Release()
			gb.Release()
			if !notImplemented(err) {
				check(op, err)
			}
		}
		if g2 != nil {
			g = g.Add(g2)
		}
		gm := reluGrad(g, out)
		gx, gw, gb := batchNormGrads(gm, sv[:4], training, rx, rw, rb, xdt, wdt, bdt)
		var gr *Tensor
		if rr {
			gr = gm
		}
		return []*Tensor{gx, gr, gw, gb}
	}
	if training {
		// The gradient may come in two parts (a residual input's, from
		// the identity and from a convolution): the kernels add them as
		// they read, where the convolution would otherwise add its input
		// gradient in place, which cuDNN's GEMM kernels do 0.7-1.3 ms
		// slower over a step's convolutions than overwriting. On an H100
		// it saved 0.44 ms of ResNet-50's 23.6 ms float32 step, and 0.2 ms
		// of the 13.5 ms bf16 step once the bf16 search had its second
		// look (BENCHMARKS.md, 2026-12-06).
		recordParts(op, y, []*Tensor{x, r, weight, bias}, sv, bw)
		return
	}
	record(op, y, []*Tensor{x, r, weight, bias}, sv, func(g *Tensor) []*Tensor { return bw(g, nil) })
}

// reluGrad returns g where y (a ReLU's output) is above 0, else 0.
func reluGrad(g, y *Tensor) *Tensor {
	if g.dtype == y.dtype && g.dtype.IsFloat() {
		return binaryRaw("relu", backend.ReluBackward, g, y)
	}
	return Where(y.GtScalar(0), g, g.NewZeros(nil))
}
