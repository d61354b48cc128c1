package vram

import (
	"fmt"
	"math"
	"slices"
)

// InterpolateMode is the algorithm of [Interpolate] (the mode argument of
// torch.nn.functional.interpolate). The zero value is [InterpNearest].
type InterpolateMode int

// The interpolation modes.
const (
	// InterpNearest copies the entry at floor(dst·scale): PyTorch's
	// "nearest", which shifts the image by half an input pixel.
	InterpNearest InterpolateMode = iota
	// InterpNearestExact copies the entry at floor((dst+0.5)·scale):
	// "nearest-exact", which matches scikit-image and PIL.
	InterpNearestExact
	// InterpLinear interpolates linearly along the last dimension of a
	// 3-D input [N, C, L].
	InterpLinear
	// InterpBilinear interpolates linearly along the last two dimensions
	// of a 4-D input [N, C, H, W].
	InterpBilinear
	// InterpBicubic interpolates with cubic convolution (a = -0.75, as
	// PyTorch) along the last two dimensions of a 4-D input.
	InterpBicubic
	// InterpTrilinear interpolates linearly along the last three
	// dimensions of a 5-D input [N, C, D, H, W].
	InterpTrilinear
	// InterpArea averages the input over the windows of adaptive average
	// pooling ([AdaptiveAvgPool2d] and its 1-D and 3-D forms), whatever
	// the scale factor: PyTorch's "area".
	InterpArea
)

// String returns PyTorch's name of the mode.
func (m InterpolateMode) String() string {
	switch m {
	case InterpNearest:
		return "nearest"
	case InterpNearestExact:
		return "nearest-exact"
	case InterpLinear:
		return "linear"
	case InterpBilinear:
		return "bilinear"
	case InterpBicubic:
		return "bicubic"
	case InterpTrilinear:
		return "trilinear"
	case InterpArea:
		return "area"
	}
	return fmt.Sprintf("InterpolateMode(%d)", int(m))
}

// rank returns the number of dimensions the mode needs, 0 for any of 3,
// 4 and 5.
func (m InterpolateMode) rank() int {
	switch m {
	case InterpLinear:
		return 3
	case InterpBilinear, InterpBicubic:
		return 4
	case InterpTrilinear:
		return 5
	}
	return 0
}

// InterpolateOptions are the arguments of [Interpolate] after the input.
// Exactly one of Size and ScaleFactor is set; either holds one value for
// every spatial dimension or a single value for all of them.
type InterpolateOptions struct {
	Size        []int     // the output's spatial size
	ScaleFactor []float64 // the output's size is floor(input size · factor)
	Mode        InterpolateMode
	// AlignCorners maps the centres of the corner pixels of the input and
	// the output onto each other (source = dst·(in-1)/(out-1)) instead of
	// their outer edges. It applies to the linear and cubic modes only.
	AlignCorners bool
	// RecomputeScaleFactor computes the source positions from the sizes
	// (in/out) rather than from ScaleFactor (1/factor), which differ where
	// in·factor is not a whole number. Without it, as in PyTorch by
	// default, a given ScaleFactor is used as it is.
	RecomputeScaleFactor bool
}

// Interpolate resizes the spatial dimensions of x, that is all but the
// first two of a 3-D [N, C, L], 4-D [N, C, H, W] or 5-D [N, C, D, H, W]
// input, as torch.nn.functional.interpolate does, with PyTorch's output
// sizes and source positions. The nearest modes take any dtype and any of
// the three ranks, [InterpArea] floating-point inputs of any of them, the
// others floating-point inputs of the rank their mode names. The result is new storage, channels-last when x is; it is computed one spatial dimension at
// a time from IndexSelect and products with the weights, so it runs and
// differentiates on every device. The interpolating modes compute a
// float16 or bfloat16 input in float32 and round the result once, as
// PyTorch's kernels do.
//
// It panics with [ErrArgument] when both or neither of Size and
// ScaleFactor are given, for RecomputeScaleFactor with a Size, a scale
// factor that is not positive and finite, an unknown mode, or AlignCorners
// with a nearest mode or area; with [ErrShape] for an input of the wrong
// rank, a Size or ScaleFactor whose length is neither one nor the number
// of spatial dimensions, an empty input or output (a size below 1, or a
// factor that leaves none), an output of more than 2^29 entries along a
// dimension or of more entries in all than an int counts (found before
// anything is resized); with [ErrDType] for an integer input to a mode
// other than the nearest ones. An input with an empty batch or no
// channels gives an empty result, made without the position tables of
// the resizing, however long its sides.
func Interpolate(x *Tensor, o InterpolateOptions) *Tensor {
	const op = "interpolate"
	notNil(op, x)
	defer pin(op, x).unpin()
	nd := len(x.shape)
	m := o.Mode
	if m < InterpNearest || m > InterpArea {
		fail(op, ErrArgument, "unknown interpolation mode %v", m)
	}
	if nd < 3 || nd > 5 {
		fail(op, ErrShape, "only 3D, 4D and 5D inputs are supported, got a %dD input of shape %v", nd, Shape(x.shape))
	}
	if r := m.rank(); r != 0 && r != nd {
		fail(op, ErrShape, "got %dD input, but %s mode needs %dD input", nd, m, r)
	}
	nearest := m == InterpNearest || m == InterpNearestExact
	if (nearest || m == InterpArea) && o.AlignCorners {
		fail(op, ErrArgument, "align_corners can only be set with the interpolating modes linear, bilinear, bicubic and trilinear, not %s", m)
	}
	if !nearest && !x.dtype.IsFloat() {
		fail(op, ErrDType, "%s interpolation needs a floating-point input, got %s", m, x.dtype)
	}
	sp := nd - 2
	in := x.shape[2:]
	out := make([]int, sp)
	scales := make([]float64, sp) // 0: from the sizes
	switch {
	case o.Size != nil && o.ScaleFactor != nil:
		fail(op, ErrArgument, "only one of Size and ScaleFactor should be set, got %v and %v", o.Size, o.ScaleFactor)
	case o.Size != nil && o.RecomputeScaleFactor:
		fail(op, ErrArgument, "RecomputeScaleFactor is not meaningful with an explicit Size %v", o.Size)
	case o.Size != nil:
		if len(o.Size) != 1 && len(o.Size) != sp {
			fail(op, ErrShape, "input and output must have the same number of spatial dimensions, got input %v with spatial size %v and output size %v",
				Shape(x.shape), in, o.Size)
		}
		for i := range out {
			out[i] = o.Size[min(i, len(o.Size)-1)]
		}
	case o.ScaleFactor != nil:
		if len(o.ScaleFactor) != 1 && len(o.ScaleFactor) != sp {
			fail(op, ErrShape, "ScaleFactor %v must hold one factor or one per spatial dimension of input %v", o.ScaleFactor, Shape(x.shape))
		}
		for i := range out {
			f := o.ScaleFactor[min(i, len(o.ScaleFactor)-1)]
			if !(f > 0) || math.IsInf(f, 0) {
				fail(op, ErrArgument, "scale factors must be positive and finite, got %v", o.ScaleFactor)
			}
			s := math.Floor(float64(in[i]) * f)
			if s >= maxExtent {
				fail(op, ErrShape, "scale factors %v of input %v overflow the sizes of a tensor", o.ScaleFactor, Shape(x.shape))
			}
			out[i] = int(s)
			if !o.RecomputeScaleFactor {
				scales[i] = f
			}
		}
	default:
		fail(op, ErrArgument, "either Size or ScaleFactor should be set")
	}
	for i := range out {
		if in[i] < 1 || out[i] < 1 {
			fail(op, ErrShape, "input and output sizes should be greater than 0, got input %v and output %v", in, out)
		}
		if out[i] > maxIndexEntries {
			fail(op, ErrShape, "output size %v has more than the %d entries along a dimension that the host index of the composed path allows", out, maxIndexEntries)
		}
	}
	// Refused before any side is resized: each within its bound, the
	// sides together may hold more entries than an int counts.
	shape := append([]int{x.shape[0], x.shape[1]}, out...)
	if n, _ := checkShape(op, shape, x.dtype); n == 0 {
		return composed(op, func() *Tensor { return emptyResult(x, shape) })
	}
	if m == InterpArea {
		return composed(op, func() *Tensor { return areaResize(x, out) })
	}
	return composed(op, func() *Tensor {
		y := x
		if w := opMath(x.dtype); !nearest && w != x.dtype {
			// In float32 for the 16-bit floats, rounded once at the end,
			// as PyTorch's kernels accumulate: weights, products and
			// partial sums rounded to 16 bits were off by several units.
			y = x.Cast(w)
		}
		for i := range sp {
			y = interpAxis(y, 2+i, in[i], out[i], scales[i], m, o.AlignCorners)
		}
		if y == x {
			return x.Clone()
		}
		return keepFormat(x, fromOpMath(y, x.dtype))
	})
}

// emptyResult returns a tensor of shape, which has no elements, as the
// result of an op on x: new storage, channels-last when x is, and in x's
// graph, whose gradient is zeros. It builds no position table, so a side
// of any length costs nothing.
func emptyResult(x *Tensor, shape []int) *Tensor {
	none := x.Reshape(x.NumElements()).Narrow(0, 0, 0)
	return keepFormat(x, none.Reshape(shape...).Clone())
}

// keepFormat returns y laid out channels-last when x is, as PyTorch's
// resizing ops keep their input's memory format.
func keepFormat(x, y *Tensor) *Tensor {
	if len(x.shape) == 4 && len(y.shape) == 4 && x.SuggestMemoryFormat() == ChannelsLast && y.SuggestMemoryFormat() != ChannelsLast {
		return y.Contiguous(ChannelsLast)
	}
	return y
}

// interpAxis resizes axis a of x from n to out entries. factor is the
// scale factor the caller gave (0 for none).
func interpAxis(x *Tensor, a, n, out int, factor float64, m InterpolateMode, alignCorners bool) *Tensor {
	switch m {
	case InterpNearest, InterpNearestExact:
		// PyTorch computes these positions in float32.
		scale := float32(n) / float32(out)
		if factor > 0 {
			scale = float32(1 / factor)
		}
		pos := make([]int64, out)
		for d := range pos {
			var p int
			switch {
			case m == InterpNearestExact:
				p = int(math.Floor(float64(float32((float64(d) + 0.5) * float64(scale)))))
			case out == n:
				p = d
			case out == 2*n:
				p = d >> 1
			default:
				p = int(math.Floor(float64(float32(d) * scale)))
			}
			pos[d] = int64(min(p, n-1))
		}
		if out == n && m == InterpNearest {
			return x
		}
		return x.selectPositions(a, pos)
	case InterpBicubic:
		return interpTaps(x, a, n, out, 4, func(d int, taps []int64, w []float64) {
			real := sourceIndex(areaScale(n, out, alignCorners, factor), d, alignCorners, true)
			i := min(int(math.Floor(real)), n-1)
			t := min(max(real-float64(i), 0), 1)
			const A = -0.75
			c1 := func(x float64) float64 { return ((A+2)*x-(A+3))*x*x + 1 }
			c2 := func(x float64) float64 { return ((A*x-5*A)*x+8*A)*x - 4*A }
			w[0], w[1], w[2], w[3] = c2(t+1), c1(t), c1(1-t), c2(2-t)
			for j := range 4 {
				taps[j] = int64(min(max(i-1+j, 0), n-1))
			}
		})
	}
	if out == n && !alignCorners {
		return x
	}
	return interpTaps(x, a, n, out, 2, func(d int, taps []int64, w []float64) {
		real := sourceIndex(areaScale(n, out, alignCorners, factor), d, alignCorners, false)
		i0 := int(real)
		i1 := i0
		if i0 < n-1 {
			i1++
		}
		l1 := min(max(real-float64(i0), 0), 1)
		taps[0], taps[1], w[0], w[1] = int64(i0), int64(i1), 1-l1, l1
	})
}

// areaScale is PyTorch's area_pixel_compute_scale: the step in the input
// of one step in the output.
func areaScale(n, out int, alignCorners bool, factor float64) float64 {
	switch {
	case alignCorners && out > 1:
		return float64(n-1) / float64(out-1)
	case alignCorners:
		return 0
	case factor > 0:
		return 1 / factor
	}
	return float64(n) / float64(out)
}

// sourceIndex is PyTorch's area_pixel_compute_source_index: the position
// in the input of output position d, clamped at 0 except for cubic
// interpolation.
func sourceIndex(scale float64, d int, alignCorners, cubic bool) float64 {
	if alignCorners {
		return scale * float64(d)
	}
	s := scale*(float64(d)+0.5) - 0.5
	if !cubic && s < 0 {
		return 0
	}
	return s
}

// interpTaps returns the sum over k taps of x's entries along axis a at
// the positions tap gives for each output position times their weights.
func interpTaps(x *Tensor, a, n, out, k int, tap func(d int, taps []int64, w []float64)) *Tensor {
	pos := make([][]int64, k)
	wts := make([][]float64, k)
	for j := range k {
		pos[j], wts[j] = make([]int64, out), make([]float64, out)
	}
	taps, w := make([]int64, k), make([]float64, k)
	for d := range out {
		tap(d, taps, w)
		for j := range k {
			pos[j][d], wts[j][d] = taps[j], w[j]
		}
	}
	wshape := make([]int, len(x.shape)-a)
	for i := range wshape {
		wshape[i] = 1
	}
	wshape[0] = out
	var y *Tensor
	for j := range k {
		wt := tableOn(x.ds(), wts[j], slices.Clone(wshape), x.dtype)
		term := x.selectPositions(a, pos[j]).Mul(wt)
		if y == nil {
			y = term
		} else {
			y = y.Add(term)
		}
	}
	return y
}

// areaResize returns the adaptive average pooling of x [N, C, *in] to the
// spatial size out, of one, two or three dimensions, from
// [AdaptiveAvgPool2d]: the mean over a box is the mean over its depth of
// the means over its rows and columns.
func areaResize(x *Tensor, out []int) *Tensor {
	n, c := x.shape[0], x.shape[1]
	switch len(out) {
	case 1:
		return AdaptiveAvgPool2d(x.Unsqueeze(2), 1, out[0]).Squeeze(2)
	case 2:
		return AdaptiveAvgPool2d(x, out[0], out[1])
	}
	d, h, w := x.shape[2], x.shape[3], x.shape[4]
	hw := AdaptiveAvgPool2d(x.Reshape(n, c*d, h, w), out[1], out[2])
	y := AdaptiveAvgPool2d(hw.Reshape(n, c, d, out[1]*out[2]), out[0], out[1]*out[2])
	return y.Reshape(n, c, out[0], out[1], out[2])
}
