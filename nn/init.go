package nn

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// Initialisation functions overwrite a tensor's values in place, like
// torch.nn.init: they draw fresh values from g (the default generator of
// the tensor's device when g is nil) and copy them in under [vram.NoGrad],
// so they work on parameters that require grad, on any device, and leave
// no temporaries. The tensor keeps its identity, dtype and device. Those
// that draw random values need a floating-point tensor; a tensor with no
// elements is left alone; bad arguments panic with an *vram.Error before
// anything is written.

// fans returns PyTorch's fan_in and fan_out of a weight shaped
// [out, in, k1, k2, ...]: in and out times the receptive field k1·k2·...
func fans(op string, t *vram.Tensor) (fanIn, fanOut int) {
	notNil(op, t)
	if t.Dim() < 2 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape,
			Detail: fmt.Sprintf("fan in and fan out cannot be computed for a tensor of fewer than 2 dimensions (shape %v)", t.Shape())})
	}
	receptive := 1
	for _, d := range t.Shape()[2:] {
		receptive *= d
	}
	return t.Size(1) * receptive, t.Size(0) * receptive
}

// notNil panics with a vram error naming op when t is nil, rather than
// letting the first method called on it name itself.
func notNil(op string, t *vram.Tensor) {
	if t == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil *Tensor"})
	}
}

// nilLayer panics with an *vram.Error of kind vram.ErrArgument, naming op
// and the layer's type typ, when isNil: the forward methods of the layers
// call it first with whether their receiver is nil, so that a layer
// declared and never made (var fc *nn.Linear) is reported as such, as
// [Sequential] and the transformer layers report theirs, rather than as a
// nil-pointer dereference.
func nilLayer(isNil bool, op, typ string) {
	if isNil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil *" + typ + ": make the layer with its constructor"})
	}
}

// sameDevice panics with a *vram.DeviceMismatchError naming op unless
// each of the layer's tensors ts that is not nil is on x's device. Layers
// that update state in place call it before they change anything.
func sameDevice(op string, x *vram.Tensor, ts ...*vram.Tensor) {
	for _, t := range ts {
		if t != nil && t.Device() != x.Device() {
			panic(&vram.DeviceMismatchError{Op: op, Expected: t.Device(), Got: x.Device()})
		}
	}
}

// fill overwrites t with values drawn from the uniform distribution on
// [-scale, scale) or, when normal is set, the normal distribution with
// standard deviation scale.
func fill(op string, t *vram.Tensor, scale float64, normal bool, g *vram.Generator) {
	if !t.DType().IsFloat() {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("needs a floating-point tensor, got %s", t.DType())})
	}
	if t.NumElements() == 0 {
		return
	}
	drawInto(t, normal, g, func(r *vram.Tensor) {
		if normal {
			r.MulScalarInPlace(scale)
		} else {
			r.MulScalarInPlace(2 * scale).AddScalarInPlace(-scale)
		}
	})
}

// leakyReLUGain returns the gain PyTorch recommends for a leaky ReLU of
// negative slope a: sqrt(2 / (1 + a²)).
func leakyReLUGain(a float64) float64 { return math.Sqrt(2 / (1 + a*a)) }

// KaimingUniform fills t (at least 2-D, [out, in, ...]) with values uniform
// in [-bound, bound) where bound = gain·sqrt(3/fan_in) and gain =
// sqrt(2/(1+a²)), a being the negative slope of the leaky ReLU that follows
// (0 for ReLU): torch.nn.init.kaiming_uniform_ with mode fan_in
// ([KaimingUniformWith] takes the other options). It panics with an
// *vram.Error of kind vram.ErrShape for a tensor of fewer than 2
// dimensions, of kind vram.ErrArgument for an a that is not finite, and of
// kind vram.ErrDType for a tensor that is not floating-point.
func KaimingUniform(t *vram.Tensor, a float64, g *vram.Generator) {
	KaimingUniformWith(t, KaimingOptions{A: a}, g)
}

// KaimingNormal fills t with normal values of standard deviation
// gain/sqrt(fan_in), gain = sqrt(2/(1+a²)): torch.nn.init.kaiming_normal_
// with mode fan_in ([KaimingNormalWith] takes the other options). It panics
// like [KaimingUniform].
func KaimingNormal(t *vram.Tensor, a float64, g *vram.Generator) {
	KaimingNormalWith(t, KaimingOptions{A: a}, g)
}

// checkGain panics with an *vram.Error of kind vram.ErrArgument unless
// gain is finite and non-negative, as PyTorch's uniform_ and normal_
// refuse the bounds and deviations a negative gain gives.
func checkGain(op string, gain float64) {
	if !(gain >= 0) || math.IsInf(gain, 1) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("gain must be finite and non-negative, got %v", gain)})
	}
}

// XavierUniform fills t with values uniform in [-bound, bound) where bound =
// gain·sqrt(6/(fan_in+fan_out)) (torch.nn.init.xavier_uniform_; Glorot
// initialisation; [CalculateGain] gives the gain for a nonlinearity). It
// panics like [KaimingUniform], and with an *vram.Error of kind
// vram.ErrArgument for a gain that is negative or not finite.
func XavierUniform(t *vram.Tensor, gain float64, g *vram.Generator) {
	fanIn, fanOut := fans("xavier_uniform", t)
	checkGain("xavier_uniform", gain)
	if fanIn+fanOut == 0 {
		return
	}
	fill("xavier_uniform", t, gain*math.Sqrt(6/float64(fanIn+fanOut)), false, g)
}

// XavierNormal fills t with normal values of standard deviation
// gain·sqrt(2/(fan_in+fan_out)) (torch.nn.init.xavier_normal_). It panics
// like [XavierUniform].
func XavierNormal(t *vram.Tensor, gain float64, g *vram.Generator) {
	fanIn, fanOut := fans("xavier_normal", t)
	checkGain("xavier_normal", gain)
	if fanIn+fanOut == 0 {
		return
	}
	fill("xavier_normal", t, gain*math.Sqrt(2/float64(fanIn+fanOut)), true, g)
}

// CalculateGain returns the gain PyTorch recommends for scaling initial
// weights before the given nonlinearity (torch.nn.init.calculate_gain): 1
// for "linear", the convolutions ("conv1d", "conv2d",
// "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
// and "sigmoid"; 5/3 for "tanh"; sqrt(2) for "relu"; sqrt(2/(1+slope²))
// for "leaky_relu", slope being param (0.01 when param is left out); 3/4
// for "selu". As in PyTorch, param is ignored by the other nonlinearities.
// It panics with an *vram.Error of kind vram.ErrArgument for another name,
// for more than one param, or for a leaky_relu slope that is not finite.
func CalculateGain(nonlinearity string, param ...float64) float64 {
	const op = "calculate_gain"
	if len(param) > 1 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("takes at most one param, got %d", len(param))})
	}
	switch nonlinearity {
	case "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid":
		return 1
	case "tanh":
		return 5.0 / 3
	case "relu":
		return math.Sqrt2
	case "selu":
		return 3.0 / 4
	case "leaky_relu":
		slope := 0.01
		if len(param) == 1 {
			slope = param[0]
		}
		if math.IsNaN(slope) || math.IsInf(slope, 0) {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("negative slope %v is not a valid number", slope)})
		}
		return leakyReLUGain(slope)
	}
	panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("unsupported nonlinearity %q; use linear, conv1d, conv2d, conv3d, "+
		"conv_transpose1d, conv_transpose2d, conv_transpose3d, sigmoid, tanh, relu, leaky_relu or selu", nonlinearity)})
}

// FanMode chooses which fan [KaimingUniformWith] and [KaimingNormalWith]
// keep the variance of: the zero value FanIn preserves the variance of the
// activations in the forward pass, FanOut that of the gradients in the
// backward pass.
type FanMode int

// The fan modes of PyTorch's kaiming_uniform_ and kaiming_normal_.
const (
	FanIn  FanMode = iota // mode="fan_in", the default
	FanOut                // mode="fan_out"
)

// String returns "fan_in" or "fan_out".
func (m FanMode) String() string {
	switch m {
	case FanIn:
		return "fan_in"
	case FanOut:
		return "fan_out"
	}
	return fmt.Sprintf("FanMode(%d)", int(m))
}

// KaimingOptions holds the options of [KaimingUniformWith] and
// [KaimingNormalWith], those of torch.nn.init.kaiming_uniform_. The zero
// value is PyTorch's default: a = 0, mode fan_in, nonlinearity leaky_relu
// (which with a = 0 is ReLU's gain sqrt(2)).
type KaimingOptions struct {
	// A is the negative slope of the leaky ReLU that follows (only used
	// with the leaky_relu nonlinearity).
	A float64
	// Mode is the fan whose variance is kept.
	Mode FanMode
	// Nonlinearity names the activation that follows, as
	// [CalculateGain] takes it; "" means "leaky_relu".
	Nonlinearity string
}

// kaimingGain returns the gain and the fan of o for t.
func kaimingGain(op string, t *vram.Tensor, o KaimingOptions) (gain float64, fan int) {
	fanIn, fanOut := fans(op, t)
	fan = fanIn
	switch o.Mode {
	case FanIn:
	case FanOut:
		fan = fanOut
	default:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("mode %v is neither FanIn nor FanOut", o.Mode)})
	}
	nl := o.Nonlinearity
	if nl == "" {
		nl = "leaky_relu"
	}
	if nl == "leaky_relu" {
		return CalculateGain(nl, o.A), fan
	}
	return CalculateGain(nl), fan
}

// KaimingUniformWith fills t (at least 2-D) with values uniform in
// [-bound, bound), bound = gain·sqrt(3/fan), with the fan and the gain of
// o (torch.nn.init.kaiming_uniform_ with all its options). The fan of a
// convolution weight [out, in/groups, k...] counts its receptive field:
// fan_in = in/groups·k..., fan_out = out·k.... It panics with an
// *vram.Error of kind vram.ErrShape for a tensor of fewer than 2
// dimensions, of kind vram.ErrArgument for a bad mode or nonlinearity, and
// of kind vram.ErrDType for a tensor that is not floating-point.
func KaimingUniformWith(t *vram.Tensor, o KaimingOptions, g *vram.Generator) {
	gain, fan := kaimingGain("kaiming_uniform", t, o)
	if fan == 0 {
		return
	}
	fill("kaiming_uniform", t, gain*math.Sqrt(3/float64(fan)), false, g)
}

// KaimingNormalWith fills t (at least 2-D) with normal values of mean 0
// and standard deviation gain/sqrt(fan), with the fan and the gain of o
// (torch.nn.init.kaiming_normal_ with all its options). It panics like
// [KaimingUniformWith].
func KaimingNormalWith(t *vram.Tensor, o KaimingOptions, g *vram.Generator) {
	gain, fan := kaimingGain("kaiming_normal", t, o)
	if fan == 0 {
		return
	}
	fill("kaiming_normal", t, gain/math.Sqrt(float64(fan)), true, g)
}

// checkFloat panics with an *vram.Error of kind vram.ErrDType unless t is
// a floating-point tensor.
func checkFloat(op string, t *vram.Tensor) {
	notNil(op, t)
	if !t.DType().IsFloat() {
		panic(&vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("needs a floating-point tensor, got %s", t.DType())})
	}
}

// checkFinite panics with an *vram.Error of kind vram.ErrArgument naming
// the first of vals that is NaN or infinite.
func checkFinite(op string, names string, vals ...float64) {
	for _, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			var got any = vals
			if len(vals) == 1 {
				got = v
			}
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("%s must be finite, got %v", names, got)})
		}
	}
}

// drawInto draws a tensor shaped as t on t's device (uniform in [0, 1), or
// standard normal when normal is set), in float64 for a float64 t and
// float32 otherwise, passes it to f, which changes it in place, and copies
// it into t under [vram.NoGrad].
func drawInto(t *vram.Tensor, normal bool, g *vram.Generator, f func(r *vram.Tensor)) {
	dt := vram.Float32
	if t.DType() == vram.Float64 {
		dt = vram.Float64
	}
	vram.NoGrad(func() {
		var r *vram.Tensor
		if normal {
			r = vram.Randn(t.Shape(), t.Device(), dt, vram.WithGenerator(g))
		} else {
			r = vram.Rand(t.Shape(), t.Device(), dt, vram.WithGenerator(g))
		}
		defer r.Release()
		f(r)
		t.CopyFrom(r)
	})
}

// Uniform fills t with values uniform in [a, b) (torch.nn.init.uniform_).
// It panics with an *vram.Error of kind vram.ErrArgument unless a and b
// are finite and a <= b, and of kind vram.ErrDType for a tensor that is
// not floating-point.
func Uniform(t *vram.Tensor, a, b float64, g *vram.Generator) {
	const op = "uniform"
	checkFloat(op, t)
	checkFinite(op, "bounds a and b", a, b)
	if a > b {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("expects a <= b, got a=%v and b=%v", a, b)})
	}
	if t.NumElements() == 0 {
		return
	}
	drawInto(t, false, g, func(r *vram.Tensor) { r.MulScalarInPlace(b - a).AddScalarInPlace(a) })
}

// Normal fills t with normal values of the given mean and standard
// deviation (torch.nn.init.normal_). It panics with an *vram.Error of kind
// vram.ErrArgument unless mean and std are finite and std >= 0, and of
// kind vram.ErrDType for a tensor that is not floating-point.
func Normal(t *vram.Tensor, mean, std float64, g *vram.Generator) {
	const op = "normal"
	checkFloat(op, t)
	checkFinite(op, "mean and std", mean, std)
	if std < 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("expects std >= 0, got %v", std)})
	}
	if t.NumElements() == 0 {
		return
	}
	drawInto(t, true, g, func(r *vram.Tensor) { r.MulScalarInPlace(std).AddScalarInPlace(mean) })
}

// TruncNormal fills t with values drawn from the normal distribution of
// the given mean and standard deviation truncated to [a, b]
// (torch.nn.init.trunc_normal_): values outside are redrawn, in effect, so
// that all lie in [a, b] and follow the normal density there. It draws
// uniform values on t's device and maps them through the inverse normal
// CDF on the host. It panics with an *vram.Error of kind vram.ErrArgument
// unless mean, std, a and b are finite, std >= 0 and a < b, and of kind
// vram.ErrDType for a tensor that is not floating-point.
func TruncNormal(t *vram.Tensor, mean, std, a, b float64, g *vram.Generator) {
	const op = "trunc_normal"
	checkFloat(op, t)
	checkFinite(op, "mean, std, a and b", mean, std, a, b)
	switch {
	case std < 0:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("expects std >= 0, got %v", std)})
	case !(a < b):
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("expects a < b, got a=%v and b=%v", a, b)})
	}
	if t.NumElements() == 0 {
		return
	}
	if std == 0 {
		Constant(t, min(max(mean, a), b))
		return
	}
	cdf := func(x float64) float64 { return (1 + math.Erf(x/math.Sqrt2)) / 2 }
	lo, hi := cdf((a-mean)/std), cdf((b-mean)/std)
	drawInto(t, false, g, func(r *vram.Tensor) {
		vals := r.Float64s()
		for i, u := range vals {
			// u in [0, 1) maps to [2lo-1, 2hi-1), then through erfinv.
			x := mean + std*math.Sqrt2*math.Erfinv(2*(lo+u*(hi-lo))-1)
			if math.IsNaN(x) { // erfinv(±1) when the bounds are far out
				x = mean
			}
			vals[i] = min(max(x, a), b)
		}
		src := vram.FromSlice(vals, r.Shape(), r.DType(), r.Device())
		defer src.Release()
		r.CopyFrom(src)
	})
}

// Constant fills t with v (torch.nn.init.constant_), on any device and for
// any dtype. It panics with an *vram.Error of kind vram.ErrArgument when v
// does not fit t's dtype, leaving t unchanged.
func Constant(t *vram.Tensor, v float64) {
	notNil("constant", t)
	vram.NoGrad(func() { t.FillInPlace(v) })
}

// Ones fills t with ones (torch.nn.init.ones_).
func Ones(t *vram.Tensor) { notNil("ones", t); Constant(t, 1) }

// Zeros fills t with zeros (torch.nn.init.zeros_).
func Zeros(t *vram.Tensor) { notNil("zeros", t); Constant(t, 0) }

// setOnes makes t zero but for ones at the flat (row-major) indices idx,
// under [vram.NoGrad].
func setOnes(t *vram.Tensor, idx []int) {
	vals := make([]float64, t.NumElements())
	for _, i := range idx {
		vals[i] = 1
	}
	vram.NoGrad(func() {
		src := vram.FromSlice(vals, t.Shape(), t.DType(), t.Device())
		defer src.Release()
		t.CopyFrom(src)
	})
}

// Eye fills the 2-D tensor t with the identity matrix: ones on the main
// diagonal, zeros elsewhere (torch.nn.init.eye_), preserving the identity
// of the inputs of a [Linear] layer. t need not be square. It panics with
// an *vram.Error of kind vram.ErrShape unless t has 2 dimensions.
func Eye(t *vram.Tensor) {
	const op = "eye"
	notNil(op, t)
	if t.Dim() != 2 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("only tensors with 2 dimensions are supported, got shape %v", t.Shape())})
	}
	rows, cols := t.Size(0), t.Size(1)
	var idx []int
	for i := range min(rows, cols) {
		idx = append(idx, i*cols+i)
	}
	setOnes(t, idx)
}

// Dirac fills the 3-, 4- or 5-D tensor t, a convolution weight [out, in,
// k...], with the Dirac delta (torch.nn.init.dirac_): a convolution with
// it passes as many input channels through unchanged as it can. With
// groups > 1 the out channels are split into groups, each passing the
// first in channels through. It panics with an *vram.Error of kind
// vram.ErrShape unless t has 3 to 5 dimensions and groups divides its
// first dimension, and of kind vram.ErrArgument for groups < 1. A t
// without elements is left as it is.
func Dirac(t *vram.Tensor, groups int) {
	const op = "dirac"
	notNil(op, t)
	shape := t.Shape()
	switch {
	case t.Dim() < 3 || t.Dim() > 5:
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("only tensors with 3, 4, or 5 dimensions are supported, got shape %v", shape)})
	case groups < 1:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("groups must be at least 1, got %d", groups)})
	case shape[0]%groups != 0:
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("dimension 0 (%d) must be divisible by groups (%d)", shape[0], groups)})
	}
	if t.NumElements() == 0 {
		return // nothing to fill; an empty kernel has no centre to index
	}
	perGroup := shape[0] / groups
	// strides of the row-major layout, and the offset of the kernel's centre
	strides := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = s
		s *= shape[i]
	}
	centre := 0
	for i := 2; i < len(shape); i++ {
		centre += shape[i] / 2 * strides[i]
	}
	var idx []int
	for g := range groups {
		for d := range min(perGroup, shape[1]) {
			idx = append(idx, (g*perGroup+d)*strides[0]+d*strides[1]+centre)
		}
	}
	setOnes(t, idx)
}

// hostGenerator returns g, or the default generator of t's device when g
// is nil: the generator of draws made on the host for t.
func hostGenerator(op string, t *vram.Tensor, g *vram.Generator) *vram.Generator {
	if g != nil {
		return g
	}
	g, err := vram.DeviceGenerator(t.Device())
	if err != nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "no default generator for the tensor's device", Err: err})
	}
	return g
}

// Orthogonal fills t (at least 2-D) with a (semi-)orthogonal matrix times
// gain (torch.nn.init.orthogonal_): t is taken as a matrix of size(0) rows
// and the product of the other sizes as columns; the rows are orthonormal
// when there are fewer rows than columns, else the columns are. As in
// PyTorch, it is the Q of the QR decomposition of a standard normal matrix,
// its columns' signs fixed by R's diagonal so that it is uniformly
// distributed. The normal values are drawn on t's device and the
// decomposition runs on the host in float64, in time rows·cols·min(rows,
// cols). It panics with an *vram.Error of kind vram.ErrShape for a tensor
// of fewer than 2 dimensions, of kind vram.ErrArgument for a gain that is
// not finite, and of kind vram.ErrDType for a tensor that is not
// floating-point.
func Orthogonal(t *vram.Tensor, gain float64, g *vram.Generator) {
	const op = "orthogonal"
	checkFloat(op, t)
	if t.Dim() < 2 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("only tensors with 2 or more dimensions are supported, got shape %v", t.Shape())})
	}
	checkFinite(op, "gain", gain)
	if t.NumElements() == 0 {
		return
	}
	rows := t.Size(0)
	cols := t.NumElements() / rows
	drawInto(t, true, g, func(r *vram.Tensor) {
		a := r.Float64s() // [rows, cols] row-major
		m, n := rows, cols
		at := func(i, j int) int { return i*cols + j }
		if rows < cols {
			// Decompose the transpose, [cols, rows].
			m, n = cols, rows
			at = func(i, j int) int { return j*cols + i }
		}
		q := householderQ(m, n, func(i, j int) float64 { return a[at(i, j)] })
		for i := range m {
			for j := range n {
				a[at(i, j)] = gain * q[i*n+j]
			}
		}
		src := vram.FromSlice(a, r.Shape(), r.DType(), r.Device())
		defer src.Release()
		r.CopyFrom(src)
	})
}

// householderQ returns the m×n (m >= n) matrix Q, row-major, of the
// reduced QR decomposition of the m×n matrix whose elements el gives, its
// columns multiplied by the signs of R's diagonal (so that R's diagonal is
// non-negative, as PyTorch's orthogonal_ makes it).
func householderQ(m, n int, el func(i, j int) float64) []float64 {
	a := make([]float64, m*n) // overwritten by R above and v below the diagonal
	for i := range m {
		for j := range n {
			a[i*n+j] = el(i, j)
		}
	}
	vs := make([][]float64, n) // the Householder vectors
	sign := make([]float64, n) // the sign of R's diagonal
	for k := range n {
		var norm float64
		for i := k; i < m; i++ {
			norm = math.Hypot(norm, a[i*n+k])
		}
		v := make([]float64, m-k)
		for i := k; i < m; i++ {
			v[i-k] = a[i*n+k]
		}
		alpha := -norm // R's diagonal element, of the sign that avoids cancellation
		if v[0] < 0 {
			alpha = norm
		}
		v[0] -= alpha
		var vv float64
		for _, x := range v {
			vv += x * x
		}
		sign[k] = 1
		if alpha < 0 {
			sign[k] = -1
		} else if alpha == 0 {
			sign[k] = 0 // torch.sign(0), as PyTorch does
		}
		if vv == 0 {
			continue // the column is already reduced; no reflection
		}
		for j := k; j < n; j++ {
			var dot float64
			for i := k; i < m; i++ {
				dot += v[i-k] * a[i*n+j]
			}
			f := 2 * dot / vv
			for i := k; i < m; i++ {
				a[i*n+j] -= f * v[i-k]
			}
		}
		for i := range v {
			v[i] /= math.Sqrt(vv)
		}
		vs[k] = v
	}
	// Q = H_0 H_1 ... H_{n-1} applied to the first n columns of I.
	q := make([]float64, m*n)
	for j := range n {
		q[j*n+j] = 1
	}
	for k := n - 1; k >= 0; k-- {
		v := vs[k]
		if v == nil {
			continue
		}
		for j := range n {
			var dot float64
			for i := k; i < m; i++ {
				dot += v[i-k] * q[i*n+j]
			}
			for i := k; i < m; i++ {
				q[i*n+j] -= 2 * dot * v[i-k]
			}
		}
	}
	for i := range m {
		for j := range n {
			q[i*n+j] *= sign[j]
		}
	}
	return q
}

// Sparse fills the 2-D tensor t as a sparse matrix (torch.nn.init.sparse_,
// after Martens 2010): normal values of mean 0 and standard deviation std,
// then, in every column, ceil(sparsity·rows) elements at random rows set to
// zero. It panics with an *vram.Error of kind vram.ErrShape unless t has 2
// dimensions, of kind vram.ErrArgument unless sparsity is in [0, 1] and std
// is finite and non-negative, and of kind vram.ErrDType for a tensor that
// is not floating-point.
func Sparse(t *vram.Tensor, sparsity, std float64, g *vram.Generator) {
	const op = "sparse"
	checkFloat(op, t)
	if t.Dim() != 2 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("only tensors with 2 dimensions are supported, got shape %v", t.Shape())})
	}
	if !(sparsity >= 0 && sparsity <= 1) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("sparsity must be in [0, 1], got %v", sparsity)})
	}
	checkFinite(op, "std", std)
	if std < 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("expects std >= 0, got %v", std)})
	}
	if t.NumElements() == 0 {
		return
	}
	rows, cols := t.Size(0), t.Size(1)
	zeros := int(math.Ceil(sparsity * float64(rows)))
	hg := hostGenerator(op, t, g)
	drawInto(t, true, g, func(r *vram.Tensor) {
		vals := r.Float64s()
		perm := make([]int, rows)
		for j := range cols {
			for i := range perm {
				perm[i] = i
			}
			// The first zeros entries of a random permutation.
			for i := range zeros {
				k := i + int(hg.Float64()*float64(rows-i))
				perm[i], perm[k] = perm[k], perm[i]
				vals[perm[i]*cols+j] = 0
			}
		}
		for i := range vals {
			vals[i] *= std
		}
		src := vram.FromSlice(vals, r.Shape(), r.DType(), r.Device())
		defer src.Release()
		r.CopyFrom(src)
	})
}
