package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// SetInt8Weight makes l a weight-only quantized layer (package nn/quant
// calls it with the values it computes): Weight becomes wq, int8 of the
// weight's shape [out, in], Scale becomes scale, [out] floating-point, so
// that Forward computes with wq[n,k]·scale[n] ([vram.LinearInt8]), and the
// float weight is released (with its gradient).
//
// A quantized layer has no parameters, as PyTorch's dynamically quantized
// Linear has none: "weight" (now int8), "bias" and the new "scale" are
// buffers ([NamedBuffers]), so that Parameters, parameter counts and the
// optimizers built over them leave them out, while To, [Release],
// [Replicate], [StateDict], [Save] and [Load] still reach them under the
// same state-dict keys ("weight", "bias", "scale"), reading them from the
// fields ([Base.RegisterBufferField]). The bias stops
// requiring grad and loses its gradient, since a quantized layer is for
// inference; Half, BFloat16 and [ConvertDType] leave the scale and the
// bias as they are (Forward casts them to the input's dtype). The layer
// owns wq and scale.
//
// It returns an error matching vram.ErrArgument, changing nothing, when l
// is nil or has no weight (a Linear made without [NewLinear]), is already
// quantized, has a pruning mask (make it permanent with
// prune.Remove first), when wq or scale does not fit, or when a scale is
// not positive and finite (as package nn/quant makes them); one matching
// vram.ErrReleased when the layer's bias, wq or scale was released.
func (l *Linear) SetInt8Weight(wq, scale *vram.Tensor) error {
	if l == nil || l.Weight == nil {
		return &vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: "SetInt8Weight: nil layer or a layer without a weight; make the layer with nn.NewLinear"}
	}
	w := l.Weight
	switch {
	case wq == nil || scale == nil:
		return &vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: "SetInt8Weight: nil tensor"}
	case l.Bias != nil && l.Bias.Released() || wq.Released() || scale.Released():
		// The float weight may be released already: layers sharing it
		// are quantized one after the other, and the first releases it.
		return &vram.Error{Op: "linear", Kind: vram.ErrReleased, Detail: "SetInt8Weight: the layer's bias, or the int8 weight or scale given, was released"}
	case l.Scale != nil || !w.DType().IsFloat():
		return &vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: fmt.Sprintf("the layer is already quantized (weight %s)", w.DType())}
	case l.WeightMask != nil || l.BiasMask != nil:
		return &vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: "the layer has a pruning mask; make the pruning permanent (prune.Remove) before quantizing"}
	case wq.DType() != vram.Int8 || !slices.Equal(wq.Shape(), w.Shape()):
		return &vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: fmt.Sprintf("int8 weight is %v %s, want %v int8", wq.Shape(), wq.DType(), w.Shape())}
	case !scale.DType().IsFloat() || !slices.Equal(scale.Shape(), vram.Shape{w.Shape()[0]}):
		return &vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: fmt.Sprintf("scale is %v %s, want [%d] floating-point", scale.Shape(), scale.DType(), w.Shape()[0])}
	case wq.Device() != w.Device() || scale.Device() != w.Device():
		return &vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: fmt.Sprintf("int8 weight on %s and scale on %s, want the layer's %s", wq.Device(), scale.Device(), w.Device())}
	}
	if n, err := badScales(scale); err != nil {
		return err
	} else if n > 0 {
		return &vram.Error{Op: "linear", Kind: vram.ErrArgument, Detail: fmt.Sprintf("the scale holds %d values that are not positive and finite (NaN, an infinity, zero or negative); the layer would compute NaN or lose its weight", n)}
	}
	l.unregisterParameter("weight")
	l.unregisterParameter("bias")
	l.Weight = wq
	l.RegisterBufferField("weight", &l.Weight)
	if l.Bias != nil {
		if l.Bias.RequiresGrad() {
			l.Bias.SetRequiresGrad(false)
		}
		l.Bias.ZeroGrad()
		l.RegisterBufferField("bias", &l.Bias)
	}
	l.Scale = scale
	l.RegisterBufferField("scale", &l.Scale)
	l.fixedBuffers = true
	if w != wq {
		w.Release()
	}
	return nil
}

// int8Scaled is a layer with int8 quantized weights and their scale
// ([Linear.SetInt8Weight]), or a module that embeds one.
type int8Scaled interface {
	int8Scale() *vram.Tensor
}

// int8Scale returns l's scale, nil for a float layer.
func (l *Linear) int8Scale() *vram.Tensor { return l.Scale }

// int8Scales returns the scales of m's int8 quantized layers, which
// loading checks as SetInt8Weight does.
func int8Scales(m Module) map[*vram.Tensor]bool {
	out := map[*vram.Tensor]bool{}
	for _, nm := range NamedModules(m) {
		if q, ok := nm.Module.(int8Scaled); ok {
			if s := q.int8Scale(); s != nil {
				out[s] = true
			}
		}
	}
	return out
}

// badScales returns how many values of scale are NaN, infinite, zero or
// negative, reading one number from its device (a shape-only device,
// which keeps no values, reads 0).
func badScales(scale *vram.Tensor) (n int, err error) {
	err = vram.Catch(func() {
		vram.NoGrad(func() {
			vram.Tidy(func() {
				ok := scale.GtScalar(0).LogicalAnd(scale.LtScalar(math.Inf(1)))
				n = int(ok.LogicalNot().Sum().Item())
			})
		})
	})
	return n, err
}

// unregisterParameter removes the parameter name from b's own parameters,
// if it is there; the tensor is not released.
func (b *Base) unregisterParameter(name string) {
	b.params = slices.DeleteFunc(b.params, func(p paramSlot) bool { return p.name == name })
}
