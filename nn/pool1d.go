package nn

import (
	"fmt"
	"slices"

	"github.com/vramgo/vram"
)

// This file holds the pools of sequences [N, C, L] (or [C, L]): each runs
// vram's 2-D pool on the input seen as [N, C, 1, L].

// pool1d returns f of x [N, C, L] or [C, L] seen with a height of one, of
// the shape [N, C, OL] or [C, OL]. It panics with an *vram.Error of kind
// vram.ErrShape naming op for an input of another number of dimensions,
// and names op in the errors of f too.
func pool1d(op string, x *vram.Tensor, f func(x *vram.Tensor) *vram.Tensor) *vram.Tensor {
	notNil(op, x)
	if d := x.Dim(); d != 2 && d != 3 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("expects input [N, C, L] or [C, L], got %v", x.Shape())})
	}
	defer asOp(op)
	x4 := x.Unsqueeze(-2)
	defer x4.Release()
	y := f(x4)
	defer y.Release()
	return y.Squeeze(-2)
}

// pool1dParams checks and returns the 2-D parameters of height one of a
// 1-D window.
func pool1dParams(op string, kernel, stride, padding int) vram.Pool2dParams {
	p := poolParams(op, kernel, stride, padding)
	p.Kernel[0], p.Stride[0], p.Padding[0] = 1, 1, 0
	return p
}

// MaxPool1d takes the maximum of each window of a sequence
// (torch.nn.MaxPool1d) over inputs [N, C, L] or [C, L].
type MaxPool1d struct {
	Base
	// Params is the window as 2-D parameters of height one: Kernel[1],
	// Stride[1], Padding[1] and Dilation[1] are the 1-D layer's, and
	// CeilMode its ceil_mode.
	Params vram.Pool2dParams
}

// NewMaxPool1d returns a MaxPool1d layer with a window of kernel
// elements, moved by stride (0 means kernel, PyTorch's default) over the
// input padded by padding elements of −Inf at both ends. Set Params for
// dilation and ceil mode. It panics with an *vram.Error of kind
// vram.ErrArgument for a kernel below 1 or a negative stride or padding.
func NewMaxPool1d(kernel, stride, padding int) *MaxPool1d {
	return &MaxPool1d{Params: pool1dParams("max_pool1d", kernel, stride, padding)}
}

// Forward returns the pooled x, [N, C, OL] for x [N, C, L]. Errors are
// those of [vram.MaxPool2d].
func (l *MaxPool1d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "max_pool1d", "MaxPool1d")
	return pool1d("max_pool1d", x, func(x *vram.Tensor) *vram.Tensor { return vram.MaxPool2d(x, l.Params) })
}

// ForwardWithIndices returns the pooled x and the int64 position in the
// sequence of each maximum, as a MaxPool1d made with return_indices=True
// does.
func (l *MaxPool1d) ForwardWithIndices(x *vram.Tensor) (y, indices *vram.Tensor) {
	nilLayer(l == nil, "max_pool1d", "MaxPool1d")
	y = pool1d("max_pool1d", x, func(x *vram.Tensor) *vram.Tensor {
		yy, idx := vram.MaxPool2dWithIndices(x, l.Params)
		defer idx.Release()
		indices = idx.Squeeze(-2)
		return yy
	})
	return y, indices
}

// AvgPool1d takes the mean of each window of a sequence
// (torch.nn.AvgPool1d) over inputs [N, C, L] or [C, L].
type AvgPool1d struct {
	Base
	// Params is the window as 2-D parameters of height one, as
	// [MaxPool1d]'s; ExcludePad is count_include_pad=False.
	Params vram.Pool2dParams
}

// NewAvgPool1d returns an AvgPool1d layer with a window as
// [NewMaxPool1d]'s; the padding counts as zeros in the mean (PyTorch's
// default count_include_pad=True). It panics as NewMaxPool1d does.
func NewAvgPool1d(kernel, stride, padding int) *AvgPool1d {
	return &AvgPool1d{Params: pool1dParams("avg_pool1d", kernel, stride, padding)}
}

// Forward returns the pooled x, [N, C, OL] for x [N, C, L]. Errors are
// those of [vram.AvgPool2d].
func (l *AvgPool1d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "avg_pool1d", "AvgPool1d")
	return pool1d("avg_pool1d", x, func(x *vram.Tensor) *vram.Tensor { return vram.AvgPool2d(x, l.Params) })
}

// AdaptiveAvgPool1d averages a sequence down to a fixed length Out
// (torch.nn.AdaptiveAvgPool1d), with the windows of
// [vram.AdaptiveAvgPool2d].
type AdaptiveAvgPool1d struct {
	Base
	// Out is the output length.
	Out int
}

// NewAdaptiveAvgPool1d returns an AdaptiveAvgPool1d layer with output
// length out. It panics with an *vram.Error of kind vram.ErrArgument for
// an out below 1.
func NewAdaptiveAvgPool1d(out int) *AdaptiveAvgPool1d {
	if out < 1 {
		panic(&vram.Error{Op: "adaptive_avg_pool1d", Kind: vram.ErrArgument, Detail: fmt.Sprintf("output size %d must be positive", out)})
	}
	return &AdaptiveAvgPool1d{Out: out}
}

// Forward returns the pooled x, [N, C, Out] for x [N, C, L].
func (l *AdaptiveAvgPool1d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "adaptive_avg_pool1d", "AdaptiveAvgPool1d")
	return pool1d("adaptive_avg_pool1d", x, func(x *vram.Tensor) *vram.Tensor { return vram.AdaptiveAvgPool2d(x, 1, l.Out) })
}

// AdaptiveMaxPool1d takes the maximum of a sequence over Out windows
// (torch.nn.AdaptiveMaxPool1d), those of [AdaptiveAvgPool1d].
type AdaptiveMaxPool1d struct {
	Base
	// Out is the output length.
	Out int
}

// NewAdaptiveMaxPool1d returns an AdaptiveMaxPool1d layer with output
// length out. It panics with an *vram.Error of kind vram.ErrArgument for
// an out below 1.
func NewAdaptiveMaxPool1d(out int) *AdaptiveMaxPool1d {
	if out < 1 {
		panic(&vram.Error{Op: "adaptive_max_pool1d", Kind: vram.ErrArgument, Detail: fmt.Sprintf("output size %d must be positive", out)})
	}
	return &AdaptiveMaxPool1d{Out: out}
}

// Forward returns the pooled x, [N, C, Out] for x [N, C, L].
func (l *AdaptiveMaxPool1d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "adaptive_max_pool1d", "AdaptiveMaxPool1d")
	return pool1d("adaptive_max_pool1d", x, func(x *vram.Tensor) *vram.Tensor { return vram.AdaptiveMaxPool2d(x, 1, l.Out) })
}

// ForwardWithIndices returns the pooled x and the int64 position in the
// sequence of each maximum, as an AdaptiveMaxPool1d made with
// return_indices=True does ([vram.AdaptiveMaxPool2dWithIndices]).
func (l *AdaptiveMaxPool1d) ForwardWithIndices(x *vram.Tensor) (y, indices *vram.Tensor) {
	nilLayer(l == nil, "adaptive_max_pool1d", "AdaptiveMaxPool1d")
	y = pool1d("adaptive_max_pool1d", x, func(x *vram.Tensor) *vram.Tensor {
		yy, idx := vram.AdaptiveMaxPool2dWithIndices(x, 1, l.Out)
		defer idx.Release()
		indices = idx.Squeeze(-2)
		return yy
	})
	return y, indices
}

// Unflatten splits dimension Dim of its input into Sizes
// (torch.nn.Unflatten), the inverse of [Flatten]; one size may be −1, to
// be inferred.
type Unflatten struct {
	Base
	// Dim is the dimension split; a negative Dim counts from the end.
	Dim int
	// Sizes is the shape that replaces it; their product must be its
	// size.
	Sizes []int
}

// NewUnflatten returns an Unflatten of dimension dim into sizes.
func NewUnflatten(dim int, sizes ...int) *Unflatten {
	return &Unflatten{Dim: dim, Sizes: slices.Clone(sizes)}
}

// Forward returns x.Unflatten(Dim, Sizes...), a view of x. Errors are
// those of [vram.Tensor.Unflatten].
func (l *Unflatten) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "unflatten", "Unflatten")
	notNil("unflatten", x)
	return x.Unflatten(l.Dim, l.Sizes...)
}
