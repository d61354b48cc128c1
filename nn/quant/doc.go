// Package quant implements int8 weight-only quantization of linear layers
// for inference, as PyTorch's dynamic quantization of nn.Linear does for
// the weights: each [nn.Linear] keeps its int8 weight [out, in] and one
// float scale per output channel, a quarter of the float32 weight's
// memory, while activations stay floating-point.
//
//	model := train()               // an nn.Module with nn.Linear layers
//	n, err := quant.Quantize(model) // every Linear, in place
//	vram.NoGrad(func() { y = model.Forward(x) })
//
// [Quantize] and [QuantizeLinear] change the layers in place, so models
// that hold their layers in fields of their own (the usual way to write a
// module) are quantized too; the float weights are released. The scales
// are symmetric, per output channel: scale[n] = max_k |w[n,k]| / 127 and
// wq[n,k] = round(w[n,k] / scale[n]) in [-127, 127], computed in float32
// (float64 for float64 weights) with the scale rounded to the weight's
// dtype first, so that wq·scale is the closest the stored scale allows.
//
// Forward runs [vram.LinearInt8]: the CPU multiplies from the int8 values a
// block of output channels at a time; CUDA expands one layer's weight into
// a transient buffer of the activations' dtype with one kernel, runs the
// cuBLASLt product and frees the buffer at once, so no full-size float
// copy of the weights is kept.
//
// # Affine quantization of tensors
//
// [PerTensor] and [PerChannel] quantize any floating-point tensor to int8
// with a scale and a zero point, as torch.quantize_per_tensor and
// torch.quantize_per_channel do with torch.qint8 (multiply by the
// reciprocal of the scale in float32, round half to even, add the zero
// point, then clamp to [QMin, QMax]); [DequantizePerTensor] and
// [DequantizePerChannel] map the values back to float32, and [Params]
// chooses a scale and zero point for a range of values, symmetric or
// affine, in float32 as PyTorch's MinMaxObserver does. vram has no quantized tensor
// type: the int8 values, the scales and the zero points are kept by the
// caller.
//
// # Parameters and buffers
//
// A quantized layer has no parameters, as PyTorch's dynamically quantized
// Linear has none: its int8 "weight", its "scale" and its "bias" are
// buffers ([nn.NamedBuffers]). Parameters and parameter counts leave them
// out, so an optimizer built over a partly quantized model gets the float
// layers only (over a fully quantized one it reports an empty parameter
// list), while To, nn.Release and nn.Replicate still reach them and the
// state-dict keys stay "weight", "bias" and "scale". Half, BFloat16 and
// nn.ConvertDType leave them as they are; Forward casts the scale and the
// bias to the input's dtype.
//
// [nn.Save] writes a quantized layer's int8 "weight" and its "scale";
// [nn.Load] reads such a file into a model quantized the same way (build
// the float model, quantize it, then load). Loading a quantized file into
// a float model, or a float file into a quantized one, returns an error
// matching vram.ErrDType and changes nothing, strict or not; a file whose
// "scale" holds NaN, an infinity, zero or a negative value is refused
// with one matching vram.ErrArgument.
//
// # Errors
//
// Quantize and QuantizeLinear return errors (a layer already quantized,
// one with a pruning mask, a weight with NaN or Inf values, a weight or
// bias shared with a layer that is not quantized with it) and change
// nothing then; each matches vram.ErrArgument under errors.Is.
// Quantized layers are for inference: the int8 weight cannot require
// grad, an optimizer handed it refuses it with vram.ErrDType, and a scale
// or bias that requires grad makes Forward panic with vram.ErrAutograd;
// gradients still flow through a quantized layer to its input.
package quant
