package quant_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
)

func ExampleQuantize() {
	g := vram.WithGenerator(vram.NewGenerator(0))
	model := nn.NewSequential(nn.NewLinear(256, 512, g), nn.NewReLU(), nn.NewLinear(512, 10, g))
	defer nn.Release(model)
	bytes := func() (n int64) {
		for _, t := range nn.StateDict(model) {
			n += t.Bytes()
		}
		return n
	}
	fmt.Println("float32 model bytes:", bytes())
	n, err := quant.Quantize(model)
	if err != nil {
		panic(err)
	}
	fmt.Println("quantized layers:", n)
	fmt.Println("int8 model bytes:", bytes())
	// As in PyTorch, a quantized layer has no parameters: its int8
	// weight, scale and bias are buffers, saved and moved with the model.
	fmt.Println("parameters:", len(model.Parameters()))
	for _, p := range nn.NamedBuffers(model) {
		fmt.Println(p.Name, p.Tensor.DType(), p.Tensor.Shape())
	}
	vram.NoGrad(func() {
		vram.Tidy(func() {
			y := model.Forward(vram.Ones(vram.Shape{4, 256}))
			fmt.Println("output", y.Shape(), y.DType())
		})
	})
	// Output:
	// float32 model bytes: 546856
	// quantized layers: 2
	// int8 model bytes: 140368
	// parameters: 0
	// 0.weight int8 [512, 256]
	// 0.bias float32 [512]
	// 0.scale float32 [512]
	// 2.weight int8 [10, 512]
	// 2.bias float32 [10]
	// 2.scale float32 [10]
	// output [4, 10] float32
}

func ExamplePerTensor() {
	x := vram.FromSlice([]float32{-1, -0.5, 0, 0.25, 2}, vram.Shape{5})
	defer x.Release()
	// The scale and zero point of MinMaxObserver for torch.qint8.
	scale, zp, err := quant.Params(-1, 2, false)
	if err != nil {
		panic(err)
	}
	q, err := quant.PerTensor(x, scale, zp)
	if err != nil {
		panic(err)
	}
	defer q.Release()
	back, err := quant.DequantizePerTensor(q, scale, zp)
	if err != nil {
		panic(err)
	}
	defer back.Release()
	fmt.Printf("scale %.6f, zero point %d\n", scale, zp)
	fmt.Println(q.Float64s())
	fmt.Printf("%.4f\n", back.Float64s())
	// Output:
	// scale 0.011765, zero point -43
	// [-128 -85 -43 -22 127]
	// [-1.0000 -0.4941 0.0000 0.2471 2.0000]
}
