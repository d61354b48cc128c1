package optim_test

import (
	"fmt"
	"math"

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

// One NAdam step from p = 1 with gradient 1 and PyTorch's defaults
// (lr 2e-3, betas 0.9 and 0.999, momentum decay 4e-3): the Nesterov
// term adds a look-ahead of the first moment to Adam's step.
func ExampleNAdam() {
	p := vram.FromSlice([]float64{1}, nil, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewNAdam([]*vram.Tensor{p}, optim.NAdamConfig{})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	p.SetGrad(vram.FromSlice([]float64{1}, nil))
	opt.Step()
	c := opt.Config()
	fmt.Printf("lr %g, momentum decay %g\n", c.LR, c.MomentumDecay)
	fmt.Printf("p = %.6f\n", p.Item())
	// Output:
	// lr 0.002, momentum decay 0.004
	// p = 0.997887
}

// ASGD keeps a running average of each parameter over the steps since t0
// (here from the start), which serves as the model's weights for
// evaluation.
func ExampleASGD() {
	p := vram.FromSlice([]float64{0}, nil, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewASGDGroups([]optim.ParamGroup{
		optim.Group([]*vram.Tensor{p}, optim.WithT0(0), optim.WithLambd(0)),
	}, optim.ASGDConfig{LR: 1})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	for range 3 {
		p.SetGrad(vram.FromSlice([]float64{-1}, nil))
		opt.Step()
	}
	// With lambd 0 the rate stays 1: p goes 1, 2, 3. μ is updated after
	// each step, as PyTorch updates it, so the average is p after the
	// first two steps and 2 + (3 - 2)/2 after the third.
	fmt.Printf("p = %g, average = %g\n", p.Item(), opt.Average(0).Item())
	// Output: p = 3, average = 2.5
}

// GetTotalNorm and ClipGradsWithNorm are ClipGradNorm's two halves: the
// norm may be taken over more gradients than are clipped with it.
func ExampleGetTotalNorm() {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	q := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	defer p.Release()
	defer q.Release()
	p.SetGrad(vram.FromSlice([]float32{3, 4}, nil))
	q.SetGrad(vram.FromSlice([]float32{12}, nil))
	norm, err := optim.GetTotalNorm([]*vram.Tensor{p.Grad(), q.Grad()}, optim.ClipOptions{})
	if err != nil {
		panic(err)
	}
	inf, _ := optim.GetTotalNorm([]*vram.Tensor{p.Grad(), q.Grad()}, optim.ClipOptions{NormType: math.Inf(1)})
	if err := optim.ClipGradsWithNorm([]*vram.Tensor{p}, 1.3, norm); err != nil {
		panic(err)
	}
	fmt.Printf("2-norm %.0f, inf-norm %.0f, p's gradient %.3f\n", norm, inf, p.Grad().Float64s())
	// Output: 2-norm 13, inf-norm 12, p's gradient [0.300 0.400]
}

// An L-BFGS's state, copied with State, resumes another L-BFGS of the
// same parameters where the first stopped, as load_state_dict does.
func ExampleLBFGS_State() {
	x := vram.FromSlice([]float64{0}, nil, vram.Float64, vram.WithGrad())
	defer x.Release()
	cfg := optim.LBFGSConfig{MaxIter: 2}
	opt, err := optim.NewLBFGS([]*vram.Tensor{x}, cfg)
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	closure := func(o *optim.LBFGS) func() float64 {
		return func() float64 {
			o.ZeroGrad()
			var loss float64
			vram.Tidy(func() {
				l := x.AddScalar(-3).Square().Sum()
				l.Backward()
				loss = l.Item()
			})
			return loss
		}
	}
	opt.Step(closure(opt))
	st := opt.State()
	defer st.Release()

	resumed, err := optim.NewLBFGS([]*vram.Tensor{x}, cfg)
	if err != nil {
		panic(err)
	}
	defer resumed.Release()
	if err := resumed.LoadState(st); err != nil {
		panic(err)
	}
	fmt.Println(resumed.Iterations(), resumed.FuncEvals())
	// Output: 1 2
}
