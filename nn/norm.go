package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// BatchNorm2d normalizes each channel of its input [N, C, H, W] over the
// batch and the pixels (torch.nn.BatchNorm2d); see [vram.BatchNorm2d]. In
// training mode it normalizes with the batch's statistics and updates the
// running ones; in evaluation mode ([Base.Eval]) it normalizes with the
// running statistics, or, for a layer without them
// (BatchNormOptions.NoRunningStats), with the batch's again.
//
// It is a [Float32Layer]: Half and BFloat16 leave its parameters and
// buffers float32, and a 16-bit input (from a converted model or under
// autocast) is normalized in float32 and returned in its own dtype.
type BatchNorm2d struct {
	Base
	// Weight (ones at first) and Bias (zeros) are [C], or both nil for a
	// layer made with BatchNormOptions.NoAffine.
	Weight, Bias *vram.Tensor
	// RunningMean (zeros) and RunningVar (ones) are the [C] float32
	// buffers "running_mean" and "running_var", or both nil for a layer
	// made with BatchNormOptions.NoRunningStats. Like the buffer fields
	// below, they are registered by field ([Base.RegisterBufferField]):
	// a tensor assigned to one is the buffer the state dict, To and
	// Forward use.
	RunningMean, RunningVar *vram.Tensor
	// NumBatchesTracked counts the training batches seen: the int64
	// scalar buffer "num_batches_tracked" of PyTorch's state dicts (nil
	// without running statistics).
	NumBatchesTracked *vram.Tensor
	// Momentum weighs each batch in the running statistics (0.1).
	Momentum float64
	// CumulativeAverage makes the running statistics the plain average of
	// every batch seen, each weighed 1/NumBatchesTracked, in place of
	// Momentum (PyTorch's momentum=None).
	CumulativeAverage bool
	// Eps is added to the variance (1e-5).
	Eps float64
}

// BatchNormOptions are the settings of [NewBatchNorm2dOptions]. The zero
// value is PyTorch's default: eps 1e-5, momentum 0.1, with an affine map
// and running statistics.
type BatchNormOptions struct {
	// Eps is added to the variance; 0 means 1e-5. It must not be negative.
	Eps float64
	// Momentum weighs each batch in the running statistics, in [0, 1]; 0
	// means 0.1 (set the layer's Momentum field to 0 for running
	// statistics that never change).
	Momentum float64
	// CumulativeAverage averages every batch alike (momentum=None).
	CumulativeAverage bool
	// NoAffine leaves out the weight and the bias (affine=False).
	NoAffine bool
	// NoRunningStats leaves out the running statistics
	// (track_running_stats=False): the layer normalizes with the batch's
	// statistics in evaluation mode too.
	NoRunningStats bool
}

// NewBatchNorm2d returns a BatchNorm2d over c channels with PyTorch's
// defaults: momentum 0.1, eps 1e-5, weight ones, bias zeros, running mean
// zeros and running variance ones. opts (device, dtype) go to vram's
// factory functions; a dtype other than float64 gives float32 tensors, as
// the layer stays float32. It panics with an *vram.Error of kind
// vram.ErrArgument unless c is positive.
func NewBatchNorm2d(c int, opts ...vram.Option) *BatchNorm2d {
	return NewBatchNorm2dOptions(c, BatchNormOptions{}, opts...)
}

// NewBatchNorm2dOptions returns a BatchNorm2d over c channels with the
// settings o, as [NewBatchNorm2d] does. It panics with an *vram.Error of
// kind vram.ErrArgument unless c is positive, Eps is not negative and
// Momentum is in [0, 1].
func NewBatchNorm2dOptions(c int, o BatchNormOptions, opts ...vram.Option) *BatchNorm2d {
	l := &BatchNorm2d{}
	l.init("batch_norm2d", c, o, opts)
	return l
}

// init checks the settings and makes l's parameters and buffers, as
// NewBatchNorm2dOptions documents.
func (l *BatchNorm2d) init(op string, c int, o BatchNormOptions, opts []vram.Option) {
	switch {
	case c < 1:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("channels must be positive, got %d", c)})
	case !(o.Eps >= 0) || math.IsInf(o.Eps, 1):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("eps %v must be finite and not negative", o.Eps)})
	case !(o.Momentum >= 0 && o.Momentum <= 1):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("momentum %v must be in [0, 1]", o.Momentum)})
	}
	l.Momentum, l.Eps, l.CumulativeAverage = o.Momentum, o.Eps, o.CumulativeAverage
	if l.Momentum == 0 {
		l.Momentum = 0.1
	}
	if l.Eps == 0 {
		l.Eps = 1e-5
	}
	dt := normDType(opts)
	popts := append(slices.Clone(opts), dt)
	if !o.NoAffine {
		l.Weight = fullParam(vram.Shape{c}, 1, popts)
		l.Bias = fullParam(vram.Shape{c}, 0, popts)
		l.RegisterParameterField("weight", &l.Weight)
		l.RegisterParameterField("bias", &l.Bias)
	}
	if !o.NoRunningStats {
		vram.Region(ParametersRegion, func() {
			l.RunningMean = vram.Keep(vram.Zeros(vram.Shape{c}, popts...))
			l.RunningVar = vram.Keep(vram.Ones(vram.Shape{c}, popts...))
			l.NumBatchesTracked = vram.Keep(vram.Zeros(vram.Shape{}, append(slices.Clone(opts), vram.Int64)...))
		})
		l.RegisterBufferField("running_mean", &l.RunningMean)
		l.RegisterBufferField("running_var", &l.RunningVar)
		l.RegisterBufferField("num_batches_tracked", &l.NumBatchesTracked)
	}
}

// optionalState names the buffer that [Load] lets a file lack, as
// PyTorch's batch norm does for files older than the buffer.
func (l *BatchNorm2d) optionalState() []string {
	if l.NumBatchesTracked == nil {
		return nil
	}
	return []string{"num_batches_tracked"}
}

// Forward returns the normalized x, of x's shape, dtype and memory format.
// In training mode it updates the running statistics and counts the batch.
// It panics as [vram.BatchNorm2dTracked] does, and with an *vram.Error of
// kind vram.ErrArgument for an Eps set to +Inf since construction.
func (l *BatchNorm2d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "batch_norm2d", "BatchNorm2d")
	checkEps("batch_norm2d", l.Eps)
	training, momentum := l.mode()
	w, b, done := l.maskedParams(l.Weight, l.Bias)
	defer done()
	return vram.BatchNorm2dTracked(x, w, b, l.RunningMean, l.RunningVar, l.NumBatchesTracked, training, momentum, l.Eps)
}

// ForwardReLU returns relu(l.Forward(x) + residual), or relu(l.Forward(x))
// when residual is nil, as a ResNet block ends: with
// [vram.BatchNorm2dReLU], one pass over the data on a device with fused
// kernels, composed elsewhere.
func (l *BatchNorm2d) ForwardReLU(x, residual *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "batch_norm2d", "BatchNorm2d")
	checkEps("batch_norm2d_relu", l.Eps)
	training, momentum := l.mode()
	w, b, done := l.maskedParams(l.Weight, l.Bias)
	defer done()
	return vram.BatchNorm2dReLUTracked(x, residual, w, b, l.RunningMean, l.RunningVar, l.NumBatchesTracked, training, momentum, l.Eps)
}

// mode returns whether l normalizes with the batch's statistics, as it
// does in training mode and always without running statistics, and the
// momentum of this batch's update of the running ones. A counter that is
// not one int64 (or was released) is not read: the batch norm op refuses
// it with its error.
func (l *BatchNorm2d) mode() (training bool, momentum float64) {
	training, momentum = l.Training() || l.RunningMean == nil, l.Momentum
	if c := l.NumBatchesTracked; training && l.CumulativeAverage && c != nil &&
		!c.Released() && c.DType() == vram.Int64 && c.NumElements() == 1 {
		momentum = 1 / float64(c.Int64s()[0]+1)
	}
	return training, momentum
}

// KeepsFloat32 marks BatchNorm2d as a [Float32Layer].
func (*BatchNorm2d) KeepsFloat32() {}

// ToDType converts the parameters to float32 when dt is a 16-bit type and
// to dt otherwise (dt must be a floating-point type): BatchNorm2d is a
// [Float32Layer].
func (l *BatchNorm2d) ToDType(dt vram.DType) { ConvertDType(l, dt) }

// Half keeps BatchNorm2d float32 (see [BatchNorm2d.ToDType]).
func (l *BatchNorm2d) Half() { l.ToDType(vram.Float16) }

// BFloat16 keeps BatchNorm2d float32 (see [BatchNorm2d.ToDType]).
func (l *BatchNorm2d) BFloat16() { l.ToDType(vram.BFloat16) }

// Float converts BatchNorm2d's parameters to float32.
func (l *BatchNorm2d) Float() { l.ToDType(vram.Float32) }

// BatchNorm1d normalizes each channel of its input [N, C] or [N, C, L]
// over the batch and the length (torch.nn.BatchNorm1d): a [BatchNorm2d]
// of the input seen as [N, C, L, 1], with its fields, modes, options and
// state-dict names.
type BatchNorm1d struct {
	BatchNorm2d
}

// NewBatchNorm1d returns a BatchNorm1d over c channels with PyTorch's
// defaults, as [NewBatchNorm2d] does.
func NewBatchNorm1d(c int, opts ...vram.Option) *BatchNorm1d {
	return NewBatchNorm1dOptions(c, BatchNormOptions{}, opts...)
}

// NewBatchNorm1dOptions returns a BatchNorm1d over c channels with the
// settings o, as [NewBatchNorm2dOptions] does.
func NewBatchNorm1dOptions(c int, o BatchNormOptions, opts ...vram.Option) *BatchNorm1d {
	l := &BatchNorm1d{}
	l.init("batch_norm1d", c, o, opts)
	return l
}

// Forward returns the normalized x [N, C] or [N, C, L], of x's shape and
// dtype. In training mode it updates the running statistics and counts
// the batch. Other shapes panic with an *vram.Error of kind
// vram.ErrShape.
func (l *BatchNorm1d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "batch_norm1d", "BatchNorm1d")
	x4 := l.as4D(x)
	defer x4.Release()
	y := l.BatchNorm2d.Forward(x4)
	defer y.Release()
	return y.Reshape(x.Shape()...)
}

// ForwardReLU returns relu(l.Forward(x) + residual), or relu(l.Forward(x))
// when residual is nil, as [BatchNorm2d.ForwardReLU] does; residual has
// x's shape. Another shape panics with an *vram.Error of kind
// vram.ErrShape, before the running statistics change.
func (l *BatchNorm1d) ForwardReLU(x, residual *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "batch_norm1d", "BatchNorm1d")
	const op = "batch_norm1d"
	x4 := l.as4D(x)
	defer x4.Release()
	var r4 *vram.Tensor
	if residual != nil {
		// Checked here: reshaped to x's [N, C, L, 1], a residual of
		// another shape with as many elements would pass.
		if !slices.Equal(residual.Shape(), x.Shape()) {
			panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("the residual must have the input's shape %v, got %v", x.Shape(), residual.Shape())})
		}
		r4 = residual.Reshape(x4.Shape()...)
		defer r4.Release()
	}
	y := l.BatchNorm2d.ForwardReLU(x4, r4)
	defer y.Release()
	return y.Reshape(x.Shape()...)
}

// as4D returns x [N, C] or [N, C, L] as [N, C, L, 1]. It panics with
// the errors of x's own shape that BatchNorm2d would report of the
// reshaped one.
func (l *BatchNorm1d) as4D(x *vram.Tensor) *vram.Tensor {
	const op = "batch_norm1d"
	notNil(op, x)
	s := x.Shape()
	if len(s) != 2 && len(s) != 3 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("input must be [N, C] or [N, C, L], got shape %v", s)})
	}
	length := 1
	if len(s) == 3 {
		length = s[2]
	}
	if (l.Training() || l.RunningMean == nil) && s[0]*length == 1 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expected more than 1 value per channel when training, got input %v", s)})
	}
	return x.Reshape(s[0], s[1], length, 1)
}

// GroupNorm normalizes its input [N, C, *] over groups of C/NumGroups
// channels: each group of each sample over its channels and every
// remaining dimension, to zero mean and unit variance (population
// variance plus Eps), then scales and shifts each channel by Weight and
// Bias (torch.nn.GroupNorm). Unlike [BatchNorm2d] it keeps no statistics
// and does the same in training and evaluation mode. One group is a
// LayerNorm over [C, *] with per-channel parameters; C groups are an
// instance norm.
//
// It is a [Float32Layer]: a 16-bit input is normalized in float32 and
// returned in its own dtype, or in float32 inside an Autocast region.
type GroupNorm struct {
	Base
	NumGroups, NumChannels int
	// Eps is added to the variance (PyTorch uses 1e-5).
	Eps float64
	// Weight (ones at first) and Bias (zeros) are [C], or both nil for a
	// layer made by NewGroupNormNoAffine.
	Weight, Bias *vram.Tensor
}

// NewGroupNorm returns a GroupNorm of channels channels in groups groups,
// with eps added to the variance, weight ones and bias zeros. opts go to
// vram's factory functions. It panics with an *vram.Error of kind
// vram.ErrArgument unless groups and channels are positive and groups
// divides channels, and for an eps that is negative, infinite or NaN.
func NewGroupNorm(groups, channels int, eps float64, opts ...vram.Option) *GroupNorm {
	l := NewGroupNormNoAffine(groups, channels, eps)
	l.Weight = fullParam(vram.Shape{channels}, 1, opts)
	l.Bias = fullParam(vram.Shape{channels}, 0, opts)
	l.RegisterParameterField("weight", &l.Weight)
	l.RegisterParameterField("bias", &l.Bias)
	return l
}

// NewGroupNormNoAffine returns a GroupNorm without weight and bias
// (affine=False): it only normalizes. It panics as [NewGroupNorm] does.
func NewGroupNormNoAffine(groups, channels int, eps float64) *GroupNorm {
	if groups < 1 || channels < 1 || channels%groups != 0 {
		panic(&vram.Error{Op: "group_norm", Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("groups %d must be positive and divide the %d channels", groups, channels)})
	}
	checkEps("group_norm", eps)
	return &GroupNorm{NumGroups: groups, NumChannels: channels, Eps: eps}
}

// check panics, naming op, with an *vram.Error of kind vram.ErrArgument
// unless NumGroups is positive and divides NumChannels and Weight and Bias
// are both set or both nil and Eps is finite and not negative, and of
// kind vram.ErrShape unless Weight and Bias are [NumChannels]: the checks
// of [NewGroupNorm], for fields set since.
func (l *GroupNorm) check(op string) {
	bad := func(kind error, format string, args ...any) {
		panic(&vram.Error{Op: op, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	if l.NumGroups < 1 || l.NumChannels%l.NumGroups != 0 {
		bad(vram.ErrArgument, "groups %d must be positive and divide the %d channels", l.NumGroups, l.NumChannels)
	}
	checkEps(op, l.Eps)
	if (l.Weight == nil) != (l.Bias == nil) {
		bad(vram.ErrArgument, "weight and bias must both be set or both be nil, got weight %v and bias %v", l.Weight != nil, l.Bias != nil)
	}
	for _, p := range []struct {
		name string
		t    *vram.Tensor
	}{{"weight", l.Weight}, {"bias", l.Bias}} {
		if p.t != nil && !slices.Equal(p.t.Shape(), vram.Shape{l.NumChannels}) {
			bad(vram.ErrShape, "%s must be [%d], got shape %v", p.name, l.NumChannels, p.t.Shape())
		}
	}
}

// Forward returns the normalized x [N, C, *], of x's shape and dtype
// (float32 for a 16-bit x inside an Autocast region, as PyTorch's autocast
// runs group_norm in float32). It panics with an *vram.Error of kind vram.ErrShape unless x has at least
// two dimensions and NumChannels channels, and as [NewGroupNorm] does for
// fields set since to what it refuses (NumGroups that do not divide
// NumChannels, a negative or NaN Eps), or to a Weight or Bias that is not
// [NumChannels].
func (l *GroupNorm) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "group_norm", "GroupNorm")
	const op = "group_norm"
	notNil(op, x)
	shape := x.Shape()
	if len(shape) < 2 || shape[1] != l.NumChannels {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape,
			Detail: fmt.Sprintf("input must be [N, %d, *], got shape %v", l.NumChannels, shape)})
	}
	l.check(op)
	n, g := shape[0], l.NumGroups
	per := 1
	for _, d := range shape[1:] {
		per *= d
	}
	per /= g
	// 16-bit inputs are normalized in float32 and rounded once at the end.
	xw := x
	if dt := x.DType(); dt == vram.Float16 || dt == vram.BFloat16 {
		xw = x.Cast(vram.Float32)
		defer xw.Release()
	}
	// One group of one sample is a row: a LayerNorm over the rows.
	xg := xw.Reshape(n, g, per)
	defer xg.Release()
	yg := vram.LayerNorm(xg, []int{per}, nil, nil, l.Eps)
	defer yg.Release()
	y := yg.Reshape(shape...)
	if l.Weight != nil {
		defer y.Release()
		bshape := make(vram.Shape, len(shape))
		for i := range bshape {
			bshape[i] = 1
		}
		bshape[1] = l.NumChannels
		mw, mb, done := l.maskedParams(l.Weight, l.Bias)
		defer done()
		w := mw.Reshape(bshape...)
		defer w.Release()
		b := mb.Reshape(bshape...)
		defer b.Release()
		yw := y.Mul(w)
		defer yw.Release()
		y = yw.Add(b)
	}
	dt := autocastFloat32(x.DType())
	if y.DType() == dt {
		return y
	}
	defer y.Release()
	return y.Cast(dt)
}

// KeepsFloat32 marks GroupNorm as a [Float32Layer].
func (*GroupNorm) KeepsFloat32() {}

// ToDType converts the weight and bias to float32 when dt is a 16-bit type
// and to dt otherwise (dt must be a floating-point type): GroupNorm is a
// [Float32Layer].
func (l *GroupNorm) ToDType(dt vram.DType) { ConvertDType(l, dt) }

// Half keeps GroupNorm float32 (see [GroupNorm.ToDType]).
func (l *GroupNorm) Half() { l.ToDType(vram.Float16) }

// BFloat16 keeps GroupNorm float32 (see [GroupNorm.ToDType]).
func (l *GroupNorm) BFloat16() { l.ToDType(vram.BFloat16) }

// Float converts GroupNorm's parameters to float32.
func (l *GroupNorm) Float() { l.ToDType(vram.Float32) }

// normDType returns the float dtype of a normalization layer made with
// opts: float64 when they ask for it, else float32 (the layers keep
// float32 statistics under 16-bit types, as PyTorch's do).
func normDType(opts []vram.Option) vram.DType {
	dt := vram.Float32
	vram.Region(ParametersRegion, func() {
		probe := vram.Empty(vram.Shape{0}, opts...)
		if probe.DType() == vram.Float64 {
			dt = vram.Float64
		}
		probe.Release()
	})
	return dt
}
