package vram

import "slices"

// MaxUnpool2d returns the partial inverse of [MaxPool2dWithIndices]
// (torch.nn.functional.max_unpool2d): zeros of shape [N, C, OH, OW] with
// each value of x [N, C, H, W] at the position of its plane that the
// matching entry of indices names, oh·OW + ow, as MaxPool2dWithIndices
// gives them. indices is int64, of x's shape. The output size is OH =
// (H-1)·Stride - 2·Padding + Kernel, and OW likewise, from the Kernel,
// Stride (0 means the kernel) and Padding of p, the only fields it reads,
// so that the pooling's own parameters may be passed. A non-zero entry of
// size replaces that axis's size, as PyTorch's output_size does, strictly
// between the size computed less the stride and the size computed plus
// the stride: the size of the pooling's input, which a window that left
// rows or columns out of the pooling, or ceil mode, does not give back. x
// and indices may also be [C, H, W], giving [C, OH, OW]. The output has
// x's dtype and memory format.
//
// A position named more than once (overlapping windows take one maximum
// twice) holds the value of its plane's last entry that names it, as
// PyTorch's CPU kernel writes them in order. The gradient of each entry of
// x is the output's gradient at its position, as in PyTorch. The indices
// are read on the host, which waits for the work queued before.
//
// It panics with [ErrDType] for indices that are not int64, with
// [ErrShape] for indices of another shape than x, an x that is not 3-D or
// 4-D, or an output size out of reach, below 1 or with more than 2^29
// entries (the bound of the host table the output is gathered through),
// with [ErrArgument] for a kernel below 1 or a negative stride or padding,
// and with [ErrIndex] for a position outside [0, OH·OW).
func MaxUnpool2d(x, indices *Tensor, p Pool2dParams, size [2]int) *Tensor {
	const op = "max_unpool2d"
	defer asOp(op)
	notNil(op, x, indices)
	_, held := sameDevice(op, x, indices)
	defer held.unpin()
	if indices.dtype != Int64 {
		fail(op, ErrDType, "indices must be int64, got %s", indices.dtype)
	}
	if !slices.Equal(x.shape, indices.shape) {
		fail(op, ErrShape, "indices %v must have the input's shape %v", Shape(indices.shape), Shape(x.shape))
	}
	switch len(x.shape) {
	case 3:
		xb, ib := x.Unsqueeze(0), indices.Unsqueeze(0)
		defer xb.Release()
		defer ib.Release()
		y := MaxUnpool2d(xb, ib, p, size)
		defer y.Release()
		return y.Squeeze(0)
	case 4:
	default:
		fail(op, ErrShape, "input must be [N, C, H, W] or [C, H, W], got shape %v", Shape(x.shape))
	}
	out := unpoolSize(op, x.shape, p, size)
	n, c, l, ol := x.shape[0], x.shape[1], x.shape[2]*x.shape[3], out[0]*out[1]
	if f := float64(n) * float64(c) * float64(ol); f > maxIndexEntries {
		fail(op, ErrShape, "an output of %d planes of %dx%d needs a gather table of %.0f entries on the host, more than the %d allowed; split the input",
			n*c, out[0], out[1], f, maxIndexEntries)
	}
	// src[plane·OL + q] is the entry of x that output position q of the
	// plane takes, or l, a slot of zero past the plane's entries.
	pos := indices.Int64s()
	src := make([]int64, n*c*ol)
	for i := range src {
		src[i] = int64(l)
	}
	for plane := range n * c {
		for j, q := range pos[plane*l : (plane+1)*l] {
			if q < 0 || q >= int64(ol) {
				fail(op, ErrIndex, "found an invalid max index %d (output planes are %dx%d)", q, out[0], out[1])
			}
			src[plane*ol+int(q)] = int64(j) // a later entry overwrites
		}
	}
	var y *Tensor
	NoGrad(func() {
		xf := x.Reshape(n, c, l)
		defer xf.Release()
		zero := Zeros(Shape{n, c, 1}, x.dtype, x.Device())
		defer zero.Release()
		xe := Cat([]*Tensor{xf, zero}, 2)
		defer xe.Release()
		si := tableOn(x.ds(), src, Shape{n, c, ol}, Int64)
		defer si.Release()
		g := xe.Gather(2, si)
		defer g.Release()
		y = g.Reshape(n, c, out[0], out[1])
	})
	if needsGrad(x) {
		xShape := slices.Clone(x.shape)
		sv := save(indices)
		record(op, y, []*Tensor{x}, sv, func(g *Tensor) []*Tensor {
			gf := g.Reshape(n, c, ol)
			defer gf.Release()
			ix := sv[0].Reshape(n, c, l)
			defer ix.Release()
			gx := gf.Gather(2, ix)
			defer gx.Release()
			return []*Tensor{gx.Reshape(xShape...)}
		})
	}
	if x.SuggestMemoryFormat() == ChannelsLast {
		defer y.Release()
		return y.toFormat(op, ChannelsLast)
	}
	return y
}

// unpoolSize returns the output size of [MaxUnpool2d] of an input of
// shape xs [N, C, H, W], checked, for p and size.
func unpoolSize(op string, xs []int, p Pool2dParams, size [2]int) [2]int {
	var out [2]int
	for i := range 2 {
		k, s, pad := p.Kernel[i], p.Stride[i], p.Padding[i]
		if s == 0 {
			s = k
		}
		if k < 1 || s < 0 || pad < 0 {
			fail(op, ErrArgument, "kernel %v must be positive, stride %v and padding %v not negative", p.Kernel, p.Stride, p.Padding)
		}
		// In float64, which cannot overflow; sizes past 2^29 are refused
		// by the caller, so the rounding does not matter.
		def := float64(xs[2+i]-1)*float64(s) - 2*float64(pad) + float64(k)
		want := def
		if size[i] != 0 {
			want = float64(size[i])
			if !(def-float64(s) < want && want < def+float64(s)) {
				fail(op, ErrShape, "output size %v is not reachable from input %v with kernel %v, stride %v and padding %v: axis %d takes %.0f to %.0f",
					size, Shape(xs), p.Kernel, p.Stride, p.Padding, i, max(def-float64(s)+1, 1), def+float64(s)-1)
			}
		}
		if want < 1 || want > maxIndexEntries {
			fail(op, ErrShape, "input %v with kernel %v, stride %v and padding %v gives an output size of %.0f along axis %d; it must be between 1 and %d",
				Shape(xs), p.Kernel, p.Stride, p.Padding, want, i, maxIndexEntries)
		}
		out[i] = int(want)
	}
	return out
}
