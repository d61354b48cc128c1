package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// InstanceNorm normalizes each channel of each sample over its spatial
// dimensions (torch.nn.InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
// made by [NewInstanceNorm1d], [NewInstanceNorm2d] and
// [NewInstanceNorm3d]), then applies a per-channel affine map if it has
// one. With running statistics it updates them in training mode from the
// batch's per-instance statistics (the variance unbiased, as PyTorch's)
// and normalizes with them in evaluation mode; without, it normalizes
// with the instance's statistics in both modes.
//
// It is a [Float32Layer]: a 16-bit input is normalized in float32 and
// returned in its own dtype, or in float32 inside an Autocast region.
type InstanceNorm struct {
	Base
	// NumFeatures is the number of channels C.
	NumFeatures int
	// Spatial is the number of spatial dimensions: 1, 2 or 3.
	Spatial int
	// Weight (ones at first) and Bias (zeros) are [C], or both nil
	// without InstanceNormOptions.Affine.
	Weight, Bias *vram.Tensor
	// RunningMean (zeros), RunningVar (ones) and NumBatchesTracked are the
	// buffers "running_mean", "running_var" and "num_batches_tracked", or
	// nil without InstanceNormOptions.TrackRunningStats. As in PyTorch,
	// whose instance norm never counts its batches, NumBatchesTracked
	// stays as made or loaded: it is kept for state dicts. They are
	// registered by field ([Base.RegisterBufferField]): a tensor assigned
	// to one is the buffer the state dict, To and Forward use.
	RunningMean, RunningVar, NumBatchesTracked *vram.Tensor
	// Momentum weighs each batch in the running statistics (0.1); 0
	// leaves them unchanged, as PyTorch's momentum=0 and momentum=None
	// do (its instance norm takes None as 0, not as a cumulative
	// average).
	Momentum float64
	// Eps is added to the variance (1e-5).
	Eps float64
}

// InstanceNormOptions are the settings of the InstanceNorm constructors.
// The zero value is PyTorch's default: eps 1e-5, momentum 0.1, no affine
// map and no running statistics.
type InstanceNormOptions struct {
	// Eps is added to the variance; 0 means 1e-5. It must not be negative.
	Eps float64
	// Momentum weighs each batch in the running statistics, in [0, 1]; 0
	// means 0.1 unless ZeroMomentum is set.
	Momentum float64
	// ZeroMomentum makes the momentum 0: running statistics that never
	// change in training, as PyTorch's momentum=0 or momentum=None give
	// an instance norm. Momentum must then be 0.
	ZeroMomentum bool
	// Affine adds a weight and a bias per channel (affine=True).
	Affine bool
	// TrackRunningStats keeps running statistics, used in evaluation
	// mode (track_running_stats=True).
	TrackRunningStats bool
}

// NewInstanceNorm1d returns an InstanceNorm of inputs [N, C, L] or [C, L]
// with c channels (torch.nn.InstanceNorm1d). opts (device, dtype) go to
// vram's factory functions; a dtype other than float64 gives float32
// tensors, as the layer stays float32. It panics with an *vram.Error of
// kind vram.ErrArgument unless c is positive, Eps is finite and not
// negative, Momentum is in [0, 1] and, with ZeroMomentum, 0.
func NewInstanceNorm1d(c int, o InstanceNormOptions, opts ...vram.Option) *InstanceNorm {
	return newInstanceNorm(1, c, o, opts)
}

// NewInstanceNorm2d returns an InstanceNorm of inputs [N, C, H, W] or
// [C, H, W] (torch.nn.InstanceNorm2d), as [NewInstanceNorm1d] does.
func NewInstanceNorm2d(c int, o InstanceNormOptions, opts ...vram.Option) *InstanceNorm {
	return newInstanceNorm(2, c, o, opts)
}

// NewInstanceNorm3d returns an InstanceNorm of inputs [N, C, D, H, W] or
// [C, D, H, W] (torch.nn.InstanceNorm3d), as [NewInstanceNorm1d] does.
func NewInstanceNorm3d(c int, o InstanceNormOptions, opts ...vram.Option) *InstanceNorm {
	return newInstanceNorm(3, c, o, opts)
}

func newInstanceNorm(spatial, c int, o InstanceNormOptions, opts []vram.Option) *InstanceNorm {
	l := &InstanceNorm{NumFeatures: c, Spatial: spatial, Momentum: o.Momentum, Eps: o.Eps}
	op := l.op()
	switch {
	case c < 1:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("channels must be positive, got %d", c)})
	case !(o.Eps >= 0) || math.IsInf(o.Eps, 1):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("eps %v must be finite and not negative", o.Eps)})
	case !(o.Momentum >= 0 && o.Momentum <= 1):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("momentum %v must be in [0, 1]", o.Momentum)})
	case o.ZeroMomentum && o.Momentum != 0:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("momentum %v given with ZeroMomentum", o.Momentum)})
	}
	if l.Momentum == 0 && !o.ZeroMomentum {
		l.Momentum = 0.1
	}
	if l.Eps == 0 {
		l.Eps = 1e-5
	}
	dt := normDType(opts)
	popts := append(slices.Clone(opts), dt)
	if o.Affine {
		l.Weight = fullParam(vram.Shape{c}, 1, popts)
		l.Bias = fullParam(vram.Shape{c}, 0, popts)
		l.RegisterParameterField("weight", &l.Weight)
		l.RegisterParameterField("bias", &l.Bias)
	}
	if o.TrackRunningStats {
		vram.Region(ParametersRegion, func() {
			l.RunningMean = vram.Keep(vram.Zeros(vram.Shape{c}, popts...))
			l.RunningVar = vram.Keep(vram.Ones(vram.Shape{c}, popts...))
			l.NumBatchesTracked = vram.Keep(vram.Zeros(vram.Shape{}, append(slices.Clone(opts), vram.Int64)...))
		})
		l.RegisterBufferField("running_mean", &l.RunningMean)
		l.RegisterBufferField("running_var", &l.RunningVar)
		l.RegisterBufferField("num_batches_tracked", &l.NumBatchesTracked)
	}
	return l
}

// op returns PyTorch's name of l's function, "instance_norm" for a
// Spatial that no constructor makes.
func (l *InstanceNorm) op() string {
	if l.Spatial < 1 || l.Spatial > 3 {
		return "instance_norm"
	}
	return fmt.Sprintf("instance_norm%dd", l.Spatial)
}

// check panics, naming op, with an *vram.Error for fields set since
// construction to what Forward cannot use, so that Forward refuses them
// before it updates the running statistics: of kind vram.ErrArgument for
// a Spatial other than 1, 2 or 3, a NumFeatures that is not positive, an
// Eps or Momentum the constructors refuse, and a Weight without a Bias
// (or the reverse) or a RunningMean without a RunningVar; of kind
// vram.ErrShape for a weight, bias or running statistic that is not
// [NumFeatures]; of kind vram.ErrDType for one that is not floating-point;
// and of kind vram.ErrReleased for one released.
func (l *InstanceNorm) check(op string) {
	bad := func(kind error, format string, args ...any) {
		panic(&vram.Error{Op: op, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	switch {
	case l.Spatial < 1 || l.Spatial > 3:
		bad(vram.ErrArgument, "Spatial %d must be 1, 2 or 3", l.Spatial)
	case l.NumFeatures < 1:
		bad(vram.ErrArgument, "NumFeatures %d must be positive", l.NumFeatures)
	case !(l.Momentum >= 0 && l.Momentum <= 1):
		bad(vram.ErrArgument, "momentum %v must be in [0, 1]", l.Momentum)
	case (l.Weight == nil) != (l.Bias == nil):
		bad(vram.ErrArgument, "weight and bias must both be set or both be nil, got weight %v and bias %v", l.Weight != nil, l.Bias != nil)
	case (l.RunningMean == nil) != (l.RunningVar == nil):
		bad(vram.ErrArgument, "running_mean and running_var must both be set or both be nil, got running_mean %v and running_var %v",
			l.RunningMean != nil, l.RunningVar != nil)
	}
	checkEps(op, l.Eps)
	for _, p := range []struct {
		name string
		t    *vram.Tensor
	}{{"weight", l.Weight}, {"bias", l.Bias}, {"running_mean", l.RunningMean}, {"running_var", l.RunningVar}} {
		switch {
		case p.t == nil:
		case p.t.Released():
			bad(vram.ErrReleased, "%s was released", p.name)
		case !slices.Equal(p.t.Shape(), vram.Shape{l.NumFeatures}):
			bad(vram.ErrShape, "%s must be [%d], got shape %v", p.name, l.NumFeatures, p.t.Shape())
		case !p.t.DType().IsFloat():
			bad(vram.ErrDType, "%s must be floating-point, got %s", p.name, p.t.DType())
		}
	}
}

// optionalState names the buffer that [Load] lets a file lack, as for
// batch norm.
func (l *InstanceNorm) optionalState() []string {
	if l.NumBatchesTracked == nil {
		return nil
	}
	return []string{"num_batches_tracked"}
}

// Forward returns the normalized x, of x's shape and dtype. In training
// mode a layer with running statistics updates them, except in the
// recompute of a checkpoint ([vram.Recomputing]). It panics with an
// *vram.Error of kind vram.ErrShape unless x has Spatial + 1 or
// Spatial + 2 dimensions, and, for a layer with an affine map or running
// statistics, NumFeatures channels, and when it normalizes with the
// instance's statistics unless there is more than one spatial element,
// as PyTorch requires; with a *vram.DeviceMismatchError, changing
// nothing, for an x on another device than the layer's tensors; and,
// changing nothing, for fields changed since construction into what
// Forward cannot use: of kind vram.ErrArgument for an Eps, Momentum,
// Spatial or NumFeatures the constructors refuse, a Weight without a Bias
// or a RunningMean without a RunningVar (or the reverse), of kind
// vram.ErrShape for a Weight, Bias, RunningMean or RunningVar that is not
// [NumFeatures], of kind vram.ErrDType for one that is not floating-point
// and of kind vram.ErrReleased for one released. A batch of no samples
// leaves the running statistics as they are.
func (l *InstanceNorm) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "instance_norm", "InstanceNorm")
	op := l.op()
	defer asOp(op)
	notNil(op, x)
	l.check(op)
	sameDevice(op, x, l.Weight, l.Bias, l.RunningMean, l.RunningVar, l.NumBatchesTracked)
	if d := x.Dim(); d == l.Spatial+1 {
		u := x.Unsqueeze(0)
		defer u.Release()
		y := l.Forward(u)
		defer y.Release()
		return y.Squeeze(0)
	} else if d != l.Spatial+2 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects %d-D or %d-D input, got shape %v", l.Spatial+1, l.Spatial+2, x.Shape())})
	}
	shape := x.Shape()
	n, c := shape[0], shape[1]
	if (l.Weight != nil || l.RunningMean != nil) && c != l.NumFeatures {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects %d channels, got input of shape %v", l.NumFeatures, shape)})
	}
	per := 1
	for _, s := range shape[2:] {
		per *= s
	}
	var ts temps
	defer ts.release()
	xw := x
	if dt := x.DType(); dt == vram.Float16 || dt == vram.BFloat16 {
		xw = ts.add(x.Cast(vram.Float32))
	}
	rows := ts.add(xw.Reshape(n*c, per))
	bshape := slices.Repeat([]int{1}, len(shape))
	bshape[1] = c
	var y *vram.Tensor
	if l.RunningMean != nil && !l.Training() {
		rm := ts.add(ts.add(l.RunningMean.Cast(xw.DType())).Reshape(bshape...))
		rv := ts.add(ts.add(l.RunningVar.Cast(xw.DType())).Reshape(bshape...))
		inv := ts.add(ts.add(rv.AddScalar(l.Eps)).Rsqrt())
		y = ts.add(ts.add(xw.Sub(rm)).Mul(inv))
	} else {
		if per < 2 {
			panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects more than 1 spatial element to normalize with the instance's statistics, got input of shape %v", shape)})
		}
		// An empty batch has no statistics to average in: the running
		// ones stay as they are, as a batch norm's do.
		if l.RunningMean != nil && n > 0 && !vram.Recomputing() {
			l.track(rows, n, c)
		}
		y = ts.add(ts.add(vram.LayerNorm(rows, []int{per}, nil, nil, l.Eps)).Reshape(shape...))
	}
	if l.Weight != nil {
		mw, mb, done := l.maskedParams(l.Weight, l.Bias)
		defer done()
		w := ts.add(mw.Reshape(bshape...))
		b := ts.add(mb.Reshape(bshape...))
		y = ts.add(ts.add(y.Mul(w)).Add(b))
	}
	if dt := autocastFloat32(x.DType()); y.DType() != dt {
		return y.Cast(dt)
	}
	return ts.keep(y)
}

// track updates the running statistics from rows [N·C, per]: the mean
// over the batch of each instance's mean and unbiased variance, weighed
// by Momentum. It leaves NumBatchesTracked alone, as PyTorch does.
func (l *InstanceNorm) track(rows *vram.Tensor, n, c int) {
	vram.NoGrad(func() {
		var ts temps
		defer ts.release()
		mean := ts.add(ts.add(ts.add(rows.Mean(1)).Reshape(n, c)).Mean(0))
		vr := ts.add(ts.add(ts.add(rows.Var([]int{1}, 1, false)).Reshape(n, c)).Mean(0))
		m := l.Momentum
		upd := func(run, batch *vram.Tensor) {
			b := ts.add(batch.Cast(run.DType()))
			run.MulScalarInPlace(1 - m)
			run.AddScaledInPlace(b, m)
		}
		upd(l.RunningMean, mean)
		upd(l.RunningVar, vr)
	})
}

// KeepsFloat32 marks InstanceNorm as a [Float32Layer].
func (*InstanceNorm) KeepsFloat32() {}

// ToDType converts the layer's parameters to dt, or to float32 for a
// 16-bit dt, as [ConvertDType] does.
func (l *InstanceNorm) ToDType(dt vram.DType) { ConvertDType(l, dt) }

// Half keeps the layer float32; see [InstanceNorm.ToDType].
func (l *InstanceNorm) Half() { l.ToDType(vram.Float16) }

// BFloat16 keeps the layer float32; see [InstanceNorm.ToDType].
func (l *InstanceNorm) BFloat16() { l.ToDType(vram.BFloat16) }

// Float converts the layer to float32.
func (l *InstanceNorm) Float() { l.ToDType(vram.Float32) }
