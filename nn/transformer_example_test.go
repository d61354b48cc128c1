package nn_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

func ExampleTransformer() {
	g := vram.WithGenerator(vram.NewGenerator(0))
	model := nn.NewTransformer(8, 2, 2, 1, nn.TransformerOptions{DimFeedforward: 16, BatchFirst: true}, g)
	defer nn.Release(model)
	names := model.NamedParameters()
	fmt.Println(len(names), "parameters, PyTorch's names:")
	for _, i := range []int{0, 12, 24, 26, 45} {
		fmt.Println(names[i].Name, names[i].Tensor.Shape())
	}

	// Two source sequences of 4 tokens (the second one's last is padding)
	// and targets of 3 tokens, each seeing only the tokens before it.
	src := vram.Randn(vram.Shape{2, 4, 8}, g)
	tgt := vram.Randn(vram.Shape{2, 3, 8}, g)
	pad := vram.FromSlice([]bool{false, false, false, false, false, false, false, true}, vram.Shape{2, 4})
	model.Eval()
	out := model.ForwardSrcTgt(src, tgt, nn.TransformerMasks{
		SrcKeyPaddingMask: pad, MemoryKeyPaddingMask: pad, TgtCausal: true,
	})
	fmt.Println(out.Shape())
	fmt.Println(nn.GenerateSquareSubsequentMask(3))
	// Output:
	// 46 parameters, PyTorch's names:
	// encoder.layers.0.self_attn.in_proj_weight [24, 8]
	// encoder.layers.1.self_attn.in_proj_weight [24, 8]
	// encoder.norm.weight [8]
	// decoder.layers.0.self_attn.in_proj_weight [24, 8]
	// decoder.norm.bias [8]
	// [2, 3, 8]
	// Tensor([[0, -Inf, -Inf], [0, 0, -Inf], [0, 0, 0]], shape=[3, 3], dtype=float32, device=cpu)
}

func ExampleNewTransformerEncoder() {
	g := vram.WithGenerator(vram.NewGenerator(0))
	// A decoder-only language model's blocks: pre-norm encoder layers
	// with a causal mask, and a final LayerNorm.
	layer := nn.NewTransformerEncoderLayer(8, 2, nn.TransformerOptions{DimFeedforward: 32, Activation: "gelu", NormFirst: true, BatchFirst: true}, g)
	blocks := nn.NewTransformerEncoder(layer, 3, nn.NewLayerNorm([]int{8}, 1e-5))
	defer nn.Release(blocks)
	x := vram.Randn(vram.Shape{2, 5, 8}, g)
	y := blocks.ForwardMasked(x, nn.EncoderMasks{Causal: true})
	fmt.Println(y.Shape(), len(blocks.Layers), blocks.Layers[0] == layer)
	// Output:
	// [2, 5, 8] 3 true
}
