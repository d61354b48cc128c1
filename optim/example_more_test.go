package optim_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// L-BFGS minimizes (x - 3)² with a closure that evaluates the loss and
// its gradient again, as torch.optim.LBFGS's step does.
func ExampleLBFGS() {
	x := vram.FromSlice([]float64{0}, nil, vram.Float64, vram.WithGrad())
	defer x.Release()
	opt, err := optim.NewLBFGS([]*vram.Tensor{x}, optim.LBFGSConfig{LineSearch: "strong_wolfe"})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	closure := func() float64 {
		opt.ZeroGrad()
		var loss float64
		vram.Tidy(func() {
			l := x.AddScalar(-3).Square().Sum()
			l.Backward()
			loss = l.Item()
		})
		return loss
	}
	opt.Step(closure)
	fmt.Printf("x = %.4f\n", x.Item())
	// Output: x = 3.0000
}

// SWALR anneals the rate to the SWA rate over two steps along a cosine.
func ExampleNewSWALR() {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
	if err != nil {
		panic(err)
	}
	sched, err := optim.NewSWALR(opt, []float64{0.02}, 2, false)
	if err != nil {
		panic(err)
	}
	for range 3 {
		sched.Step()
		fmt.Printf("%.3f ", opt.LR())
	}
	fmt.Println()
	// Output: 0.060 0.020 0.020
}
