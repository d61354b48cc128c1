package optim_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

func ExampleAdam() {
	// Fit y = 2x + 1 with a one-input linear layer.
	model := nn.NewLinear(1, 1, vram.Float64, vram.WithGenerator(vram.NewGenerator(0)))
	x := vram.FromSlice([]float64{0, 1, 2, 3}, vram.Shape{4, 1})
	y := vram.FromSlice([]float64{1, 3, 5, 7}, vram.Shape{4, 1})

	opt, err := optim.NewAdam(model.Parameters(), optim.AdamConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	var loss float64
	for range 500 {
		vram.Tidy(func() { // frees each step's temporaries
			opt.ZeroGrad()
			l := nn.MSELoss(model.Forward(x), y)
			l.Backward()
			opt.Step()
			loss = l.Item()
		})
	}
	fmt.Printf("weight %.2f, bias %.2f, loss < 1e-4: %v\n", model.Weight.Item(), model.Bias.Item(), loss < 1e-4)
	// Output: weight 2.00, bias 1.00, loss < 1e-4: true
}

func ExampleClipGradNorm() {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	p.SetGrad(vram.FromSlice([]float32{3, 4}, nil))
	norm := optim.ClipGradNorm([]*vram.Tensor{p}, 1)
	fmt.Printf("norm before: %.1f, after: %.3f\n", norm, p.Grad().Float64s())
	// Output: norm before: 5.0, after: [0.600 0.800]
}
