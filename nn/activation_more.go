package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// This file holds the activations of torch.nn composed from vram's ops, so
// that every device runs them: their values and gradients, kinks
// included, are PyTorch's.

// mask returns x's elements for which keep is true as a tensor of x's
// dtype holding 1 where it is and 0 elsewhere, made without a graph.
func mask(x *vram.Tensor, keep func(*vram.Tensor) *vram.Tensor) *vram.Tensor {
	var m *vram.Tensor
	vram.NoGrad(func() {
		b := keep(x)
		defer b.Release()
		m = b.Cast(x.DType())
	})
	return m
}

// Softsign applies x/(1 + |x|) elementwise (torch.nn.Softsign).
type Softsign struct{ Base }

// NewSoftsign returns a Softsign module.
func NewSoftsign() *Softsign { return &Softsign{} }

// Forward returns x/(1 + |x|).
func (*Softsign) Forward(x *vram.Tensor) *vram.Tensor {
	defer asOp("softsign")
	notNil("softsign", x)
	var ts temps
	defer ts.release()
	return x.Div(ts.add(ts.add(x.Abs()).AddScalar(1)))
}

// Tanhshrink applies x − tanh(x) elementwise (torch.nn.Tanhshrink).
type Tanhshrink struct{ Base }

// NewTanhshrink returns a Tanhshrink module.
func NewTanhshrink() *Tanhshrink { return &Tanhshrink{} }

// Forward returns x − tanh(x).
func (*Tanhshrink) Forward(x *vram.Tensor) *vram.Tensor {
	defer asOp("tanhshrink")
	notNil("tanhshrink", x)
	th := x.Tanh()
	defer th.Release()
	return x.Sub(th)
}

// Hardshrink passes the elements whose magnitude exceeds Lambda, NaN
// included, and zeroes the others (torch.nn.Hardshrink); the gradient is
// 1 where it passes them and 0 elsewhere. A negative Lambda passes every
// element, as PyTorch's does.
type Hardshrink struct {
	Base
	// Lambda is the threshold (PyTorch's default is 0.5).
	Lambda float64
}

// NewHardshrink returns a Hardshrink module. It panics with an
// *vram.Error of kind vram.ErrArgument for a NaN lambda.
func NewHardshrink(lambda float64) *Hardshrink {
	checkHardshrink(lambda)
	return &Hardshrink{Lambda: lambda}
}

// checkHardshrink panics as [NewHardshrink] does for a NaN lambda.
func checkHardshrink(lambda float64) {
	if math.IsNaN(lambda) {
		panic(&vram.Error{Op: "hardshrink", Kind: vram.ErrArgument, Detail: "lambda must not be NaN"})
	}
}

// Forward returns x where |x| > Lambda and 0 (never −0) elsewhere. It
// panics as [NewHardshrink] does for a Lambda set to NaN since.
func (l *Hardshrink) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "hardshrink", "Hardshrink")
	defer asOp("hardshrink")
	notNil("hardshrink", x)
	checkHardshrink(l.Lambda)
	var ts temps
	defer ts.release()
	// Zeroed where −λ <= x <= λ, so that NaN passes, as in PyTorch.
	var inside *vram.Tensor
	vram.NoGrad(func() { inside = ts.add(ts.add(x.Abs()).LeScalar(l.Lambda)) })
	return vram.Where(inside, ts.add(x.NewZeros(nil)), x)
}

// Softshrink shrinks every element toward 0 by Lambda, giving x − Lambda
// above Lambda, x + Lambda below −Lambda and 0 between
// (torch.nn.Softshrink).
type Softshrink struct {
	Base
	// Lambda is the amount of shrinkage (PyTorch's default is 0.5).
	Lambda float64
}

// NewSoftshrink returns a Softshrink module. It panics with an
// *vram.Error of kind vram.ErrArgument for a negative, infinite or NaN
// lambda, as PyTorch refuses a negative one.
func NewSoftshrink(lambda float64) *Softshrink {
	checkLossParam("softshrink", "lambda", lambda)
	return &Softshrink{Lambda: lambda}
}

// Forward returns x shrunk toward 0 by Lambda. It panics as
// [NewSoftshrink] does for a Lambda set since to what it refuses.
func (l *Softshrink) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "softshrink", "Softshrink")
	defer asOp("softshrink")
	notNil("softshrink", x)
	checkLossParam("softshrink", "lambda", l.Lambda)
	var ts temps
	defer ts.release()
	// x − clamp(x, −λ, λ) where |x| > λ: the mask keeps the gradient at
	// ±λ at 0, as PyTorch's.
	m := ts.add(mask(x, func(x *vram.Tensor) *vram.Tensor { return ts.add(x.Abs()).GtScalar(l.Lambda) }))
	d := ts.add(x.Sub(ts.add(x.Clamp(-l.Lambda, l.Lambda))))
	return d.Mul(m)
}

// Threshold replaces the elements not greater than Threshold by Value and
// passes the others, NaN included (torch.nn.Threshold).
type Threshold struct {
	Base
	// Threshold is the value an element must exceed to pass; Value
	// replaces the others.
	Threshold, Value float64
}

// NewThreshold returns a Threshold module. It panics with an *vram.Error
// of kind vram.ErrArgument for a NaN threshold or value.
func NewThreshold(threshold, value float64) *Threshold {
	checkThreshold(threshold, value)
	return &Threshold{Threshold: threshold, Value: value}
}

// checkThreshold panics as [NewThreshold] does for a NaN threshold or
// value.
func checkThreshold(threshold, value float64) {
	if math.IsNaN(threshold) || math.IsNaN(value) {
		panic(&vram.Error{Op: "threshold", Kind: vram.ErrArgument, Detail: fmt.Sprintf("threshold and value must not be NaN, got %v and %v", threshold, value)})
	}
}

// Forward returns Value where x <= Threshold and x elsewhere; the
// gradient is 0 where x is replaced and 1 elsewhere. It panics as
// [NewThreshold] does for a Threshold or Value set to NaN since.
func (l *Threshold) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "threshold", "Threshold")
	defer asOp("threshold")
	notNil("threshold", x)
	checkThreshold(l.Threshold, l.Value)
	var ts temps
	defer ts.release()
	// Replaced where x <= Threshold, so that NaN passes, as in PyTorch.
	var below *vram.Tensor
	vram.NoGrad(func() { below = ts.add(x.LeScalar(l.Threshold)) })
	return vram.Where(below, ts.add(x.NewFull(nil, l.Value)), x)
}

// LogSigmoid applies log(sigmoid(x)) = −softplus(−x) elementwise, stably
// for large |x| (torch.nn.LogSigmoid).
type LogSigmoid struct{ Base }

// NewLogSigmoid returns a LogSigmoid module.
func NewLogSigmoid() *LogSigmoid { return &LogSigmoid{} }

// Forward returns log(sigmoid(x)), in x's dtype also inside a
// vram.Autocast region, as PyTorch's log_sigmoid.
func (*LogSigmoid) Forward(x *vram.Tensor) *vram.Tensor {
	defer asOp("log_sigmoid")
	notNil("log_sigmoid", x)
	var ts temps
	defer ts.release()
	// log_sigmoid is on none of autocast's lists: a 16-bit input gives its
	// dtype, though softplus alone would run in float32.
	var out *vram.Tensor
	vram.NoAutocast(func() { out = ts.add(ts.add(x.Neg()).Softplus(1, 20)).Neg() })
	return out
}

// Hardsigmoid applies min(max(x + 3, 0), 6)/6 elementwise
// (torch.nn.Hardsigmoid); its gradient is 1/6 strictly between −3 and 3
// and 0 elsewhere.
type Hardsigmoid struct{ Base }

// NewHardsigmoid returns a Hardsigmoid module.
func NewHardsigmoid() *Hardsigmoid { return &Hardsigmoid{} }

// Forward returns min(max(x + 3, 0), 6)/6.
func (*Hardsigmoid) Forward(x *vram.Tensor) *vram.Tensor {
	defer asOp("hardsigmoid")
	notNil("hardsigmoid", x)
	var ts temps
	defer ts.release()
	return ts.add(ts.add(x.Hardtanh(-3, 3)).AddScalar(3)).DivScalar(6)
}

// CELU applies max(0, x) + min(0, Alpha·(e^(x/Alpha) − 1)) elementwise
// (torch.nn.CELU).
type CELU struct {
	Base
	// Alpha scales the negative part (PyTorch's default is 1).
	Alpha float64
}

// NewCELU returns a CELU module. It panics with an *vram.Error of kind
// vram.ErrArgument for an alpha of 0, as PyTorch does, or one that is not
// finite.
func NewCELU(alpha float64) *CELU {
	checkCELU(alpha)
	return &CELU{Alpha: alpha}
}

// checkCELU panics as [NewCELU] does for an alpha that is 0 or not
// finite.
func checkCELU(alpha float64) {
	checkFinite("celu", "alpha", alpha)
	if alpha == 0 {
		panic(&vram.Error{Op: "celu", Kind: vram.ErrArgument, Detail: "alpha must not be 0"})
	}
}

// Forward returns x where x > 0 and Alpha·(e^(x/Alpha) − 1) elsewhere,
// which is Alpha·elu(x/Alpha) for a positive Alpha. A negative Alpha
// follows the same rule, as PyTorch's does. It panics as [NewCELU] does
// for an Alpha set since to what it refuses.
func (l *CELU) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "celu", "CELU")
	defer asOp("celu")
	notNil("celu", x)
	checkCELU(l.Alpha)
	var ts temps
	defer ts.release()
	if l.Alpha > 0 {
		return ts.add(ts.add(x.DivScalar(l.Alpha)).Elu(1)).MulScalar(l.Alpha)
	}
	// elu(x/Alpha) would take the exponential branch where x > 0. The
	// exponential is taken of x where x <= 0 and of 0 elsewhere, so that
	// no overflow reaches the value or the gradient.
	var pos *vram.Tensor
	vram.NoGrad(func() { pos = ts.add(x.GtScalar(0)) })
	z := ts.add(vram.Where(pos, ts.add(x.NewZeros(nil)), x))
	neg := ts.add(ts.add(ts.add(z.DivScalar(l.Alpha)).Expm1()).MulScalar(l.Alpha))
	return vram.Where(pos, x, neg)
}

// The constants of SELU, as PyTorch gives them.
const (
	seluAlpha = 1.6732632423543772848170429916717
	seluScale = 1.0507009873554804934193349852946
)

// SELU applies scale·elu(x, alpha) elementwise with PyTorch's constants
// alpha ≈ 1.6733 and scale ≈ 1.0507 (torch.nn.SELU).
type SELU struct{ Base }

// NewSELU returns a SELU module.
func NewSELU() *SELU { return &SELU{} }

// Forward returns scale·elu(x, alpha).
func (*SELU) Forward(x *vram.Tensor) *vram.Tensor {
	defer asOp("selu")
	notNil("selu", x)
	e := x.Elu(seluAlpha)
	defer e.Release()
	return e.MulScalar(seluScale)
}

// Softmin normalises its input to probabilities along Dim, as Softmax of
// −x (torch.nn.Softmin); a negative Dim counts from the end.
type Softmin struct {
	Base
	// Dim is the dimension summing to 1.
	Dim int
}

// NewSoftmin returns a Softmin module along dim.
func NewSoftmin(dim int) *Softmin { return &Softmin{Dim: dim} }

// Forward returns softmax(−x) along Dim.
func (l *Softmin) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "softmin", "Softmin")
	defer asOp("softmin")
	notNil("softmin", x)
	n := x.Neg()
	defer n.Release()
	return n.Softmax(l.Dim)
}

// GLU is the gated linear unit (torch.nn.GLU): it splits its input in
// halves a and b along Dim and returns a·sigmoid(b), of the input's shape
// with Dim halved.
type GLU struct {
	Base
	// Dim is the dimension split (PyTorch's default is −1); a negative
	// Dim counts from the end.
	Dim int
}

// NewGLU returns a GLU module splitting along dim.
func NewGLU(dim int) *GLU { return &GLU{Dim: dim} }

// Forward returns a·sigmoid(b). It panics with an *vram.Error of kind
// vram.ErrShape for a 0-dimensional x or an odd size along Dim, and of
// kind vram.ErrIndex for a Dim out of range.
func (l *GLU) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "glu", "GLU")
	const op = "glu"
	defer asOp(op)
	notNil(op, x)
	if x.Dim() == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: "glu does not take a 0-dimensional tensor"})
	}
	d := l.Dim
	if d < -x.Dim() || d >= x.Dim() {
		panic(&vram.Error{Op: op, Kind: vram.ErrIndex, Detail: fmt.Sprintf("dim %d out of range for %d dimensions", l.Dim, x.Dim())})
	}
	if d < 0 {
		d += x.Dim()
	}
	if n := x.Size(d); n%2 != 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("halving dimension must be even, but dimension %d is size %d", d, n)})
	}
	var ts temps
	defer ts.release()
	h := x.Size(d) / 2
	a, b := ts.add(x.Narrow(d, 0, h)), ts.add(x.Narrow(d, h, h))
	return a.Mul(ts.add(b.Sigmoid()))
}

// PReLU applies x where x > 0 and weight·x elsewhere (torch.nn.PReLU),
// with a learnt weight: one slope shared by every channel, or one per
// channel, the input's dimension 1 (a 1-dimensional input has no
// channels). Its gradient with respect to x at 0 is the slope, as
// PyTorch's.
type PReLU struct {
	Base
	// Weight holds the slopes, [NumParameters] ("weight").
	Weight *vram.Tensor
}

// NewPReLU returns a PReLU module with numParameters slopes (1, or the
// number of channels), each initialised to init (PyTorch's defaults are 1
// and 0.25). opts choose the device and dtype of the weight. It panics
// with an *vram.Error of kind vram.ErrArgument for numParameters below 1
// or an init that is not finite.
func NewPReLU(numParameters int, init float64, opts ...vram.Option) *PReLU {
	if numParameters < 1 {
		panic(&vram.Error{Op: "prelu", Kind: vram.ErrArgument, Detail: fmt.Sprintf("num_parameters must be at least 1, got %d", numParameters)})
	}
	checkFinite("prelu", "init", init)
	l := &PReLU{Weight: fullParam(vram.Shape{numParameters}, init, opts)}
	l.RegisterParameterField("weight", &l.Weight)
	return l
}

// Forward returns x where x > 0 and the slope of x's channel times x
// elsewhere. It panics with an *vram.Error of kind vram.ErrShape when the
// weight has more than one slope and x has fewer than 2 dimensions or
// another number of channels. Inside a vram.Autocast region a float32
// input and weight run in the region's dtype, as PyTorch's prelu.
func (l *PReLU) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "prelu", "PReLU")
	const op = "prelu"
	defer asOp(op)
	notNil(op, x)
	n := l.Weight.NumElements()
	var ts temps
	defer ts.release()
	w := l.Weight
	// prelu is on autocast's list of ops run in the low dtype: a float32
	// input and weight (and one of the other 16-bit dtype) are cast to it.
	if dt, ok := vram.AutocastDType(); ok {
		for _, t := range []**vram.Tensor{&x, &w} {
			if c := (*t).DType(); c != dt && (c == vram.Float32 || c == vram.Float16 || c == vram.BFloat16) {
				*t = ts.add((*t).Cast(dt))
			}
		}
	}
	if n > 1 {
		if x.Dim() < 2 || x.Size(1) != n {
			panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("mismatch in parameter numbers: weight has %d slopes for an input of shape %v, whose dimension 1 is the channels", n, x.Shape())})
		}
		shape := slices.Repeat([]int{1}, x.Dim())
		shape[1] = n
		w = ts.add(w.Reshape(shape...))
	} else {
		w = ts.add(w.Reshape())
	}
	var pos *vram.Tensor
	vram.NoGrad(func() { pos = ts.add(x.GtScalar(0)) })
	return vram.Where(pos, x, ts.add(x.Mul(w)))
}

// RReLU is the randomized leaky ReLU (torch.nn.RReLU): x where x > 0 and
// a·x elsewhere, with a drawn uniformly from [Lower, Upper] for every
// element in training mode and (Lower + Upper)/2 in evaluation mode.
type RReLU struct {
	Base
	// Lower and Upper bound the slopes (PyTorch's defaults are 1/8 and
	// 1/3).
	Lower, Upper float64
	opts         []vram.Option
}

// NewRReLU returns an RReLU module. Its random slopes come from the
// generator of a [vram.WithGenerator] option in opts, or from vram's
// default generator, on the input's device. It panics with an
// *vram.Error of kind vram.ErrArgument unless lower and upper are finite
// and lower <= upper.
func NewRReLU(lower, upper float64, opts ...vram.Option) *RReLU {
	checkFinite("rrelu", "lower", lower)
	checkFinite("rrelu", "upper", upper)
	if lower > upper {
		panic(&vram.Error{Op: "rrelu", Kind: vram.ErrArgument, Detail: fmt.Sprintf("lower bound %v must not be greater than upper bound %v", lower, upper)})
	}
	return &RReLU{Lower: lower, Upper: upper, opts: slices.Clone(opts)}
}

// Forward returns x with its negative elements scaled by random slopes in
// training mode and by their mean in evaluation mode.
func (l *RReLU) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "rrelu", "RReLU")
	defer asOp("rrelu")
	notNil("rrelu", x)
	if !l.Training() || x.NumElements() == 0 {
		return x.LeakyRelu((l.Lower + l.Upper) / 2)
	}
	var ts temps
	defer ts.release()
	var slope *vram.Tensor
	vram.NoGrad(func() {
		// The slopes are drawn in at least float32, on x's device;
		// later options override the caller's.
		dt := vram.Float32
		if x.DType() == vram.Float64 {
			dt = vram.Float64
		}
		r := ts.add(vram.Uniform(x.Shape(), l.Lower, l.Upper, append(slices.Clone(l.opts), x.Device(), dt)...))
		pos := ts.add(x.GtScalar(0))
		slope = ts.add(ts.add(vram.Where(pos, ts.add(r.NewOnes(nil)), r)).Cast(x.DType()))
	})
	return x.Mul(slope)
}
