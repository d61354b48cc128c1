// Package nn provides neural-network building blocks on top of package vram,
// in the style of torch.nn: a [Module] interface, layers ([Linear],
// [LayerNorm], [RMSNorm], [BatchNorm1d], [GroupNorm], [Embedding] and
// [NewEmbeddingFromPretrained], [EmbeddingBag], [Dropout],
// [Bilinear], activations ([ReLU], [LeakyReLU], [PReLU], [RReLU], [ELU],
// [CELU], [SELU], [GELU], [GLU], [SiLU], [Mish], [Softplus], [Hardtanh],
// [Hardswish], [Hardsigmoid], [Sigmoid], [LogSigmoid], [Tanh],
// [Softsign], [Tanhshrink], [Hardshrink], [Softshrink], [Threshold],
// [Softmax], [Softmin], [LogSoftmax]), and for convolutional networks
// [Conv2d], [ConvTranspose2d], [BatchNorm2d], [InstanceNorm] (made by
// [NewInstanceNorm1d], [NewInstanceNorm2d], [NewInstanceNorm3d]),
// [LocalResponseNorm],
// [MaxPool2d], [AvgPool2d], [AdaptiveAvgPool2d], [AdaptiveMaxPool2d],
// their 1-D forms [MaxPool1d], [AvgPool1d], [AdaptiveAvgPool1d] and
// [AdaptiveMaxPool1d], [Flatten], [Unflatten], [Dropout2d], the padding layers ([Pad]
// from [NewZeroPad2d], [NewConstantPad2d], [NewReflectionPad2d],
// [NewReplicationPad2d], [NewCircularPad2d] and their 1-d and 3-d forms), [Upsample] (with
// [NewUpsamplingNearest2d] and [NewUpsamplingBilinear2d]), [PixelShuffle],
// [PixelUnshuffle], [Unfold] and [Fold], for sequence models
// [MultiheadAttention] (PyTorch's state-dict names, masks and weights;
// built on [vram.ScaledDotProductAttention]), the transformer layers
// [TransformerEncoderLayer], [TransformerDecoderLayer], their stacks
// [TransformerEncoder] and [TransformerDecoder], and [Transformer], the
// recurrent layers [RNN], [LSTM] and [GRU] and their cells [RNNCell],
// [LSTMCell] and [GRUCell], and [Conv1d], and [Identity] as a
// placeholder), containers
// ([Sequential], which also holds a list of modules under PyTorch's names
// "0", "1", ... as a ModuleList does), loss functions ([CrossEntropyLoss],
// [MSELoss], [KLDivLoss], [CosineEmbeddingLoss], the margin losses
// [MarginRankingLoss], [HingeEmbeddingLoss], [SoftMarginLoss],
// [MultiLabelSoftMarginLoss], [MultiLabelMarginLoss], [MultiMarginLoss],
// [TripletMarginLoss],
// [TripletMarginWithDistanceLoss] over any distance, [PairwiseDistance], the
// likelihoods [PoissonNLLLoss] and [GaussianNLLLoss], [CTCLoss] for
// unaligned label sequences, ..., and
// their forms with PyTorch's options, such as [CrossEntropyLossWith] with
// class weights, an ignore index, label smoothing and a [Reduction]),
// parameter initialisation as torch.nn.init ([CalculateGain], [Uniform],
// [Normal], [TruncNormal], [Constant], [Eye], [Dirac], [XavierUniform],
// [KaimingNormalWith], [Orthogonal], [Sparse], ...) and saving and loading of parameters in the
// safetensors format ([Save], [Load]) under PyTorch's state-dict names,
// and [LoadStateDict] of tensors in memory (package nn/torchload reads
// them from torch.save files).
//
// # Writing a layer
//
// A layer is a struct that embeds [Base] and implements Forward. Base
// supplies every other method of [Module]: its constructor registers the
// layer's parameters and sub-modules by name, and Base then lists them
// (recursively, with dotted names such as "encoder.0.weight"), moves them
// between devices and switches training and evaluation mode:
//
//	type MLP struct {
//		nn.Base
//		hidden, out *nn.Linear
//	}
//
//	func NewMLP(in, hidden, out int, opts ...vram.Option) *MLP {
//		m := &MLP{hidden: nn.NewLinear(in, hidden, opts...), out: nn.NewLinear(hidden, out, opts...)}
//		m.RegisterModule("hidden", m.hidden)
//		m.RegisterModule("out", m.out)
//		return m
//	}
//
//	func (m *MLP) Forward(x *vram.Tensor) *vram.Tensor {
//		h := m.hidden.Forward(x)
//		defer h.Release()
//		a := h.Relu()
//		defer a.Release()
//		return m.out.Forward(a)
//	}
//
// A layer registers a tensor field with [Base.RegisterParameterField]
// (m.RegisterParameterField("weight", &m.Weight)), as this package's
// layers register Weight and Bias: the field is then the parameter, and
// assigning to it ties weights as in PyTorch. A language model whose
// output projection is its token embedding writes
//
//	lm.Head.Weight = lm.Embed.Weight // both [vocab, dim]
//
// and then lists the shared tensor once ([Base.NamedParameters],
// [NumParameters], optimizers, data parallelism), keys it under both names
// in [StateDict] and [Save], loads it once, and sums the gradients of its
// two uses in it. The fields of the recurrent layers' Weights and of the
// cells' RecurrentWeights are parameters in the same way.
//
// Simple functions become modules through [Func]. [Replicate] copies such
// a module, unexported fields and all, to another device (data parallelism
// makes one replica per device with it).
//
// # Whole models
//
// The functions of torch.nn.utils and Module's own helpers take any
// [Module]: [Apply] calls a function on every sub-module, children before
// parents (PyTorch's model.apply, the usual way to initialise a model),
// [SetRequiresGrad] freezes or unfreezes it, [ZeroGrad] releases its
// gradients (zero_grad with set_to_none, PyTorch's default; every module
// built on [Base] has it as a method too, model.ZeroGrad()),
// [NumParameters] counts its parameters, [Format] describes it as PyTorch's
// print(model) does, and [ParametersToVector] and
// [VectorToParameters] flatten its parameters into one vector and back.
// Gradient clipping (clip_grad_norm_, clip_grad_value_) lives in package
// optim, beside the optimizers. These functions, and the others that take a
// module, treat a nil pointer held as a Module (a "var l *Linear" left
// unset) as the nil module, as each documents for nil.
//
// # Sequence models
//
// [MultiheadAttention] is torch.nn.MultiheadAttention: its parameters carry
// PyTorch's names and shapes, so a state dict saved by PyTorch loads with
// [Load]. Forward is self-attention without masks; [MultiheadAttention.ForwardQKV]
// takes separate queries, keys and values, a key padding mask and an
// attention mask (bool masks are true where attention is NOT allowed, as
// in PyTorch, unlike [vram.ScaledDotProductAttention]'s), and returns the
// attention weights too:
//
//	mha := nn.NewMultiheadAttention(512, 8, nn.MultiheadAttentionOptions{BatchFirst: true})
//	out, weights := mha.ForwardQKV(x, x, x, nn.MultiheadForwardOptions{KeyPaddingMask: pad, Causal: true})
//
// [TransformerEncoderLayer] and [TransformerDecoderLayer] are
// torch.nn.TransformerEncoderLayer and TransformerDecoderLayer, with
// PyTorch's options and defaults in [TransformerOptions] (dim_feedforward
// 2048, dropout 0.1, relu, gelu or a function, layer_norm_eps, batch_first,
// norm_first, bias) and its state-dict names ("self_attn.in_proj_weight",
// "linear1.weight", "norm1.bias", ...). [NewTransformerEncoder] and
// [NewTransformerDecoder] stack a layer and copies of it that share no
// parameter ("layers.0.", "layers.1.", ..., and "norm." for an optional
// final norm); unlike PyTorch they take the layer given over as the first
// layer rather than leave an unused copy allocated. [NewTransformer] is
// torch.nn.Transformer, with final LayerNorms and Xavier-initialised
// matrices ("encoder.layers.0.", "decoder.norm.", ...), so a PyTorch
// model's safetensors load with [Load]. Masks go in [EncoderMasks],
// [DecoderMasks] and [TransformerMasks]: attention masks and key padding
// masks, bool (true = excluded) or float (added), as PyTorch takes them,
// and is_causal, which here needs no mask beside it;
// [GenerateSquareSubsequentMask] makes PyTorch's float causal mask:
//
//	model := nn.NewTransformer(512, 8, 6, 6, nn.TransformerOptions{BatchFirst: true})
//	out := model.ForwardSrcTgt(src, tgt, nn.TransformerMasks{SrcKeyPaddingMask: pad, MemoryKeyPaddingMask: pad, TgtCausal: true})
//
// A decoder needs two inputs, so its Forward (and the Transformer's)
// panics; call ForwardMemory (ForwardSrcTgt). The encoder layer's Forward
// takes no mask, so [Checkpoint] wraps it (or a whole encoder) as any
// layer; with masks, call [vram.Checkpoint] on a closure of ForwardMasked.
// The nested-tensor fast path of PyTorch's evaluation mode is not
// modelled: padded positions get their computed outputs, not zeros.
//
// [RNN], [LSTM] and [GRU] are torch.nn.RNN, LSTM and GRU, composed from
// vram's ops so that every device runs them: NumLayers stacked layers,
// optionally bidirectional, with dropout between layers in training mode,
// over [L, N, H_in] inputs ([N, L, H_in] with BatchFirst, [L, H_in]
// unbatched). Their parameters have PyTorch's names (weight_ih_l0,
// weight_hh_l0, bias_ih_l0, bias_hh_l0, ..._reverse), shapes, gate order
// and initialisation, so PyTorch's weights load. Forward returns the
// output; ForwardState also takes initial states (nil for zeros) and
// returns the final ones:
//
//	lstm := nn.NewLSTM(128, 256, nn.RecurrentOptions{NumLayers: 2, BatchFirst: true})
//	out, hn, cn := lstm.ForwardState(x, nil, nil) // [N, L, 256], [2, N, 256], [2, N, 256]
//
// The cells ([RNNCell], [LSTMCell], [GRUCell]) compute one time step.
// An LSTM takes proj_size ([RecurrentOptions.ProjSize]); packed sequences
// are not supported: pad the sequences.
//
// [Conv1d] convolves sequences [N, C, L]; [Identity] stands in for a layer
// removed from a model. The examples of MultiheadAttention, NewConv1d and
// Identity show each at work.
//
// # Memory
//
// Parameters are leaf tensors that require grad. Constructors create them
// with [vram.Keep], so a model built inside [vram.Tidy] survives it; release
// them with [Release] when the model is no longer needed. Forward returns a
// new tensor that the caller owns; the layers here release their own
// intermediate results as soon as they are done with them (the autograd
// graph keeps what backward needs), so a forward pass holds no more memory
// than it must even outside [vram.Tidy].
//
// # Losses
//
// The losses compute in the floating-point dtype that PyTorch's type
// promotion gives their operands: an integer target meeting a float
// prediction takes the prediction's dtype, and a loss none of whose
// operands is floating point (for [HingeEmbeddingLoss], [MultiMarginLoss]
// and the class losses, whose input is not) panics with an *vram.Error
// of kind vram.ErrDType, whatever its [Reduction] (its losses would be
// truncated to integers). float16 and bfloat16 operands are computed in float32 and
// the result rounded once to their dtype; inside a vram.Autocast region
// the result stays float32, as PyTorch's autocast runs its losses.
//
// # Options
//
// Layer constructors take [vram.Option] values and pass them to vram's
// factory functions: a [vram.Device] and a [vram.DType] choose where and in
// what type the parameters live, and [vram.WithGenerator] the source of their
// random initial values, so that models built with the same seeded generator
// are identical.
package nn
