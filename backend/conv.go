package backend

// This file holds the optional abilities of a device for convolutional
// networks: 2-D convolutions, pooling and batch normalization done by a
// native library (cuDNN on NVIDIA GPUs). The root package composes every one
// of them from [Kernels] (im2col through Gather, then MatMul) when a device
// lacks them, so a backend needs none of them to run a convolutional network;
// they exist for speed.
//
// Memory format is carried by strides alone, as in PyTorch: every 4-D view
// here has the logical shape [N, C, H, W]. A contiguous ("NCHW") view has
// strides [C·H·W, H·W, W, 1]; a channels-last ("NHWC") view has strides
// [H·W·C, 1, W·C, C]. An implementation may return [ErrNotImplemented] for
// any other layout, dtype or parameter it has no kernel for, and the caller
// falls back to the composed path.

// Conv2DParams describes a 2-D convolution (or cross-correlation, as every
// deep-learning library computes it): the output size along each spatial
// axis is
//
//	out = (in + 2·Padding - Dilation·(kernel-1) - 1) / Stride + 1
//
// Index 0 is the height, index 1 the width.
type Conv2DParams struct {
	Stride   [2]int // at least 1
	Padding  [2]int // zeros on each side, at least 0
	Dilation [2]int // at least 1
	Groups   int    // at least 1; divides both the input and the output channels
}

// ConvOutputSize returns the output size along one spatial axis of a
// convolution or pooling window of size kernel over in elements, or a
// negative number when the window does not fit.
func ConvOutputSize(in, kernel, stride, padding, dilation int) int {
	span := dilation*(kernel-1) + 1
	if stride < 1 || in+2*padding < span {
		return -1
	}
	return (in+2*padding-span)/stride + 1
}

// Convolver is an optional interface of a [Device] with native 2-D
// convolutions. x is [N, C, H, W], w is [O, C/Groups, KH, KW] and y is
// [N, O, OH, OW]; all three have the same floating-point dtype (float32,
// float16 or bfloat16; float32 math may use TF32 tensor cores, as PyTorch's
// default does). Gradients (dx, dw, db) are overwritten, not accumulated.
type Convolver interface {
	// Conv2D computes y = conv(x, w) + bias, where bias ([O], contiguous) may
	// be the zero View (no bias). When relu is set, y = max(y, 0) in the same
	// pass.
	Conv2D(s Stream, y, x, w, bias View, p Conv2DParams, relu bool) error
	// Conv2DBackwardData computes dx from dy and w.
	Conv2DBackwardData(s Stream, dx, dy, w View, p Conv2DParams) error
	// Conv2DBackwardFilter computes dw from dy and x, and db ([O],
	// contiguous) when it is not the zero View.
	Conv2DBackwardFilter(s Stream, dw, db, dy, x View, p Conv2DParams) error
}

// ConvAccumulator is an optional interface of a [Convolver] that adds a
// convolution's input gradient to dx rather than overwriting it: the sum
// a tensor's gradient takes when it feeds two operations (a residual
// block's input: a convolution and the identity, or two convolutions),
// with no separate addition reading both gradients back.
type ConvAccumulator interface {
	// Conv2DBackwardDataAccumulate computes dx += the gradient from dy and
	// w. An error wrapping [ErrNotImplemented] leaves dx as it was, and
	// the caller adds.
	Conv2DBackwardDataAccumulate(s Stream, dx, dy, w View, p Conv2DParams) error
}

// PoolMode names a pooling reduction.
type PoolMode uint8

// The pooling modes. Average pooling divides by the whole window, padding
// included when CountIncludePad is set in [Pool2DParams], else by the
// elements inside the input.
const (
	MaxPool PoolMode = iota
	AvgPool
)

// Pool2DParams describes a 2-D pooling window. Index 0 is the height,
// index 1 the width. Padding of max pooling is -Inf.
type Pool2DParams struct {
	Mode            PoolMode
	Kernel          [2]int
	Stride          [2]int
	Padding         [2]int
	CountIncludePad bool // average pooling only
}

// Pooler is an optional interface of a [Device] with native 2-D pooling. x
// is [N, C, H, W] and y is [N, C, OH, OW], of one floating-point dtype.
type Pooler interface {
	// Pool2D computes y from x.
	Pool2D(s Stream, y, x View, p Pool2DParams) error
	// Pool2DBackward computes dx (overwritten) from dy, the forward's input
	// x and its output y.
	Pool2DBackward(s Stream, dx, dy, x, y View, p Pool2DParams) error
}

// MaxPoolTapper is an optional interface of a [Pooler] whose max pooling
// can keep, for the backward pass, the tap each window's maximum came
// from, so that the backward pass need not find it again in x: a byte per
// element of y, the tap's number i·kw + j within the window (i, j counted
// from the window's corner, padding included) read as an unsigned byte,
// in an [Int8] view of y's shape and layout. Operands a device does not
// take get an error wrapping [ErrNotImplemented] before anything is
// queued.
type MaxPoolTapper interface {
	// MaxPool2DTaps computes y from x as Pool2D does (p.Mode is MaxPool)
	// and writes every maximum's tap to taps.
	MaxPool2DTaps(s Stream, y, taps, x View, p Pool2DParams) error
	// MaxPool2DBackwardTaps computes dx (overwritten, the forward's input
	// shape) from dy and the taps that MaxPool2DTaps wrote.
	MaxPool2DBackwardTaps(s Stream, dx, dy, taps View, p Pool2DParams) error
}

// BatchNormer is an optional interface of a [Device] with native batch
// normalization over the N, H and W axes of x [N, C, H, W]. x, y, dx and dy
// share one floating-point dtype; the per-channel views (scale, bias, the
// running statistics, the saved mean and inverse standard deviation, and
// their gradients) are contiguous float32 [C], as cuDNN and PyTorch keep
// them under half precision.
type BatchNormer interface {
	// BatchNormTrain normalizes x with the batch's statistics into y =
	// scale·(x-mean)·invStd + bias, saves mean and invStd = 1/sqrt(var+eps)
	// (biased variance) for the backward pass, and updates the running
	// statistics in place: running = (1-momentum)·running + momentum·batch,
	// with the unbiased variance for runVar, as PyTorch does.
	BatchNormTrain(s Stream, y, x, scale, bias, runMean, runVar, saveMean, saveInvStd View, momentum, eps float64) error
	// BatchNormInfer normalizes x with the running statistics.
	BatchNormInfer(s Stream, y, x, scale, bias, runMean, runVar View, eps float64) error
	// BatchNormBackward computes dx, dscale and dbias (all overwritten) from
	// dy, x, scale and the statistics saved by BatchNormTrain.
	BatchNormBackward(s Stream, dx, dscale, dbias, dy, x, scale, saveMean, saveInvStd View, eps float64) error
}

// FusedBatchNormer is an optional interface of a [Device] whose batch
// normalization can end as a residual block does, y = max(0, bn(x) + r),
// in one pass over the data, and take the ReLU's backward pass into its
// own. The views follow [BatchNormer]'s rules; r (and dr) have x's shape,
// dtype and layout, and may be the zero View (no residual). A device that
// does not take some operands (a layout its kernels do not read) returns an
// error wrapping [ErrNotImplemented] before anything is queued, and the
// caller composes the op.
type FusedBatchNormer interface {
	// BatchNormTrainReLU is BatchNormTrain with y = max(0, scale·(x −
	// mean)·invStd + bias + r).
	BatchNormTrainReLU(s Stream, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd View, momentum, eps float64) error
	// BatchNormInferReLU is BatchNormInfer with the residual and the ReLU.
	BatchNormInferReLU(s Stream, y, x, r, scale, bias, runMean, runVar View, eps float64) error
	// BatchNormBackwardReLU computes g = dy (plus dy2 unless dy2 is the
	// zero View: a gradient in two parts that nobody has added yet, as a
	// residual input's) where the forward's output y is above 0 and 0
	// elsewhere, stores g in dr unless dr is the zero View (the residual's
	// gradient), and dx, dscale and dbias from g as BatchNormBackward does
	// (all overwritten). dy2 has dy's shape, dtype and layout; g's sum is
	// rounded to that dtype.
	BatchNormBackwardReLU(s Stream, dx, dr, dscale, dbias, dy, dy2, y, x, scale, saveMean, saveInvStd View, eps float64) error
}

// BatchNormCounter is an optional interface of a [Device] whose training
// batch norm can also count the batch, as torch.nn.BatchNorm2d counts
// num_batches_tracked, in its own kernels rather than with an addition of
// its own.
type BatchNormCounter interface {
	// BatchNormTrainCount is [BatchNormer.BatchNormTrain], or with relu
	// [FusedBatchNormer.BatchNormTrainReLU] with the residual r (the zero
	// View for none; without relu r must be the zero View), that also adds
	// 1 to count, an int64 scalar on the device. Operands that its
	// kernels do not take get an error wrapping [ErrNotImplemented] before
	// anything is queued, count unchanged, and the caller runs the
	// uncounted op and counts.
	BatchNormTrainCount(s Stream, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd, count View, momentum, eps float64, relu bool) error
}
