package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// ConvOptions are the settings of [NewConv2d], [NewConvTranspose2d] and
// [NewConv1d] besides the channels and the kernel size. The zero value is
// PyTorch's default: stride 1, no padding, dilation 1, one group, with a
// bias.
type ConvOptions struct {
	Stride   int // 0 means 1
	Padding  int // zeros added on each side
	Dilation int // 0 means 1
	Groups   int // 0 means 1; must divide both channel counts
	// OutputPadding is added to one side of a transposed convolution's
	// output (ConvTranspose2d only), smaller than Stride or Dilation.
	OutputPadding int
	NoBias        bool // no bias parameter (bias=False)

	// KernelHW, StrideHW, PaddingHW, DilationHW and OutputPaddingHW are
	// per-axis values, height first, as PyTorch's tuple arguments
	// (kernel_size=(3, 5)) give them: a pair that is not all zero takes
	// the place of the kernel argument or of the int field of its name.
	KernelHW, StrideHW, PaddingHW, DilationHW, OutputPaddingHW [2]int
	// PaddingSame pads the input so that the output keeps its size
	// (padding="same"; see [vram.Conv2dParams].Same): Conv2d only, with
	// stride 1 and no Padding.
	PaddingSame bool
	// PaddingMode is PyTorch's padding_mode: "" or "zeros" pads with zeros
	// inside the convolution; "reflect", "replicate" and "circular" (Conv2d
	// and Conv1d only, as in PyTorch) make the layer pad its input in that
	// mode with [vram.Pad] and convolve the result without padding (the
	// layer's PaddingMode field).
	PaddingMode string
}

// pair returns hw when it is not all zero, else v on both axes.
func pair(v int, hw [2]int) [2]int {
	if hw != [2]int{} {
		return hw
	}
	return [2]int{v, v}
}

// params returns o as vram's parameters and the kernel size, checked, for
// op with the given channels.
func (o ConvOptions) params(op string, in, out, kernel int, transposed bool) (vram.Conv2dParams, [2]int) {
	bad := func(format string, args ...any) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf(format, args...)})
	}
	k := pair(kernel, o.KernelHW)
	stride, padding, dilation, outPad := pair(o.Stride, o.StrideHW), pair(o.Padding, o.PaddingHW), pair(o.Dilation, o.DilationHW), pair(o.OutputPadding, o.OutputPaddingHW)
	groups := max(o.Groups, 1)
	neg := func(v [2]int) bool { return v[0] < 0 || v[1] < 0 }
	switch {
	case in < 1 || out < 1:
		bad("channels must be positive, got in=%d, out=%d", in, out)
	case k[0] < 1 || k[1] < 1:
		bad("kernel size must be positive, got %v", k)
	case neg(stride) || neg(dilation) || neg(padding) || o.Groups < 0 || neg(outPad):
		bad("negative option in %+v", o)
	case in%groups != 0 || out%groups != 0:
		bad("groups %d must divide both in_channels %d and out_channels %d", groups, in, out)
	case !transposed && outPad != [2]int{}:
		bad("OutputPadding applies to ConvTranspose2d only")
	case !slices.Contains([]string{"", "zeros", "reflect", "replicate", "circular"}, o.PaddingMode):
		bad("padding mode %q must be one of \"zeros\", \"reflect\", \"replicate\" or \"circular\"", o.PaddingMode)
	case transposed && o.PaddingMode != "" && o.PaddingMode != "zeros":
		bad("padding mode %q: only \"zeros\" padding is supported for ConvTranspose2d", o.PaddingMode)
	case o.PaddingSame && transposed:
		bad("padding \"same\" applies to Conv2d only")
	case o.PaddingSame && padding != [2]int{}:
		bad("padding \"same\" computes the padding itself; got padding %v too", padding)
	}
	p := vram.Conv2dParams{
		Stride:        [2]int{max(stride[0], 1), max(stride[1], 1)},
		Padding:       padding,
		Dilation:      [2]int{max(dilation[0], 1), max(dilation[1], 1)},
		Groups:        groups,
		OutputPadding: outPad,
		Same:          o.PaddingSame,
	}
	if o.PaddingSame && p.Stride != [2]int{1, 1} {
		bad("padding \"same\" needs stride 1, got stride %v", p.Stride)
	}
	for i := range 2 {
		if transposed && outPad[i] >= p.Stride[i] && outPad[i] >= p.Dilation[i] {
			bad("output padding %v must be smaller than the stride %v or the dilation %v", outPad, p.Stride, p.Dilation)
		}
	}
	return p, k
}

// padMode returns the [vram.PadMode] of o.PaddingMode, which params has
// checked: PadConstant for zeros.
func (o ConvOptions) padMode() vram.PadMode {
	switch o.PaddingMode {
	case "reflect":
		return vram.PadReflect
	case "replicate":
		return vram.PadReplicate
	case "circular":
		return vram.PadCircular
	}
	return vram.PadConstant
}

// modePad returns x padded in mode before a convolution whose kernel,
// stride, padding and dilation along the last len(kernel) axes are
// kernel, stride, padding and dilation, with padding "same" when same is
// set, as PyTorch's _conv_forward pads for a padding_mode other than
// zeros: by the padding on both sides, or for "same" by Dilation·(K-1),
// half before and the odd one after; the caller releases the result and
// convolves it without padding. It returns x itself and ok false, for
// the convolution to pad (or refuse) as it would, for mode PadConstant,
// for no padding, and for parameters the convolution refuses (a negative
// padding or dilation, an empty kernel or a span past 2^62, "same" with
// a stride or a padding), so that it names them.
func modePad(x *vram.Tensor, mode vram.PadMode, kernel, stride, padding, dilation []int, same bool) (_ *vram.Tensor, ok bool) {
	if mode == vram.PadConstant {
		return x, false
	}
	pads := make([]int, 0, 2*len(kernel))
	for i := len(kernel) - 1; i >= 0; i-- { // the last axis first, as vram.Pad takes them
		d := max(dilation[i], 1)
		if padding[i] < 0 || dilation[i] < 0 || kernel[i] < 1 || float64(d)*float64(kernel[i]-1) >= 1<<62 ||
			same && (stride[i] > 1 || padding[i] != 0) {
			return x, false
		}
		lo, hi := padding[i], padding[i]
		if same {
			total := d * (kernel[i] - 1)
			lo, hi = total/2, total-total/2
		}
		pads = append(pads, lo, hi)
	}
	if !slices.ContainsFunc(pads, func(v int) bool { return v != 0 }) {
		return x, false
	}
	return vram.Pad(x, pads, mode, 0), true
}

// Conv2d is a 2-D convolution layer (torch.nn.Conv2d) over inputs
// [N, C, H, W] (or [C, H, W]); see [vram.Conv2d].
type Conv2d struct {
	Base
	// Weight is [out, in/groups, kH, kW].
	Weight *vram.Tensor
	// Bias is [out], or nil with ConvOptions.NoBias.
	Bias *vram.Tensor
	// Params are the convolution's stride, padding, dilation and groups.
	Params vram.Conv2dParams
	// PaddingMode is how the input is padded by Params.Padding (or, with
	// Params.Same, as "same" needs): [vram.PadConstant], the zero value,
	// pads with zeros inside the convolution; [vram.PadReflect],
	// [vram.PadReplicate] and [vram.PadCircular] pad the input in that mode
	// with [vram.Pad] first (padding_mode), which panics as Pad does for
	// sizes the mode cannot take (reflect padding as large as the input).
	PaddingMode vram.PadMode
	// WeightMask and BiasMask, set by package nn/prune through
	// [Conv2d.SetParameterMask], are nil or tensors of zeros and ones of
	// their parameter's shape: Forward then computes with Weight⊙WeightMask
	// and Bias⊙BiasMask, so the pruned elements get no gradient.
	WeightMask, BiasMask *vram.Tensor
}

// NewConv2d returns a Conv2d layer from in to out channels with a square
// kernel (or o.KernelHW), initialised as PyTorch does: the weight by
// Kaiming-uniform with a = sqrt(5) and the bias uniform in
// ±1/sqrt(fan_in), which both come to bound 1/sqrt(in/groups·kH·kW). opts
// (device, dtype, generator) go to vram's factory functions. Bad sizes or
// options panic with an *vram.Error of kind vram.ErrArgument.
func NewConv2d(in, out, kernel int, o ConvOptions, opts ...vram.Option) *Conv2d {
	const op = "conv2d"
	p, k := o.params(op, in, out, kernel, false)
	l := &Conv2d{Params: p, PaddingMode: o.padMode()}
	bound := 1 / math.Sqrt(float64(in/p.Groups*k[0]*k[1]))
	l.Weight = uniformParam(vram.Shape{out, in / p.Groups, k[0], k[1]}, bound, opts)
	l.RegisterParameterField("weight", &l.Weight)
	if !o.NoBias {
		l.Bias = uniformParam(vram.Shape{out}, bound, opts)
		l.RegisterParameterField("bias", &l.Bias)
	}
	return l
}

// Forward returns the convolution of x ([vram.Conv2d]), with the masks of
// a pruned layer applied.
func (l *Conv2d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "conv2d", "Conv2d")
	return l.ForwardAct(x, vram.ActNone)
}

// ForwardAct returns act(conv(x) + bias) as one fused op
// ([vram.Conv2dAct]): what [Sequential] runs for a Conv2d followed by a
// ReLU or GELU.
func (l *Conv2d) ForwardAct(x *vram.Tensor, act vram.Activation) *vram.Tensor {
	nilLayer(l == nil, "conv2d", "Conv2d")
	w, rw := masked(l.Weight, l.WeightMask)
	if rw {
		defer w.Release()
	}
	b, rb := masked(l.Bias, l.BiasMask)
	if rb {
		defer b.Release()
	}
	p := l.Params
	if w != nil && x != nil && w.Dim() == 4 && (x.Dim() == 3 || x.Dim() == 4) {
		ws := w.Shape()
		if xp, ok := modePad(x, l.PaddingMode, ws[2:], p.Stride[:], p.Padding[:], p.Dilation[:], p.Same); ok {
			defer xp.Release()
			x, p.Padding, p.Same = xp, [2]int{}, false
		}
	}
	if act == vram.ActNone {
		return vram.Conv2d(x, w, b, p)
	}
	return vram.Conv2dAct(x, w, b, p, act)
}

// Conv1d is a 1-D convolution layer (torch.nn.Conv1d) over inputs
// [N, C, L] (or [C, L]); see [vram.Conv1d].
type Conv1d struct {
	Base
	// Weight is [out, in/groups, kernel].
	Weight *vram.Tensor
	// Bias is [out], or nil with ConvOptions.NoBias.
	Bias *vram.Tensor
	// Params are the convolution's stride, padding, dilation and groups.
	Params vram.Conv1dParams
	// PaddingMode is how the input is padded, as for [Conv2d].
	PaddingMode vram.PadMode
}

// NewConv1d returns a Conv1d layer from in to out channels with a kernel
// of the given length, initialised as PyTorch does (weight and bias
// uniform in ±1/sqrt(in/groups·kernel)). Of o, the int fields, NoBias,
// PaddingSame and PaddingMode apply; the per-axis pairs and OutputPadding,
// which are 2-D settings, must be zero. opts (device, dtype, generator) go
// to vram's factory functions. Bad sizes or options panic with an
// *vram.Error of kind vram.ErrArgument.
func NewConv1d(in, out, kernel int, o ConvOptions, opts ...vram.Option) *Conv1d {
	const op = "conv1d"
	var zero [2]int
	if o.KernelHW != zero || o.StrideHW != zero || o.PaddingHW != zero || o.DilationHW != zero ||
		o.OutputPadding != 0 || o.OutputPaddingHW != zero {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: "per-axis pairs (KernelHW, StrideHW, ...) and OutputPadding are 2-D settings; Conv1d takes Stride, Padding, Dilation and Groups"})
	}
	p, _ := o.params(op, in, out, kernel, false)
	l := &Conv1d{Params: vram.Conv1dParams{Stride: p.Stride[1], Padding: p.Padding[1], Dilation: p.Dilation[1], Groups: p.Groups, Same: p.Same},
		PaddingMode: o.padMode()}
	bound := 1 / math.Sqrt(float64(in/p.Groups*kernel))
	l.Weight = uniformParam(vram.Shape{out, in / p.Groups, kernel}, bound, opts)
	l.RegisterParameterField("weight", &l.Weight)
	if !o.NoBias {
		l.Bias = uniformParam(vram.Shape{out}, bound, opts)
		l.RegisterParameterField("bias", &l.Bias)
	}
	return l
}

// Forward returns the convolution of x ([vram.Conv1d]).
func (l *Conv1d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "conv1d", "Conv1d")
	w, b, done := l.maskedParams(l.Weight, l.Bias)
	defer done()
	p := l.Params
	if w != nil && x != nil && w.Dim() == 3 && (x.Dim() == 2 || x.Dim() == 3) {
		if xp, ok := modePad(x, l.PaddingMode, w.Shape()[2:], []int{p.Stride}, []int{p.Padding}, []int{p.Dilation}, p.Same); ok {
			defer xp.Release()
			x, p.Padding, p.Same = xp, 0, false
		}
	}
	return vram.Conv1d(x, w, b, p)
}

// ConvTranspose2d is a 2-D transposed convolution layer
// (torch.nn.ConvTranspose2d); see [vram.ConvTranspose2d].
type ConvTranspose2d struct {
	Base
	// Weight is [in, out/groups, kH, kW].
	Weight *vram.Tensor
	// Bias is [out], or nil with ConvOptions.NoBias.
	Bias *vram.Tensor
	// Params are the convolution's stride, padding, dilation, groups and
	// output padding.
	Params vram.Conv2dParams
}

// NewConvTranspose2d returns a ConvTranspose2d layer from in to out
// channels with a square kernel (or o.KernelHW), initialised as PyTorch
// does (bound 1/sqrt(out/groups·kH·kW), the fan-in PyTorch computes from
// the weight's second dimension). opts and errors are as for [NewConv2d].
func NewConvTranspose2d(in, out, kernel int, o ConvOptions, opts ...vram.Option) *ConvTranspose2d {
	const op = "conv_transpose2d"
	p, k := o.params(op, in, out, kernel, true)
	l := &ConvTranspose2d{Params: p}
	bound := 1 / math.Sqrt(float64(out/p.Groups*k[0]*k[1]))
	l.Weight = uniformParam(vram.Shape{in, out / p.Groups, k[0], k[1]}, bound, opts)
	l.RegisterParameterField("weight", &l.Weight)
	if !o.NoBias {
		l.Bias = uniformParam(vram.Shape{out}, bound, opts)
		l.RegisterParameterField("bias", &l.Bias)
	}
	return l
}

// Forward returns the transposed convolution of x ([vram.ConvTranspose2d]).
func (l *ConvTranspose2d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "conv_transpose2d", "ConvTranspose2d")
	w, b, done := l.maskedParams(l.Weight, l.Bias)
	defer done()
	return vram.ConvTranspose2d(x, w, b, l.Params)
}

// ForwardSize returns the transposed convolution of x with an output of
// height h and width w, as PyTorch's forward(input, output_size) gives it:
// a stride above 1 maps several output sizes onto one input size, and the
// output padding (in place of Params.OutputPadding) picks among them, as a
// decoder matches the size of its encoder's feature map. A size outside
// the reachable ones, or parameters whose output sizes overflow an int,
// panic with an *vram.Error of kind vram.ErrShape; a bad input, weight or
// parameter panics as in [ConvTranspose2d.Forward].
func (l *ConvTranspose2d) ForwardSize(x *vram.Tensor, h, w int) *vram.Tensor {
	nilLayer(l == nil, "conv_transpose2d", "ConvTranspose2d")
	const op = "conv_transpose2d"
	notNil(op, x)
	notNil(op, l.Weight)
	s, ws := x.Shape(), l.Weight.Shape()
	p := l.Params
	neg := func(v [2]int) bool { return v[0] < 0 || v[1] < 0 }
	if len(s) < 3 || len(ws) != 4 || neg(p.Stride) || neg(p.Padding) || neg(p.Dilation) {
		return l.Forward(x) // vram.ConvTranspose2d names the bad shape or parameter
	}
	in := [2]int{s[len(s)-2], s[len(s)-1]}
	var stride, least [2]int
	for i := range 2 {
		stride[i] = max(p.Stride[i], 1)
		dilation := max(p.Dilation[i], 1)
		// The sizes in float64 first, which cannot overflow.
		if f := float64(in[i]-1)*float64(stride[i]) - 2*float64(p.Padding[i]) + float64(dilation)*float64(ws[2+i]-1) + 1; math.Abs(f)+float64(stride[i]) >= 1<<62 {
			panic(&vram.Error{Op: op, Kind: vram.ErrShape,
				Detail: fmt.Sprintf("input %v with weight %v, stride %v, padding %v and dilation %v gives output sizes that overflow an int",
					s, ws, p.Stride, p.Padding, p.Dilation)})
		}
		least[i] = (in[i]-1)*stride[i] - 2*p.Padding[i] + dilation*(ws[2+i]-1) + 1
	}
	want := [2]int{h, w}
	for i := range 2 {
		most := least[i] + stride[i] - 1
		if want[i] < least[i] || want[i] > most {
			panic(&vram.Error{Op: op, Kind: vram.ErrShape,
				Detail: fmt.Sprintf("requested output size %v is not reachable from input %v: axis %d takes %d to %d", want, s, i, least[i], most)})
		}
		p.OutputPadding[i] = want[i] - least[i]
	}
	mw, mb, done := l.maskedParams(l.Weight, l.Bias)
	defer done()
	return vram.ConvTranspose2d(x, mw, mb, p)
}

// poolParams checks and returns square pooling parameters.
func poolParams(op string, kernel, stride, padding int) vram.Pool2dParams {
	if kernel < 1 || stride < 0 || padding < 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("kernel %d must be positive, stride %d and padding %d not negative", kernel, stride, padding)})
	}
	if stride == 0 {
		stride = kernel
	}
	return vram.Pool2dParams{Kernel: [2]int{kernel, kernel}, Stride: [2]int{stride, stride}, Padding: [2]int{padding, padding}}
}

// MaxPool2d takes the maximum of each window (torch.nn.MaxPool2d); see
// [vram.MaxPool2d].
type MaxPool2d struct {
	Base
	Params vram.Pool2dParams
}

// NewMaxPool2d returns a MaxPool2d layer with a square window of kernel,
// moved by stride (0 means kernel, PyTorch's default) over the input
// padded with -Inf by padding on each side (at most kernel/2). PyTorch's
// other arguments are fields of Params, set before the first Forward:
// CeilMode (ceil_mode), Dilation, and per-axis pairs for tuple arguments.
func NewMaxPool2d(kernel, stride, padding int) *MaxPool2d {
	return &MaxPool2d{Params: poolParams("max_pool2d", kernel, stride, padding)}
}

// Forward returns the pooled x.
func (l *MaxPool2d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "max_pool2d", "MaxPool2d")
	return vram.MaxPool2d(x, l.Params)
}

// ForwardWithIndices returns the pooled x and the position of each
// maximum in its input plane, as a MaxPool2d made with
// return_indices=True does ([vram.MaxPool2dWithIndices]).
func (l *MaxPool2d) ForwardWithIndices(x *vram.Tensor) (y, indices *vram.Tensor) {
	nilLayer(l == nil, "max_pool2d", "MaxPool2d")
	return vram.MaxPool2dWithIndices(x, l.Params)
}

// AvgPool2d takes the mean of each window (torch.nn.AvgPool2d); see
// [vram.AvgPool2d].
type AvgPool2d struct {
	Base
	Params vram.Pool2dParams
}

// NewAvgPool2d returns an AvgPool2d layer with a square window, as
// [NewMaxPool2d]; the padding counts as zeros in the mean
// (count_include_pad=True) unless Params.ExcludePad is set. PyTorch's
// ceil_mode and divisor_override are Params.CeilMode and
// Params.DivisorOverride.
func NewAvgPool2d(kernel, stride, padding int) *AvgPool2d {
	return &AvgPool2d{Params: poolParams("avg_pool2d", kernel, stride, padding)}
}

// Forward returns the pooled x.
func (l *AvgPool2d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "avg_pool2d", "AvgPool2d")
	return vram.AvgPool2d(x, l.Params)
}

// AdaptiveAvgPool2d averages its input down to a fixed OutH×OutW
// (torch.nn.AdaptiveAvgPool2d); see [vram.AdaptiveAvgPool2d].
type AdaptiveAvgPool2d struct {
	Base
	OutH, OutW int
}

// NewAdaptiveAvgPool2d returns an AdaptiveAvgPool2d layer with output
// size outH×outW ([1, 1] for a global average). Sizes below 1 panic with
// an *vram.Error of kind vram.ErrArgument.
func NewAdaptiveAvgPool2d(outH, outW int) *AdaptiveAvgPool2d {
	if outH < 1 || outW < 1 {
		panic(&vram.Error{Op: "adaptive_avg_pool2d", Kind: vram.ErrArgument, Detail: fmt.Sprintf("output size %dx%d must be positive", outH, outW)})
	}
	return &AdaptiveAvgPool2d{OutH: outH, OutW: outW}
}

// Forward returns the pooled x.
func (l *AdaptiveAvgPool2d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "adaptive_avg_pool2d", "AdaptiveAvgPool2d")
	return vram.AdaptiveAvgPool2d(x, l.OutH, l.OutW)
}

// AdaptiveMaxPool2d takes the maximum of its input over a fixed
// OutH×OutW grid of windows (torch.nn.AdaptiveMaxPool2d); see
// [vram.AdaptiveMaxPool2d].
type AdaptiveMaxPool2d struct {
	Base
	OutH, OutW int
}

// NewAdaptiveMaxPool2d returns an AdaptiveMaxPool2d layer with output
// size outH×outW. Sizes below 1 panic with an *vram.Error of kind
// vram.ErrArgument.
func NewAdaptiveMaxPool2d(outH, outW int) *AdaptiveMaxPool2d {
	if outH < 1 || outW < 1 {
		panic(&vram.Error{Op: "adaptive_max_pool2d", Kind: vram.ErrArgument, Detail: fmt.Sprintf("output size %dx%d must be positive", outH, outW)})
	}
	return &AdaptiveMaxPool2d{OutH: outH, OutW: outW}
}

// Forward returns the pooled x.
func (l *AdaptiveMaxPool2d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "adaptive_max_pool2d", "AdaptiveMaxPool2d")
	return vram.AdaptiveMaxPool2d(x, l.OutH, l.OutW)
}

// ForwardWithIndices returns the pooled x and the position of each
// maximum in its input plane (return_indices=True;
// [vram.AdaptiveMaxPool2dWithIndices]).
func (l *AdaptiveMaxPool2d) ForwardWithIndices(x *vram.Tensor) (y, indices *vram.Tensor) {
	nilLayer(l == nil, "adaptive_max_pool2d", "AdaptiveMaxPool2d")
	return vram.AdaptiveMaxPool2dWithIndices(x, l.OutH, l.OutW)
}

// Flatten merges dimensions StartDim to EndDim into one (torch.nn.Flatten):
// by default every dimension but the batch's, turning [N, C, H, W] into
// [N, C·H·W] for a linear layer.
type Flatten struct {
	Base
	StartDim, EndDim int
}

// NewFlatten returns a Flatten of dimensions 1 to -1, PyTorch's default.
func NewFlatten() *Flatten { return &Flatten{StartDim: 1, EndDim: -1} }

// Forward returns x.Flatten(StartDim, EndDim).
func (l *Flatten) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "flatten", "Flatten")
	return x.Flatten(l.StartDim, l.EndDim)
}

// Dropout2d zeroes whole channels of its input [N, C, H, W] with
// probability P in training mode and scales the others by 1/(1-P)
// (torch.nn.Dropout2d): neighbouring pixels of a feature map are
// correlated, so dropping them one by one regularizes little. In
// evaluation mode it passes its input through. As PyTorch's does, it takes
// a 3-D input as [N, C, L], a batch of 1-D maps (what torch.nn.Dropout1d
// does), not as one unbatched image [C, H, W]: each of its N·C rows is
// kept or dropped whole.
type Dropout2d struct {
	Base
	// P is the probability of zeroing a channel, in [0, 1].
	P    float64
	opts []vram.Option
}

// NewDropout2d returns a Dropout2d layer; its masks come from the
// generator of a [vram.WithGenerator] option in opts, or from vram's
// default generator. It panics with an *vram.Error of kind
// vram.ErrArgument unless 0 <= p <= 1 (1 drops everything).
func NewDropout2d(p float64, opts ...vram.Option) *Dropout2d {
	if !(p >= 0 && p <= 1) {
		panic(&vram.Error{Op: "dropout2d", Kind: vram.ErrArgument, Detail: fmt.Sprintf("probability must be in [0, 1], got %v", p)})
	}
	return &Dropout2d{P: p, opts: slices.Clone(opts)}
}

// Forward returns x with channels dropped in training mode (the maps of
// its last two dimensions for a 4-D x, of its last one for a 3-D x), and
// a new reference to x in evaluation mode or when P is 0. It panics with
// an *vram.Error of kind vram.ErrShape unless x is 3-D or 4-D.
func (d *Dropout2d) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(d == nil, "dropout2d", "Dropout2d")
	notNil("dropout2d", x)
	if x.Dim() != 3 && x.Dim() != 4 {
		panic(&vram.Error{Op: "dropout2d", Kind: vram.ErrShape, Detail: fmt.Sprintf("input must be [N, C, H, W] or [C, H, W], got shape %v", x.Shape())})
	}
	if !d.Training() || d.P == 0 || x.NumElements() == 0 {
		return identity(x)
	}
	if !(d.P >= 0 && d.P <= 1) {
		panic(&vram.Error{Op: "dropout2d", Kind: vram.ErrArgument, Detail: fmt.Sprintf("probability must be in [0, 1], got %v", d.P)})
	}
	// One draw per channel, shared by its pixels: a 3-D x is [N, C, L],
	// as PyTorch takes it.
	return vram.FeatureDropout(x, d.P, x.Dim()-2, d.opts...)
}

// ToMemoryFormat lays every 4-D parameter and buffer of m (convolution
// weights) out in format f in place, with their gradients, as PyTorch's
// model.to(memory_format=torch.channels_last): the tensors keep their
// identity, so optimizers made before see the change. With
// [vram.ChannelsLast] a convolution then returns channels-last outputs for
// inputs in either format; convert the input too
// (x.Contiguous(vram.ChannelsLast)) so that the first layer does not
// convert it. With [vram.ContiguousFormat] every parameter and buffer is
// made row-major.
//
// A channels-last input alone also gives channels-last convolutions (a
// row-major weight is laid out like the input for each call, a small copy);
// converting the model as well saves those copies. The gradients of the
// converted weights are channels-last too, and so is the optimizers' state
// (package optim), so that the fused optimizer steps still update each
// weight in one pass. A nil m does nothing.
func ToMemoryFormat(m Module, f vram.MemoryFormat) {
	for _, p := range stateTensors(m) {
		if f == vram.ContiguousFormat || p.Tensor.Dim() == 4 {
			p.Tensor.ConvertMemoryFormat(f)
		}
	}
}
