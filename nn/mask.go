package nn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vramgo/vram"
)

// Maskable is implemented by layers whose Forward multiplies a parameter
// by a mask of zeros and ones when one is set, so that the layer computes
// with the pruned parameter and the gradient reaches only its kept
// elements: the layers that package nn/prune prunes. [Linear], [Conv1d],
// [Conv2d], [ConvTranspose2d], [LayerNorm], [GroupNorm], [BatchNorm2d]
// and [BatchNorm1d] implement it for "weight" and "bias" (those of the
// normalization layers when they have them), [Embedding] and
// [EmbeddingBag] for "weight".
type Maskable interface {
	Module
	// ParameterMask returns the mask of the layer's own parameter name, or
	// nil when it has none, and whether the layer can mask that parameter
	// (false for a nil layer, and for a parameter the layer lacks).
	ParameterMask(name string) (mask *vram.Tensor, ok bool)
	// SetParameterMask sets the mask of parameter name to mask, a tensor
	// of the parameter's shape, dtype and device holding zeros and ones,
	// which the layer then owns (it is registered as the buffer
	// name+"_mask", as in PyTorch, so that To, ConvertDType, Save, Load,
	// Release and Replicate reach it while optimizers and parameter
	// counts never see it); nil removes the mask, and the layer releases
	// the one it held. It returns an
	// error (matching vram.ErrArgument or vram.ErrDType under errors.Is)
	// for a parameter the layer cannot mask (any, for a nil layer or one
	// made without its constructor, which has no parameters) or a mask
	// that does not fit, and then leaves mask to the caller.
	SetParameterMask(name string, mask *vram.Tensor) error
}

var _ Maskable = (*Linear)(nil)

// ParameterMask returns the mask of "weight" or "bias" (nil when none).
// It implements [Maskable].
func (l *Linear) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return weightBiasMask(name, l.Weight, l.Bias, l.WeightMask, l.BiasMask)
}

// SetParameterMask sets or removes the mask of "weight" or "bias". It
// implements [Maskable]; masks of an int8 (quantized) weight are refused.
func (l *Linear) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("linear")
	}
	switch {
	case name == "weight" && l.Weight != nil:
		return l.setMask("linear", name, l.Weight, &l.WeightMask, mask)
	case name == "bias" && l.Bias != nil:
		return l.setMask("linear", name, l.Bias, &l.BiasMask, mask)
	}
	return noMaskError("linear", name)
}

var _ Maskable = (*Conv2d)(nil)

// ParameterMask returns the mask of "weight" or "bias" (nil when none).
// It implements [Maskable].
func (l *Conv2d) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return weightBiasMask(name, l.Weight, l.Bias, l.WeightMask, l.BiasMask)
}

// weightBiasMask is ParameterMask of a layer whose parameters are weight
// and bias (either may be nil: then it cannot be masked) with masks
// weightMask and biasMask, which it reports even for a parameter since
// dropped.
func weightBiasMask(name string, weight, bias, weightMask, biasMask *vram.Tensor) (*vram.Tensor, bool) {
	switch name {
	case "weight":
		return weightMask, weight != nil
	case "bias":
		return biasMask, bias != nil
	}
	return nil, false
}

// nilLayerError is SetParameterMask's error for a nil layer.
func nilLayerError(op string) error {
	return &vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "SetParameterMask: nil layer"}
}

// The layers below keep their masks among their buffers only.
var (
	_ Maskable = (*Conv1d)(nil)
	_ Maskable = (*ConvTranspose2d)(nil)
	_ Maskable = (*Embedding)(nil)
	_ Maskable = (*EmbeddingBag)(nil)
	_ Maskable = (*LayerNorm)(nil)
	_ Maskable = (*GroupNorm)(nil)
	_ Maskable = (*BatchNorm2d)(nil)
	_ Maskable = (*BatchNorm1d)(nil)
)

// ParameterMask returns the mask of "weight" or "bias" (nil when none).
// It implements [Maskable].
func (l *Conv1d) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return l.weightBiasMaskOf(name, l.Weight, l.Bias)
}

// SetParameterMask sets or removes the mask of "weight" or "bias". It
// implements [Maskable].
func (l *Conv1d) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("conv1d")
	}
	return l.setWeightBiasMask("conv1d", name, l.Weight, l.Bias, mask)
}

// ParameterMask returns the mask of "weight" or "bias" (nil when none).
// It implements [Maskable].
func (l *ConvTranspose2d) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return l.weightBiasMaskOf(name, l.Weight, l.Bias)
}

// SetParameterMask sets or removes the mask of "weight" or "bias". It
// implements [Maskable]; dimension 0 of the weight is the input channels.
func (l *ConvTranspose2d) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("conv_transpose2d")
	}
	return l.setWeightBiasMask("conv_transpose2d", name, l.Weight, l.Bias, mask)
}

// ParameterMask returns the mask of "weight" (nil when none). It
// implements [Maskable].
func (e *Embedding) ParameterMask(name string) (*vram.Tensor, bool) {
	if e == nil {
		return nil, false
	}
	return e.weightBiasMaskOf(name, e.Weight, nil)
}

// SetParameterMask sets or removes the mask of "weight": the rows looked
// up are those of Weight⊙mask. It implements [Maskable].
func (e *Embedding) SetParameterMask(name string, mask *vram.Tensor) error {
	if e == nil {
		return nilLayerError("embedding")
	}
	return e.setWeightBiasMask("embedding", name, e.Weight, nil, mask)
}

// ParameterMask returns the mask of "weight" (nil when none). It
// implements [Maskable].
func (e *EmbeddingBag) ParameterMask(name string) (*vram.Tensor, bool) {
	if e == nil {
		return nil, false
	}
	return e.weightBiasMaskOf(name, e.Weight, nil)
}

// SetParameterMask sets or removes the mask of "weight": the bags reduce
// the rows of Weight⊙mask. It implements [Maskable].
func (e *EmbeddingBag) SetParameterMask(name string, mask *vram.Tensor) error {
	if e == nil {
		return nilLayerError("embedding_bag")
	}
	return e.setWeightBiasMask("embedding_bag", name, e.Weight, nil, mask)
}

// ParameterMask returns the mask of "weight" or "bias" (nil when none;
// the layer has them unless made without elementwise affine). It
// implements [Maskable].
func (l *LayerNorm) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return l.weightBiasMaskOf(name, l.Weight, l.Bias)
}

// SetParameterMask sets or removes the mask of "weight" or "bias". It
// implements [Maskable].
func (l *LayerNorm) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("layer_norm")
	}
	return l.setWeightBiasMask("layer_norm", name, l.Weight, l.Bias, mask)
}

// ParameterMask returns the mask of "weight" or "bias" (nil when none;
// the layer has them unless made without affine). It implements
// [Maskable].
func (l *GroupNorm) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return l.weightBiasMaskOf(name, l.Weight, l.Bias)
}

// SetParameterMask sets or removes the mask of "weight" or "bias". It
// implements [Maskable].
func (l *GroupNorm) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("group_norm")
	}
	return l.setWeightBiasMask("group_norm", name, l.Weight, l.Bias, mask)
}

// ParameterMask returns the mask of "weight" or "bias" (nil when none;
// the layer has them unless made without affine). It implements
// [Maskable], for [BatchNorm1d] too.
func (l *BatchNorm2d) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return l.weightBiasMaskOf(name, l.Weight, l.Bias)
}

// SetParameterMask sets or removes the mask of "weight" or "bias". It
// implements [Maskable], for [BatchNorm1d] too.
func (l *BatchNorm2d) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("batch_norm")
	}
	return l.setWeightBiasMask("batch_norm", name, l.Weight, l.Bias, mask)
}

// ParameterMask returns the mask of "weight" or "bias" (nil when none;
// the layer has them unless made without affine). It implements
// [Maskable].
func (l *BatchNorm1d) ParameterMask(name string) (*vram.Tensor, bool) {
	if l == nil {
		return nil, false
	}
	return l.BatchNorm2d.ParameterMask(name)
}

// SetParameterMask sets or removes the mask of "weight" or "bias". It
// implements [Maskable].
func (l *BatchNorm1d) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("batch_norm")
	}
	return l.BatchNorm2d.SetParameterMask(name, mask)
}

// noMaskError is SetParameterMask's error for a name that is not one of
// the op's maskable parameters.
func noMaskError(op, name string) error {
	return &vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("no parameter %q to mask (want weight, or bias when there is one)", name)}
}

// SetParameterMask sets or removes the mask of "weight" or "bias". It
// implements [Maskable].
func (l *Conv2d) SetParameterMask(name string, mask *vram.Tensor) error {
	if l == nil {
		return nilLayerError("conv2d")
	}
	switch {
	case name == "weight" && l.Weight != nil:
		return l.setMask("conv2d", name, l.Weight, &l.WeightMask, mask)
	case name == "bias" && l.Bias != nil:
		return l.setMask("conv2d", name, l.Bias, &l.BiasMask, mask)
	}
	return noMaskError("conv2d", name)
}

// setMask is SetParameterMask for the parameter name, p, whose mask the
// layer keeps in *slot as well as among its buffers (only there for a nil
// slot); op names the layer in errors.
func (b *Base) setMask(op, name string, p *vram.Tensor, slot **vram.Tensor, mask *vram.Tensor) error {
	if mask != nil {
		switch {
		case !p.DType().IsFloat():
			return &vram.Error{Op: op, Kind: vram.ErrDType, Detail: fmt.Sprintf("%s has dtype %s; only floating-point parameters can be masked (prune before quantizing)", name, p.DType())}
		case mask.DType() != p.DType() || mask.Device() != p.Device() || !slices.Equal(mask.Shape(), p.Shape()):
			return &vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("mask of %s is %v %s on %s, want %v %s on %s",
				name, mask.Shape(), mask.DType(), mask.Device(), p.Shape(), p.DType(), p.Device())}
		}
	}
	old := b.maskOf(name)
	if slot != nil {
		old = *slot
		*slot = mask
	}
	b.setMaskBuffer(name, mask)
	if old != nil && old != mask {
		old.Release()
	}
	return nil
}

// setMaskBuffer registers mask as the buffer name+"_mask" that masks the
// parameter name (replacing the one there), or removes that buffer for a
// nil mask.
func (b *Base) setMaskBuffer(name string, mask *vram.Tensor) {
	key := name + maskSuffix
	i := slices.IndexFunc(b.buffers, func(p paramSlot) bool { return p.name == key })
	switch {
	case mask == nil && i >= 0:
		b.buffers = slices.Delete(b.buffers, i, i+1)
		b.masked = slices.DeleteFunc(b.masked, func(n string) bool { return n == name })
	case mask == nil:
	case i >= 0:
		vram.Keep(mask)
		b.buffers[i].ref = &mask
	default:
		b.RegisterBuffer(key, mask)
		b.masked = append(b.masked, name)
	}
}

// maskOf returns the mask of b's own parameter name, or nil when it has
// none.
func (b *Base) maskOf(name string) *vram.Tensor {
	if !slices.Contains(b.masked, name) {
		return nil
	}
	for _, p := range b.ownBuffers() {
		if p.Name == name+maskSuffix {
			return p.Tensor
		}
	}
	return nil
}

// weightBiasMaskOf is ParameterMask of a layer whose maskable parameters
// are weight and bias (either may be nil: then it cannot be masked), with
// their masks kept among its buffers only.
func (b *Base) weightBiasMaskOf(name string, weight, bias *vram.Tensor) (*vram.Tensor, bool) {
	switch {
	case name == "weight" && weight != nil, name == "bias" && bias != nil:
		return b.maskOf(name), true
	}
	return nil, false
}

// setWeightBiasMask is SetParameterMask of a layer whose maskable
// parameters are weight and bias (either may be nil); op names the layer
// in errors.
func (b *Base) setWeightBiasMask(op, name string, weight, bias, mask *vram.Tensor) error {
	switch {
	case name == "weight" && weight != nil:
		return b.setMask(op, name, weight, nil, mask)
	case name == "bias" && bias != nil:
		return b.setMask(op, name, bias, nil, mask)
	}
	return noMaskError(op, name)
}

// maskedParams returns weight and bias with the masks of b's parameters
// "weight" and "bias" applied ([masked]), and a function that releases
// what that made.
func (b *Base) maskedParams(weight, bias *vram.Tensor) (w, bb *vram.Tensor, done func()) {
	w, rw := masked(weight, b.maskOf("weight"))
	bb, rb := masked(bias, b.maskOf("bias"))
	return w, bb, func() {
		if rw {
			w.Release()
		}
		if rb {
			bb.Release()
		}
	}
}

// maskSuffix ends the buffer name of a pruning mask, as in PyTorch.
const maskSuffix = "_mask"

// castOwnMasks casts the masks of b's own parameters to their parameter's
// dtype, after the parameters were converted.
func (b *Base) castOwnMasks() {
	for _, name := range b.masked {
		own := b.ownParams()
		pi := slices.IndexFunc(own, func(p NamedParameter) bool { return p.Name == name })
		bufs := b.ownBuffers()
		mi := slices.IndexFunc(bufs, func(p NamedParameter) bool { return p.Name == name+maskSuffix })
		if pi < 0 || mi < 0 {
			continue
		}
		if p, m := own[pi].Tensor, bufs[mi].Tensor; m.DType() != p.DType() {
			m.CastInPlace(p.DType())
		}
	}
}

// castMasks casts the mask of every parameter of m's [Maskable] layers to
// the parameter's dtype, so that masks follow their parameters through
// [ConvertDType] as PyTorch's floating-point buffers follow model.half().
func castMasks(m Module) {
	for _, sub := range Modules(m) {
		mk, ok := sub.(Maskable)
		if !ok {
			continue
		}
		for _, p := range sub.NamedParameters() {
			if strings.Contains(p.Name, ".") || !p.Tensor.DType().IsFloat() {
				continue
			}
			if mask, _ := mk.ParameterMask(p.Name); mask != nil && !mask.Released() && mask.DType() != p.Tensor.DType() {
				mask.CastInPlace(p.Tensor.DType())
			}
		}
	}
}

// masked returns p⊙mask (recorded, so that p's gradient is masked) or, for
// a nil mask, p itself; release reports whether the caller must release
// the result.
func masked(p, mask *vram.Tensor) (t *vram.Tensor, release bool) {
	if p == nil || mask == nil {
		return p, false
	}
	return p.Mul(mask), true
}
