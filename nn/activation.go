package nn

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// LeakyReLU applies x where x > 0 and NegativeSlope·x elsewhere
// (torch.nn.LeakyReLU); its gradient at 0 is NegativeSlope, as PyTorch's.
type LeakyReLU struct {
	Base
	// NegativeSlope multiplies the negative inputs (PyTorch's default is
	// 0.01).
	NegativeSlope float64
}

// NewLeakyReLU returns a LeakyReLU module with the given negative slope.
// It panics with an *vram.Error of kind vram.ErrArgument for a NaN slope,
// which would make every negative input NaN.
func NewLeakyReLU(negativeSlope float64) *LeakyReLU {
	l := &LeakyReLU{NegativeSlope: negativeSlope}
	l.check()
	return l
}

// check panics as [NewLeakyReLU] does for a NaN NegativeSlope.
func (l *LeakyReLU) check() {
	if math.IsNaN(l.NegativeSlope) {
		panic(&vram.Error{Op: "leaky_relu", Kind: vram.ErrArgument, Detail: "negative slope must not be NaN"})
	}
}

// Forward returns x.LeakyRelu(NegativeSlope). It panics as
// [NewLeakyReLU] does for a NegativeSlope set to NaN since.
func (l *LeakyReLU) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "leaky_relu", "LeakyReLU")
	l.check()
	return x.LeakyRelu(l.NegativeSlope)
}

// ELU applies x where x > 0 and Alpha·(eˣ − 1) elsewhere (torch.nn.ELU).
type ELU struct {
	Base
	// Alpha scales the negative part (PyTorch's default is 1).
	Alpha float64
}

// NewELU returns an ELU module with the given alpha. It panics with an
// *vram.Error of kind vram.ErrArgument for a NaN alpha, which would make
// every negative input NaN.
func NewELU(alpha float64) *ELU {
	l := &ELU{Alpha: alpha}
	l.check()
	return l
}

// check panics as [NewELU] does for a NaN Alpha.
func (l *ELU) check() {
	if math.IsNaN(l.Alpha) {
		panic(&vram.Error{Op: "elu", Kind: vram.ErrArgument, Detail: "alpha must not be NaN"})
	}
}

// Forward returns x.Elu(Alpha). It panics as [NewELU] does for an Alpha
// set to NaN since.
func (l *ELU) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "elu", "ELU")
	l.check()
	return x.Elu(l.Alpha)
}

// SiLU applies x·sigmoid(x) elementwise (torch.nn.SiLU, also called
// swish).
type SiLU struct{ Base }

// NewSiLU returns a SiLU module.
func NewSiLU() *SiLU { return &SiLU{} }

// Forward returns x.Silu().
func (*SiLU) Forward(x *vram.Tensor) *vram.Tensor { return x.Silu() }

// Mish applies x·tanh(log(1 + eˣ)) elementwise (torch.nn.Mish).
type Mish struct{ Base }

// NewMish returns a Mish module.
func NewMish() *Mish { return &Mish{} }

// Forward returns x.Mish().
func (*Mish) Forward(x *vram.Tensor) *vram.Tensor { return x.Mish() }

// Softplus applies log(1 + e^(Beta·x))/Beta elementwise, and x itself where
// Beta·x > Threshold (torch.nn.Softplus).
type Softplus struct {
	Base
	// Beta and Threshold are PyTorch's parameters, 1 and 20 by default
	// there; see [vram.Tensor.Softplus].
	Beta, Threshold float64
}

// NewSoftplus returns a Softplus module. It panics with an *vram.Error of
// kind vram.ErrArgument for a beta of 0, an infinite or NaN beta or a NaN
// threshold.
func NewSoftplus(beta, threshold float64) *Softplus {
	if beta == 0 || math.IsInf(beta, 0) || math.IsNaN(beta) || math.IsNaN(threshold) {
		panic(&vram.Error{Op: "softplus", Kind: vram.ErrArgument, Detail: fmt.Sprintf("beta must be finite and not 0 and threshold not NaN, got beta %v, threshold %v", beta, threshold)})
	}
	return &Softplus{Beta: beta, Threshold: threshold}
}

// Forward returns x.Softplus(Beta, Threshold).
func (l *Softplus) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "softplus", "Softplus")
	return x.Softplus(l.Beta, l.Threshold)
}

// Hardtanh clamps its input to [Min, Max] (torch.nn.Hardtanh), passing no
// gradient at the bounds themselves, as PyTorch's does.
type Hardtanh struct {
	Base
	// Min and Max are the bounds (−1 and 1 by default in PyTorch).
	Min, Max float64
}

// NewHardtanh returns a Hardtanh module. It panics with an *vram.Error of
// kind vram.ErrArgument when min > max or either is NaN.
func NewHardtanh(min, max float64) *Hardtanh {
	if !(min <= max) {
		panic(&vram.Error{Op: "hardtanh", Kind: vram.ErrArgument, Detail: fmt.Sprintf("min %v must not be greater than max %v", min, max)})
	}
	return &Hardtanh{Min: min, Max: max}
}

// NewReLU6 returns a Hardtanh module clamping to [0, 6] (torch.nn.ReLU6).
func NewReLU6() *Hardtanh { return NewHardtanh(0, 6) }

// Forward returns x.Hardtanh(Min, Max).
func (l *Hardtanh) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "hardtanh", "Hardtanh")
	return x.Hardtanh(l.Min, l.Max)
}

// Hardswish applies x·min(max(x + 3, 0), 6)/6 elementwise
// (torch.nn.Hardswish).
type Hardswish struct{ Base }

// NewHardswish returns a Hardswish module.
func NewHardswish() *Hardswish { return &Hardswish{} }

// Forward returns x.Hardswish().
func (*Hardswish) Forward(x *vram.Tensor) *vram.Tensor { return x.Hardswish() }

// Softmax normalises its input to probabilities along Dim
// (torch.nn.Softmax); a negative Dim counts from the end. A slice that is
// all −Inf gives NaN, as in PyTorch.
type Softmax struct {
	Base
	// Dim is the dimension summing to 1.
	Dim int
}

// NewSoftmax returns a Softmax module along dim.
func NewSoftmax(dim int) *Softmax { return &Softmax{Dim: dim} }

// Forward returns x.Softmax(Dim).
func (l *Softmax) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "softmax", "Softmax")
	return x.Softmax(l.Dim)
}

// LogSoftmax returns the logarithm of the softmax of its input along Dim,
// computed stably (torch.nn.LogSoftmax); a negative Dim counts from the
// end.
type LogSoftmax struct {
	Base
	// Dim is the dimension normalised.
	Dim int
}

// NewLogSoftmax returns a LogSoftmax module along dim.
func NewLogSoftmax(dim int) *LogSoftmax { return &LogSoftmax{Dim: dim} }

// Forward returns x.LogSoftmax(Dim).
func (l *LogSoftmax) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "log_softmax", "LogSoftmax")
	return x.LogSoftmax(l.Dim)
}
