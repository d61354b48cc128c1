package optim_test

import (
	"fmt"
	"math"

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

func ExampleNewAdamWGroups() {
	// Decay the weights but not the bias, and train the bias ten times
	// faster: two parameter groups.
	model := nn.NewLinear(3, 1, vram.Float64, vram.WithGenerator(vram.NewGenerator(0)))
	opt, err := optim.NewAdamWGroups([]optim.ParamGroup{
		optim.Group([]*vram.Tensor{model.Weight}),
		optim.Group([]*vram.Tensor{model.Bias}, optim.WithWeightDecay(0), optim.WithLR(1e-2)),
	}, optim.AdamConfig{LR: 1e-3, WeightDecay: 0.05})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	sched, err := optim.NewStepLR(opt, 10, 0.5)
	if err != nil {
		panic(err)
	}
	for range 10 {
		sched.Step()
	}
	for k := range opt.NumGroups() {
		c := opt.GroupConfig(k)
		fmt.Printf("group %d: lr %g, weight decay %g\n", k, c.LR, c.WeightDecay)
	}
	// Output:
	// group 0: lr 0.0005, weight decay 0.05
	// group 1: lr 0.005, weight decay 0
}

func ExampleClipGradNormWith() {
	p := vram.Zeros(vram.Shape{3}, vram.WithGrad())
	p.SetGrad(vram.FromSlice([]float32{1, -6, 2}, nil))
	// Clip by the largest absolute value, refusing NaN and infinite norms.
	norm, err := optim.ClipGradNormWith([]*vram.Tensor{p}, 3, optim.ClipOptions{NormType: math.Inf(1), ErrorIfNonfinite: true})
	fmt.Printf("norm %.0f, error %v, after: %.3f\n", norm, err, p.Grad().Float64s())
	// Output: norm 6, error <nil>, after: [0.500 -3.000 1.000]
}

func ExampleClipGradValue() {
	p := vram.Zeros(vram.Shape{3}, vram.WithGrad())
	p.SetGrad(vram.FromSlice([]float32{0.5, -6, 2}, nil))
	optim.ClipGradValue([]*vram.Tensor{p}, 1)
	fmt.Println(p.Grad().Float64s())
	// Output: [0.5 -1 1]
}
