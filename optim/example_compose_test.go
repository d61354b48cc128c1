package optim_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

func ExampleNewSequentialLR() {
	// Three steps of warm-up, then a cosine decay over the next six.
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	warmup, err := optim.NewLinearLR(opt, 0.25, 1, 3)
	if err != nil {
		panic(err)
	}
	decay, err := optim.NewCosineAnnealingLR(opt, 6, 0) // from 0.1, the rate before the warm-up
	if err != nil {
		panic(err)
	}
	sched, err := optim.NewSequentialLR(opt, []*optim.Schedule{warmup, decay}, []int{3})
	if err != nil {
		panic(err)
	}
	for range 10 {
		fmt.Printf("%.3f ", opt.LR())
		// ... a training step: opt.Step() ...
		sched.Step()
	}
	fmt.Println()
	// Output: 0.025 0.050 0.075 0.100 0.093 0.075 0.050 0.025 0.007 0.000
}

func ExampleNewChainedScheduler() {
	// A rate held at a tenth for two steps, decaying by 0.5 every step.
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 1})
	if err != nil {
		panic(err)
	}
	low, err := optim.NewConstantLR(opt, 0.1, 2)
	if err != nil {
		panic(err)
	}
	decay, err := optim.NewExponentialLR(opt, 0.5)
	if err != nil {
		panic(err)
	}
	sched, err := optim.NewChainedScheduler([]*optim.Schedule{low, decay})
	if err != nil {
		panic(err)
	}
	for range 5 {
		fmt.Printf("%.4f ", opt.LR())
		sched.Step()
	}
	fmt.Println()
	// Output: 0.1000 0.0500 0.2500 0.1250 0.0625
}

func ExampleReduceLROnPlateau() {
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	cfg := optim.DefaultPlateauConfig()
	cfg.Patience = 2
	plateau, err := optim.NewReduceLROnPlateau(opt, cfg)
	if err != nil {
		panic(err)
	}
	// Validation losses that stop improving after the third epoch.
	for _, loss := range []float64{1.0, 0.8, 0.7, 0.7, 0.71, 0.72, 0.69} {
		// ... train an epoch ...
		if plateau.Step(loss) {
			fmt.Printf("loss %.2f: rate reduced to %.3f\n", loss, opt.LR())
		}
	}
	// Output: loss 0.72: rate reduced to 0.010
}

func ExampleRMSprop() {
	// Minimize (p - 3)² from p = 0, centered with momentum.
	p := vram.Zeros(vram.Shape{1}, vram.Float64, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewRMSprop([]*vram.Tensor{p}, optim.RMSpropConfig{LR: 0.01, Momentum: 0.9, Centered: true})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	for range 300 {
		vram.Tidy(func() {
			opt.ZeroGrad()
			d := p.AddScalar(-3)
			d.Mul(d).Sum().Backward()
			opt.Step()
		})
	}
	fmt.Printf("p = %.2f\n", p.Item())
	// Output: p = 3.00
}

func ExampleAdagrad() {
	// Two groups: the second with a decaying rate and a warm accumulator.
	p := vram.FromSlice([]float64{1}, nil, vram.WithGrad())
	q := vram.FromSlice([]float64{1}, nil, vram.WithGrad())
	opt, err := optim.NewAdagradGroups([]optim.ParamGroup{
		optim.Group([]*vram.Tensor{p}),
		optim.Group([]*vram.Tensor{q}, optim.WithLRDecay(0.5), optim.WithInitialAccumulatorValue(3)),
	}, optim.AdagradConfig{LR: 0.5})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	for range 2 {
		p.SetGrad(vram.FromSlice([]float64{1}, nil))
		q.SetGrad(vram.FromSlice([]float64{1}, nil))
		opt.Step()
	}
	// p: 1 - 0.5/1 - 0.5/√2; q: 1 - 0.5/2 - (0.5/1.5)/√5
	fmt.Printf("p = %.4f, q = %.4f\n", p.Item(), q.Item())
	// Output: p = 0.1464, q = 0.6009
}

func ExampleNewCyclicLR() {
	// Triangular cycles between 0.1 and 1: two steps up, two down.
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.5})
	if err != nil {
		panic(err)
	}
	sched, err := optim.NewCyclicLR(opt, 0.1, 1, optim.CyclicOptions{StepSizeUp: 2})
	if err != nil {
		panic(err)
	}
	for range 6 {
		fmt.Printf("%.2f ", opt.LR())
		// ... a training step: opt.Step() ...
		sched.Step()
	}
	fmt.Println()
	// Output: 0.10 0.55 1.00 0.55 0.10 0.55
}
