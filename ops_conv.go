package vram

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
)

// Conv2dParams describes a 2-D convolution ([Conv2d], [ConvTranspose2d]).
// Index 0 of each pair is the height, index 1 the width. The zero value is
// PyTorch's default: stride 1, no padding, dilation 1, one group.
type Conv2dParams struct {
	Stride   [2]int // 0 means 1
	Padding  [2]int // zeros added on each side of the input
	Dilation [2]int // spacing of the kernel's taps; 0 means 1
	Groups   int    // 0 means 1; divides the input and output channels
	// OutputPadding adds rows and columns at the bottom and right of the
	// output of [ConvTranspose2d] (not allowed for [Conv2d]), each smaller
	// than the stride or the dilation: it picks among the output sizes
	// that a strided convolution maps onto the same input size.
	OutputPadding [2]int
	// Same pads the input so that the output of [Conv2d] has its size
	// (PyTorch's padding="same"; padding="valid" is the zero Padding): a
	// total of Dilation·(K-1) zeros along each axis, half of it on each
	// side and the odd one at the bottom or right, as PyTorch pads. It
	// needs stride 1, no Padding and a kernel of at least 1×1, and does
	// not apply to [ConvTranspose2d].
	Same bool
}

// resolve fills in the defaults of p and checks it, panicking with
// ErrArgument.
func (p Conv2dParams) resolve(op string, transposed bool) Conv2dParams {
	for i := range 2 {
		if p.Stride[i] == 0 {
			p.Stride[i] = 1
		}
		if p.Dilation[i] == 0 {
			p.Dilation[i] = 1
		}
	}
	if p.Groups == 0 {
		p.Groups = 1
	}
	switch {
	case p.Stride[0] < 0 || p.Stride[1] < 0:
		fail(op, ErrArgument, "stride %v must be positive", p.Stride)
	case p.Dilation[0] < 0 || p.Dilation[1] < 0:
		fail(op, ErrArgument, "dilation %v must be positive", p.Dilation)
	case p.Padding[0] < 0 || p.Padding[1] < 0:
		fail(op, ErrArgument, "padding %v must not be negative", p.Padding)
	case p.Groups < 0:
		fail(op, ErrArgument, "groups %d must be positive", p.Groups)
	case !transposed && p.OutputPadding != [2]int{}:
		fail(op, ErrArgument, "output padding %v applies to ConvTranspose2d only", p.OutputPadding)
	case p.Same && transposed:
		fail(op, ErrArgument, "padding \"same\" applies to Conv2d only")
	case p.Same && p.Stride != [2]int{1, 1}:
		fail(op, ErrArgument, "padding \"same\" needs stride 1, got stride %v", p.Stride)
	case p.Same && p.Padding != [2]int{}:
		fail(op, ErrArgument, "padding \"same\" computes the padding itself; got padding %v too", p.Padding)
	}
	for i := range 2 {
		if o := p.OutputPadding[i]; o < 0 || o >= p.Stride[i] && o >= p.Dilation[i] {
			fail(op, ErrArgument, "output padding %v must be smaller than the stride %v or the dilation %v",
				p.OutputPadding, p.Stride, p.Dilation)
		}
	}
	return p
}

func (p Conv2dParams) backend() backend.Conv2DParams {
	return backend.Conv2DParams{Stride: p.Stride, Padding: p.Padding, Dilation: p.Dilation, Groups: p.Groups}
}

// window is the geometry of a sliding window: a kernel of kh×kw taps,
// dilated, moved with a stride over an input of inH×inW padded on each
// side, giving outH×outW positions. It keys the index cache.
type window struct {
	inH, inW, outH, outW int
	kh, kw, sh, sw       int
	ph, pw, dh, dw       int
}

// hostCache holds immutable host slices (the gather indices and window
// sizes of the composed ops) by geometry, shared by every goroutine. It is
// bounded: an insertion that would pass limit bytes empties it first, so a
// program whose shapes change every step keeps at most limit, rebuilding
// what it needs again.
type hostCache struct {
	mu    sync.Mutex
	m     map[any]any
	bytes int64
	limit int64
}

// indexCache is the composed ops' cache: 64 MiB.
var indexCache = &hostCache{limit: 64 << 20}

// get returns the value cached under k.
func (c *hostCache) get(k any) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// put caches v, of size bytes, under k unless another goroutine did
// first, and returns the cached value.
func (c *hostCache) put(k, v any, size int64) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		return old
	}
	if c.m == nil || c.bytes+size > c.limit {
		c.m, c.bytes = map[any]any{}, 0
	}
	if size <= c.limit {
		c.m[k] = v
		c.bytes += size
	}
	return v
}

// index returns, for tap k and output position l, the flat position
// ih·inW + iw of the input element the tap reads at k·L + l (L =
// outH·outW), or inH·inW (a padding slot past the input) where it falls
// into the padding. The slice is cached and must not be modified.
func (w window) index() []int64 {
	if v, ok := indexCache.get(w); ok {
		return v.([]int64)
	}
	w.checkSize("im2col")
	L := w.outH * w.outW
	hw := int64(w.inH * w.inW)
	idx := make([]int64, w.kh*w.kw*L)
	for i := range w.kh {
		for j := range w.kw {
			row := idx[(i*w.kw+j)*L:]
			for oy := range w.outH {
				iy := oy*w.sh - w.ph + i*w.dh
				for ox := range w.outW {
					ix := ox*w.sw - w.pw + j*w.dw
					if iy < 0 || iy >= w.inH || ix < 0 || ix >= w.inW {
						row[oy*w.outW+ox] = hw
					} else {
						row[oy*w.outW+ox] = int64(iy*w.inW + ix)
					}
				}
			}
		}
	}
	return indexCache.put(w, idx, 8*int64(len(idx))).([]int64)
}

// maxIndexEntries bounds the gather index of one window (8 bytes an
// entry, built on the host): 512 Mi entries, 4 GiB.
const maxIndexEntries = 1 << 29

// checkSize panics with ErrShape, naming op, when the composed path's
// index for w would pass maxIndexEntries, rather than let the host run out
// of memory building it. The composed paths check before they start;
// native kernels have no such bound.
func (w window) checkSize(op string) {
	if n := float64(w.kh) * float64(w.kw) * float64(w.outH) * float64(w.outW); n > maxIndexEntries {
		fail(op, ErrShape, "a %dx%d window over a %dx%d output needs a gather index of %.0f entries on the host, more than the %d the composed path allows; "+
			"use a device with native convolutions (cuDNN), or split the input", w.kh, w.kw, w.outH, w.outW, n, maxIndexEntries)
	}
}

// indexTensor returns w's index as an int64 tensor [1, 1, KK·L] on ds.
func (w window) indexTensor(ds *devState) *Tensor {
	idx := w.index()
	return tableOn(ds, idx, Shape{1, 1, len(idx)}, Int64)
}

// im2col returns the windows of x [N, C, inH, inW] as [N, C, KK, L]: tap k
// of output position l of channel c is element [n, c, k, l], pad where the
// tap falls outside x. It is recorded (a concatenation and a Gather).
func im2col(x *Tensor, w window, pad float64) *Tensor {
	n, c := x.shape[0], x.shape[1]
	hw := w.inH * w.inW
	xf := x.Reshape(n, c, hw)
	defer xf.Release()
	pv := Full(Shape{n, c, 1}, pad, x.dtype, x.Device())
	defer pv.Release()
	xe := Cat([]*Tensor{xf, pv}, 2)
	defer xe.Release()
	idx := w.indexTensor(x.ds())
	defer idx.Release()
	kk, l := w.kh*w.kw, w.outH*w.outW
	ix := idx.Expand(n, c, kk*l)
	defer ix.Release()
	cols := xe.Gather(2, ix)
	defer cols.Release()
	return cols.Reshape(n, c, kk, l)
}

// col2im adds the windows cols [N, C, KK·L] back into an image [N, C,
// inH, inW] of w, each tap's value into the element it read (im2col's
// adjoint): the output of a transposed convolution. 16-bit values are
// summed in float32 and rounded once. It is recorded; its gradient is
// im2col of the image's gradient.
func col2im(op string, cols *Tensor, w window) *Tensor {
	ds := cols.ds()
	n, c := cols.shape[0], cols.shape[1]
	hw := w.inH * w.inW
	wdt := opMath(cols.dtype)
	z := newTensor(op, ds, wdt, []int{n, c, hw + 1})
	defer z.Release()
	z.fill(op, 0)
	src := castRaw(cols, wdt)
	defer src.Release()
	if !src.IsContiguous() {
		c := src.clone()
		src.Release()
		src = c
	}
	idx := w.indexTensor(ds)
	defer idx.Release()
	iv := idx.bv()
	iv.Shape, iv.Strides = slices.Clone(cols.shape), []int{0, 0, 1}
	check(op, ds.bd.ScatterAdd(ds.stream(), z.bv(), iv, src.bv(), 2))
	shape := []int{n, c, w.inH, w.inW}
	img := z.view(shape, []int{c * (hw + 1), hw + 1, w.inW, 1}, 0)
	out := img
	if wdt != cols.dtype {
		out = castRaw(img, cols.dtype)
		img.Release()
	}
	if needsGrad(cols) {
		record(op, out, []*Tensor{cols}, nil, func(g *Tensor) []*Tensor {
			r := im2col(g, w, 0)
			defer r.Release()
			return []*Tensor{r.Reshape(cols.shape...)}
		})
	}
	return out
}

// noNativeConv turns the devices' native convolutions, pooling and batch
// normalization off, for tests of the composed path.
var noNativeConv atomic.Bool

// nativeFloat reports whether the native interfaces take dt.
func nativeFloat(dt DType) bool { return dt == Float32 || dt == Float16 || dt == BFloat16 }

// convFormat returns the memory format of a convolution's output, as
// PyTorch picks it: channels-last when the input or the weight is.
func convFormat(x, w *Tensor) MemoryFormat {
	if x.SuggestMemoryFormat() == ChannelsLast || w.SuggestMemoryFormat() == ChannelsLast {
		return ChannelsLast
	}
	return ContiguousFormat
}

// unbatched runs f on x [N, C, H, W], or on x [C, H, W] as a batch of one
// whose result loses the batch dimension again (PyTorch's unbatched
// input).
func unbatched(op string, x *Tensor, f func(x *Tensor) *Tensor) *Tensor {
	x.live(op)
	switch len(x.shape) {
	case 4:
		return f(x)
	case 3:
		xb := x.Unsqueeze(0)
		defer xb.Release()
		y := f(xb)
		defer y.Release()
		return y.Squeeze(0)
	}
	fail(op, ErrShape, "input must be [N, C, H, W] or [C, H, W], got shape %v", Shape(x.shape))
	return nil
}

// Conv2d returns the 2-D convolution (cross-correlation, as in every
// deep-learning library) of x [N, C, H, W] with weight [O, C/Groups, KH,
// KW], plus bias [O] when it is not nil, of shape [N, O, OH, OW] with OH =
// (H + 2·Padding - Dilation·(KH-1) - 1)/Stride + 1 and OW likewise
// (torch.nn.functional.conv2d), or OH = H and OW = W with p.Same. x may
// also be [C, H, W], giving [O, OH, OW].
//
// A device with native convolutions ([backend.Convolver]: cuDNN on CUDA)
// runs them, forward and backward; elsewhere, or for what the device has
// no kernel for, the convolution is composed from a Gather of the input's
// windows (im2col, with an index built once per shape on the host) and a
// batched matrix product, with the same results up to rounding. The output
// is channels-last when x or the weight is ([ChannelsLast]), else
// row-major. Inside [Autocast] the convolution runs in the region's 16-bit
// dtype, as matrix products do. The tensors must be floating-point of one
// dtype ([ErrDType]) on one device; a weight whose channels do not match
// x's or that has fewer than Groups entries along dimension 0 (as PyTorch
// requires), a kernel larger than the padded input, or parameters whose
// sizes overflow an int, panics with [ErrShape], a bad parameter with
// [ErrArgument].
func Conv2d(x, weight, bias *Tensor, p Conv2dParams) *Tensor {
	const op = "conv2d"
	defer asOp(op)
	notNil(op, x, weight)
	return unbatched(op, x, func(x *Tensor) *Tensor { return conv2d(op, x, weight, bias, p, false, ActNone) })
}

// Conv2dAct returns act(Conv2d(x, weight, bias, p)): a convolution, its
// bias and its activation as one op. A device whose native convolution
// fuses them (cuDNN's convolution with bias and ReLU) runs the three in
// one kernel, and the backward pass takes the ReLU's gradient from the
// output; elsewhere it is the convolution followed by [BiasAct], with the
// same results up to rounding. Everything else is as for Conv2d.
func Conv2dAct(x, weight, bias *Tensor, p Conv2dParams, act Activation) *Tensor {
	const op = "conv2d"
	defer asOp(op)
	act.check(op)
	notNil(op, x, weight)
	return unbatched(op, x, func(x *Tensor) *Tensor { return conv2d(op, x, weight, bias, p, false, act) })
}

// ConvTranspose2d returns the transposed convolution of x [N, C, H, W]
// with weight [C, O/Groups, KH, KW], plus bias [O] when it is not nil: the
// gradient of [Conv2d] with respect to its input, used to upsample
// (torch.nn.functional.conv_transpose2d). The output is [N, O, OH, OW]
// with OH = (H-1)·Stride - 2·Padding + Dilation·(KH-1) + OutputPadding + 1
// and OW likewise. Devices, autocast, formats and errors are as for
// [Conv2d].
func ConvTranspose2d(x, weight, bias *Tensor, p Conv2dParams) *Tensor {
	const op = "conv_transpose2d"
	defer asOp(op)
	notNil(op, x, weight)
	return unbatched(op, x, func(x *Tensor) *Tensor { return conv2d(op, x, weight, bias, p, true, ActNone) })
}

// maxExtent bounds the padded input, the dilated kernel and a transposed
// convolution's output along one axis, so that the int arithmetic of the
// geometry cannot overflow (and wrap to a small, wrong size).
const maxExtent = 1 << 62

// checkExtent panics with ErrShape, naming op, when the padded input or
// the dilated kernel along an axis of size in, or (transposed) the output
// that the stride spreads the input over, reaches maxExtent. The sizes are
// computed in float64, which cannot overflow.
func checkExtent(op string, in, kernel, stride, padding, dilation, outputPadding int, transposed bool) {
	padded := float64(in) + 2*float64(padding)
	span := float64(dilation)*float64(kernel-1) + 1
	out := 0.0
	if transposed {
		out = float64(in-1)*float64(stride) + span + float64(outputPadding)
	}
	if padded >= maxExtent || span >= maxExtent || out >= maxExtent {
		fail(op, ErrShape, "input size %d with kernel %d, stride %d, padding %d and dilation %d overflows the sizes of a tensor",
			in, kernel, stride, padding, dilation)
	}
}

// convGeom is the checked geometry of a convolution.
type convGeom struct {
	p                 Conv2dParams
	n, c, h, w        int // the input
	o, oh, ow, kh, kw int // output channels and size, kernel
	win               window
}

// geometry checks x, w and bias and returns the convolution's geometry.
// For a transposed convolution, win maps the output (as the input of the
// corresponding convolution) to the input's positions.
func geometry(op string, x, w, bias *Tensor, p Conv2dParams, transposed bool) convGeom {
	if len(w.shape) != 4 {
		if transposed {
			fail(op, ErrShape, "weight must be [in_channels, out_channels/groups, kH, kW], got shape %v", Shape(w.shape))
		}
		fail(op, ErrShape, "weight must be [out_channels, in_channels/groups, kH, kW], got shape %v", Shape(w.shape))
	}
	g := convGeom{p: p, n: x.shape[0], c: x.shape[1], h: x.shape[2], w: x.shape[3], kh: w.shape[2], kw: w.shape[3]}
	checkExtent(op, g.h, g.kh, p.Stride[0], p.Padding[0], p.Dilation[0], p.OutputPadding[0], transposed)
	checkExtent(op, g.w, g.kw, p.Stride[1], p.Padding[1], p.Dilation[1], p.OutputPadding[1], transposed)
	G := p.Groups
	if G > w.shape[0] {
		// PyTorch's rule; it also bounds the channel counts that G
		// multiplies below by the weight's size.
		fail(op, ErrShape, "groups %d needs a weight with at least %d entries along dimension 0, got weight %v", G, G, Shape(w.shape))
	}
	if transposed {
		if w.shape[0] != g.c {
			fail(op, ErrShape, "weight %v expects %d input channels, got input of shape %v", Shape(w.shape), w.shape[0], Shape(x.shape))
		}
		if g.c%G != 0 {
			fail(op, ErrArgument, "groups %d does not divide the %d input channels", G, g.c)
		}
		g.o = w.shape[1] * G
		g.oh = (g.h-1)*p.Stride[0] - 2*p.Padding[0] + p.Dilation[0]*(g.kh-1) + p.OutputPadding[0] + 1
		g.ow = (g.w-1)*p.Stride[1] - 2*p.Padding[1] + p.Dilation[1]*(g.kw-1) + p.OutputPadding[1] + 1
		if g.oh < 1 || g.ow < 1 {
			fail(op, ErrShape, "output size %dx%d of input %v, weight %v, stride %v, padding %v is empty; use less padding",
				g.oh, g.ow, Shape(x.shape), Shape(w.shape), p.Stride, p.Padding)
		}
		g.win = window{inH: g.oh, inW: g.ow, outH: g.h, outW: g.w, kh: g.kh, kw: g.kw,
			sh: p.Stride[0], sw: p.Stride[1], ph: p.Padding[0], pw: p.Padding[1], dh: p.Dilation[0], dw: p.Dilation[1]}
	} else {
		g.o = w.shape[0]
		if g.o%G != 0 {
			fail(op, ErrArgument, "groups %d does not divide the weight's %d output channels (weight %v)", G, g.o, Shape(w.shape))
		}
		if w.shape[1]*G != g.c {
			fail(op, ErrShape, "weight %v with groups %d expects input with %d channels, got %d channels (input %v)",
				Shape(w.shape), G, w.shape[1]*G, g.c, Shape(x.shape))
		}
		g.oh = backend.ConvOutputSize(g.h, g.kh, p.Stride[0], p.Padding[0], p.Dilation[0])
		g.ow = backend.ConvOutputSize(g.w, g.kw, p.Stride[1], p.Padding[1], p.Dilation[1])
		if g.oh < 1 || g.ow < 1 {
			fail(op, ErrShape, "kernel %dx%d (dilation %v) is larger than the padded input %dx%d (input %v, padding %v)",
				g.kh, g.kw, p.Dilation, g.h+2*p.Padding[0], g.w+2*p.Padding[1], Shape(x.shape), p.Padding)
		}
		g.win = window{inH: g.h, inW: g.w, outH: g.oh, outW: g.ow, kh: g.kh, kw: g.kw,
			sh: p.Stride[0], sw: p.Stride[1], ph: p.Padding[0], pw: p.Padding[1], dh: p.Dilation[0], dw: p.Dilation[1]}
	}
	if bias != nil && (len(bias.shape) != 1 || bias.shape[0] != g.o) {
		fail(op, ErrShape, "bias must be [%d], got shape %v", g.o, Shape(bias.shape))
	}
	return g
}

// dual returns the geometry of the convolution that maps g's output back
// to its input: a transposed convolution for a convolution and the other
// way round, over the same window.
func (g convGeom) dual() convGeom {
	d := g
	d.c, d.h, d.w = g.o, g.oh, g.ow
	d.o, d.oh, d.ow = g.c, g.h, g.w
	return d
}

func conv2d(op string, x, w, bias *Tensor, p Conv2dParams, transposed bool, act Activation) *Tensor {
	if g := current(); g != nil && g.autocast != nil {
		ops, done := autocastLow(op, x, w, bias)
		defer done()
		x, w, bias = ops[0], ops[1], ops[2]
	}
	ds, held := sameDevice(op, compact([]*Tensor{x, w, bias})...)
	defer held.unpin()
	fusedFloat(op, x, w, bias)
	p = p.resolve(op, transposed)
	if p.Same {
		var xp *Tensor
		xp, p = samePadding(op, x, w, p)
		if xp != x {
			defer xp.Release()
			x = xp
		}
	}
	geo := geometry(op, x, w, bias, p, transposed)
	f := convFormat(x, w)
	if y := convNative(op, ds, x, w, bias, geo, transposed, act == ActReLU); y != nil {
		if act == ActNone || act == ActReLU && !transposed {
			return y
		}
		// An activation the kernel does not fuse.
		defer y.Release()
		a := y.unary(act)
		if f != ChannelsLast {
			return a
		}
		defer a.Release()
		return a.toFormat(op, f)
	}
	geo.win.checkSize(op)
	var y *Tensor
	if transposed {
		y = convTransposeComposed(x, w, bias, geo, act)
	} else {
		y = convComposed(x, w, bias, geo, act)
	}
	if f == ChannelsLast {
		defer y.Release()
		return y.toFormat(op, f)
	}
	return y
}

// samePadding returns the input and parameters of the convolution of x
// [N, C, H, W] with w that p.Same asks for: p with half of each axis's
// total padding Dilation·(K-1) on both sides, and x itself, or, when a
// total is odd, x with a row or column of zeros more at the bottom or
// right (recorded, in x's memory format) for the caller to release. An
// empty kernel, whose total would be negative, or one whose total
// overflows, panics with ErrShape.
func samePadding(op string, x, w *Tensor, p Conv2dParams) (*Tensor, Conv2dParams) {
	if len(w.shape) != 4 {
		fail(op, ErrShape, "weight must be [out_channels, in_channels/groups, kH, kW], got shape %v", Shape(w.shape))
	}
	p.Same = false
	for i := range 2 {
		k := w.shape[2+i]
		if k < 1 {
			fail(op, ErrShape, "padding \"same\" needs a kernel of at least 1x1, got weight %v", Shape(w.shape))
		}
		if float64(p.Dilation[i])*float64(k-1) >= maxExtent {
			fail(op, ErrShape, "padding \"same\" for kernel %v with dilation %v needs a padding that overflows the sizes of a tensor",
				Shape(w.shape[2:]), p.Dilation)
		}
	}
	xp := x
	for i := range 2 {
		total := p.Dilation[i] * (w.shape[2+i] - 1)
		p.Padding[i] = total / 2
		if total%2 == 0 {
			continue
		}
		shape := slices.Clone(xp.shape)
		shape[2+i] = 1
		z := Zeros(shape, xp.dtype, xp.Device())
		cat := Cat([]*Tensor{xp, z}, 2+i)
		z.Release()
		if xp != x {
			xp.Release()
		}
		xp = cat
	}
	if xp != x && x.SuggestMemoryFormat() == ChannelsLast {
		defer xp.Release()
		return xp.toFormat(op, ChannelsLast), p
	}
	return xp, p
}

// unary returns the recorded act(t) (not ActNone).
func (t *Tensor) unary(act Activation) *Tensor {
	if act == ActGELU {
		return t.Gelu()
	}
	return t.Relu()
}

// biasAct returns the recorded act(y + bias) for y [N, O, H, W] and bias
// [O] or nil, and releases y.
func biasAct(y, bias *Tensor, act Activation) *Tensor {
	if bias == nil && act == ActNone {
		return y
	}
	defer y.Release()
	if bias == nil {
		return y.unary(act)
	}
	b := bias.Reshape(1, bias.shape[0], 1, 1)
	defer b.Release()
	return BiasAct(y, b, act)
}

// convComposed is Conv2d from recorded ops: im2col and a batched product
// [G, O/G, C/G·KK] × [N, G, C/G·KK, L], then the bias and act.
func convComposed(x, w, bias *Tensor, g convGeom, act Activation) *Tensor {
	G := g.p.Groups
	kk, l := g.kh*g.kw, g.oh*g.ow
	cols := im2col(x, g.win, 0)
	defer cols.Release()
	cg := cols.Reshape(g.n, G, g.c/G*kk, l)
	defer cg.Release()
	wg := w.Reshape(G, g.o/G, g.c/G*kk)
	defer wg.Release()
	r := wg.MatMul(cg)
	defer r.Release()
	return biasAct(r.Reshape(g.n, g.o, g.oh, g.ow), bias, act)
}

// convTransposeComposed is ConvTranspose2d from recorded ops: a batched
// product [G, O/G·KK, C/G] × [N, G, C/G, H·W] and col2im, then the bias
// and act.
func convTransposeComposed(x, w, bias *Tensor, g convGeom, act Activation) *Tensor {
	G := g.p.Groups
	kk := g.kh * g.kw
	xg := x.Reshape(g.n, G, g.c/G, g.h*g.w)
	defer xg.Release()
	w3 := w.Reshape(G, g.c/G, g.o/G*kk)
	defer w3.Release()
	wt := w3.Transpose(1, 2)
	defer wt.Release()
	r := wt.MatMul(xg)
	defer r.Release()
	cols := r.Reshape(g.n, g.o, kk*g.h*g.w)
	defer cols.Release()
	return biasAct(col2im("conv_transpose2d", cols, g.win), bias, act)
}

// convWeightGrad returns the gradient of a convolution's weight [O, C/G,
// KH, KW] from its output gradient gy [N, O, OH, OW] and input x, composed.
func convWeightGrad(gy, x *Tensor, g convGeom) *Tensor {
	G := g.p.Groups
	kk, l := g.kh*g.kw, g.oh*g.ow
	cols := im2col(x, g.win, 0)
	defer cols.Release()
	cg := cols.Reshape(g.n, G, g.c/G*kk, l)
	defer cg.Release()
	ct := cg.Transpose(2, 3)
	defer ct.Release()
	gg := gy.Reshape(g.n, G, g.o/G, l)
	defer gg.Release()
	r := gg.MatMul(ct)
	defer r.Release()
	s := r.Sum(0)
	defer s.Release()
	return s.Reshape(g.o, g.c/G, g.kh, g.kw)
}

// convTransposeWeightGrad returns the gradient of a transposed
// convolution's weight [C, O/G, KH, KW] from its output gradient gy and
// input x, composed.
func convTransposeWeightGrad(gy, x *Tensor, g convGeom) *Tensor {
	G := g.p.Groups
	kk, hw := g.kh*g.kw, g.h*g.w
	cols := im2col(gy, g.win, 0) // [N, O, KK, H·W]
	defer cols.Release()
	cg := cols.Reshape(g.n, G, g.o/G*kk, hw)
	defer cg.Release()
	ct := cg.Transpose(2, 3)
	defer ct.Release()
	xg := x.Reshape(g.n, G, g.c/G, hw)
	defer xg.Release()
	r := xg.MatMul(ct)
	defer r.Release()
	s := r.Sum(0)
	defer s.Release()
	return s.Reshape(g.c, g.o/G, g.kh, g.kw)
}

// notImplemented reports whether err means "no kernel for this": the
// caller falls back to the composed path.
func notImplemented(err error) bool { return errors.Is(err, backend.ErrNotImplemented) }

// convNative runs the convolution with the device's [backend.Convolver],
// recording its backward pass, or returns nil when the device has none or
// none for these operands. A transposed convolution's forward pass is the
// backward-data kernel, its input gradient the forward kernel. relu asks
// the forward kernel of a convolution (not a transposed one) to apply a
// ReLU.
func convNative(op string, ds *devState, x, w, bias *Tensor, g convGeom, transposed, relu bool) *Tensor {
	relu = relu && !transposed
	cv, ok := ds.bd.(backend.Convolver)
	if !ok || noNativeConv.Load() || !nativeFloat(x.dtype) {
		return nil
	}
	f := convFormat(x, w)
	xc := x.inFormat(op, f)
	defer xc.Release()
	wc := w.inFormat(op, f)
	defer wc.Release()
	var bc *Tensor
	if bias != nil {
		bc = bias.contiguous(op)
		defer bc.Release()
	}
	bp := g.p.backend()
	s := ds.stream()
	y := newTensorFormat(op, ds, x.dtype, []int{g.n, g.o, g.oh, g.ow}, f)
	var err error
	if transposed {
		err = cv.Conv2DBackwardData(s, y.bv(), xc.bv(), wc.bv(), bp)
		if err == nil && bc != nil {
			bv := bc.bv()
			bv.Shape, bv.Strides = y.shape, []int{0, bc.strides[0], 0, 0}
			err = ds.bd.Binary(s, backend.Add, y.bv(), y.bv(), bv)
		}
	} else {
		var bv backend.View
		if bc != nil {
			bv = bc.bv()
		}
		err = cv.Conv2D(s, y.bv(), xc.bv(), wc.bv(), bv, bp, relu)
	}
	if notImplemented(err) {
		y.Release()
		return nil
	}
	if err != nil {
		y.Release()
		check(op, err)
	}
	if !needsGrad(x, w, bias) {
		return y
	}
	rx, rw, rb := x.requiresGrad.Load(), w.requiresGrad.Load(), bias != nil && bias.requiresGrad.Load()
	xShape, wShape := slices.Clone(x.shape), slices.Clone(w.shape)
	sv := []*Tensor{nil, nil, nil}
	if rw {
		sv[0] = xc.share()
	}
	if rx {
		sv[1] = wc.share()
	}
	if relu {
		sv[2] = y.share()
	}
	recordInto(op, y, []*Tensor{x, w, bias}, compact(sv), func(gy, into *Tensor) []*Tensor {
		if relu {
			gy = binaryRaw(op, backend.ReluBackward, gy, sv[2])
			defer gy.Release()
		}
		gc := gy.inFormat(op, f)
		defer gc.Release()
		s := ds.stream()
		var gx, gw, gb *Tensor
		if rx && !transposed && accumulates(cv, ds, into, gy.dtype, xShape, f) {
			// x's gradient so far (a residual's) takes this one in place.
			err := cv.(backend.ConvAccumulator).Conv2DBackwardDataAccumulate(s, into.bv(), gc.bv(), sv[1].bv(), bp)
			if err == nil {
				gx = into
			} else if !notImplemented(err) {
				check(op, err)
			}
		}
		if rx && gx == nil {
			gx = newTensorFormat(op, ds, gy.dtype, xShape, f)
			var err error
			if transposed {
				err = cv.Conv2D(s, gx.bv(), gc.bv(), sv[1].bv(), backend.View{}, bp, false)
			} else {
				err = cv.Conv2DBackwardData(s, gx.bv(), gc.bv(), sv[1].bv(), bp)
			}
			if notImplemented(err) {
				gx.Release()
				if transposed {
					gx = convComposed(gc, sv[1], nil, g.dual(), ActNone)
				} else {
					gx = convTransposeComposed(gc, sv[1], nil, g.dual(), ActNone)
				}
			} else if err != nil {
				gx.Release()
				check(op, err)
			}
		}
		if rw {
			gw = newTensorFormat(op, ds, gy.dtype, wShape, f)
			var dbv backend.View
			if rb {
				gb = newTensor(op, ds, gy.dtype, []int{g.o})
				dbv = gb.bv()
			}
			var err error
			if transposed {
				// The weight gradient of y = convT(x) is that of the
				// convolution of gy whose output gradient is x.
				err = cv.Conv2DBackwardFilter(s, gw.bv(), backend.View{}, sv[0].bv(), gc.bv(), bp)
			} else {
				err = cv.Conv2DBackwardFilter(s, gw.bv(), dbv, gc.bv(), sv[0].bv(), bp)
			}
			if notImplemented(err) {
				gw.Release()
				if gb != nil {
					gb.Release()
					gb = nil
				}
				if transposed {
					gw = convTransposeWeightGrad(gc, sv[0], g)
				} else {
					gw = convWeightGrad(gc, sv[0], g)
				}
			} else if err != nil {
				gw.Release()
				check(op, err)
			}
			if transposed && gb != nil {
				gb.Release()
				gb = nil
			}
		}
		if rb && gb == nil {
			gb = gc.Sum(0, 2, 3)
		}
		return []*Tensor{gx, gw, gb}
	})
	return y
}

// accumulates reports whether cv, ds's device, can add a convolution's
// input gradient, of dtype dt and shape in format f, into into: a
// [backend.ConvAccumulator] and a tensor on ds of that dtype, shape and
// format, dense.
func accumulates(cv backend.Convolver, ds *devState, into *Tensor, dt DType, shape []int, f MemoryFormat) bool {
	if _, ok := cv.(backend.ConvAccumulator); !ok || into == nil || into.ds() != ds || into.dtype != dt || !slices.Equal(into.shape, shape) {
		return false
	}
	return isDense(into.shape, into.strides, f) && (f != ChannelsLast || stridesLikeChannelsLast(into.shape, into.strides))
}

// Conv1dParams describes a 1-D convolution ([Conv1d]). The zero value is
// PyTorch's default: stride 1, no padding, dilation 1, one group.
type Conv1dParams struct {
	Stride   int // 0 means 1
	Padding  int // zeros added on each side of the input
	Dilation int // spacing of the kernel's taps; 0 means 1
	Groups   int // 0 means 1; divides the input and output channels
	// Same pads the input so that the output keeps its length (PyTorch's
	// padding="same"; padding="valid" is the zero Padding), as
	// [Conv2dParams].Same does along one axis: it needs stride 1 and no
	// Padding.
	Same bool
}

// conv2d returns p as the parameters of the 2-D convolution over [N, C,
// 1, L] that computes it.
func (p Conv1dParams) conv2d() Conv2dParams {
	return Conv2dParams{
		Stride:   [2]int{1, p.Stride},
		Padding:  [2]int{0, p.Padding},
		Dilation: [2]int{1, p.Dilation},
		Groups:   p.Groups,
		Same:     p.Same,
	}
}

// Conv1d returns the 1-D convolution (cross-correlation) of x [N, C, L]
// with weight [O, C/Groups, K], plus bias [O] when it is not nil, of shape
// [N, O, OL] with OL = (L + 2·Padding - Dilation·(K-1) - 1)/Stride + 1
// (torch.nn.functional.conv1d), or OL = L with p.Same. x may also be
// [C, L], giving [O, OL]. It runs as [Conv2d] over a height of one, with
// that function's devices, autocast and errors: a weight that is not 3-D
// or whose channels do not match x's, or a kernel longer than the padded
// input, panics with [ErrShape], a bad parameter with [ErrArgument].
func Conv1d(x, weight, bias *Tensor, p Conv1dParams) *Tensor {
	const op = "conv1d"
	defer asOp(op)
	notNil(op, x, weight)
	x.live(op)
	weight.live(op)
	if len(x.shape) != 2 && len(x.shape) != 3 {
		fail(op, ErrShape, "input must be [N, C, L] or [C, L], got shape %v", Shape(x.shape))
	}
	if len(weight.shape) != 3 {
		fail(op, ErrShape, "weight must be [out_channels, in_channels/groups, kernel], got shape %v", Shape(weight.shape))
	}
	p.check(op, x.shape, weight.shape)
	x4 := x.Unsqueeze(-2)
	defer x4.Release()
	w4 := weight.Unsqueeze(-2)
	defer w4.Release()
	y := Conv2d(x4, w4, bias, p.conv2d())
	defer y.Release()
	return y.Squeeze(-2)
}

// check panics, naming op, with ErrArgument for a negative or
// contradictory parameter of p and with ErrShape for a weight of shape
// ws [O, C/Groups, K] that does not fit an input of shape xs [N, C, L] or
// [C, L], so that a 1-D convolution's errors speak of its own shapes
// rather than of the 2-D convolution that computes it.
func (p Conv1dParams) check(op string, xs, ws []int) {
	switch {
	case p.Stride < 0 || p.Dilation < 0 || p.Padding < 0 || p.Groups < 0:
		fail(op, ErrArgument, "stride %d, dilation %d, padding %d and groups %d must not be negative", p.Stride, p.Dilation, p.Padding, p.Groups)
	case p.Same && p.Stride > 1:
		fail(op, ErrArgument, "padding \"same\" needs stride 1, got stride %d", p.Stride)
	case p.Same && p.Padding != 0:
		fail(op, ErrArgument, "padding \"same\" computes the padding itself; got padding %d too", p.Padding)
	}
	groups, dilation := max(p.Groups, 1), max(p.Dilation, 1)
	c, l := xs[len(xs)-2], xs[len(xs)-1]
	switch {
	case groups > ws[0]:
		fail(op, ErrShape, "groups %d needs a weight with at least %d entries along dimension 0, got weight %v", groups, groups, Shape(ws))
	case ws[0]%groups != 0 || ws[1]*groups != c:
		fail(op, ErrShape, "weight %v with groups %d expects input with %d channels and out_channels divisible by the groups, got input %v",
			Shape(ws), groups, ws[1]*groups, Shape(xs))
	case !p.Same && float64(dilation)*float64(ws[2]-1)+1 > float64(l)+2*float64(p.Padding):
		fail(op, ErrShape, "kernel %d (dilation %d) is longer than the padded input %d (input %v, padding %d)",
			ws[2], dilation, l+2*p.Padding, Shape(xs), p.Padding)
	}
}
