// Package prune implements magnitude pruning of layer parameters, as
// torch.nn.utils.prune does: a mask of zeros and ones is attached to a
// parameter of a layer, the layer's Forward computes with parameter⊙mask
// (so the pruned elements give nothing and get no gradient, while the
// parameter tensor that optimizers hold stays the same), and [Remove]
// makes the pruning permanent: the mask is folded into the parameter and
// freed.
//
//	prune.L1Unstructured(layer, "weight", prune.Fraction(0.5))    // the half of smallest magnitude
//	prune.LnStructured(layer, "weight", prune.Fraction(0.25), 2, 0) // a quarter of the rows, by L2 norm
//	prune.GlobalUnstructured(prune.Params(model, "weight"), prune.Fraction(0.8))
//	prune.RandomUnstructured(layer, "bias", prune.Count(2), vram.NewGenerator(1)) // two at random
//	... fine-tune ...
//	prune.RemoveAll(model)
//
// Pruning again is iterative, as in PyTorch: the amount counts the
// elements (or, for structured pruning, the slices) still unpruned, and the
// new mask is the product of the old one and the new choice. [Sparsity]
// reports the fraction of zeros of each parameter as the layers compute
// with it.
//
// [Identity] attaches a mask of ones, [CustomFromMask] a mask of the
// caller's, [Target].Importance ranks the elements of [GlobalUnstructured]
// by scores of the caller's (PyTorch's importance_scores), and [AnyPruned]
// tells whether any parameter of a model is pruned.
//
// The layers that can be pruned implement [nn.Maskable]: [nn.Linear],
// [nn.Conv1d], [nn.Conv2d], [nn.ConvTranspose2d] and the normalization
// layers ([nn.LayerNorm], [nn.GroupNorm], [nn.BatchNorm2d],
// [nn.BatchNorm1d]) for their weight and bias ([nn.RMSNorm] for its
// weight), [nn.Embedding] and [nn.EmbeddingBag] for their
// weight, and so [nn.MultiheadAttention]'s OutProj (dimension 0 of a
// Conv2d weight, for [LnStructured], is its output channels; of a
// ConvTranspose2d weight, its input channels). Layers whose Forward does
// not apply masks, such as MultiheadAttention's in_proj_weight and the
// recurrent layers' weights, are refused with an error naming the layer.
// Masks have their parameter's dtype and device
// and are the layer's buffers (name + "_mask"), as PyTorch's weight_mask
// is: To, nn.ConvertDType, Save, Load, nn.Release and nn.Replicate reach
// them, while NamedParameters, Parameters and so the optimizers made
// after pruning never see them; they take no gradient. As in
// PyTorch, the state dict of a pruned layer ([nn.StateDict], [nn.Save])
// keys the parameter as name + "_orig" beside its mask, so a model pruned
// the same way loads it, and so does PyTorch after pruning its model;
// [nn.Load] also reads the parameter under its plain name, as files
// written before this naming hold it.
//
// # Errors
//
// Every function returns an error, changing nothing, for a bad amount (a
// fraction outside [0, 1] or NaN, a count below 0 or above the number of
// elements left), a module that is not [nn.Maskable], a parameter it
// cannot mask, a norm order that is NaN, structured pruning of a
// parameter of fewer than two dimensions, or a dimension out of range. The error is an *vram.Error that matches vram.ErrArgument under
// errors.Is (vram.ErrDType for a parameter that is not floating-point,
// vram.ErrIndex for a dimension out of range, vram.ErrReleased for a
// parameter or mask that was released).
//
// The choice of elements is made on the host from the parameter's values
// (ties broken by position, first come first pruned), or, for
// [RandomUnstructured] and [RandomStructured], from uniform draws of the
// [vram.Generator] given (vram.DefaultGenerator when nil; a call that
// fails draws nothing): pruning is a step taken once in a while, not in
// the training loop.
package prune
