package nn

import (
	"fmt"
	"slices"

	"github.com/vramgo/vram"
)

// SetInt8Weight makes l a weight-only quantized layer (package nn/quant
// calls it with the values it computes): Weight becomes wq, int8 of the
// weight's shape [out, in], Scale becomes scale, [out] floating-point, so
// that Forward computes with wq[n,k]·scale[n] ([vram.LinearInt8]), and the
// float weight is released (with its gradient). The parameter list keeps
// "weight" (now int8) and gains "scale"; the bias stays as it is but stops
// requiring grad, since a quantized layer is for inference. The layer
// owns wq and scale. It returns an error matching vram.ErrArgument,
// changing nothing, when l is already quantized, has a pruning mask (make
// it permanent with prune.Remove first), or when wq or scale does not fit;
// one matching vram.ErrReleased when the layer's bias, wq or scale was
// released.
func (l *Linear) SetInt8Weight(wq, scale *vram.Tensor) error {
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
	l.setBuffer("weight", wq)
	l.Weight = wq
	l.setBuffer("scale", scale)
	l.Scale = scale
	if l.Bias != nil && l.Bias.RequiresGrad() {
		l.Bias.SetRequiresGrad(false)
	}
	if w != wq {
		w.Release()
	}
	return nil
}

// setBuffer registers t as the parameter name that takes no gradient
// (replacing one of that name), or removes that entry for a nil t.
func (b *Base) setBuffer(name string, t *vram.Tensor) {
	i := slices.IndexFunc(b.params, func(p NamedParameter) bool { return p.Name == name })
	switch {
	case t == nil && i >= 0:
		b.params = slices.Delete(b.params, i, i+1)
	case t == nil:
	case i >= 0:
		vram.Keep(t)
		b.params[i].Tensor = t
	default:
		b.RegisterParameter(name, t)
	}
}
