package vram

import (
	"math"
	"slices"

	"github.com/vramgo/vram/backend"
)

// Pool2dParams describes a 2-D pooling window ([MaxPool2d], [AvgPool2d]).
// Index 0 of each pair is the height, index 1 the width.
type Pool2dParams struct {
	Kernel   [2]int // the window, at least 1×1
	Stride   [2]int // 0 means the kernel size, PyTorch's default
	Padding  [2]int // at most half the kernel; -Inf for max pooling, zeros for average pooling
	Dilation [2]int // spacing of the window's taps (max pooling only); 0 means 1
	// ExcludePad makes average pooling divide by the number of elements of
	// the window inside the input rather than by the whole window
	// (PyTorch's count_include_pad=False; the zero value is its default).
	ExcludePad bool
	// CeilMode rounds the output size up rather than down (PyTorch's
	// ceil_mode=True): a last window that starts inside the input or its
	// left padding is kept even though it runs past the padded input; its
	// taps out there count for nothing, not even in the divisor of
	// average pooling.
	CeilMode bool
	// DivisorOverride, when positive, divides the sum of every window of
	// average pooling by itself rather than by the window's size
	// (PyTorch's divisor_override); 0 means none.
	DivisorOverride int
}

// resolve fills in the defaults of p and checks it, panicking with
// ErrArgument.
func (p Pool2dParams) resolve(op string, avg bool) Pool2dParams {
	for i := range 2 {
		if p.Kernel[i] < 1 {
			fail(op, ErrArgument, "kernel size %v must be positive", p.Kernel)
		}
		if p.Stride[i] == 0 {
			p.Stride[i] = p.Kernel[i]
		}
		if p.Dilation[i] == 0 {
			p.Dilation[i] = 1
		}
		switch {
		case p.Stride[i] < 0:
			fail(op, ErrArgument, "stride %v must be positive", p.Stride)
		case p.Dilation[i] < 0:
			fail(op, ErrArgument, "dilation %v must be positive", p.Dilation)
		case avg && p.Dilation[i] != 1:
			fail(op, ErrArgument, "average pooling has no dilation, got %v", p.Dilation)
		case p.Padding[i] < 0 || 2*p.Padding[i] > p.Kernel[i]:
			fail(op, ErrArgument, "padding %v must be between 0 and half the kernel size %v", p.Padding, p.Kernel)
		}
	}
	switch {
	case p.DivisorOverride < 0:
		fail(op, ErrArgument, "divisor override %d must be positive (0 for none)", p.DivisorOverride)
	case !avg && p.DivisorOverride != 0:
		fail(op, ErrArgument, "max pooling has no divisor, got divisor override %d", p.DivisorOverride)
	}
	return p
}

// poolOutputSize returns the number of windows along an axis of size in,
// as PyTorch's pooling_output_shape counts them: rounded down, or up in
// ceil mode, where a last window starting past the input and its left
// padding is dropped. It may be below 1; the caller checks. The sizes
// must have passed [checkExtent]; the stride may be any positive int:
// rather than add stride-1 and multiply by the stride, as PyTorch does,
// it divides, which cannot overflow.
func poolOutputSize(in, kernel, stride, padding, dilation int, ceil bool) int {
	span := in + 2*padding - dilation*(kernel-1) - 1
	out := floorDiv(span, stride) + 1
	if ceil && span%stride != 0 {
		out++ // rounded up
	}
	// The last window starts at (out-1)·stride - padding; in ceil mode it
	// must start inside the input or its left padding.
	if ceil && out-1 >= ceilDiv(in+padding, stride) {
		out--
	}
	return out
}

// ceilDiv returns a/b rounded towards plus infinity, for b > 0.
func ceilDiv(a, b int) int {
	q := floorDiv(a, b)
	if a%b != 0 {
		q++
	}
	return q
}

// floorDiv returns a/b rounded towards minus infinity, for b > 0.
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// poolWindow checks x [N, C, H, W] against p and returns the window.
func poolWindow(op string, x *Tensor, p Pool2dParams) window {
	h, w := x.shape[2], x.shape[3]
	checkExtent(op, h, p.Kernel[0], p.Stride[0], p.Padding[0], p.Dilation[0], 0, false)
	checkExtent(op, w, p.Kernel[1], p.Stride[1], p.Padding[1], p.Dilation[1], 0, false)
	oh := poolOutputSize(h, p.Kernel[0], p.Stride[0], p.Padding[0], p.Dilation[0], p.CeilMode)
	ow := poolOutputSize(w, p.Kernel[1], p.Stride[1], p.Padding[1], p.Dilation[1], p.CeilMode)
	if oh < 1 || ow < 1 {
		fail(op, ErrShape, "window %v (dilation %v) is larger than the padded input %dx%d (input %v, padding %v)",
			p.Kernel, p.Dilation, h+2*p.Padding[0], w+2*p.Padding[1], Shape(x.shape), p.Padding)
	}
	win := window{inH: h, inW: w, outH: oh, outW: ow, kh: p.Kernel[0], kw: p.Kernel[1],
		sh: p.Stride[0], sw: p.Stride[1], ph: p.Padding[0], pw: p.Padding[1], dh: p.Dilation[0], dw: p.Dilation[1]}
	return win
}

// poolInput checks that x [N, C, H, W] is a floating-point tensor whose
// channels, height and width are not empty (only the batch may be, as in
// PyTorch: an empty window has no maximum or mean) and returns its device.
func poolInput(op string, x *Tensor) *devState {
	if !x.dtype.IsFloat() {
		fail(op, ErrDType, "needs a floating-point tensor, got %s", x.dtype)
	}
	if x.shape[1] == 0 || x.shape[2] == 0 || x.shape[3] == 0 {
		fail(op, ErrShape, "input %v has an empty channel, height or width dimension; only the batch may be empty", Shape(x.shape))
	}
	return x.ds()
}

// MaxPool2d returns the maximum of each window of x [N, C, H, W] (or
// [C, H, W]), of shape [N, C, OH, OW] with OH = (H + 2·Padding -
// Dilation·(KH-1) - 1)/Stride + 1, rounded up in ceil mode
// (torch.nn.functional.max_pool2d). As in PyTorch, a window holding a NaN
// has the maximum NaN and gives its gradient to its last NaN; any other
// window gives it to its first maximum. A device with native pooling
// ([backend.Pooler]) runs it; elsewhere it is composed from a Gather of
// the windows and a reduction. The output keeps x's memory format. A
// window larger than the padded input, or an input with no channels, rows
// or columns (the batch may be empty), panics with [ErrShape], a bad
// parameter with [ErrArgument]. An empty batch gives an empty result
// without gathering any window, however large the image.
func MaxPool2d(x *Tensor, p Pool2dParams) *Tensor {
	const op = "max_pool2d"
	defer asOp(op)
	notNil(op, x)
	return unbatched(op, x, func(x *Tensor) *Tensor {
		y, _ := maxPool2d(op, x, p, false)
		return y
	})
}

// MaxPool2dWithIndices returns [MaxPool2d] of x and, for each output
// element, the int64 position h·W + w in its input plane of the element
// it took (torch.nn.functional.max_pool2d with return_indices=True), of
// the output's shape and memory format. The maximum is always composed
// from a Gather of the windows, native pooling having no indices. Errors
// are MaxPool2d's.
func MaxPool2dWithIndices(x *Tensor, p Pool2dParams) (y, indices *Tensor) {
	const op = "max_pool2d_with_indices"
	defer asOp(op)
	notNil(op, x)
	y = unbatched(op, x, func(x *Tensor) *Tensor {
		var yb *Tensor
		yb, indices = maxPool2d(op, x, p, true)
		return yb
	})
	if x.Dim() == 3 {
		ib := indices
		defer ib.Release()
		indices = ib.Squeeze(0)
	}
	return y, indices
}

// maxPool2d is MaxPool2d of x [N, C, H, W], with the positions of the
// maxima when withIndices is set (else nil).
func maxPool2d(op string, x *Tensor, p Pool2dParams, withIndices bool) (y, indices *Tensor) {
	defer pin(op, x).unpin()
	ds := poolInput(op, x)
	p = p.resolve(op, false)
	win := poolWindow(op, x, p)
	if x.shape[0] == 0 {
		return emptyPool(op, x, win.outH, win.outW, withIndices)
	}
	if !withIndices && p.Dilation == [2]int{1, 1} && win.floorSized(p) {
		bp := backend.Pool2DParams{Mode: backend.MaxPool, Kernel: p.Kernel, Stride: p.Stride, Padding: p.Padding}
		if y := poolNative(op, ds, x, win, bp); y != nil {
			return y, nil
		}
	}
	win.checkSize(op)
	cols := im2col(x, win, math.Inf(-1))
	defer cols.Release()
	taps := maxTaps(cols, win, win.firstInside())
	defer taps.Release()
	m := cols.Gather(2, taps)
	defer m.Release()
	y = inputFormat(op, x, m.Reshape(win.shape(x)...))
	if withIndices {
		indices = inputFormat(op, x, win.positions(taps, win.index()))
	}
	return y, indices
}

// AvgPool2d returns the mean of each window of x [N, C, H, W] (or
// [C, H, W]), of the size [MaxPool2d] gives (torch.nn.functional.avg_pool2d),
// as PyTorch divides: by DivisorOverride when it is set, else by the
// window's taps inside the padded input (the padding counting as zeros),
// or inside the input alone with ExcludePad. Devices, formats and errors
// are as for MaxPool2d; average pooling has no dilation.
func AvgPool2d(x *Tensor, p Pool2dParams) *Tensor {
	const op = "avg_pool2d"
	defer asOp(op)
	notNil(op, x)
	return unbatched(op, x, func(x *Tensor) *Tensor {
		defer pin(op, x).unpin()
		ds := poolInput(op, x)
		p = p.resolve(op, true)
		win := poolWindow(op, x, p)
		if x.shape[0] == 0 {
			y, _ := emptyPool(op, x, win.outH, win.outW, false)
			return y
		}
		if p.DivisorOverride == 0 && win.floorSized(p) {
			bp := backend.Pool2DParams{Mode: backend.AvgPool, Kernel: p.Kernel, Stride: p.Stride, Padding: p.Padding, CountIncludePad: !p.ExcludePad}
			if y := poolNative(op, ds, x, win, bp); y != nil {
				return y
			}
		}
		win.checkSize(op)
		if p.DivisorOverride != 0 {
			return avgComposed(op, x, win, win.index(), nil, float64(p.DivisorOverride))
		}
		return avgComposed(op, x, win, win.index(), win.divisors(!p.ExcludePad), 0)
	})
}

// floorSized reports whether w, made from p, has the output size of
// rounding down, which native pooling gives: ceil mode adds no window.
func (w window) floorSized(p Pool2dParams) bool {
	return w.outH == poolOutputSize(w.inH, w.kh, w.sh, w.ph, w.dh, false) &&
		w.outW == poolOutputSize(w.inW, w.kw, w.sw, w.pw, w.dw, false)
}

// maxTaps returns, for the windows cols [N, C, KK, L] of w (padded with
// -Inf), the int64 tap [N, C, 1, L] of each window that PyTorch's max
// pooling takes: its last NaN when it has one (PyTorch's kernels keep a
// value when it is above the maximum so far or NaN), else its first
// maximum inside the input, which is the window's first tap inside the
// input when every one is -Inf (inside gives that tap for each output
// position; nil when it is always the first). It is computed without
// recording.
func maxTaps(cols *Tensor, w window, inside []int64) *Tensor {
	kk, l := w.kh*w.kw, w.outH*w.outW
	var taps *Tensor
	NoGrad(func() {
		Tidy(func() {
			// ArgMax takes the first maximum, NaN counting as the largest.
			first := cols.ArgMax(2, true)
			m := cols.Gather(2, first)
			hasNaN, allNegInf := m.IsNaN(), m.EqScalar(math.Inf(-1))
			// Tap k+1 where there is a NaN, 0 elsewhere: the largest
			// marks the last NaN.
			ramp := tableOn(cols.ds(), rampOf(kk), Shape{1, 1, kk, 1}, Float32)
			lastNaN := Where(cols.IsNaN(), ramp, Scalar(0, Float32)).ArgMax(2, true)
			if inside != nil {
				it := tableOn(cols.ds(), inside, Shape{1, 1, 1, l}, Int64)
				first = Where(allNegInf, it, first)
			}
			taps = Keep(Where(hasNaN, lastNaN, first))
		})
	})
	return taps
}

// firstInsideKey keys window.firstInside in indexCache.
type firstInsideKey struct{ w window }

// firstInside returns, for each output position of w, its first tap (in
// row-major order) that reads the input, or 0 when none does. The slice
// is cached and must not be modified.
func (w window) firstInside() []int64 {
	if v, ok := indexCache.get(firstInsideKey{w}); ok {
		return v.([]int64)
	}
	idx := w.index()
	L := w.outH * w.outW
	hw := int64(w.inH * w.inW)
	f := make([]int64, L)
	for l := range L {
		for k := range w.kh * w.kw {
			if idx[k*L+l] != hw {
				f[l] = int64(k)
				break
			}
		}
	}
	return indexCache.put(firstInsideKey{w}, f, 8*int64(len(f))).([]int64)
}

// positions returns the flat input positions h·inW + w, as int64 [N, C,
// OH, OW], of the taps [N, C, 1, L] of w (from maxTaps) that the gather
// index idx (laid out as window.index's) reads.
func (w window) positions(taps *Tensor, idx []int64) *Tensor {
	var out *Tensor
	NoGrad(func() {
		Tidy(func() {
			n, c := taps.shape[0], taps.shape[1]
			kk, l := w.kh*w.kw, w.outH*w.outW
			idx := tableOn(taps.ds(), idx, Shape{1, 1, kk, l}, Int64).Expand(n, c, kk, l)
			out = Keep(idx.Gather(2, taps).Reshape(w.shape(taps)...))
		})
	})
	track(out) // by the caller's Tidy, which Keep took it from
	return out
}

// AdaptiveAvgPool2d returns the mean of x [N, C, H, W] (or [C, H, W]) over
// outH×outW windows that tile it as evenly as they can, window i of the
// height covering rows floor(i·H/outH) to ceil((i+1)·H/outH)
// (torch.nn.functional.adaptive_avg_pool2d); [1, 1] is the global average
// pooling of ResNet's head. When the sizes divide evenly it is
// [AvgPool2d] and runs on the device's native pooling. The output keeps
// x's memory format. Sizes below 1 panic with [ErrArgument], an input with
// no channels, rows or columns (the batch may be empty) with [ErrShape].
// An empty batch gives an empty result, however large the sizes.
func AdaptiveAvgPool2d(x *Tensor, outH, outW int) *Tensor {
	const op = "adaptive_avg_pool2d"
	defer asOp(op)
	notNil(op, x)
	if outH < 1 || outW < 1 {
		fail(op, ErrArgument, "output size %dx%d must be positive", outH, outW)
	}
	return unbatched(op, x, func(x *Tensor) *Tensor {
		defer pin(op, x).unpin()
		poolInput(op, x)
		if x.shape[0] == 0 {
			y, _ := emptyPool(op, x, outH, outW, false)
			return y
		}
		h, w := x.shape[2], x.shape[3]
		if h%outH == 0 && w%outW == 0 && h > 0 && w > 0 {
			return AvgPool2d(x, Pool2dParams{Kernel: [2]int{h / outH, w / outW}})
		}
		aw := adaptiveWindow{inH: h, inW: w, outH: outH, outW: outW}
		win := aw.window(op)
		idx, counts := aw.index()
		return avgComposed(op, x, win, idx, counts, 0)
	})
}

// AdaptiveMaxPool2d returns the maximum of x [N, C, H, W] (or [C, H, W])
// over the outH×outW windows of [AdaptiveAvgPool2d]
// (torch.nn.functional.adaptive_max_pool2d). A window's NaN and ties are
// as for [MaxPool2d]. It is composed from a Gather of the windows on every
// device. Errors are AdaptiveAvgPool2d's.
func AdaptiveMaxPool2d(x *Tensor, outH, outW int) *Tensor {
	const op = "adaptive_max_pool2d"
	defer asOp(op)
	y, idx := adaptiveMaxPool2d(op, x, outH, outW)
	idx.Release()
	return y
}

// AdaptiveMaxPool2dWithIndices returns [AdaptiveMaxPool2d] of x and, for
// each output element, the int64 position h·W + w in its input plane of
// the element it took (return_indices=True), of the output's shape and
// memory format.
func AdaptiveMaxPool2dWithIndices(x *Tensor, outH, outW int) (y, indices *Tensor) {
	const op = "adaptive_max_pool2d_with_indices"
	defer asOp(op)
	return adaptiveMaxPool2d(op, x, outH, outW)
}

func adaptiveMaxPool2d(op string, x *Tensor, outH, outW int) (y, indices *Tensor) {
	notNil(op, x)
	if outH < 1 || outW < 1 {
		fail(op, ErrArgument, "output size %dx%d must be positive", outH, outW)
	}
	y = unbatched(op, x, func(x *Tensor) *Tensor {
		defer pin(op, x).unpin()
		poolInput(op, x)
		if x.shape[0] == 0 {
			var yb *Tensor
			yb, indices = emptyPool(op, x, outH, outW, true)
			return yb
		}
		h, w := x.shape[2], x.shape[3]
		aw := adaptiveWindow{inH: h, inW: w, outH: outH, outW: outW}
		win := aw.window(op)
		idx, _ := aw.index()
		cols := gatherWindows(x, win, idx, math.Inf(-1))
		defer cols.Release()
		// Tap 0 of every adaptive window reads the input, and is the
		// first of a window of -Inf.
		taps := maxTaps(cols, win, nil)
		defer taps.Release()
		m := cols.Gather(2, taps)
		defer m.Release()
		indices = inputFormat(op, x, win.positions(taps, idx))
		return inputFormat(op, x, m.Reshape(win.shape(x)...))
	})
	if x.Dim() == 3 {
		ib := indices
		defer ib.Release()
		indices = ib.Squeeze(0)
	}
	return y, indices
}

// emptyPool returns the pooling of x [0, C, H, W], an empty batch, to
// [0, C, outH, outW], and empty int64 indices of that shape when
// withIndices is set (else nil), as PyTorch pools an empty batch: without
// the gather index of the composed path, which grows with the image
// however empty the batch, and which it refused past 2^29 entries. The
// result stays in x's graph.
func emptyPool(op string, x *Tensor, outH, outW int, withIndices bool) (y, indices *Tensor) {
	shape := []int{0, x.shape[1], outH, outW}
	checkShape(op, shape, x.dtype)
	y = composed(op, func() *Tensor { return emptyResult(x, shape) })
	if withIndices {
		indices = inputFormat(op, x, Zeros(shape, Int64, x.Device()))
	}
	return y, indices
}

// shape returns the output shape [N, C, outH, outW] of w over x.
func (w window) shape(x *Tensor) []int { return []int{x.shape[0], x.shape[1], w.outH, w.outW} }

// divisorKey keys window.divisors in indexCache.
type divisorKey struct {
	w          window
	includePad bool
}

// divisors returns the divisor of each output position of average pooling
// over w, as PyTorch's kernels count it: the window's taps inside the
// padded input (includePad) or inside the input alone, the taps past the
// padded input (of ceil mode) never counting. It returns nil when every
// divisor is the window's size. The slice is cached and must not be
// modified.
func (w window) divisors(includePad bool) []float64 {
	key := divisorKey{w, includePad}
	if v, ok := indexCache.get(key); ok {
		return v.([]float64)
	}
	count := func(o, s, p, k, in int) int {
		lo, hi := o*s-p, min(o*s-p+k, in+p)
		if !includePad {
			lo, hi = max(lo, 0), min(hi, in)
		}
		return hi - lo
	}
	full := w.kh * w.kw
	uniform := true
	c := make([]float64, w.outH*w.outW)
	for oy := range w.outH {
		ch := count(oy, w.sh, w.ph, w.kh, w.inH)
		for ox := range w.outW {
			n := ch * count(ox, w.sw, w.pw, w.kw, w.inW)
			uniform = uniform && n == full
			c[oy*w.outW+ox] = float64(n)
		}
	}
	if uniform {
		c = nil
	}
	return indexCache.put(key, c, 8*int64(len(c))+8).([]float64)
}

// adaptiveWindow is the geometry of adaptive average pooling, whose
// windows differ in size.
type adaptiveWindow struct{ inH, inW, outH, outW int }

// window returns the window of the composed path for a, whose taps are
// those of its largest windows, panicking with ErrShape, naming op, as
// window.checkSize does when its gather index would be too large. The
// index has at least max(inH, outH)·max(inW, outW) entries (a window
// covers at least one row and ceil(in/out) of them), which is checked
// first: maxK walks every output row and column, and an output size of
// 2^62 would never finish, nor an input size past 2^34 multiply without
// overflow.
func (a adaptiveWindow) window(op string) window {
	if n := float64(max(a.inH, a.outH)) * float64(max(a.inW, a.outW)); n > maxIndexEntries {
		fail(op, ErrShape, "adaptive pooling from %dx%d to %dx%d needs a gather index of at least %.0f entries on the host, more than the %d the composed path allows; "+
			"ask for a smaller output, or split the input", a.inH, a.inW, a.outH, a.outW, n, maxIndexEntries)
	}
	w := window{inH: a.inH, inW: a.inW, outH: a.outH, outW: a.outW, kh: a.maxK(a.inH, a.outH), kw: a.maxK(a.inW, a.outW)}
	w.checkSize(op)
	return w
}

// maxK returns the largest window of adaptive pooling from in to out.
func (adaptiveWindow) maxK(in, out int) int {
	k := 0
	for i := range out {
		lo, hi := i*in/out, ((i+1)*in+out-1)/out
		k = max(k, hi-lo)
	}
	return k
}

type adaptiveEntry struct {
	idx    []int64
	counts []float64
}

// index returns the gather index of a, laid out as window.index's with
// the largest window's taps (the unused taps of smaller windows read the
// padding slot), and each window's size.
func (a adaptiveWindow) index() ([]int64, []float64) {
	if v, ok := indexCache.get(a); ok {
		e := v.(adaptiveEntry)
		return e.idx, e.counts
	}
	kh, kw := a.maxK(a.inH, a.outH), a.maxK(a.inW, a.outW)
	L := a.outH * a.outW
	hw := int64(a.inH * a.inW)
	idx := make([]int64, kh*kw*L)
	counts := make([]float64, L)
	for oy := range a.outH {
		y0, y1 := oy*a.inH/a.outH, ((oy+1)*a.inH+a.outH-1)/a.outH
		for ox := range a.outW {
			x0, x1 := ox*a.inW/a.outW, ((ox+1)*a.inW+a.outW-1)/a.outW
			l := oy*a.outW + ox
			counts[l] = float64((y1 - y0) * (x1 - x0))
			for i := range kh {
				for j := range kw {
					v := hw
					if y0+i < y1 && x0+j < x1 {
						v = int64((y0+i)*a.inW + x0 + j)
					}
					idx[(i*kw+j)*L+l] = v
				}
			}
		}
	}
	e := indexCache.put(a, adaptiveEntry{idx: idx, counts: counts}, 8*int64(len(idx)+len(counts))).(adaptiveEntry)
	return e.idx, e.counts
}

// avgComposed returns the sums of the windows that idx (laid out as
// window.index's) gathers, divided by divisor when it is not 0, else by
// counts (one per output position), else, when counts is nil, by the
// window size, from recorded ops. 16-bit inputs
// are summed and divided in float32 and the mean rounded once to x's
// dtype, as PyTorch's kernels do: a window's sum may pass the 16-bit range
// where its mean does not. The result has x's dtype inside [Autocast] too.
func avgComposed(op string, x *Tensor, win window, idx []int64, counts []float64, divisor float64) *Tensor {
	cols := gatherWindows(x, win, idx, 0)
	defer cols.Release()
	cw := cols.Cast(opMath(x.dtype))
	defer cw.Release()
	s := cw.Sum(2) // [N, C, L]
	defer s.Release()
	var m *Tensor
	switch {
	case divisor != 0:
		m = s.MulScalar(1 / divisor)
	case counts == nil:
		m = s.MulScalar(1 / float64(win.kh*win.kw))
	default:
		d := reciprocals(counts, s)
		defer d.Release()
		m = s.Mul(d)
	}
	defer m.Release()
	r := m.Cast(x.dtype)
	defer r.Release()
	return inputFormat(op, x, r.Reshape(win.shape(x)...))
}

// reciprocals returns 1/counts as a tensor [L] of x's dtype and device.
func reciprocals(counts []float64, x *Tensor) *Tensor {
	inv := make([]float64, len(counts))
	for i, c := range counts {
		inv[i] = 1 / c
	}
	return tableOn(x.ds(), inv, Shape{len(inv)}, x.dtype)
}

// gatherWindows is im2col with a given index of win's layout.
func gatherWindows(x *Tensor, win window, idx []int64, pad float64) *Tensor {
	n, c := x.shape[0], x.shape[1]
	xf := x.Reshape(n, c, win.inH*win.inW)
	defer xf.Release()
	pv := Full(Shape{n, c, 1}, pad, x.dtype, x.Device())
	defer pv.Release()
	xe := Cat([]*Tensor{xf, pv}, 2)
	defer xe.Release()
	it := tableOn(x.ds(), idx, Shape{1, 1, len(idx)}, Int64)
	defer it.Release()
	ix := it.Expand(n, c, len(idx))
	defer ix.Release()
	cols := xe.Gather(2, ix)
	defer cols.Release()
	return cols.Reshape(n, c, win.kh*win.kw, win.outH*win.outW)
}

// inputFormat returns y (given away) in x's memory format.
func inputFormat(op string, x, y *Tensor) *Tensor {
	if x.SuggestMemoryFormat() != ChannelsLast {
		return y
	}
	defer y.Release()
	return y.toFormat(op, ChannelsLast)
}

// poolNative runs the pooling with the device's [backend.Pooler],
// recording its backward pass, or returns nil when the device has none or
// none for x.
func poolNative(op string, ds *devState, x *Tensor, win window, bp backend.Pool2DParams) *Tensor {
	pl, ok := ds.bd.(backend.Pooler)
	if !ok || noNativeConv.Load() || !nativeFloat(x.dtype) {
		return nil
	}
	f := x.SuggestMemoryFormat()
	xc := x.inFormat(op, f)
	defer xc.Release()
	if bp.Mode == backend.MaxPool && needsGrad(x) {
		if y := maxPoolTapped(op, ds, x, xc, win, bp, f); y != nil {
			return y
		}
	}
	y := newTensorFormat(op, ds, x.dtype, win.shape(x), f)
	err := pl.Pool2D(ds.stream(), y.bv(), xc.bv(), bp)
	if notImplemented(err) {
		y.Release()
		return nil
	}
	if err != nil {
		y.Release()
		check(op, err)
	}
	if !needsGrad(x) {
		return y
	}
	sv := save(xc, y)
	recordPool(op, ds, y, x, sv, win, bp, f, func(dx, gc *Tensor) error {
		return pl.Pool2DBackward(ds.stream(), dx.bv(), gc.bv(), sv[0].bv(), sv[1].bv(), bp)
	})
	return y
}

// recordPool records the backward pass of a native pooling y of x, whose
// saved tensors sv start with x in format f: run fills dx, x's gradient
// in format f, from gc, y's gradient in format f; when the device
// declines (an error wrapping [backend.ErrNotImplemented]), the gradient
// is composed from x.
func recordPool(op string, ds *devState, y, x *Tensor, sv []*Tensor, win window, bp backend.Pool2DParams, f MemoryFormat, run func(dx, gc *Tensor) error) {
	xShape := slices.Clone(x.shape)
	record(op, y, []*Tensor{x}, sv, func(g *Tensor) []*Tensor {
		gc := g.inFormat(op, f)
		defer gc.Release()
		dx := newTensorFormat(op, ds, g.dtype, xShape, f)
		err := run(dx, gc)
		if notImplemented(err) {
			dx.Release()
			return []*Tensor{poolGradComposed(gc, sv[0], win, bp)}
		}
		if err != nil {
			dx.Release()
			check(op, err)
		}
		return []*Tensor{dx}
	})
}

// maxPoolTapped runs a max pooling of x (xc: x in format f) whose
// gradient is needed with the device's [backend.MaxPoolTapper], which
// keeps the tap of every window's maximum (a byte per output element) for
// the backward pass, recording that pass; it returns nil when the device
// has none or none for x. The backward pass gathers the output gradient
// by the taps instead of finding each maximum again in x; x stays saved
// for the composed gradient, should the device decline the gradient
// (PyTorch's max pooling saves its input and int64 indices).
func maxPoolTapped(op string, ds *devState, x, xc *Tensor, win window, bp backend.Pool2DParams, f MemoryFormat) *Tensor {
	mt, ok := ds.bd.(backend.MaxPoolTapper)
	if !ok {
		return nil
	}
	y := newTensorFormat(op, ds, x.dtype, win.shape(x), f)
	taps := newTensorFormat(op, ds, Int8, win.shape(x), f)
	defer taps.Release()
	err := mt.MaxPool2DTaps(ds.stream(), y.bv(), taps.bv(), xc.bv(), bp)
	if err != nil {
		y.Release()
		if notImplemented(err) {
			return nil
		}
		check(op, err)
	}
	sv := save(xc, taps)
	recordPool(op, ds, y, x, sv, win, bp, f, func(dx, gc *Tensor) error {
		return mt.MaxPool2DBackwardTaps(ds.stream(), dx.bv(), gc.bv(), sv[1].bv(), bp)
	})
	return y
}

// poolGradComposed returns the gradient of a pooling of x from its output
// gradient g [N, C, OH, OW], composed (outside recording): the gradient of
// each window given to the element max pooling took (see maxTaps) or
// spread over its taps, then added back into the image by col2im.
func poolGradComposed(g, x *Tensor, win window, bp backend.Pool2DParams) *Tensor {
	n, c := x.shape[0], x.shape[1]
	kk, l := win.kh*win.kw, win.outH*win.outW
	gl := g.Reshape(n, c, 1, l)
	defer gl.Release()
	var gcols *Tensor
	if bp.Mode == backend.MaxPool {
		cols := im2col(x, win, math.Inf(-1))
		defer cols.Release()
		idx := maxTaps(cols, win, win.firstInside())
		defer idx.Release()
		gc := gl.contiguous("pool_backward")
		defer gc.Release()
		gcols = newTensor("pool_backward", cols.ds(), g.dtype, cols.shape)
		gcols.fill("pool_backward", 0)
		check("pool_backward", gcols.ds().bd.ScatterAdd(gcols.ds().stream(), gcols.bv(), idx.bv(), gc.bv(), 2))
	} else {
		var d *Tensor
		if counts := win.divisors(bp.CountIncludePad); counts != nil {
			r := reciprocals(counts, x)
			defer r.Release()
			d = gl.Mul(r)
		} else {
			d = gl.MulScalar(1 / float64(kk))
		}
		defer d.Release()
		gcols = d.Expand(n, c, kk, l)
	}
	defer gcols.Release()
	flat := gcols.Reshape(n, c, kk*l)
	defer flat.Release()
	return col2im("pool_backward", flat, win)
}
