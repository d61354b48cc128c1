package vram

import (
	"math"
	"slices"
)

// PixelShuffle rearranges x [*, C·r², H, W] into [*, C, H·r, W·r]
// (torch.nn.functional.pixel_shuffle): the r² channels of each group become
// an r×r block of pixels, channel c·r²+i·r+j going to row h·r+i and column
// w·r+j. Any number of leading dimensions is a batch. The result is new
// storage, channels-last when x is; gradients flow back. It panics with [ErrArgument] for a factor r
// below 1 and with [ErrShape] for fewer than 3 dimensions or channels that
// r² does not divide.
func PixelShuffle(x *Tensor, r int) *Tensor {
	const op = "pixel_shuffle"
	notNil(op, x)
	defer pin(op, x).unpin()
	nd := len(x.shape)
	switch {
	case r < 1:
		fail(op, ErrArgument, "upscale factor must be positive, got %d", r)
	case nd < 3:
		fail(op, ErrShape, "pixel_shuffle needs an input of at least 3 dimensions, got shape %v", Shape(x.shape))
	case r > math.MaxInt/r || r > math.MaxInt/max(x.shape[nd-2], 1) || r > math.MaxInt/max(x.shape[nd-1], 1):
		fail(op, ErrShape, "upscale factor %d of input %v overflows the sizes of a tensor", r, Shape(x.shape))
	case x.shape[nd-3]%(r*r) != 0:
		fail(op, ErrShape, "the channel dimension of input %v must be divisible by the square of the upscale factor %d, got %d channels",
			Shape(x.shape), r, x.shape[nd-3])
	}
	batch := slices.Clone(x.shape[:nd-3])
	c, h, w := x.shape[nd-3]/(r*r), x.shape[nd-2], x.shape[nd-1]
	return composed(op, func() *Tensor {
		b := len(batch)
		y := x.Reshape(append(slices.Clone(batch), c, r, r, h, w)...)
		y = y.Permute(append(seq(b), b, b+3, b+1, b+4, b+2)...)
		return keepFormat(x, y.Reshape(append(slices.Clone(batch), c, h*r, w*r)...))
	})
}

// PixelUnshuffle is the inverse of [PixelShuffle]
// (torch.nn.functional.pixel_unshuffle): it rearranges x [*, C, H·r, W·r]
// into [*, C·r², H, W]. It panics with [ErrArgument] for a factor r below 1
// and with [ErrShape] for fewer than 3 dimensions or a height or width that
// r does not divide.
func PixelUnshuffle(x *Tensor, r int) *Tensor {
	const op = "pixel_unshuffle"
	notNil(op, x)
	defer pin(op, x).unpin()
	nd := len(x.shape)
	switch {
	case r < 1:
		fail(op, ErrArgument, "downscale factor must be positive, got %d", r)
	case nd < 3:
		fail(op, ErrShape, "pixel_unshuffle needs an input of at least 3 dimensions, got shape %v", Shape(x.shape))
	case x.shape[nd-2]%r != 0 || x.shape[nd-1]%r != 0:
		fail(op, ErrShape, "the height and width of input %v must be divisible by the downscale factor %d", Shape(x.shape), r)
	case r > math.MaxInt/r || r*r > math.MaxInt/max(x.shape[nd-3], 1):
		fail(op, ErrShape, "downscale factor %d of input %v overflows the sizes of a tensor", r, Shape(x.shape))
	}
	batch := slices.Clone(x.shape[:nd-3])
	c, h, w := x.shape[nd-3], x.shape[nd-2]/r, x.shape[nd-1]/r
	return composed(op, func() *Tensor {
		b := len(batch)
		y := x.Reshape(append(slices.Clone(batch), c, h, r, w, r)...)
		y = y.Permute(append(seq(b), b, b+2, b+4, b+1, b+3)...)
		return keepFormat(x, y.Reshape(append(slices.Clone(batch), c*r*r, h, w)...))
	})
}

// seq returns 0, 1, ..., n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// FoldParams are the sliding-window arguments of [Unfold] and [Fold] after
// the kernel size. Index 0 is the height, index 1 the width. The zero value
// is PyTorch's default: dilation 1, no padding, stride 1.
type FoldParams struct {
	Dilation [2]int // spacing of the window's taps; 0 means 1
	Padding  [2]int // zeros added on each side of the image
	Stride   [2]int // 0 means 1
}

// window checks the kernel and p and returns the window of an image of
// h×w, panicking with ErrArgument for bad values and with ErrShape when
// the window does not fit, or, when gather is set, when its gather index
// passes the bound of the composed path. Without gather (for an empty
// batch, which gathers nothing) it checks only that the kernel's taps can
// be counted.
func (p FoldParams) window(op string, kernel [2]int, h, w int, gather bool) window {
	for i := range 2 {
		if p.Dilation[i] == 0 {
			p.Dilation[i] = 1
		}
		if p.Stride[i] == 0 {
			p.Stride[i] = 1
		}
	}
	switch {
	case kernel[0] < 1 || kernel[1] < 1:
		fail(op, ErrArgument, "kernel size %v must be positive", kernel)
	case p.Dilation[0] < 0 || p.Dilation[1] < 0:
		fail(op, ErrArgument, "dilation %v must be positive", p.Dilation)
	case p.Stride[0] < 0 || p.Stride[1] < 0:
		fail(op, ErrArgument, "stride %v must be positive", p.Stride)
	case p.Padding[0] < 0 || p.Padding[1] < 0:
		fail(op, ErrArgument, "padding %v must not be negative", p.Padding)
	}
	checkExtent(op, h, kernel[0], p.Stride[0], p.Padding[0], p.Dilation[0], 0, false)
	checkExtent(op, w, kernel[1], p.Stride[1], p.Padding[1], p.Dilation[1], 0, false)
	blocks := func(in, k, s, pad, d int) int {
		span := d*(k-1) + 1
		if in+2*pad < span {
			return 0
		}
		return (in+2*pad-span)/s + 1
	}
	oh := blocks(h, kernel[0], p.Stride[0], p.Padding[0], p.Dilation[0])
	ow := blocks(w, kernel[1], p.Stride[1], p.Padding[1], p.Dilation[1])
	if oh < 1 || ow < 1 {
		fail(op, ErrShape, "an image of %dx%d with kernel %v, dilation %v, padding %v and stride %v has %dx%d sliding blocks; there must be at least one",
			h, w, kernel, p.Dilation, p.Padding, p.Stride, oh, ow)
	}
	win := window{inH: h, inW: w, outH: oh, outW: ow, kh: kernel[0], kw: kernel[1],
		sh: p.Stride[0], sw: p.Stride[1], ph: p.Padding[0], pw: p.Padding[1], dh: p.Dilation[0], dw: p.Dilation[1]}
	// Before the callers multiply the kernel's sides: 2^31·2^33 taps wrap
	// an int to 0.
	if gather {
		win.checkSize(op)
	} else if float64(win.kh)*float64(win.kw) > maxExtent || float64(oh)*float64(ow) > maxExtent {
		fail(op, ErrShape, "kernel %v over an image of %dx%d has more taps or sliding blocks (%dx%d) than an int counts", kernel, h, w, oh, ow)
	}
	return win
}

// Unfold returns the sliding blocks of x [N, C, H, W] as columns
// (torch.nn.functional.unfold, im2col): a tensor [N, C·KH·KW, L] whose
// column l holds the block at the l-th window position in row-major order,
// row c·KH·KW + i·KW + j holding tap (i, j) of channel c, zero where the
// tap falls into the padding. L = OH·OW with OH = (H + 2·Padding -
// Dilation·(KH-1) - 1)/Stride + 1 and OW likewise. x may also be [C, H, W],
// giving [C·KH·KW, L]. Gradients flow back, added up where blocks overlap.
// An empty batch gives an empty result, however large the image.
// It panics with [ErrShape] for another rank or no sliding block, and with
// [ErrArgument] for a kernel, dilation or stride below 1 or a negative
// padding.
func Unfold(x *Tensor, kernel [2]int, p FoldParams) *Tensor {
	const op = "unfold"
	notNil(op, x)
	defer pin(op, x).unpin()
	if len(x.shape) != 3 && len(x.shape) != 4 {
		fail(op, ErrShape, "input must be [N, C, H, W] or [C, H, W], got shape %v", Shape(x.shape))
	}
	return unbatched(op, x, func(x *Tensor) *Tensor {
		n, c := x.shape[0], x.shape[1]
		w := p.window(op, kernel, x.shape[2], x.shape[3], n > 0)
		if n == 0 {
			// An empty batch, as PyTorch takes it: no window is gathered,
			// however large the image.
			if float64(c)*float64(w.kh*w.kw) > maxExtent {
				fail(op, ErrShape, "%d channels of a %dx%d kernel give more rows than an int counts", c, w.kh, w.kw)
			}
			shape := []int{0, c * w.kh * w.kw, w.outH * w.outW}
			checkShape(op, shape, x.dtype)
			return composed(op, func() *Tensor { return emptyResult(x, shape) })
		}
		return composed(op, func() *Tensor {
			return im2col(x, w, 0).Reshape(n, c*w.kh*w.kw, w.outH*w.outW)
		})
	})
}

// Fold is the adjoint of [Unfold] (torch.nn.functional.fold, col2im): it
// adds the columns of x [N, C·KH·KW, L] back into an image [N, C, outH,
// outW] of size outputSize, each entry into the pixel its tap covers;
// entries that fall into the padding are dropped. Overlapping blocks add
// up, so Fold(Unfold(x)) is x times the number of blocks covering each
// pixel. x may also be [C·KH·KW, L], giving [C, outH, outW]. The result
// is new contiguous storage, and gradients flow back; an empty batch gives
// an empty image, however large. It panics with [ErrShape] for another rank, a second dimension
// that KH·KW does not divide or an L other than the number of blocks of
// outputSize, with [ErrDType] for a non-float input and with [ErrArgument]
// as [Unfold] does.
func Fold(x *Tensor, outputSize, kernel [2]int, p FoldParams) *Tensor {
	const op = "fold"
	notNil(op, x)
	defer pin(op, x).unpin()
	if len(x.shape) == 2 {
		return composed(op, func() *Tensor {
			return Fold(x.Unsqueeze(0), outputSize, kernel, p).Squeeze(0)
		})
	}
	if len(x.shape) != 3 {
		fail(op, ErrShape, "input must be [N, C·KH·KW, L] or [C·KH·KW, L], got shape %v", Shape(x.shape))
	}
	if !x.dtype.IsFloat() {
		fail(op, ErrDType, "fold needs a floating-point input, got %s", x.dtype)
	}
	if outputSize[0] < 1 || outputSize[1] < 1 {
		fail(op, ErrArgument, "output size %v must be positive", outputSize)
	}
	n, ck, l := x.shape[0], x.shape[1], x.shape[2]
	w := p.window(op, kernel, outputSize[0], outputSize[1], n > 0)
	kk := w.kh * w.kw
	if ck%kk != 0 {
		fail(op, ErrShape, "dimension 1 of input %v must be divisible by the product of the kernel size %v", Shape(x.shape), kernel)
	}
	if l != w.outH*w.outW {
		fail(op, ErrShape, "output size %v with kernel %v, dilation %v, padding %v and stride %v has %dx%d = %d sliding blocks, but input %v has %d",
			outputSize, kernel, [2]int{w.dh, w.dw}, p.Padding, [2]int{w.sh, w.sw}, w.outH, w.outW, w.outH*w.outW, Shape(x.shape), l)
	}
	if n == 0 {
		// An empty batch, as PyTorch takes it: nothing is added back,
		// however large the image.
		shape := []int{0, ck / kk, outputSize[0], outputSize[1]}
		checkShape(op, shape, x.dtype)
		return composed(op, func() *Tensor { return emptyResult(x, shape) })
	}
	return composed(op, func() *Tensor {
		// col2im's image keeps a slot for the padding after each plane;
		// PyTorch's fold, and so View of its result, is contiguous.
		return col2im(op, x.Reshape(n, ck/kk, kk*l), w).Contiguous()
	})
}

// Unfold returns the view of t's windows of size entries along dim, taken
// every step entries (torch.Tensor.unfold): dim's size becomes the number
// of windows, (n - size)/step + 1, and a last dimension of size size
// indexes within a window. The view shares t's storage (windows overlap
// when step < size) and gradients flow back, added up where windows
// overlap. A 0-dimensional t takes dim 0 or -1 and a size of at most 1. It
// panics with [ErrIndex] for a dimension out of range, with [ErrArgument]
// for a negative size, a size larger than the dimension or a step below 1,
// and with [ErrShape] for windows of an empty t that together hold more
// entries than an int counts. Its backward pass panics with [ErrShape]
// when the windows hold more than 2^29 entries, the bound of the host
// table it adds their gradients back through.
func (t *Tensor) Unfold(dim, size, step int) *Tensor {
	const op = "unfold"
	defer pin(op, t).unpin()
	if len(t.shape) == 0 {
		t.scalarAxis(op, dim)
		if size < 0 || size > 1 || step < 1 {
			fail(op, ErrArgument, "a 0-dimensional tensor unfolds with size 0 or 1 and a positive step, got size %d and step %d", size, step)
		}
		defer asOp(op)
		u := t.Unsqueeze(0)
		defer u.Release()
		return u.Narrow(0, 0, size)
	}
	a := t.axis(op, dim)
	n := t.shape[a]
	switch {
	case size < 0:
		fail(op, ErrArgument, "size is %d but must be at least 0", size)
	case size > n:
		fail(op, ErrArgument, "maximum size for dimension %d of shape %v is %d, but size is %d", dim, Shape(t.shape), n, size)
	case step < 1:
		fail(op, ErrArgument, "step is %d but must be at least 1", step)
	}
	nw := (n-size)/step + 1
	ns := append(slices.Clone(t.shape), size)
	st := append(slices.Clone(t.strides), t.strides[a])
	ns[a] = nw
	checkShape(op, ns, t.dtype) // overlapping windows of an empty t may hold more than an int counts
	if nw > 1 {
		st[a] *= step
	}
	out := t.view(ns, st, t.offset)
	if needsGrad(t) {
		full := slices.Clone(t.shape)
		record(op, out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor {
			if g.NumElements() == 0 {
				return []*Tensor{g.NewZeros(full)}
			}
			// The windows' positions are a host table; its size is that of
			// the view, which takes no memory however large.
			if f := float64(nw) * float64(size); f > maxIndexEntries {
				fail(op, ErrShape, "the gradient of %d windows of %d entries along dimension %d of shape %v needs a position table of %.0f entries on the host, more than the %d allowed; "+
					"take fewer or smaller windows, or compute the windows' gradient another way", nw, size, a, Shape(full), f, maxIndexEntries)
			}
			pos := make([]int64, 0, nw*size)
			for w := range nw {
				for k := range size {
					pos = append(pos, int64(w*step+k))
				}
			}
			return []*Tensor{unfoldGrad(g, full, a, pos)}
		})
	}
	return out
}

// unfoldGrad adds the gradient g of the windows back into a tensor of
// shape full at the positions pos along axis a.
func unfoldGrad(g *Tensor, full []int, a int, pos []int64) *Tensor {
	return tidyOut(func() *Tensor {
		// [..., nw, ..., size] → [..., nw, size, ...] → [..., nw·size, ...]
		gm := g.Movedim(-1, a+1)
		shape := slices.Clone(full)
		shape[a] = len(pos)
		src := gm.Reshape(shape...)
		idx := tableOn(g.ds(), pos, Shape{len(pos)}, Int64)
		return g.NewZeros(full).IndexAdd(a, idx, src, 1)
	})
}
