package nn_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestLayersAndLossesReleaseWhatTheyMake runs each layer and loss forward
// and backward, with the caller releasing only what it receives, and
// checks that the library released everything it made on the way: no
// storage stays live, none is left for the garbage collector, and the
// allocator's count of a simulated device returns to where it was.
func TestLayersAndLossesReleaseWhatTheyMake(t *testing.T) {
	type env struct {
		d    vram.Device
		made []*vram.Tensor
	}
	in := func(e *env, shape ...int) *vram.Tensor {
		x := vram.Randn(vram.Shape(shape), e.d, vram.WithGrad())
		e.made = append(e.made, x)
		return x
	}
	prob := func(e *env, shape ...int) *vram.Tensor {
		x := vram.Uniform(vram.Shape(shape), 0.1, 0.9, e.d, vram.WithGrad())
		e.made = append(e.made, x)
		return x
	}
	labels := func(e *env, shape ...int) *vram.Tensor {
		x := vram.Randn(vram.Shape(shape), e.d)
		defer x.Release()
		y := x.Sign()
		e.made = append(e.made, y)
		return y
	}
	ints := func(e *env, data ...int64) *vram.Tensor {
		x := vram.FromSlice(data, vram.Shape{len(data)}, e.d)
		e.made = append(e.made, x)
		return x
	}
	layer := func(mk func() nn.Module, shape ...int) func(e *env) (nn.Module, []*vram.Tensor) {
		return func(e *env) (nn.Module, []*vram.Tensor) {
			m := mk()
			m.To(e.d)
			return m, []*vram.Tensor{m.Forward(in(e, shape...))}
		}
	}
	loss := func(f func(e *env) *vram.Tensor) func(e *env) (nn.Module, []*vram.Tensor) {
		return func(e *env) (nn.Module, []*vram.Tensor) { return nil, []*vram.Tensor{f(e)} }
	}
	tests := []struct {
		name string
		run  func(e *env) (nn.Module, []*vram.Tensor)
	}{
		{"Linear", layer(func() nn.Module { return nn.NewLinear(3, 4) }, 2, 3)},
		{"Bilinear", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewBilinear(3, 2, 4)
			m.To(e.d)
			return m, []*vram.Tensor{m.ForwardPair(in(e, 2, 3), in(e, 2, 2))}
		}},
		{"Conv1d", layer(func() nn.Module { return nn.NewConv1d(2, 3, 3, nn.ConvOptions{Padding: 1}) }, 1, 2, 5)},
		{"Conv2d", layer(func() nn.Module { return nn.NewConv2d(2, 3, 3, nn.ConvOptions{Padding: 1}) }, 1, 2, 4, 4)},
		{"ConvTranspose2d", layer(func() nn.Module { return nn.NewConvTranspose2d(2, 3, 3, nn.ConvOptions{Stride: 2}) }, 1, 2, 3, 3)},
		{"BatchNorm1d", layer(func() nn.Module { return nn.NewBatchNorm1d(3) }, 4, 3)},
		{"BatchNorm2d", layer(func() nn.Module { return nn.NewBatchNorm2d(2) }, 2, 2, 3, 3)},
		{"InstanceNorm1d", layer(func() nn.Module {
			return nn.NewInstanceNorm1d(3, nn.InstanceNormOptions{Affine: true, TrackRunningStats: true})
		}, 2, 3, 4)},
		{"InstanceNorm2d eval", layer(func() nn.Module {
			m := nn.NewInstanceNorm2d(2, nn.InstanceNormOptions{Affine: true, TrackRunningStats: true})
			m.Eval()
			return m
		}, 2, 2, 3, 3)},
		{"InstanceNorm2d unbatched", layer(func() nn.Module { return nn.NewInstanceNorm2d(2, nn.InstanceNormOptions{}) }, 2, 3, 3)},
		{"LocalResponseNorm", layer(func() nn.Module { return nn.NewLocalResponseNorm(2, 1e-4, 0.75, 1) }, 2, 3, 2)},
		{"GroupNorm", layer(func() nn.Module { return nn.NewGroupNorm(2, 4, 1e-5) }, 2, 4, 3)},
		{"LayerNorm", layer(func() nn.Module { return nn.NewLayerNorm([]int{3}, 1e-5) }, 2, 3)},
		{"RMSNorm", layer(func() nn.Module { return nn.NewRMSNorm([]int{3}, -1) }, 2, 3)},
		{"Embedding", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewEmbedding(5, 3)
			m.To(e.d)
			return m, []*vram.Tensor{m.Forward(ints(e, 0, 4, 2))}
		}},
		{"Dropout", layer(func() nn.Module { return nn.NewDropout(0.5) }, 2, 3)},
		{"Dropout2d", layer(func() nn.Module { return nn.NewDropout2d(0.5) }, 1, 2, 3, 3)},
		{"ReflectionPad2d", layer(func() nn.Module { return nn.NewReflectionPad2d(1) }, 1, 2, 3, 3)},
		{"ZeroPad2d", layer(func() nn.Module { return nn.NewZeroPad2d(1, 0, -1, 2) }, 1, 2, 3, 3)},
		{"UpsamplingBilinear2d", layer(func() nn.Module { return nn.NewUpsamplingBilinear2d(nil, []float64{1.5}) }, 1, 2, 3, 3)},
		{"Upsample bicubic", layer(func() nn.Module {
			return nn.NewUpsample(vram.InterpolateOptions{Size: []int{4, 5}, Mode: vram.InterpBicubic})
		}, 1, 2, 3, 3)},
		{"PixelShuffle", layer(func() nn.Module { return nn.NewPixelShuffle(2) }, 1, 4, 2, 2)},
		{"PixelUnshuffle", layer(func() nn.Module { return nn.NewPixelUnshuffle(2) }, 1, 1, 2, 2)},
		{"Unfold", layer(func() nn.Module { return nn.NewUnfold([2]int{2, 2}, vram.FoldParams{Padding: [2]int{1, 1}}) }, 1, 2, 3, 3)},
		{"Fold", layer(func() nn.Module { return nn.NewFold([2]int{3, 3}, [2]int{2, 2}, vram.FoldParams{}) }, 1, 8, 4)},
		{"activations", layer(func() nn.Module {
			return nn.NewSequential(nn.NewReLU(), nn.NewGELU(), nn.NewSiLU(), nn.NewMish(), nn.NewELU(1),
				nn.NewHardswish(), nn.NewReLU6(), nn.NewSoftplus(1, 20), nn.NewLeakyReLU(0.1), nn.NewTanh(), nn.NewSigmoid(),
				nn.NewSoftmax(1), nn.NewLogSoftmax(1))
		}, 2, 3)},
		{"more activations", layer(func() nn.Module {
			return nn.NewSequential(nn.NewSoftsign(), nn.NewTanhshrink(), nn.NewHardshrink(0.1), nn.NewSoftshrink(0.1),
				nn.NewThreshold(0.1, -1), nn.NewLogSigmoid(), nn.NewHardsigmoid(), nn.NewCELU(0.5), nn.NewSELU(),
				nn.NewPReLU(3, 0.25), nn.NewRReLU(0.1, 0.3), nn.NewSoftmin(1), nn.NewGLU(0))
		}, 2, 3)},
		{"pools", layer(func() nn.Module {
			return nn.NewSequential(nn.NewMaxPool2d(2, 1, 0), nn.NewAvgPool2d(2, 1, 0), nn.NewAdaptiveAvgPool2d(1, 1),
				nn.NewFlatten())
		}, 1, 2, 4, 4)},
		{"1-d pools", layer(func() nn.Module {
			return nn.NewSequential(nn.NewMaxPool1d(2, 1, 0), nn.NewAvgPool1d(2, 1, 1), nn.NewAdaptiveAvgPool1d(3),
				nn.NewAdaptiveMaxPool1d(2), nn.NewFlatten(), nn.NewUnflatten(1, 2, 2))
		}, 1, 2, 8)},
		{"MaxPool1d with indices", func(e *env) (nn.Module, []*vram.Tensor) {
			y, idx := nn.NewMaxPool1d(2, 0, 0).ForwardWithIndices(in(e, 2, 6))
			return nil, []*vram.Tensor{y, idx}
		}},
		{"AdaptiveMaxPool1d with indices", func(e *env) (nn.Module, []*vram.Tensor) {
			y, idx := nn.NewAdaptiveMaxPool1d(4).ForwardWithIndices(in(e, 2, 7))
			return nil, []*vram.Tensor{y, idx}
		}},
		{"RNN", layer(func() nn.Module { return nn.NewRNN(3, 4, nn.RecurrentOptions{NumLayers: 2}) }, 5, 2, 3)},
		{"LSTM", layer(func() nn.Module { return nn.NewLSTM(3, 4, nn.RecurrentOptions{NumLayers: 2}) }, 5, 2, 3)},
		{"GRU", layer(func() nn.Module { return nn.NewGRU(3, 4, nn.RecurrentOptions{}) }, 5, 2, 3)},
		{"RNNCell", layer(func() nn.Module { return nn.NewRNNCell(3, 4, nn.CellOptions{}) }, 2, 3)},
		{"LSTMCell", layer(func() nn.Module { return nn.NewLSTMCell(3, 4, nn.CellOptions{}) }, 2, 3)},
		{"GRUCell", layer(func() nn.Module { return nn.NewGRUCell(3, 4, nn.CellOptions{}) }, 2, 3)},
		{"MultiheadAttention", layer(func() nn.Module { return nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{Dropout: 0.2}) }, 3, 2, 4)},
		{"Checkpointed", layer(func() nn.Module {
			return nn.Checkpoint(nn.NewSequential(nn.NewLinear(3, 4), nn.NewMish(), nn.NewDropout(0.3), nn.NewLinear(4, 2)))
		}, 2, 3)},
		{"Checkpointed LSTM", layer(func() nn.Module { return nn.Checkpoint(nn.NewLSTM(3, 4, nn.RecurrentOptions{})) }, 4, 2, 3)},
		{"MultiheadAttention masked with weights", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{BatchFirst: true})
			m.To(e.d)
			pad := vram.FromSlice([]bool{false, true, false, false}, vram.Shape{2, 2}, e.d)
			e.made = append(e.made, pad)
			out, w := m.ForwardQKV(in(e, 2, 3, 4), in(e, 2, 2, 4), in(e, 2, 2, 4),
				nn.MultiheadForwardOptions{KeyPaddingMask: pad, Causal: true})
			return m, []*vram.Tensor{out, w}
		}},
		{"TransformerEncoderLayer", layer(func() nn.Module {
			return nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, Activation: "gelu"})
		}, 3, 2, 4)},
		{"TransformerEncoder pre-norm", layer(func() nn.Module {
			return nn.NewTransformerEncoder(nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, NormFirst: true}), 2,
				nn.NewLayerNorm([]int{4}, 1e-5))
		}, 3, 2, 4)},
		{"Checkpointed TransformerEncoderLayer", layer(func() nn.Module {
			return nn.Checkpoint(nn.NewTransformerEncoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, BatchFirst: true}))
		}, 2, 3, 4)},
		{"Transformer masked", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewTransformer(4, 2, 2, 2, nn.TransformerOptions{DimFeedforward: 6, BatchFirst: true})
			m.To(e.d)
			pad := vram.FromSlice([]bool{false, true, false, false, false, true}, vram.Shape{2, 3}, e.d)
			mask := nn.GenerateSquareSubsequentMask(2, e.d)
			e.made = append(e.made, pad, mask)
			out := m.ForwardSrcTgt(in(e, 2, 3, 4), in(e, 2, 2, 4), nn.TransformerMasks{SrcKeyPaddingMask: pad,
				MemoryKeyPaddingMask: pad, TgtMask: mask, TgtCausal: true})
			return m, []*vram.Tensor{out}
		}},
		{"TransformerDecoderLayer unbatched", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewTransformerDecoderLayer(4, 2, nn.TransformerOptions{DimFeedforward: 6, NoBias: true})
			m.To(e.d)
			return m, []*vram.Tensor{m.ForwardMemory(in(e, 2, 4), in(e, 3, 4), nn.DecoderMasks{TgtCausal: true, MemoryCausal: true})}
		}},
		{"LSTM with state", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewLSTM(3, 4, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true, BatchFirst: true})
			m.To(e.d)
			out, h, c := m.ForwardState(in(e, 2, 5, 3), in(e, 4, 2, 4), in(e, 4, 2, 4))
			return m, []*vram.Tensor{out, h, c}
		}},
		{"LSTM with projections and state", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewLSTM(3, 4, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true, ProjSize: 2})
			m.To(e.d)
			out, h, c := m.ForwardState(in(e, 5, 3), in(e, 4, 2), in(e, 4, 4))
			return m, []*vram.Tensor{out, h, c}
		}},
		{"Embedding max norm, scaled by frequency", func(e *env) (nn.Module, []*vram.Tensor) {
			pad := 0
			m := nn.NewEmbeddingOptions(5, 3, nn.EmbeddingOptions{PaddingIdx: &pad, MaxNorm: 0.5, ScaleGradByFreq: true})
			m.To(e.d)
			return m, []*vram.Tensor{m.Forward(ints(e, 0, 4, 4, 2))}
		}},
		{"EmbeddingBag 2-D", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewEmbeddingBagOptions(5, 3, nn.EmbeddingBagOptions{Mode: "max", PaddingIdx: intp(4), MaxNorm: 0.5})
			m.To(e.d)
			x := ints(e, 0, 4, 4, 2)
			xs := x.Reshape(2, 2)
			e.made = append(e.made, xs)
			return m, []*vram.Tensor{m.Forward(xs)}
		}},
		{"EmbeddingBag offsets, weights", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewEmbeddingBagOptions(5, 3, nn.EmbeddingBagOptions{Mode: "sum", PaddingIdx: intp(4), ScaleGradByFreq: true, IncludeLastOffset: true})
			m.To(e.d)
			return m, []*vram.Tensor{m.ForwardBags(ints(e, 0, 4, 4, 2, 1), ints(e, 0, 2, 2, 5), in(e, 5))}
		}},
		{"EmbeddingBag all empty", func(e *env) (nn.Module, []*vram.Tensor) {
			m := nn.NewEmbeddingBagOptions(5, 3, nn.EmbeddingBagOptions{Mode: "mean"})
			m.To(e.d)
			return m, []*vram.Tensor{m.ForwardBags(ints(e), ints(e, 0, 0), nil)}
		}},
		{"MSELoss", loss(func(e *env) *vram.Tensor { return nn.MSELoss(in(e, 2, 3), in(e, 2, 3)) })},
		{"L1Loss", loss(func(e *env) *vram.Tensor { return nn.L1Loss(in(e, 2, 3), in(e, 2, 3)) })},
		{"HuberLoss", loss(func(e *env) *vram.Tensor { return nn.HuberLoss(in(e, 2, 3), in(e, 2, 3), 0.5) })},
		{"SmoothL1Loss", loss(func(e *env) *vram.Tensor { return nn.SmoothL1Loss(in(e, 2, 3), in(e, 2, 3), 0.5) })},
		{"BCELoss", loss(func(e *env) *vram.Tensor { return nn.BCELoss(prob(e, 2, 3), prob(e, 2, 3)) })},
		{"BCEWithLogitsLoss", loss(func(e *env) *vram.Tensor { return nn.BCEWithLogitsLoss(in(e, 2, 3), prob(e, 2, 3)) })},
		{"CrossEntropyLoss", loss(func(e *env) *vram.Tensor { return nn.CrossEntropyLoss(in(e, 2, 3), ints(e, 0, 2)) })},
		{"CrossEntropyLoss smoothed", loss(func(e *env) *vram.Tensor {
			return nn.CrossEntropyLossWith(in(e, 2, 3), ints(e, 0, 2), nn.CrossEntropyOptions{LabelSmoothing: 0.1})
		})},
		{"NLLLoss", loss(func(e *env) *vram.Tensor { return nn.NLLLoss(in(e, 2, 3), ints(e, 0, 2)) })},
		{"KLDivLoss", loss(func(e *env) *vram.Tensor {
			return nn.KLDivLoss(in(e, 2, 3), prob(e, 2, 3), false, nn.ReductionSum)
		})},
		{"CosineEmbeddingLoss", loss(func(e *env) *vram.Tensor {
			y := vram.FromSlice([]float32{1, -1}, vram.Shape{2}, e.d)
			e.made = append(e.made, y)
			return nn.CosineEmbeddingLoss(in(e, 2, 3), in(e, 2, 3), y, 0.1, nn.ReductionMean)
		})},
		{"MarginRankingLoss", loss(func(e *env) *vram.Tensor {
			return nn.MarginRankingLoss(in(e, 2, 3), in(e, 2, 3), labels(e, 2, 3), 0.1, nn.ReductionMean)
		})},
		{"HingeEmbeddingLoss", loss(func(e *env) *vram.Tensor {
			return nn.HingeEmbeddingLoss(in(e, 2, 3), labels(e, 2, 3), 1, nn.ReductionSum)
		})},
		{"SoftMarginLoss", loss(func(e *env) *vram.Tensor { return nn.SoftMarginLoss(in(e, 2, 3), in(e, 2, 3), nn.ReductionMean) })},
		{"MultiLabelSoftMarginLoss", loss(func(e *env) *vram.Tensor {
			return nn.MultiLabelSoftMarginLoss(in(e, 2, 3), prob(e, 2, 3), prob(e, 3), nn.ReductionMean)
		})},
		{"MultiMarginLoss", loss(func(e *env) *vram.Tensor {
			return nn.MultiMarginLoss(in(e, 2, 3), ints(e, 0, 2), 2, 1, prob(e, 3), nn.ReductionMean)
		})},
		{"MultiLabelMarginLoss", loss(func(e *env) *vram.Tensor {
			y := vram.FromSlice([]int64{2, 0, -1, 1, -1, 0}, vram.Shape{2, 3}, e.d)
			e.made = append(e.made, y)
			return nn.MultiLabelMarginLoss(in(e, 2, 3), y, nn.ReductionMean)
		})},
		{"CTCLoss", loss(func(e *env) *vram.Tensor {
			lp := in(e, 4, 2, 3)
			return nn.CTCLoss(lp, ints(e, 1, 2, 2), ints(e, 4, 3), ints(e, 2, 1), 0, nn.ReductionMean, false)
		})},
		{"TripletMarginLoss", loss(func(e *env) *vram.Tensor {
			return nn.TripletMarginLoss(in(e, 2, 3), in(e, 2, 3), in(e, 2, 3), 1, 2, 1e-6, true, nn.ReductionMean)
		})},
		{"PoissonNLLLoss", loss(func(e *env) *vram.Tensor {
			return nn.PoissonNLLLoss(in(e, 2, 3), prob(e, 2, 3), true, true, 1e-8, nn.ReductionMean)
		})},
		{"GaussianNLLLoss", loss(func(e *env) *vram.Tensor {
			return nn.GaussianNLLLoss(in(e, 2, 3), in(e, 2, 3), prob(e, 2, 1), true, 1e-6, nn.ReductionMean)
		})},
		{"CosineSimilarity", loss(func(e *env) *vram.Tensor { return nn.CosineSimilarity(in(e, 2, 3), in(e, 2, 3), 1, 1e-8) })},
	}
	for _, d := range []vram.Device{vram.CPU, vram.Sim(1)} {
		memtest.Settle(d)
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				e := &env{d: d}
				before, allocated := vram.Storage(d), vram.MemoryAllocated(d)
				m, outs := tc.run(e)
				s := outs[0].Sum()
				s.Backward()
				s.Release()
				for _, o := range outs {
					o.Release()
				}
				for _, x := range e.made {
					x.Release()
				}
				if m != nil {
					nn.Release(m)
				}
				after := vram.Storage(d)
				if after.LiveBytes != before.LiveBytes || after.Allocs-before.Allocs != after.Frees-before.Frees ||
					after.Leaked != before.Leaked || vram.MemoryAllocated(d) != allocated {
					t.Errorf("%s: %d storages made, %d freed, %d left to the collector; %d bytes live, %d before",
						d, after.Allocs-before.Allocs, after.Frees-before.Frees, after.Leaked-before.Leaked, after.LiveBytes, before.LiveBytes)
				}
			})
		}
	}
}
