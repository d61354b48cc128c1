package nn

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// Initialisation functions overwrite a tensor's values in place, like
// torch.nn.init: they draw fresh values from g (vram's default generator
// when g is nil) and copy them in under [vram.NoGrad], so they work on
// parameters that require grad, on any device, and leave no temporaries.

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
	dt := vram.Float32
	if t.DType() == vram.Float64 {
		dt = vram.Float64
	}
	vram.NoGrad(func() {
		var r *vram.Tensor
		if normal {
			r = vram.Randn(t.Shape(), t.Device(), dt, vram.WithGenerator(g))
			r.MulScalarInPlace(scale)
		} else {
			r = vram.Rand(t.Shape(), t.Device(), dt, vram.WithGenerator(g))
			r.MulScalarInPlace(2 * scale).AddScalarInPlace(-scale)
		}
		defer r.Release()
		t.CopyFrom(r)
	})
}

// leakyReLUGain returns the gain PyTorch recommends for a leaky ReLU of
// negative slope a: sqrt(2 / (1 + a²)).
func leakyReLUGain(a float64) float64 { return math.Sqrt(2 / (1 + a*a)) }

// KaimingUniform fills t (at least 2-D, [out, in, ...]) with values uniform
// in [-bound, bound) where bound = gain·sqrt(3/fan_in) and gain =
// sqrt(2/(1+a²)), a being the negative slope of the leaky ReLU that follows
// (0 for ReLU): torch.nn.init.kaiming_uniform_ with mode fan_in. It panics
// with an *vram.Error of kind vram.ErrShape for a tensor of fewer than 2
// dimensions.
func KaimingUniform(t *vram.Tensor, a float64, g *vram.Generator) {
	fanIn, _ := fans("kaiming_uniform", t)
	if fanIn == 0 {
		return
	}
	fill("kaiming_uniform", t, leakyReLUGain(a)*math.Sqrt(3/float64(fanIn)), false, g)
}

// KaimingNormal fills t with normal values of standard deviation
// gain/sqrt(fan_in), gain = sqrt(2/(1+a²)): torch.nn.init.kaiming_normal_
// with mode fan_in. It panics like [KaimingUniform].
func KaimingNormal(t *vram.Tensor, a float64, g *vram.Generator) {
	fanIn, _ := fans("kaiming_normal", t)
	if fanIn == 0 {
		return
	}
	fill("kaiming_normal", t, leakyReLUGain(a)/math.Sqrt(float64(fanIn)), true, g)
}

// XavierUniform fills t with values uniform in [-bound, bound) where bound =
// gain·sqrt(6/(fan_in+fan_out)) (torch.nn.init.xavier_uniform_; Glorot
// initialisation). It panics like [KaimingUniform].
func XavierUniform(t *vram.Tensor, gain float64, g *vram.Generator) {
	fanIn, fanOut := fans("xavier_uniform", t)
	if fanIn+fanOut == 0 {
		return
	}
	fill("xavier_uniform", t, gain*math.Sqrt(6/float64(fanIn+fanOut)), false, g)
}

// XavierNormal fills t with normal values of standard deviation
// gain·sqrt(2/(fan_in+fan_out)) (torch.nn.init.xavier_normal_). It panics
// like [KaimingUniform].
func XavierNormal(t *vram.Tensor, gain float64, g *vram.Generator) {
	fanIn, fanOut := fans("xavier_normal", t)
	if fanIn+fanOut == 0 {
		return
	}
	fill("xavier_normal", t, gain*math.Sqrt(2/float64(fanIn+fanOut)), true, g)
}
