package nn

import (
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/footprint"
)

// TransformerOptions are the settings of the transformer layers and of
// [NewTransformer] besides d_model and nhead. The zero value is PyTorch's
// default: dim_feedforward 2048, dropout 0.1, relu, layer_norm_eps 1e-5,
// sequence-first inputs, the norms after each block (post-norm), with
// biases.
type TransformerOptions struct {
	// DimFeedforward is the hidden size of the feed-forward block
	// (dim_feedforward); 0 means 2048.
	DimFeedforward int
	// Dropout is the probability of the dropout after the attention
	// blocks, inside and after the feed-forward block and of the attention
	// weights, in training mode, in [0, 1]; 0 means 0.1 (set NoDropout for
	// none).
	Dropout float64
	// NoDropout turns dropout off (dropout=0.0).
	NoDropout bool
	// Activation is the feed-forward block's activation: "relu" (also "")
	// or "gelu" (the exact GELU), as PyTorch's activation strings.
	Activation string
	// ActivationFunc, when not nil, is the feed-forward block's
	// activation instead, as PyTorch takes a callable (such as
	// (*vram.Tensor).Silu). It is called once a forward on the first
	// linear layer's output, which it must not release; a result other
	// than its argument is released by the layer once used. Activation
	// must then be "".
	ActivationFunc func(*vram.Tensor) *vram.Tensor
	// LayerNormEps is added to the variance of every LayerNorm
	// (layer_norm_eps); 0 means 1e-5. It must not be negative.
	LayerNormEps float64
	// BatchFirst takes and returns [N, S, E] rather than [S, N, E]
	// (batch_first=True).
	BatchFirst bool
	// NormFirst applies each LayerNorm before its block rather than after
	// the residual sum (norm_first=True, pre-norm).
	NormFirst bool
	// NoBias leaves out the biases of the linear layers, the attention's
	// projections and the LayerNorms (bias=False).
	NoBias bool
}

// transformerConfig is a TransformerOptions with its defaults applied.
type transformerConfig struct {
	dff        int
	dropout    float64
	activation string
	eps        float64
	TransformerOptions
}

// config checks the sizes and o and fills in PyTorch's defaults. It panics
// with an *vram.Error of kind vram.ErrArgument for a size that is not
// positive, an nhead that does not divide dModel, a dropout outside
// [0, 1], an unknown activation or a bad eps.
func (o TransformerOptions) config(op string, dModel, nhead int) transformerConfig {
	bad := func(format string, args ...any) {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf(format, args...)})
	}
	c := transformerConfig{dff: o.DimFeedforward, dropout: o.Dropout, eps: o.LayerNormEps, TransformerOptions: o}
	if c.dff == 0 {
		c.dff = 2048
	}
	if c.dropout == 0 {
		c.dropout = 0.1
	}
	if o.NoDropout {
		c.dropout = 0
	}
	if c.eps == 0 {
		c.eps = 1e-5
	}
	c.activation = o.Activation
	if c.activation == "" {
		c.activation = "relu"
	}
	if _, ok := activation(c.activation); !ok {
		bad("activation should be relu or gelu, not %q", o.Activation)
	}
	if o.ActivationFunc != nil && o.Activation != "" {
		bad("set Activation %q or ActivationFunc, not both", o.Activation)
	}
	if o.ActivationFunc != nil {
		c.activation = ""
	}
	switch {
	case dModel < 1 || nhead < 1 || c.dff < 1:
		bad("sizes must be positive, got d_model %d, nhead %d, dim_feedforward %d", dModel, nhead, c.dff)
	case dModel%nhead != 0:
		bad("d_model %d must be divisible by nhead %d", dModel, nhead)
	case !(c.dropout >= 0 && c.dropout <= 1):
		bad("dropout probability must be in [0, 1], got %v", o.Dropout)
	}
	checkEps(op, c.eps)
	return c
}

// layerParams returns the number of parameter elements of a layer of c
// with dModel features, attns attention blocks and norms LayerNorms,
// counted with the biases (an upper bound with NoBias), in float64, which
// does not overflow here and is exact well past the sizes that allocate.
func (c transformerConfig) layerParams(dModel, attns, norms int) float64 {
	d, f := float64(dModel), float64(c.dff)
	return float64(attns)*(4*d*d+4*d) + 2*d*f + f + d + float64(norms)*2*d
}

// addLayers counts in f the parameters of n layers of c with dModel
// features, attns attention blocks and norms LayerNorms, of dtype dt,
// as the layers' constructors make them.
func (c transformerConfig) addLayers(f *footprint.Footprint, n int64, dt vram.DType, dModel, attns, norms int) {
	d := dModel
	f.Add(footprint.Mul(n, int64(attns)), dt, 3*d, d) // in_proj_weight
	f.Add(footprint.Mul(n, int64(attns)), dt, d, d)   // out_proj.weight
	f.Add(n, dt, c.dff, d)                            // linear1.weight
	f.Add(n, dt, d, c.dff)                            // linear2.weight
	if !c.NoBias {
		f.Add(footprint.Mul(n, int64(attns)), dt, 3*d) // in_proj_bias
		f.Add(footprint.Mul(n, int64(attns)), dt, d)   // out_proj.bias
		f.Add(n, dt, c.dff)                            // linear1.bias
		f.Add(n, dt, d)                                // linear2.bias
	}
	c.addLayerNorms(f, footprint.Mul(n, int64(norms)), dt, d)
}

// addLayerNorms counts in f the parameters of n LayerNorms of c over d
// features, of dtype dt.
func (c transformerConfig) addLayerNorms(f *footprint.Footprint, n int64, dt vram.DType, d int) {
	if c.NoBias {
		f.Add(n, dt, d)
		return
	}
	f.Add(footprint.Mul(2, n), dt, d)
}

// checkParamElems panics with an *vram.Error of kind vram.ErrArgument naming
// op when n parameter elements are more than an int counts, so that a
// parameter's shape would wrap around, or a stack be cloned until memory
// runs out, rather than fail at once; what names the sizes that give n.
func checkParamElems(op string, n float64, what string) {
	if n >= math.MaxInt {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: what + " give more parameters than an int can count"})
	}
}

// releaseParts releases the parameters of the modules of ms that are not
// nil, the sub-layers made before a constructor failed.
func releaseParts(ms ...Module) {
	for _, m := range ms {
		if m = noModule(m); m != nil {
			Release(m)
		}
	}
}

// activation returns the fused activation named by PyTorch's activation
// string name ("" is relu), and whether there is one.
func activation(name string) (vram.Activation, bool) {
	switch name {
	case "", "relu":
		return vram.ActReLU, true
	case "gelu":
		return vram.ActGELU, true
	}
	return vram.ActNone, false
}

// part is one of a transformer layer's sub-layers, under its state-dict
// name.
type part struct {
	name string
	m    Module
}

// layerConfig returns a layer's activation, and panics with an
// *vram.Error of kind vram.ErrArgument when the layer's fields were
// changed after construction into something it cannot run: an unknown
// activation, a sub-layer among parts set to nil, or a BatchFirst that
// its attention does not follow.
func layerConfig(op, name string, batchFirst bool, parts []part, attns ...*MultiheadAttention) vram.Activation {
	act, ok := activation(name)
	if !ok {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("activation should be relu or gelu, not %q", name)})
	}
	for _, p := range parts {
		if noModule(p.m) == nil {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("sub-layer %s is nil; make a new layer", p.name)})
		}
	}
	for _, a := range attns {
		if a.BatchFirst != batchFirst {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf(
				"the layer's BatchFirst is %v but its attention's is %v; set both, or make a new layer", batchFirst, a.BatchFirst)})
		}
	}
	return act
}

// layerNorm returns the LayerNorm over d features of c (without bias with
// NoBias).
func (c transformerConfig) layerNorm(d int, opts []vram.Option) *LayerNorm {
	if c.NoBias {
		return NewLayerNormNoBias([]int{d}, c.eps, opts...)
	}
	return NewLayerNorm([]int{d}, c.eps, opts...)
}

// linear returns the Linear layer from in to out features of c.
func (c transformerConfig) linear(in, out int, opts []vram.Option) *Linear {
	if c.NoBias {
		return NewLinearNoBias(in, out, opts...)
	}
	return NewLinear(in, out, opts...)
}

// attention returns the MultiheadAttention of c.
func (c transformerConfig) attention(dModel, nhead int, opts []vram.Option) *MultiheadAttention {
	return NewMultiheadAttention(dModel, nhead, MultiheadAttentionOptions{Dropout: c.dropout, NoBias: c.NoBias, BatchFirst: c.BatchFirst}, opts...)
}

// feedForward returns dropout2(linear2(dropout(act(linear1(x))))), the
// feed-forward block shared by both layer kinds; fn, when not nil, is the
// activation instead of act.
func feedForward(x *vram.Tensor, linear1, linear2 *Linear, act vram.Activation, fn func(*vram.Tensor) *vram.Tensor,
	dropout, dropoutOut *Dropout) *vram.Tensor {
	var ts temps
	defer ts.release()
	var h *vram.Tensor
	if fn == nil {
		h = ts.add(linear1.ForwardAct(x, act))
	} else {
		pre := ts.add(linear1.Forward(x))
		if h = fn(pre); h == nil {
			panic(&vram.Error{Kind: vram.ErrArgument, Detail: "the feed-forward block's activation function returned nil"})
		}
		if h != pre {
			ts.add(h)
		}
	}
	h = ts.add(dropout.Forward(h))
	h = ts.add(linear2.Forward(h))
	return dropoutOut.Forward(h)
}

// attend returns dropout(attn(q, kv, kv)) with the masks of mo, the
// attention block shared by both layer kinds; its errors say which block
// (what) failed, since a decoder layer has two with masks of their own.
func attend(what string, attn *MultiheadAttention, q, kv *vram.Tensor, mo MultiheadForwardOptions, dropout *Dropout) *vram.Tensor {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(*vram.Error); ok {
				c := *e
				c.Detail = what + ": " + c.Detail
				r = &c
			}
			panic(r)
		}
	}()
	mo.NoWeights = true
	a, _ := attn.ForwardQKV(q, kv, kv, mo)
	defer a.Release()
	return dropout.Forward(a)
}

// residual returns x + block(x) (pre-norm: x + block(norm(x))) or
// norm(x + block(x)) (post-norm), releasing its intermediates before it
// returns, so that a layer holds no more than one block's at a time.
func residual(x *vram.Tensor, normFirst bool, norm *LayerNorm, block func(*vram.Tensor) *vram.Tensor) *vram.Tensor {
	var ts temps
	defer ts.release()
	if normFirst {
		return x.Add(ts.add(block(ts.add(norm.Forward(x)))))
	}
	return norm.Forward(ts.add(x.Add(ts.add(block(x)))))
}

// TransformerEncoderLayer is torch.nn.TransformerEncoderLayer: self-attention
// then a feed-forward block of two linear layers, each with dropout, a
// residual connection and a LayerNorm (after the residual sum, or before
// the block with NormFirst). Its state dict has PyTorch's names
// ("self_attn.in_proj_weight", "self_attn.out_proj.weight",
// "linear1.weight", "linear2.bias", "norm1.weight", "norm2.bias", ...), so
// PyTorch's weights load with [Load].
//
// Inputs are [S, N, E] (sequence first, PyTorch's default), [N, S, E] with
// BatchFirst, or [S, E] unbatched, E being DModel. Forward and
// ForwardMasked may run concurrently (dropout draws from one generator).
type TransformerEncoderLayer struct {
	Base
	// DModel is the feature size, NHead the number of attention heads.
	DModel, NHead int
	// Activation is "relu" or "gelu" ("" is relu), unless ActivationFunc
	// is set.
	Activation string
	// ActivationFunc, when not nil, is the feed-forward block's
	// activation in place of Activation (see [TransformerOptions]).
	ActivationFunc func(*vram.Tensor) *vram.Tensor
	// BatchFirst says whether inputs and outputs are [N, S, E] (the
	// attention's BatchFirst must say the same); NormFirst whether the
	// LayerNorms come before their blocks.
	BatchFirst, NormFirst bool
	// SelfAttn is the self-attention (self_attn).
	SelfAttn *MultiheadAttention
	// Linear1 [DimFeedforward, E] and Linear2 [E, DimFeedforward] make the
	// feed-forward block.
	Linear1, Linear2 *Linear
	// Norm1 follows (or precedes) the attention, Norm2 the feed-forward
	// block.
	Norm1, Norm2 *LayerNorm
	// Dropout acts inside the feed-forward block, Dropout1 after the
	// attention, Dropout2 after the feed-forward block.
	Dropout, Dropout1, Dropout2 *Dropout
}

// NewTransformerEncoderLayer returns a TransformerEncoderLayer of dModel
// features and nhead heads, initialised as PyTorch initialises the layer
// alone (each sub-layer by its own rule: [NewMultiheadAttention],
// [NewLinear], [NewLayerNorm]; [NewTransformer] then applies Xavier to
// every matrix). opts (device, dtype, generator) go to vram's factory
// functions; a [vram.WithGenerator] generator also draws the dropout
// masks. It panics with an *vram.Error of kind vram.ErrArgument for a
// size that is not positive, an nhead that does not divide dModel, sizes
// whose parameters have more elements than an int counts, or a bad
// option (see [TransformerOptions]). When a parameter fails to allocate,
// it releases those it made and panics with the error, naming the layer.
func NewTransformerEncoderLayer(dModel, nhead int, o TransformerOptions, opts ...vram.Option) *TransformerEncoderLayer {
	const op = "transformer_encoder_layer"
	c := o.config(op, dModel, nhead)
	checkParamElems(op, c.layerParams(dModel, 1, 2), fmt.Sprintf("d_model %d and dim_feedforward %d", dModel, c.dff))
	l := &TransformerEncoderLayer{DModel: dModel, NHead: nhead, Activation: c.activation, ActivationFunc: o.ActivationFunc,
		BatchFirst: o.BatchFirst, NormFirst: o.NormFirst}
	// The sub-layers made before a failure, out of memory for one, are
	// released rather than left to the caller, who gets no layer, and the
	// error names the layer.
	defer asOp(op)
	made := false
	defer func() {
		if !made {
			releaseParts(l.SelfAttn, l.Linear1, l.Linear2, l.Norm1, l.Norm2)
		}
	}()
	l.SelfAttn = c.attention(dModel, nhead, opts)
	l.Linear1 = c.linear(dModel, c.dff, opts)
	l.Dropout = NewDropout(c.dropout, opts...)
	l.Linear2 = c.linear(c.dff, dModel, opts)
	l.Norm1, l.Norm2 = c.layerNorm(dModel, opts), c.layerNorm(dModel, opts)
	l.Dropout1, l.Dropout2 = NewDropout(c.dropout, opts...), NewDropout(c.dropout, opts...)
	l.RegisterModule("self_attn", l.SelfAttn)
	l.RegisterModule("linear1", l.Linear1)
	l.RegisterModule("dropout", l.Dropout)
	l.RegisterModule("linear2", l.Linear2)
	l.RegisterModule("norm1", l.Norm1)
	l.RegisterModule("norm2", l.Norm2)
	l.RegisterModule("dropout1", l.Dropout1)
	l.RegisterModule("dropout2", l.Dropout2)
	made = true
	return l
}

// EncoderMasks are the optional masks of an encoder's forward. The zero
// value is no mask.
type EncoderMasks struct {
	// Mask is nil, [S, S] or [N·NHead, S, S]: bool, true where a position
	// must NOT attend to another, or floating-point, added to the
	// attention scores (src_mask, mask), such as
	// [GenerateSquareSubsequentMask]'s.
	Mask *vram.Tensor
	// KeyPaddingMask is nil or [N, S] ([S] unbatched): bool, true for a
	// padding position that no position attends to, or floating-point,
	// added to the scores (src_key_padding_mask).
	KeyPaddingMask *vram.Tensor
	// Causal keeps each position from attending to later ones (is_causal),
	// on top of Mask and KeyPaddingMask. PyTorch takes is_causal as a hint
	// that Mask is the causal mask and requires Mask with it; here Mask
	// may be nil, and the result is the same as with the causal mask.
	//
	// A position that the masks leave nothing to attend to gets a zero
	// attention output, so its attention block returns out_proj's bias
	// and the layer's output stays finite. PyTorch's fast path (inference
	// with nested tensors) also gives 0 there; its general path gives NaN.
	Causal bool
}

// Forward returns the layer's output for src without masks, of src's
// shape.
func (l *TransformerEncoderLayer) Forward(src *vram.Tensor) *vram.Tensor {
	return l.ForwardMasked(src, EncoderMasks{})
}

// ForwardMasked returns the layer's output for src, of src's shape, with
// the masks of m (src_mask, src_key_padding_mask, is_causal). The caller
// owns the result. Dropout applies in training mode only.
//
// It panics with an *vram.Error of kind vram.ErrShape for inputs or masks
// of the wrong rank or sizes, and of kind vram.ErrDType for masks that are
// neither bool nor floating-point and for inputs that are not of the
// parameters' dtype (outside [vram.Autocast]).
func (l *TransformerEncoderLayer) ForwardMasked(src *vram.Tensor, m EncoderMasks) *vram.Tensor {
	const op = "transformer_encoder_layer"
	defer asOp(op)
	notNil(op, src)
	if l == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil layer"})
	}
	act := layerConfig(op, l.Activation, l.BatchFirst, []part{
		{"self_attn", l.SelfAttn}, {"linear1", l.Linear1}, {"dropout", l.Dropout}, {"linear2", l.Linear2},
		{"norm1", l.Norm1}, {"norm2", l.Norm2}, {"dropout1", l.Dropout1}, {"dropout2", l.Dropout2},
	}, l.SelfAttn)
	var ts temps
	defer ts.release()
	mo := MultiheadForwardOptions{AttnMask: m.Mask, KeyPaddingMask: m.KeyPaddingMask, Causal: m.Causal}
	x := ts.add(residual(src, l.NormFirst, l.Norm1, func(x *vram.Tensor) *vram.Tensor {
		return attend("self-attention (src masks)", l.SelfAttn, x, x, mo, l.Dropout1)
	}))
	return residual(x, l.NormFirst, l.Norm2, func(x *vram.Tensor) *vram.Tensor {
		return feedForward(x, l.Linear1, l.Linear2, act, l.ActivationFunc, l.Dropout, l.Dropout2)
	})
}

// TransformerDecoderLayer is torch.nn.TransformerDecoderLayer:
// self-attention over the target, attention from the target to the
// encoder's output (the memory), then a feed-forward block, each with
// dropout, a residual connection and a LayerNorm (after the residual sum,
// or before the block with NormFirst). Its state dict has PyTorch's names
// ("self_attn.in_proj_weight", "multihead_attn.out_proj.bias",
// "linear1.weight", "norm3.weight", ...).
//
// Inputs are [T, N, E] for the target and [S, N, E] for the memory
// (sequence first), [N, T, E] and [N, S, E] with BatchFirst, or [T, E] and
// [S, E] unbatched. ForwardMemory may run concurrently.
type TransformerDecoderLayer struct {
	Base
	// DModel is the feature size, NHead the number of attention heads.
	DModel, NHead int
	// Activation is "relu" or "gelu" ("" is relu), unless ActivationFunc
	// is set.
	Activation string
	// ActivationFunc, when not nil, is the feed-forward block's
	// activation in place of Activation (see [TransformerOptions]).
	ActivationFunc func(*vram.Tensor) *vram.Tensor
	// BatchFirst says whether inputs and outputs are [N, T, E] (the
	// attentions' BatchFirst must say the same); NormFirst whether the
	// LayerNorms come before their blocks.
	BatchFirst, NormFirst bool
	// SelfAttn is the target's self-attention (self_attn), MultiheadAttn
	// the attention to the memory (multihead_attn).
	SelfAttn, MultiheadAttn *MultiheadAttention
	// Linear1 [DimFeedforward, E] and Linear2 [E, DimFeedforward] make the
	// feed-forward block.
	Linear1, Linear2 *Linear
	// Norm1, Norm2 and Norm3 go with the self-attention, the attention to
	// the memory and the feed-forward block.
	Norm1, Norm2, Norm3 *LayerNorm
	// Dropout acts inside the feed-forward block, Dropout1, Dropout2 and
	// Dropout3 after the three blocks.
	Dropout, Dropout1, Dropout2, Dropout3 *Dropout
}

// NewTransformerDecoderLayer returns a TransformerDecoderLayer of dModel
// features and nhead heads, initialised and checked as
// [NewTransformerEncoderLayer] does.
func NewTransformerDecoderLayer(dModel, nhead int, o TransformerOptions, opts ...vram.Option) *TransformerDecoderLayer {
	const op = "transformer_decoder_layer"
	c := o.config(op, dModel, nhead)
	checkParamElems(op, c.layerParams(dModel, 2, 3), fmt.Sprintf("d_model %d and dim_feedforward %d", dModel, c.dff))
	l := &TransformerDecoderLayer{DModel: dModel, NHead: nhead, Activation: c.activation, ActivationFunc: o.ActivationFunc,
		BatchFirst: o.BatchFirst, NormFirst: o.NormFirst}
	defer asOp(op) // as NewTransformerEncoderLayer's
	made := false
	defer func() {
		if !made {
			releaseParts(l.SelfAttn, l.MultiheadAttn, l.Linear1, l.Linear2, l.Norm1, l.Norm2, l.Norm3)
		}
	}()
	l.SelfAttn = c.attention(dModel, nhead, opts)
	l.MultiheadAttn = c.attention(dModel, nhead, opts)
	l.Linear1 = c.linear(dModel, c.dff, opts)
	l.Dropout = NewDropout(c.dropout, opts...)
	l.Linear2 = c.linear(c.dff, dModel, opts)
	l.Norm1, l.Norm2, l.Norm3 = c.layerNorm(dModel, opts), c.layerNorm(dModel, opts), c.layerNorm(dModel, opts)
	l.Dropout1, l.Dropout2, l.Dropout3 = NewDropout(c.dropout, opts...), NewDropout(c.dropout, opts...), NewDropout(c.dropout, opts...)
	l.RegisterModule("self_attn", l.SelfAttn)
	l.RegisterModule("multihead_attn", l.MultiheadAttn)
	l.RegisterModule("linear1", l.Linear1)
	l.RegisterModule("dropout", l.Dropout)
	l.RegisterModule("linear2", l.Linear2)
	l.RegisterModule("norm1", l.Norm1)
	l.RegisterModule("norm2", l.Norm2)
	l.RegisterModule("norm3", l.Norm3)
	l.RegisterModule("dropout1", l.Dropout1)
	l.RegisterModule("dropout2", l.Dropout2)
	l.RegisterModule("dropout3", l.Dropout3)
	made = true
	return l
}

// DecoderMasks are the optional masks of a decoder's forward. The zero
// value is no mask.
type DecoderMasks struct {
	// TgtMask is nil, [T, T] or [N·NHead, T, T] (tgt_mask) and MemoryMask
	// nil, [T, S] or [N·NHead, T, S] (memory_mask): bool, true where a
	// position must NOT attend, or floating-point, added to the scores.
	TgtMask, MemoryMask *vram.Tensor
	// TgtKeyPaddingMask is nil or [N, T] and MemoryKeyPaddingMask nil or
	// [N, S] ([T] and [S] unbatched): bool, true for padding, or
	// floating-point, added to the scores (tgt_key_padding_mask,
	// memory_key_padding_mask).
	TgtKeyPaddingMask, MemoryKeyPaddingMask *vram.Tensor
	// TgtCausal keeps each target position from attending to later ones
	// (tgt_is_causal), MemoryCausal target position i from memory
	// positions after i (memory_is_causal), on top of the masks; see
	// [EncoderMasks].Causal, also for a position left nothing to attend
	// to.
	TgtCausal, MemoryCausal bool
}

// Forward panics with an *vram.Error of kind vram.ErrArgument: a decoder
// layer needs the encoder's output; call
// [TransformerDecoderLayer.ForwardMemory].
func (l *TransformerDecoderLayer) Forward(*vram.Tensor) *vram.Tensor {
	panic(needsMemory("transformer_decoder_layer", "ForwardMemory(tgt, memory, masks)"))
}

// needsMemory is the error of Forward of a module that needs two inputs.
func needsMemory(op, call string) error {
	return &vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "Forward takes one input, this module needs two; call " + call}
}

// ForwardMemory returns the layer's output for the target tgt attending to
// memory, of tgt's shape, with the masks of m. The caller owns the
// result. Dropout applies in training mode only. It panics as
// [TransformerEncoderLayer.ForwardMasked] does, and with an *vram.Error of
// kind vram.ErrShape when tgt and memory differ in batch size or rank.
func (l *TransformerDecoderLayer) ForwardMemory(tgt, memory *vram.Tensor, m DecoderMasks) *vram.Tensor {
	const op = "transformer_decoder_layer"
	defer asOp(op)
	notNil(op, tgt)
	notNil(op, memory)
	if l == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil layer"})
	}
	act := layerConfig(op, l.Activation, l.BatchFirst, []part{
		{"self_attn", l.SelfAttn}, {"multihead_attn", l.MultiheadAttn}, {"linear1", l.Linear1}, {"dropout", l.Dropout},
		{"linear2", l.Linear2}, {"norm1", l.Norm1}, {"norm2", l.Norm2}, {"norm3", l.Norm3},
		{"dropout1", l.Dropout1}, {"dropout2", l.Dropout2}, {"dropout3", l.Dropout3},
	}, l.SelfAttn, l.MultiheadAttn)
	var ts temps
	defer ts.release()
	x := ts.add(residual(tgt, l.NormFirst, l.Norm1, func(x *vram.Tensor) *vram.Tensor {
		return attend("self-attention (tgt masks)", l.SelfAttn, x, x, MultiheadForwardOptions{AttnMask: m.TgtMask, KeyPaddingMask: m.TgtKeyPaddingMask, Causal: m.TgtCausal}, l.Dropout1)
	}))
	x = ts.add(residual(x, l.NormFirst, l.Norm2, func(x *vram.Tensor) *vram.Tensor {
		return attend("attention to the memory (memory masks)", l.MultiheadAttn, x, memory, MultiheadForwardOptions{AttnMask: m.MemoryMask, KeyPaddingMask: m.MemoryKeyPaddingMask, Causal: m.MemoryCausal}, l.Dropout2)
	}))
	return residual(x, l.NormFirst, l.Norm3, func(x *vram.Tensor) *vram.Tensor {
		return feedForward(x, l.Linear1, l.Linear2, act, l.ActivationFunc, l.Dropout, l.Dropout3)
	})
}

// cloneLayers returns layer followed by n-1 deep copies of it on its
// device (PyTorch's _get_clones), which share no tensor with it or with
// each other. It panics with an *vram.Error when a copy fails, releasing
// the copies made.
func cloneLayers[L Module](op string, layer L, n int) []L {
	out := []L{layer}
	if n == 1 {
		return out
	}
	dev, ok := commonDevice(layer)
	if !ok {
		panic(&vram.Error{Op: op, Kind: vram.ErrDevice, Detail: "the layer's parameters must be live and all on one device to be cloned"})
	}
	for len(out) < n {
		c, err := Replicate(layer, dev)
		if err != nil {
			for _, l := range out[1:] {
				Release(l)
			}
			kind := vram.ErrArgument
			var ve *vram.Error
			if errors.As(err, &ve) {
				kind = ve.Kind
			}
			panic(&vram.Error{Op: op, Kind: kind, Detail: fmt.Sprintf("cloning layer %d of %d", len(out), n), Err: err})
		}
		out = append(out, c.(L))
	}
	return out
}

// stack registers layers under "layers" ("layers.0", "layers.1", ...) and
// norm, when not nil, under "norm", as PyTorch's encoder and decoder do.
func stack[L Module](b *Base, layers []L, norm Module) {
	list := NewSequential()
	for _, l := range layers {
		list.Append(l)
	}
	b.RegisterModule("layers", list)
	if norm != nil {
		b.RegisterModule("norm", norm)
	}
}

// noModule returns nil for a nil m and for a nil pointer in m (a
// "var norm *LayerNorm" passed as a Module), and m otherwise.
func noModule(m Module) Module {
	if m == nil {
		return nil
	}
	if v := reflect.ValueOf(m); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return m
}

// checkStack panics with an *vram.Error of kind vram.ErrArgument for a nil
// layer or a number of layers that is not positive.
func checkStack(op string, isNil bool, n int) {
	switch {
	case isNil:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "the layer to stack is nil"})
	case n < 1:
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("num_layers must be positive, got %d", n)})
	}
}

// checkCopies panics as [checkParamElems] does when n copies of layer have
// more parameter elements than an int counts, and with an *vram.Error of
// kind vram.ErrOutOfMemory when the n-1 copies that cloneLayers makes
// cannot fit in memory ([footprint.Footprint.Check]), before any is made.
func checkCopies(op string, layer Module, n int) {
	per := 0
	for _, p := range layer.Parameters() {
		per += p.NumElements()
	}
	checkParamElems(op, float64(per)*float64(n), fmt.Sprintf("num_layers %d copies of a layer of %d parameters", n, per))
	dev, ok := commonDevice(layer)
	if n < 2 || !ok {
		return // nothing to copy, or cloneLayers refuses it
	}
	one := footprint.Footprint{Device: dev}
	for _, t := range stateTensorsOf(layer) {
		if t != nil && !t.Released() {
			one.Add(1, t.DType(), t.Shape()...)
		}
	}
	one.Times(int64(n-1)).Check(op, fmt.Sprintf("num_layers %d: %d copies of a layer of %d parameters", n, n-1, per))
}

// TransformerEncoder is torch.nn.TransformerEncoder: NumLayers encoder
// layers one after another, then an optional norm. Its state dict names
// are "layers.0.self_attn.in_proj_weight", ..., "norm.weight".
type TransformerEncoder struct {
	Base
	// Layers are the stacked layers, which share no parameter.
	Layers []*TransformerEncoderLayer
	// Norm is the final norm (norm), or nil.
	Norm Module
}

// NewTransformerEncoder returns a TransformerEncoder of numLayers copies
// of layer followed by norm (nil, or a nil pointer, for none; PyTorch's
// nn.Transformer uses a [LayerNorm]). Unlike PyTorch, which deep-copies layer numLayers times
// and leaves it to the caller, the encoder takes layer over as its first
// layer and deep-copies it numLayers-1 times ([Replicate]), so that no
// unused copy holds memory; every layer has its own parameters, equal at
// first. layer and norm belong to the encoder afterwards ([Release]
// releases them with it). It panics with an *vram.Error of kind
// vram.ErrArgument for a nil layer, a numLayers that is not positive or
// whose copies would have more parameter elements than an int counts
// (refused before any is made), with one of kind vram.ErrOutOfMemory when
// the copies would need more host memory than the CPU device's limit or
// more memory than their device has (also before any is made), and when
// the copies cannot be made, releasing those made.
func NewTransformerEncoder(layer *TransformerEncoderLayer, numLayers int, norm Module) *TransformerEncoder {
	const op = "transformer_encoder"
	checkStack(op, layer == nil, numLayers)
	checkCopies(op, layer, numLayers)
	norm = noModule(norm)
	e := &TransformerEncoder{Layers: cloneLayers(op, layer, numLayers), Norm: norm}
	stack(&e.Base, e.Layers, norm)
	return e
}

// Forward returns the encoder's output for src without masks.
func (e *TransformerEncoder) Forward(src *vram.Tensor) *vram.Tensor {
	return e.ForwardMasked(src, EncoderMasks{})
}

// ForwardMasked returns the encoder's output for src, of src's shape, each
// layer applying the masks of m (mask, src_key_padding_mask, is_causal).
// Each layer's output is released once the next has consumed it; the
// caller owns the result. It panics as
// [TransformerEncoderLayer.ForwardMasked] does.
func (e *TransformerEncoder) ForwardMasked(src *vram.Tensor, m EncoderMasks) *vram.Tensor {
	const op = "transformer_encoder"
	notNil(op, src)
	if e == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil encoder"})
	}
	return runStack(src, len(e.Layers), e.Norm, func(i int, x *vram.Tensor) *vram.Tensor {
		return e.Layers[i].ForwardMasked(x, m)
	})
}

// runStack runs layer(0, x), layer(1, ...), ..., n of them, then norm (nil
// for none), releasing each intermediate result, also when a layer
// panics.
func runStack(x *vram.Tensor, n int, norm Module, layer func(i int, x *vram.Tensor) *vram.Tensor) (out *vram.Tensor) {
	cur := x
	defer func() {
		if out == nil && cur != x && cur != nil {
			cur.Release() // a layer panicked
		}
	}()
	step := func(next *vram.Tensor) {
		if cur != x {
			cur.Release()
		}
		cur = next
	}
	for i := range n {
		step(layer(i, cur))
	}
	if norm = noModule(norm); norm != nil { // a nil *LayerNorm set since is no norm, as the constructors take it
		step(norm.Forward(cur))
	}
	if cur == x {
		return identity(x)
	}
	return cur
}

// TransformerDecoder is torch.nn.TransformerDecoder: NumLayers decoder
// layers one after another, each attending to the same memory, then an
// optional norm. Its state dict names are
// "layers.0.multihead_attn.in_proj_weight", ..., "norm.weight".
type TransformerDecoder struct {
	Base
	// Layers are the stacked layers, which share no parameter.
	Layers []*TransformerDecoderLayer
	// Norm is the final norm (norm), or nil.
	Norm Module
}

// NewTransformerDecoder returns a TransformerDecoder of numLayers copies
// of layer followed by norm (nil for none), made as
// [NewTransformerEncoder] makes an encoder: layer becomes the first layer.
func NewTransformerDecoder(layer *TransformerDecoderLayer, numLayers int, norm Module) *TransformerDecoder {
	const op = "transformer_decoder"
	checkStack(op, layer == nil, numLayers)
	checkCopies(op, layer, numLayers)
	norm = noModule(norm)
	d := &TransformerDecoder{Layers: cloneLayers(op, layer, numLayers), Norm: norm}
	stack(&d.Base, d.Layers, norm)
	return d
}

// Forward panics with an *vram.Error of kind vram.ErrArgument: a decoder
// needs the encoder's output; call [TransformerDecoder.ForwardMemory].
func (d *TransformerDecoder) Forward(*vram.Tensor) *vram.Tensor {
	panic(needsMemory("transformer_decoder", "ForwardMemory(tgt, memory, masks)"))
}

// ForwardMemory returns the decoder's output for tgt attending to memory,
// of tgt's shape, each layer applying the masks of m. The caller owns the
// result. It panics as [TransformerDecoderLayer.ForwardMemory] does.
func (d *TransformerDecoder) ForwardMemory(tgt, memory *vram.Tensor, m DecoderMasks) *vram.Tensor {
	const op = "transformer_decoder"
	notNil(op, tgt)
	notNil(op, memory)
	if d == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil decoder"})
	}
	return runStack(tgt, len(d.Layers), d.Norm, func(i int, x *vram.Tensor) *vram.Tensor {
		return d.Layers[i].ForwardMemory(x, memory, m)
	})
}

// Transformer is torch.nn.Transformer: an encoder of encoder layers with a
// final LayerNorm, whose output (the memory) a decoder of decoder layers
// with a final LayerNorm attends to. Its state dict names are PyTorch's
// ("encoder.layers.0.self_attn.in_proj_weight", "encoder.norm.weight",
// "decoder.layers.0.multihead_attn.out_proj.weight",
// "decoder.norm.bias", ...), so a PyTorch model's safetensors load with
// [Load].
type Transformer struct {
	Base
	// DModel is the feature size, NHead the number of attention heads.
	DModel, NHead int
	// BatchFirst says whether inputs and outputs are [N, S, E].
	BatchFirst bool
	// Encoder and Decoder are the two stacks.
	Encoder *TransformerEncoder
	Decoder *TransformerDecoder
}

// NewTransformer returns a Transformer of dModel features, nhead heads,
// numEncoderLayers encoder and numDecoderLayers decoder layers (PyTorch's
// defaults are 512, 8, 6 and 6), initialised as PyTorch does: every
// parameter of more than one dimension (the attention's and linear
// layers' weights) Xavier-uniform, the biases and norms as the layers
// make them. opts (device, dtype, generator) go to vram's factory
// functions; a [vram.WithGenerator] generator draws the initial values
// and the dropout masks. It panics as [NewTransformerEncoderLayer] and
// [NewTransformerEncoder] do, naming the transformer (the memory that all
// the layers need is checked before the first is made), and releases
// everything it made when a parameter or a copy fails to allocate.
func NewTransformer(dModel, nhead, numEncoderLayers, numDecoderLayers int, o TransformerOptions, opts ...vram.Option) *Transformer {
	const op = "transformer"
	c := o.config(op, dModel, nhead)
	checkStack(op, false, numEncoderLayers)
	checkStack(op, false, numDecoderLayers)
	checkParamElems(op, float64(numEncoderLayers)*c.layerParams(dModel, 1, 2)+float64(numDecoderLayers)*c.layerParams(dModel, 2, 3)+4*float64(dModel),
		fmt.Sprintf("d_model %d, dim_feedforward %d, %d encoder and %d decoder layers", dModel, c.dff, numEncoderLayers, numDecoderLayers))
	f, dt := footprint.Of(opts)
	c.addLayers(&f, int64(numEncoderLayers), dt, dModel, 1, 2)
	c.addLayers(&f, int64(numDecoderLayers), dt, dModel, 2, 3)
	c.addLayerNorms(&f, 2, dt, dModel) // the encoder's and the decoder's final norms
	f.Check(op, fmt.Sprintf("d_model %d, dim_feedforward %d, %d encoder and %d decoder layers", dModel, c.dff, numEncoderLayers, numDecoderLayers))
	t := &Transformer{DModel: dModel, NHead: nhead, BatchFirst: o.BatchFirst}
	// What was made before a failure, out of memory for a parameter or a
	// copy of a layer, is released, and the error names the transformer.
	defer asOp(op)
	var owned []Module
	defer func() {
		if owned != nil {
			releaseParts(owned...)
		}
	}()
	encLayer := NewTransformerEncoderLayer(dModel, nhead, o, opts...)
	owned = append(owned, encLayer)
	encNorm := c.layerNorm(dModel, opts)
	owned = append(owned, encNorm)
	t.Encoder = NewTransformerEncoder(encLayer, numEncoderLayers, encNorm)
	owned = []Module{t.Encoder}
	decLayer := NewTransformerDecoderLayer(dModel, nhead, o, opts...)
	owned = append(owned, decLayer)
	decNorm := c.layerNorm(dModel, opts)
	owned = append(owned, decNorm)
	t.Decoder = NewTransformerDecoder(decLayer, numDecoderLayers, decNorm)
	owned = nil
	t.RegisterModule("encoder", t.Encoder)
	t.RegisterModule("decoder", t.Decoder)
	g := vram.GeneratorOf(opts...)
	vram.NoGrad(func() {
		for _, p := range t.Parameters() {
			if p.Dim() > 1 {
				XavierUniform(p, 1, g)
			}
		}
	})
	return t
}

// TransformerMasks are the optional masks of [Transformer.ForwardSrcTgt]:
// those of the encoder (src_*), of the decoder's self-attention (tgt_*)
// and of its attention to the memory (memory_*). The zero value is no
// mask; see [EncoderMasks] and [DecoderMasks] for their shapes.
type TransformerMasks struct {
	SrcMask, TgtMask, MemoryMask                               *vram.Tensor
	SrcKeyPaddingMask, TgtKeyPaddingMask, MemoryKeyPaddingMask *vram.Tensor
	SrcCausal, TgtCausal, MemoryCausal                         bool
}

// Forward panics with an *vram.Error of kind vram.ErrArgument: a
// transformer needs a source and a target; call
// [Transformer.ForwardSrcTgt].
func (t *Transformer) Forward(*vram.Tensor) *vram.Tensor {
	panic(needsMemory("transformer", "ForwardSrcTgt(src, tgt, masks)"))
}

// ForwardSrcTgt returns the decoder's output for tgt attending to the
// encoder's output for src, of tgt's shape ([T, N, E], [N, T, E] with
// BatchFirst, [T, E] unbatched), with the masks of m. The caller owns the
// result; the memory is released once the decoder is done with it.
//
// It panics with an *vram.Error of kind vram.ErrShape when src and tgt
// differ in rank or batch size or do not have DModel features, of kind
// vram.ErrArgument for an Encoder or Decoder set to nil or a BatchFirst
// changed so that it differs from the layers', and as the layers'
// forwards do for bad masks.
func (t *Transformer) ForwardSrcTgt(src, tgt *vram.Tensor, m TransformerMasks) *vram.Tensor {
	const op = "transformer"
	notNil(op, src)
	notNil(op, tgt)
	if t == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil transformer"})
	}
	if t.Encoder == nil || t.Decoder == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "the encoder or the decoder is nil; make a new transformer"})
	}
	// The batch sizes are checked along t.BatchFirst's dimension, which
	// must then be the layers'.
	layersBF := func(bf bool) {
		if bf != t.BatchFirst {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf(
				"the transformer's BatchFirst is %v but its layers' is %v; set both, or make a new transformer", t.BatchFirst, bf)})
		}
	}
	for _, l := range t.Encoder.Layers {
		if l != nil {
			layersBF(l.BatchFirst)
		}
	}
	for _, l := range t.Decoder.Layers {
		if l != nil {
			layersBF(l.BatchFirst)
		}
	}
	batch := 1
	if t.BatchFirst {
		batch = 0
	}
	switch {
	case src.Dim() != tgt.Dim() || src.Dim() != 2 && src.Dim() != 3:
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("src and tgt must both be 3-D (batched) or 2-D (unbatched), got shapes %v and %v", src.Shape(), tgt.Shape())})
	case src.Dim() == 3 && src.Size(batch) != tgt.Size(batch):
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("the batch number of src and tgt must be equal, got shapes %v and %v", src.Shape(), tgt.Shape())})
	case src.Size(-1) != t.DModel || tgt.Size(-1) != t.DModel:
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("the feature number of src and tgt must be equal to d_model %d, got shapes %v and %v", t.DModel, src.Shape(), tgt.Shape())})
	}
	memory := t.Encoder.ForwardMasked(src, EncoderMasks{Mask: m.SrcMask, KeyPaddingMask: m.SrcKeyPaddingMask, Causal: m.SrcCausal})
	defer memory.Release()
	return t.Decoder.ForwardMemory(tgt, memory, DecoderMasks{TgtMask: m.TgtMask, MemoryMask: m.MemoryMask,
		TgtKeyPaddingMask: m.TgtKeyPaddingMask, MemoryKeyPaddingMask: m.MemoryKeyPaddingMask,
		TgtCausal: m.TgtCausal, MemoryCausal: m.MemoryCausal})
}

// GenerateSquareSubsequentMask returns the causal mask of a sequence of n
// positions, [n, n]: zeros on and below the diagonal and -Inf above it
// (nn.Transformer.generate_square_subsequent_mask), to add to attention
// scores as a float mask. opts (device, dtype; float32 by default) go to
// vram's factory functions. It panics with an *vram.Error of kind
// vram.ErrArgument for a negative n, and as vram.Full does, naming the
// mask, for an n whose square an int cannot count or a dtype that cannot
// hold -Inf. With vram.Bool it returns the bool mask of true above the
// diagonal.
func GenerateSquareSubsequentMask(n int, opts ...vram.Option) *vram.Tensor {
	const op = "generate_square_subsequent_mask"
	if n < 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("size must not be negative, got %d", n)})
	}
	defer asOp(op)
	full := vram.Full(vram.Shape{n, n}, math.Inf(-1), opts...)
	defer full.Release()
	return full.Triu(1)
}
