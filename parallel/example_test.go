package parallel_test

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
	"github.com/vramgo/vram/parallel"
)

// maxDiff returns the largest difference between the values of a and b.
func maxDiff(a, b *vram.Tensor) float64 {
	x, y := a.CPU().Float64s(), b.CPU().Float64s()
	d := 0.0
	for i := range x {
		d = math.Max(d, math.Abs(x[i]-y[i]))
	}
	return d
}

// A linear model trained on two simulated GPUs, each computing the loss of
// half of every batch, takes the same steps as the model on one device with
// the whole batch.
func ExampleNewDataParallel() {
	g := vram.NewGenerator(1)
	x := vram.Randn(vram.Shape{64, 8}, vram.WithGenerator(g))
	y := vram.Randn(vram.Shape{64, 1}, vram.WithGenerator(g))
	single := nn.NewLinear(8, 1, vram.WithGenerator(vram.NewGenerator(2)))
	model := nn.NewLinear(8, 1, vram.WithGenerator(vram.NewGenerator(2)))

	net, err := parallel.NewDataParallel(model, []vram.Device{vram.Sim(0), vram.Sim(1)})
	if err != nil {
		fmt.Println(err)
		return
	}
	opt, err := net.Optimizer(func(ps []*vram.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ref, _ := optim.NewSGD(single.Parameters(), optim.SGDConfig{LR: 0.1})
	var first, last float64
	for step := range 20 {
		vram.Tidy(func() {
			loss := net.ForwardLoss(x, y, nn.MSELoss) // the loss of each half on its device
			loss.Backward()
			opt.Step() // sums the gradients, then steps both replicas
			opt.ZeroGrad()
			if step == 0 {
				first = loss.Item()
			}
			last = loss.Item()

			refLoss := nn.MSELoss(single.Forward(x), y)
			refLoss.Backward()
			ref.Step()
			ref.ZeroGrad()
		})
	}
	fmt.Println("loss falls:", last < first)
	fmt.Println("model on", model.Weight.Device())
	fmt.Println("same weights as on one device:", maxDiff(model.Weight, single.Weight) < 1e-5)
	for _, r := range net.Report().Replicas {
		fmt.Printf("replica %d on %v\n", r.Rank, r.Device)
	}
	// Output:
	// loss falls: true
	// model on sim:0
	// same weights as on one device: true
	// replica 0 on sim:0
	// replica 1 on sim:1
}

// Two stages on two simulated GPUs and a batch cut into four micro-batches
// under the 1F1B schedule give the loss of the sequential network on one
// device.
func ExampleNewPipeline() {
	g := vram.NewGenerator(1)
	x := vram.Randn(vram.Shape{32, 8}, vram.WithGenerator(g))
	y := vram.Randn(vram.Shape{32, 1}, vram.WithGenerator(g))
	first := nn.NewSequential(nn.NewLinear(8, 16, vram.WithGenerator(g)), nn.NewReLU())
	second := nn.NewLinear(16, 1, vram.WithGenerator(g))

	var want float64
	vram.NoGrad(func() {
		want = nn.MSELoss(second.Forward(first.Forward(x)), y).Item()
	})

	p, err := parallel.NewPipeline([]parallel.Stage{
		{Module: first, Device: vram.Sim(0)},
		{Module: second, Device: vram.Sim(1)},
	}, parallel.MicroBatches(4), parallel.WithSchedule(parallel.OneFOneB))
	if err != nil {
		fmt.Println(err)
		return
	}
	loss := p.ForwardBackward(x, y, nn.MSELoss) // the gradients are in the stages' parameters
	rep := p.Report()
	fmt.Printf("loss %.6f, sequential %.6f\n", loss, want)
	fmt.Println("stages on", first.Parameters()[0].Device(), "and", second.Weight.Device())
	fmt.Println("first layer's weight has a gradient:", first.Parameters()[0].Grad() != nil)
	fmt.Printf("%v, %d stages, %d micro-batches: bubble expected %.0f%%\n", rep.Schedule, rep.Stages, rep.MicroBatches, 100*rep.ExpectedBubble)
	// Output:
	// loss 1.003295, sequential 1.003295
	// stages on sim:0 and sim:1
	// first layer's weight has a gradient: true
	// 1F1B, 2 stages, 4 micro-batches: bubble expected 20%
}
