package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// RMSNorm divides its input by the root mean square over the trailing
// NormalizedShape dimensions and scales it elementwise by Weight
// (torch.nn.RMSNorm).
type RMSNorm struct {
	Base
	NormalizedShape []int
	// Eps is added to the mean square. A negative Eps stands for
	// PyTorch's default (eps=None): the machine epsilon of the dtype the
	// norm computes in (float32's for 16-bit inputs, float64's for
	// float64), as PyTorch's kernel takes it.
	Eps float64
	// Weight (ones at first) has NormalizedShape, or is nil for a layer
	// made by NewRMSNormNoAffine.
	Weight *vram.Tensor
}

// NewRMSNorm returns an RMSNorm over the trailing dimensions shape, with
// eps added to the mean square and weight ones (elementwise_affine=True);
// its state dict holds "weight", as PyTorch's does. A negative eps
// selects PyTorch's default, the machine epsilon of the dtype it computes in
// (pass -1 for torch.nn.RMSNorm(shape)). opts go to vram's factory
// functions. It panics with an *vram.Error of kind vram.ErrArgument for
// an empty shape or one with a negative size, and for an eps that is NaN
// or +Inf.
func NewRMSNorm(shape []int, eps float64, opts ...vram.Option) *RMSNorm {
	l := NewRMSNormNoAffine(shape, eps)
	l.Weight = fullParam(shape, 1, opts)
	l.RegisterParameterField("weight", &l.Weight)
	return l
}

// NewRMSNormNoAffine returns an RMSNorm over the trailing dimensions
// shape without weight (elementwise_affine=False): it only normalises. It
// panics as [NewRMSNorm] does.
func NewRMSNormNoAffine(shape []int, eps float64) *RMSNorm {
	const op = "rms_norm"
	if len(shape) == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "normalized shape is empty"})
	}
	if slices.ContainsFunc(shape, func(d int) bool { return d < 0 }) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("normalized shape %v has a negative size", shape)})
	}
	if math.IsNaN(eps) || math.IsInf(eps, 1) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("eps %v must be finite (negative for the dtype's machine epsilon)", eps)})
	}
	if eps < 0 {
		eps = -1
	}
	return &RMSNorm{NormalizedShape: slices.Clone(shape), Eps: eps}
}

// Forward returns the normalised x, of x's shape and dtype. The mean
// square is computed in float32 or wider whatever x's dtype; when x is
// 16-bit and the weight is float32 (a model converted with Half or
// BFloat16), the result is cast back to x's dtype. Inside an Autocast
// region a 16-bit x gives float32, as for [LayerNorm]. It panics as
// [vram.RMSNorm] does when x's shape does not end with NormalizedShape.
func (l *RMSNorm) Forward(x *vram.Tensor) *vram.Tensor {
	nilLayer(l == nil, "rms_norm", "RMSNorm")
	w, _, done := l.maskedParams(l.Weight, nil)
	defer done()
	y := vram.RMSNorm(x, l.NormalizedShape, w, l.Eps)
	if y.DType() == x.DType() || !x.DType().IsFloat() || y.DType() == autocastFloat32(x.DType()) {
		return y
	}
	defer y.Release()
	return y.Cast(x.DType())
}

// KeepsFloat32 marks RMSNorm as a [Float32Layer]: Half and BFloat16 leave
// its weight float32.
func (*RMSNorm) KeepsFloat32() {}

// ToDType converts the weight to float32 when dt is a 16-bit type and to
// dt otherwise (dt must be a floating-point type): RMSNorm is a
// [Float32Layer].
func (l *RMSNorm) ToDType(dt vram.DType) { ConvertDType(l, dt) }

// Half keeps RMSNorm float32 (see [RMSNorm.ToDType]).
func (l *RMSNorm) Half() { l.ToDType(vram.Float16) }

// BFloat16 keeps RMSNorm float32 (see [RMSNorm.ToDType]).
func (l *RMSNorm) BFloat16() { l.ToDType(vram.BFloat16) }

// Float converts RMSNorm's weight to float32.
func (l *RMSNorm) Float() { l.ToDType(vram.Float32) }

// ParameterMask returns the mask of "weight" (nil when none; the layer
// has it unless made without elementwise affine). It implements
// [Maskable].
func (l *RMSNorm) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return l.weightBiasMaskOf(name, l.Weight, nil)
}

// SetParameterMask sets or removes the mask of "weight". It implements
// [Maskable].
func (l *RMSNorm) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("rms_norm")
	}
	return l.setWeightBiasMask("rms_norm", name, l.Weight, nil, mask)
}

var (
	_ Maskable     = (*RMSNorm)(nil)
	_ Float32Layer = (*RMSNorm)(nil)
)
