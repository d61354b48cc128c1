// Package amp is automatic mixed precision: [Autocast] runs matrix
// products in float16 or bfloat16 while the weights stay float32, and
// [GradScaler] scales the loss so that float16 gradients do not underflow,
// skipping the optimizer step when they overflow.
//
// A training step with both, as with torch.autocast and torch.amp.GradScaler:
//
//	scaler, _ := amp.NewGradScaler(amp.GradScalerConfig{})
//	for batch := range batches {
//		vram.Tidy(func() { // releases the step's tensors, the 16-bit weight copies too
//			opt.ZeroGrad()
//			var loss *vram.Tensor
//			amp.Autocast(vram.Float16, func() {
//				loss = nn.MSELoss(model.Forward(batch.X), batch.Y)
//			})
//			scaled := scaler.Scale(loss)
//			scaled.Backward()
//			scaler.Unscale(params) // before clipping, if any
//			scaler.Step(opt, params)
//			scaler.Update()
//		})
//	}
//
// Inside Autocast, on the calling goroutine only:
//
//   - in the low dtype (PyTorch's "lower_precision_fp" list): MatMul, BMM,
//     Linear, LinearAct, Conv1d, Conv2d, ConvTranspose2d and nn's PReLU
//     (and so ScaledDotProductAttention, nn's MultiheadAttention and its
//     recurrent layers, which are built on them), with float32 operands and those
//     of the other 16-bit dtype cast to the region's; a weight (a
//     leaf that requires grad) is cast once per region and the copy
//     reused; float64 operands are left alone, as in PyTorch (a float64
//     product stays float64);
//   - in float32 (PyTorch's "fp32" list): Softmax, LogSoftmax, Exp, Log,
//     Log1p, Expm1, Log10, Log2, Sinh, Cosh, Tan, Asin, Acos, Rsqrt,
//     Reciprocal, RDivScalar (s / x, which PyTorch computes as
//     x.reciprocal() * s), Softplus, Pow, PowScalar, Sum, Prod, Logsumexp, CumSum,
//     CumProd, Norm, Cdist, LayerNorm, MSELoss, CrossEntropy and nn's
//     LayerNorm, GroupNorm, CosineSimilarity and losses, with 16-bit inputs
//     cast up and float32 results; RMSNorm and nn's RMSNorm follow
//     LayerNorm;
//   - refused: nn's BCELoss panics with ErrArgument, as PyTorch's autocast
//     refuses binary_cross_entropy; take BCEWithLogitsLoss on the logits,
//     or compute it under NoAutocast;
//   - promoted to float32 (PyTorch's "promote" list): ScatterAdd, IndexAdd
//     and Dot, whose operands must otherwise share a dtype (two of one
//     16-bit dtype keep it), and Addcmul,
//     Addcdiv, Atan2 and Cross with mixed 16-bit and float32 operands;
//     Cat and Stack promote mixed
//     inputs inside and outside a region;
//   - every other op runs in the dtype of its inputs, promoting mixed
//     operands as outside (Mean, like PyTorch's, is not on the float32
//     list: it accumulates in float32 and returns its input's dtype;
//     BatchNorm2d normalizes a 16-bit input with float32 statistics and
//     parameters and returns the input's dtype, as cuDNN's does).
//
// [NoAutocast] suspends the region for a block that needs full precision
// (torch.autocast with enabled=False): inside it ops run in their inputs'
// dtypes, so the block casts its 16-bit inputs itself.
//
// Backward runs outside the region's rules: gradients come back in the
// dtypes the forward pass used, and reach float32 weights as float32.
// bfloat16 has float32's range, so it needs no GradScaler; a scaler made
// with GradScalerConfig.Disabled passes everything through, so that one
// loop serves both. One scaler serves several optimizers: Step each, then
// Update once. With gradient accumulation, Scale and Backward every
// micro-batch, then Step and Update once after the last: Update refuses
// to run between micro-batches, where it would change the scale under the
// gradients summed so far.
package amp
