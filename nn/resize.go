package nn

import (
	"fmt"

	"github.com/vramgo/vram"
)

// Pad pads the last dimensions of its input with [vram.Pad]: the layers
// torch.nn.ZeroPad2d, ConstantPad1d/2d, ReflectionPad1d/2d and
// ReplicationPad1d/2d, made by the constructors of those names. Padding
// holds pairs (before, after), last dimension first, as [vram.Pad] takes
// them; negative sizes crop.
type Pad struct {
	Base
	Padding []int
	Mode    vram.PadMode
	Value   float64 // the fill of [vram.PadConstant]
}

// padding expands the sizes a padding layer of dims dimensions was given,
// one for every side or one per side (left, right, top, bottom), into
// Pad's pairs, panicking with [vram.ErrArgument] for another count.
func padding(op string, dims int, p []int) []int {
	switch len(p) {
	case 1:
		out := make([]int, 2*dims)
		for i := range out {
			out[i] = p[0]
		}
		return out
	case 2 * dims:
		return append([]int(nil), p...)
	}
	panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
		Detail: fmt.Sprintf("padding takes one size for every side or %d sizes, got %v", 2*dims, p)})
}

// NewZeroPad2d returns a layer padding the last two dimensions with zeros
// (torch.nn.ZeroPad2d): padding is one size for every side or four, (left,
// right, top, bottom). It panics with [vram.ErrArgument] for another count.
func NewZeroPad2d(p ...int) *Pad { return NewConstantPad2d(0, p...) }

// NewConstantPad1d returns a layer padding the last dimension with value
// (torch.nn.ConstantPad1d): padding is one size for both sides or two,
// (left, right). It panics with [vram.ErrArgument] for another count.
func NewConstantPad1d(value float64, p ...int) *Pad {
	return &Pad{Padding: padding("constant_pad1d", 1, p), Mode: vram.PadConstant, Value: value}
}

// NewConstantPad2d returns a layer padding the last two dimensions with
// value (torch.nn.ConstantPad2d): padding is one size for every side or
// four, (left, right, top, bottom). It panics with [vram.ErrArgument] for
// another count.
func NewConstantPad2d(value float64, p ...int) *Pad {
	return &Pad{Padding: padding("constant_pad2d", 2, p), Mode: vram.PadConstant, Value: value}
}

// NewReflectionPad1d returns a layer mirroring the last dimension of a
// [N, C, W] or [C, W] input at its edges (torch.nn.ReflectionPad1d):
// padding is one size for both sides or two, each smaller than W. It
// panics with [vram.ErrArgument] for another count.
func NewReflectionPad1d(p ...int) *Pad {
	return &Pad{Padding: padding("reflection_pad1d", 1, p), Mode: vram.PadReflect}
}

// NewReflectionPad2d returns a layer mirroring the last two dimensions of
// a [N, C, H, W] or [C, H, W] input (torch.nn.ReflectionPad2d): padding is
// one size for every side or four, (left, right, top, bottom). It panics
// with [vram.ErrArgument] for another count.
func NewReflectionPad2d(p ...int) *Pad {
	return &Pad{Padding: padding("reflection_pad2d", 2, p), Mode: vram.PadReflect}
}

// NewReplicationPad1d returns a layer repeating the edge entries of the
// last dimension of a [N, C, W] or [C, W] input
// (torch.nn.ReplicationPad1d). It panics with [vram.ErrArgument] for a
// count of sizes other than one or two.
func NewReplicationPad1d(p ...int) *Pad {
	return &Pad{Padding: padding("replication_pad1d", 1, p), Mode: vram.PadReplicate}
}

// NewReplicationPad2d returns a layer repeating the edge entries of the
// last two dimensions of a [N, C, H, W] or [C, H, W] input
// (torch.nn.ReplicationPad2d). It panics with [vram.ErrArgument] for a
// count of sizes other than one or four.
func NewReplicationPad2d(p ...int) *Pad {
	return &Pad{Padding: padding("replication_pad2d", 2, p), Mode: vram.PadReplicate}
}

// NewZeroPad1d returns a layer padding the last dimension with zeros
// (torch.nn.ZeroPad1d): one size for both sides or two. It panics with
// [vram.ErrArgument] for another count.
func NewZeroPad1d(p ...int) *Pad { return NewConstantPad1d(0, p...) }

// NewZeroPad3d returns a layer padding the last three dimensions with
// zeros (torch.nn.ZeroPad3d): one size for every side or six, (left,
// right, top, bottom, front, back). It panics with [vram.ErrArgument] for
// another count.
func NewZeroPad3d(p ...int) *Pad { return NewConstantPad3d(0, p...) }

// NewConstantPad3d returns a layer padding the last three dimensions with
// value (torch.nn.ConstantPad3d): one size for every side or six. It
// panics with [vram.ErrArgument] for another count.
func NewConstantPad3d(value float64, p ...int) *Pad {
	return &Pad{Padding: padding("constant_pad3d", 3, p), Mode: vram.PadConstant, Value: value}
}

// NewReflectionPad3d returns a layer mirroring the last three dimensions
// of a [N, C, D, H, W] or [C, D, H, W] input (torch.nn.ReflectionPad3d):
// one size for every side or six. It panics with [vram.ErrArgument] for
// another count.
func NewReflectionPad3d(p ...int) *Pad {
	return &Pad{Padding: padding("reflection_pad3d", 3, p), Mode: vram.PadReflect}
}

// NewReplicationPad3d returns a layer repeating the edge entries of the
// last three dimensions of a [N, C, D, H, W] or [C, D, H, W] input
// (torch.nn.ReplicationPad3d): one size for every side or six. It panics
// with [vram.ErrArgument] for another count.
func NewReplicationPad3d(p ...int) *Pad {
	return &Pad{Padding: padding("replication_pad3d", 3, p), Mode: vram.PadReplicate}
}

// NewCircularPad1d returns a layer padding the last dimension of a
// [N, C, W] or [C, W] input by wrapping around (torch.nn.CircularPad1d):
// one size for both sides or two. It panics with [vram.ErrArgument] for
// another count.
func NewCircularPad1d(p ...int) *Pad {
	return &Pad{Padding: padding("circular_pad1d", 1, p), Mode: vram.PadCircular}
}

// NewCircularPad2d returns a layer padding the last two dimensions of a
// [N, C, H, W] or [C, H, W] input by wrapping around
// (torch.nn.CircularPad2d): one size for every side or four. It panics
// with [vram.ErrArgument] for another count.
func NewCircularPad2d(p ...int) *Pad {
	return &Pad{Padding: padding("circular_pad2d", 2, p), Mode: vram.PadCircular}
}

// NewCircularPad3d returns a layer padding the last three dimensions of a
// [N, C, D, H, W] or [C, D, H, W] input by wrapping around
// (torch.nn.CircularPad3d): one size for every side or six. It panics with
// [vram.ErrArgument] for another count.
func NewCircularPad3d(p ...int) *Pad {
	return &Pad{Padding: padding("circular_pad3d", 3, p), Mode: vram.PadCircular}
}

// Forward returns vram.Pad(x, Padding, Mode, Value).
func (l *Pad) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "pad", "Pad")
	return vram.Pad(x, l.Padding, l.Mode, l.Value)
}

// Upsample resizes the spatial dimensions of its input with
// [vram.Interpolate] (torch.nn.Upsample). [NewUpsamplingNearest2d] and
// [NewUpsamplingBilinear2d] make PyTorch's fixed-mode forms.
type Upsample struct {
	Base
	Options vram.InterpolateOptions
}

// NewUpsample returns an Upsample with the given size or scale factor,
// mode and corner alignment.
func NewUpsample(o vram.InterpolateOptions) *Upsample { return &Upsample{Options: o} }

// NewUpsamplingNearest2d returns an Upsample of [N, C, H, W] inputs by
// nearest neighbours (torch.nn.UpsamplingNearest2d) to size or by
// scaleFactor, one of which is nil.
func NewUpsamplingNearest2d(size []int, scaleFactor []float64) *Upsample {
	return &Upsample{Options: vram.InterpolateOptions{Size: size, ScaleFactor: scaleFactor, Mode: vram.InterpNearest}}
}

// NewUpsamplingBilinear2d returns an Upsample of [N, C, H, W] inputs by
// bilinear interpolation with aligned corners, as
// torch.nn.UpsamplingBilinear2d does, to size or by scaleFactor, one of
// which is nil.
func NewUpsamplingBilinear2d(size []int, scaleFactor []float64) *Upsample {
	return &Upsample{Options: vram.InterpolateOptions{Size: size, ScaleFactor: scaleFactor, Mode: vram.InterpBilinear, AlignCorners: true}}
}

// Forward returns vram.Interpolate(x, Options).
func (l *Upsample) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "upsample", "Upsample")
	return vram.Interpolate(x, l.Options)
}

// PixelShuffle trades channels for resolution (torch.nn.PixelShuffle):
// [*, C·r², H, W] becomes [*, C, H·r, W·r] with [vram.PixelShuffle].
type PixelShuffle struct {
	Base
	UpscaleFactor int // r
}

// NewPixelShuffle returns a PixelShuffle with upscale factor r.
func NewPixelShuffle(r int) *PixelShuffle { return &PixelShuffle{UpscaleFactor: r} }

// Forward returns vram.PixelShuffle(x, UpscaleFactor).
func (l *PixelShuffle) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "pixel_shuffle", "PixelShuffle")
	return vram.PixelShuffle(x, l.UpscaleFactor)
}

// PixelUnshuffle is the inverse of [PixelShuffle]
// (torch.nn.PixelUnshuffle): [*, C, H·r, W·r] becomes [*, C·r², H, W].
type PixelUnshuffle struct {
	Base
	DownscaleFactor int // r
}

// NewPixelUnshuffle returns a PixelUnshuffle with downscale factor r.
func NewPixelUnshuffle(r int) *PixelUnshuffle { return &PixelUnshuffle{DownscaleFactor: r} }

// Forward returns vram.PixelUnshuffle(x, DownscaleFactor).
func (l *PixelUnshuffle) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "pixel_unshuffle", "PixelUnshuffle")
	return vram.PixelUnshuffle(x, l.DownscaleFactor)
}

// Unfold extracts sliding blocks of its input as columns
// (torch.nn.Unfold): [N, C, H, W] becomes [N, C·KH·KW, L] with
// [vram.Unfold].
type Unfold struct {
	Base
	KernelSize [2]int
	Params     vram.FoldParams
}

// NewUnfold returns an Unfold of kernel kh×kw with dilation, padding and
// stride p.
func NewUnfold(kernel [2]int, p vram.FoldParams) *Unfold {
	return &Unfold{KernelSize: kernel, Params: p}
}

// Forward returns vram.Unfold(x, KernelSize, Params).
func (l *Unfold) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "unfold", "Unfold")
	return vram.Unfold(x, l.KernelSize, l.Params)
}

// Fold adds columns of sliding blocks back into an image (torch.nn.Fold):
// [N, C·KH·KW, L] becomes [N, C, OutputSize[0], OutputSize[1]] with
// [vram.Fold].
type Fold struct {
	Base
	OutputSize, KernelSize [2]int
	Params                 vram.FoldParams
}

// NewFold returns a Fold into images of outputSize with kernel kh×kw and
// dilation, padding and stride p.
func NewFold(outputSize, kernel [2]int, p vram.FoldParams) *Fold {
	return &Fold{OutputSize: outputSize, KernelSize: kernel, Params: p}
}

// Forward returns vram.Fold(x, OutputSize, KernelSize, Params).
func (l *Fold) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "fold", "Fold")
	return vram.Fold(x, l.OutputSize, l.KernelSize, l.Params)
}
