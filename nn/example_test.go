package nn_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

func ExampleSequential() {
	g := vram.NewGenerator(0)
	model := nn.NewSequential(
		nn.NewLinear(4, 8, vram.WithGenerator(g)),
		nn.NewReLU(),
		nn.NewLinear(8, 3, vram.WithGenerator(g)),
	)
	for _, p := range model.NamedParameters() {
		fmt.Println(p.Name, p.Tensor.Shape())
	}

	// Give the layers known weights to show the computation.
	vram.NoGrad(func() {
		for _, p := range model.Parameters() {
			p.FillInPlace(0.5)
		}
	})
	x := vram.Ones(vram.Shape{2, 4})
	vram.Tidy(func() {
		y := model.Forward(x) // hidden: 4·0.5+0.5 = 2.5; output: 8·2.5·0.5+0.5 = 10.5
		fmt.Println(y)
	})
	// Output:
	// 0.weight [8, 4]
	// 0.bias [8]
	// 2.weight [3, 8]
	// 2.bias [3]
	// Tensor([[10.5, 10.5, 10.5], [10.5, 10.5, 10.5]], shape=[2, 3], dtype=float32, device=cpu, requires_grad)
}

// A user-defined layer embeds nn.Base and implements Forward.
type residual struct {
	nn.Base
	inner *nn.Linear
}

func newResidual(dim int) *residual {
	r := &residual{inner: nn.NewLinear(dim, dim)}
	r.RegisterModule("inner", r.inner)
	return r
}

func (r *residual) Forward(x *vram.Tensor) *vram.Tensor {
	h := r.inner.Forward(x)
	defer h.Release()
	return x.Add(h)
}

func ExampleBase() {
	model := nn.NewSequential(newResidual(4), nn.NewGELU(), newResidual(4))
	for _, p := range model.NamedParameters() {
		fmt.Println(p.Name)
	}
	// Output:
	// 0.inner.weight
	// 0.inner.bias
	// 2.inner.weight
	// 2.inner.bias
}

func ExampleModules() {
	model := nn.NewSequential(newResidual(4), nn.NewGELU(), nn.NewLinear(4, 2))
	// for m in model.modules(): if isinstance(m, nn.Linear): ...
	for _, m := range nn.Modules(model) {
		if lin, ok := m.(*nn.Linear); ok {
			fmt.Println("linear", lin.Weight.Shape())
		}
	}
	for _, m := range nn.NamedModules(model) {
		fmt.Printf("%q %T\n", m.Name, m.Module)
	}
	// Output:
	// linear [4, 4]
	// linear [2, 4]
	// "" *nn.Sequential
	// "0" *nn_test.residual
	// "0.inner" *nn.Linear
	// "1" *nn.GELU
	// "2" *nn.Linear
}

// GroupNorm normalizes groups of channels of each sample: the first
// sample's two groups, channels 0-1 (0 to 3) and 2-3 (4 to 7), each come
// to the same values.
func ExampleGroupNorm() {
	gn := nn.NewGroupNorm(2, 4, 1e-5)
	x := vram.Arange(0, 16, 1).Reshape(2, 4, 2)
	y := gn.Forward(x)
	vram.NoGrad(func() {
		fmt.Printf("%.3f\n", y.Select(0, 0).Float32s())
	})
	// Output:
	// [-1.342 -0.447 0.447 1.342 -1.342 -0.447 0.447 1.342]
}

// An EmbeddingBag in mode "sum" takes bags as one list of indices and the
// offsets where they start (here [0 1], [] and [2 2 3]), with a weight for
// each index; the empty bag gives zeros.
func ExampleEmbeddingBag_ForwardBags() {
	bag := nn.NewEmbeddingBagOptions(4, 2, nn.EmbeddingBagOptions{Mode: "sum"})
	vram.NoGrad(func() { bag.Weight.CopyFrom(vram.Arange(0, 8, 1).Reshape(4, 2)) })
	input := vram.FromSlice([]int64{0, 1, 2, 2, 3}, vram.Shape{5})
	offsets := vram.FromSlice([]int64{0, 2, 2}, vram.Shape{3})
	weights := vram.FromSlice([]float32{1, 1, 0.5, 0.5, 2}, vram.Shape{5})
	fmt.Println(bag.ForwardBags(input, offsets, weights).Float32s())
	// Output:
	// [2 4 0 0 16 19]
}

// A batch norm without running statistics normalizes with the batch's
// in evaluation mode too (track_running_stats=False).
func ExampleNewBatchNorm2dOptions() {
	bn := nn.NewBatchNorm2dOptions(1, nn.BatchNormOptions{NoAffine: true, NoRunningStats: true})
	bn.Eval()
	x := vram.FromSlice([]float32{1, 3}, vram.Shape{2, 1, 1, 1})
	fmt.Printf("%.3f %d\n", bn.Forward(x).Float32s(), len(nn.StateDict(bn)))
	// Output:
	// [-1.000 1.000] 0
}

// PyTorch's tuple arguments, nn.Conv2d(3, 8, kernel_size=(1, 5),
// padding=(0, 2)), are ConvOptions' per-axis pairs; padding="same" is
// PaddingSame.
func ExampleNewConv2d() {
	conv := nn.NewConv2d(3, 8, 0, nn.ConvOptions{KernelHW: [2]int{1, 5}, PaddingHW: [2]int{0, 2}})
	same := nn.NewConv2d(3, 8, 4, nn.ConvOptions{PaddingSame: true})
	x := vram.Randn(vram.Shape{2, 3, 6, 7})
	fmt.Println(conv.Weight.Shape(), conv.Forward(x).Shape())
	fmt.Println(same.Weight.Shape(), same.Forward(x).Shape())
	// Output:
	// [8, 3, 1, 5] [2, 8, 6, 7]
	// [8, 3, 4, 4] [2, 8, 6, 7]
}

// Class weights, an ignored padding class and label smoothing, as
// torch.nn.functional.cross_entropy takes them; ReductionNone keeps one
// loss per target.
func ExampleCrossEntropyLossWith() {
	vram.Tidy(func() {
		logits := vram.FromSlice([]float64{2, 0, 0, 0, 2, 0, 0, 0, 2}, vram.Shape{3, 3})
		targets := vram.FromSlice([]int64{0, 1, -100}, vram.Shape{3})
		o := nn.CrossEntropyOptions{
			Weight:         vram.FromSlice([]float64{1, 3, 1}, vram.Shape{3}),
			LabelSmoothing: 0.1,
		}
		fmt.Printf("mean %.4f\n", nn.CrossEntropyLossWith(logits, targets, o).Item())
		o.Reduction = nn.ReductionNone
		fmt.Printf("each %.4f\n", nn.CrossEntropyLossWith(logits, targets, o).Float64s())
	})
	// Output:
	// mean 0.3356
	// each [0.5222 0.8200 0.0000]
}

// Probabilities as targets, and a pos_weight for a rare positive label.
func ExampleBCEWithLogitsLossWith() {
	vram.Tidy(func() {
		logits := vram.FromSlice([]float64{0, 0}, vram.Shape{1, 2})
		labels := vram.FromSlice([]float64{1, 0}, vram.Shape{1, 2})
		o := nn.BCEOptions{PosWeight: vram.FromSlice([]float64{3, 3}, vram.Shape{2}), Reduction: nn.ReductionNone}
		fmt.Printf("%.4f\n", nn.BCEWithLogitsLossWith(logits, labels, o).Float64s()) // 3·log 2 and log 2
	})
	// Output:
	// [2.0794 0.6931]
}

func ExampleMultiheadAttention() {
	g := vram.WithGenerator(vram.NewGenerator(0))
	mha := nn.NewMultiheadAttention(8, 2, nn.MultiheadAttentionOptions{BatchFirst: true}, g)
	for _, p := range mha.NamedParameters() {
		fmt.Println(p.Name, p.Tensor.Shape()) // PyTorch's state-dict names
	}

	// Two sequences of 3 tokens; the second one's last token is padding.
	x := vram.Randn(vram.Shape{2, 3, 8}, g)
	pad := vram.FromSlice([]bool{false, false, false, false, false, true}, vram.Shape{2, 3})
	out, weights := mha.ForwardQKV(x, x, x, nn.MultiheadForwardOptions{KeyPaddingMask: pad, Causal: true})
	fmt.Println(out.Shape(), weights.Shape())
	// Causal: the first token sees only itself, the second the first two.
	w := weights.Float64s()
	fmt.Printf("%.0f %.0f %.0f\n", w[0], w[1], w[2])
	fmt.Printf("%.0f\n", w[9+3]+w[9+4]) // second sequence, second token
	fmt.Printf("%.0f\n", w[9+8])        // its third token never sees the padding
	// Output:
	// in_proj_weight [24, 8]
	// in_proj_bias [24]
	// out_proj.weight [8, 8]
	// out_proj.bias [8]
	// [2, 3, 8] [2, 3, 3]
	// 1 0 0
	// 1
	// 0
}

func ExampleNewConv1d() {
	// A convolution over sequences: [N, C, L] in, [N, O, L] out with
	// padding "same".
	conv := nn.NewConv1d(4, 6, 3, nn.ConvOptions{PaddingSame: true}, vram.WithGenerator(vram.NewGenerator(0)))
	x := vram.Randn(vram.Shape{2, 4, 10})
	fmt.Println(conv.Weight.Shape(), conv.Forward(x).Shape())
	// Output: [6, 4, 3] [2, 6, 10]
}

func ExampleIdentity() {
	// Identity replaces a layer, here a classifier head, without changing
	// the model's structure or its other parameters' names.
	model := nn.NewSequential(nn.NewLinear(4, 2), nn.NewIdentity())
	fmt.Println(model.Forward(vram.Ones(vram.Shape{3, 4})).Shape(), len(model.Parameters()))
	// Output: [3, 2] 2
}

func ExampleNewEmbeddingFromPretrained() {
	table := vram.FromSlice([]float32{3, 4, 0.6, 0.8, 0, 0}, vram.Shape{3, 2})
	defer table.Release()
	// A frozen table whose rows are looked up with a norm of at most 1.
	e := nn.NewEmbeddingFromPretrained(table, true, nn.EmbeddingOptions{MaxNorm: 1, PaddingIdx: new(2)})
	defer nn.Release(e)
	vram.Tidy(func() {
		y := e.Forward(vram.FromSlice([]int64{0, 1, 2}, vram.Shape{3}))
		fmt.Printf("%.3f\n", y.Float64s())
		fmt.Println(e.Weight.RequiresGrad())
	})
	// Output:
	// [0.600 0.800 0.600 0.800 0.000 0.000]
	// false
}

// An RMSNorm with PyTorch's default eps (eps=None) is made with a
// negative eps: it then adds the machine epsilon of the dtype it computes in.
func ExampleRMSNorm() {
	norm := nn.NewRMSNorm([]int{2}, -1)
	fmt.Println(nn.Format(norm))
	x := vram.FromSlice([]float32{3, 4, -6, 8}, vram.Shape{2, 2})
	y := norm.Forward(x)
	fmt.Printf("%.4f\n", y.Float32s())
	// Output:
	// RMSNorm(weight [2])
	// [0.8485 1.1314 -0.8485 1.1314]
}
