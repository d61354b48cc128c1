// Modelparallel places the two halves of a network on two devices, as
// PyTorch's model_parallel example does: the first sub-network on one device,
// the second on the other, and Forward moves the activations across. To,
// CUDA and CPU are differentiable, so Backward carries the gradients back
// across the devices and one optimizer trains both halves. Each device
// holds only its half of the parameters, but it waits while the other
// works; the example measures that wait (examples/pipeline fills it with
// micro-batches). It uses GPUs 0 and 1 when the machine has two, else two
// simulated GPUs.
//
//	go run ./examples/modelparallel
package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

func main() {
	cmdline.NoArgs("Modelparallel trains a network whose two halves live on two devices, gradients flowing back across them.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "modelparallel:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	var err error
	if e := vram.Catch(func() { err = modelParallelDemo(w) }); e != nil {
		return e
	}
	return err
}

// modelParallel is PyTorch's model-parallel example in Go:
//
//	class model_parallel(nn.Module):
//	    def __init__(self):
//	        super().__init__()
//	        self.sub_network1 = ...
//	        self.sub_network2 = ...
//	        self.sub_network1.cuda(0)
//	        self.sub_network2.cuda(1)
//
//	    def forward(self, x):
//	        x = x.cuda(0)
//	        x = self.sub_network1(x)
//	        x = x.cuda(1)
//	        x = self.sub_network2(x)
//	        return x
//
// On two GPUs dev1 and dev2 are vram.CUDA(0) and vram.CUDA(1), and the
// calls below are m.subNetwork1.CUDA(0), x.CUDA(1) and so on; the devices
// are fields so that the same code runs on simulated GPUs.
type modelParallel struct {
	nn.Base
	subNetwork1, subNetwork2 *nn.Sequential
	dev1, dev2               vram.Device

	// Forward's time on each sub-network, each ending when its device
	// finished.
	took1, took2 time.Duration
}

func newModelParallel(dev1, dev2 vram.Device) *modelParallel {
	m := &modelParallel{
		subNetwork1: nn.NewSequential(nn.NewLinear(32, 128), nn.NewReLU(), nn.NewLinear(128, 128), nn.NewReLU()),
		subNetwork2: nn.NewSequential(nn.NewLinear(128, 128), nn.NewReLU(), nn.NewLinear(128, 4)),
		dev1:        dev1,
		dev2:        dev2,
	}
	m.RegisterModule("sub_network1", m.subNetwork1)
	m.RegisterModule("sub_network2", m.subNetwork2)
	m.subNetwork1.To(dev1) // self.sub_network1.cuda(0)
	m.subNetwork2.To(dev2) // self.sub_network2.cuda(1)
	return m
}

func (m *modelParallel) Forward(x *vram.Tensor) *vram.Tensor {
	start := time.Now()
	x = x.To(m.dev1) // x = x.cuda(0)
	defer x.Release()
	h := m.subNetwork1.Forward(x) // x = self.sub_network1(x)
	defer h.Release()
	sync(m.dev1)
	mid := time.Now()
	h = h.To(m.dev2) // x = x.cuda(1)
	defer h.Release()
	out := m.subNetwork2.Forward(h) // x = self.sub_network2(x)
	sync(m.dev2)
	m.took1 += mid.Sub(start)
	m.took2 += time.Since(mid)
	return out
}

func sync(d vram.Device) {
	if err := vram.Synchronize(d); err != nil {
		panic(err)
	}
}

const (
	batch = 256
	steps = 30
)

func modelParallelDemo(w io.Writer) error {
	dev1, dev2 := vram.Sim(0), vram.Sim(1)
	if vram.DeviceCount() >= 2 {
		dev1, dev2 = vram.CUDA(0), vram.CUDA(1)
	}
	vram.ManualSeed(3)
	m := newModelParallel(dev1, dev2)
	defer nn.Release(m)

	// The same network on the CPU, for comparison.
	one, err := nn.Replicate(m, vram.CPU)
	if err != nil {
		return err
	}
	defer nn.Release(one)
	ref := one.(*modelParallel)
	ref.dev1, ref.dev2 = vram.CPU, vram.CPU

	for _, d := range []vram.Device{dev1, dev2} {
		fmt.Fprintf(w, "%v holds %.2f MiB of parameters\n", d, float64(vram.MemoryAllocated(d))/(1<<20))
	}

	// A regression target: four smooth functions of the input.
	gen := vram.NewGenerator(4)
	x := vram.Randn(vram.Shape{batch, 32}, vram.WithGenerator(gen))
	defer x.Release()
	proj := vram.Randn(vram.Shape{32, 4}, vram.WithGenerator(gen))
	defer proj.Release()
	var y *vram.Tensor
	vram.NoGrad(func() {
		p := x.MatMul(proj).MulScalar(0.3)
		defer p.Release()
		y = p.Sin()
	})
	defer y.Release()

	// One step on both, to compare the gradients that crossed devices.
	vram.Tidy(func() {
		nn.MSELoss(m.Forward(x), y.To(dev2)).Backward()
		nn.MSELoss(ref.Forward(x), y).Backward()
	})
	for _, p := range m.subNetwork1.Parameters() {
		if p.Grad() == nil || p.Grad().Device() != dev1 {
			return fmt.Errorf("the first sub-network's gradient did not arrive on %v", dev1)
		}
	}
	fmt.Fprintf(w, "gradients flowed back from %v to %v; largest difference from the network on the CPU: %.2g\n",
		dev2, dev1, maxGradDiff(m, ref))

	opt, err := optim.NewAdam(m.Parameters(), optim.AdamConfig{LR: 3e-3})
	if err != nil {
		return err
	}
	defer opt.Release()
	opt.ZeroGrad()
	m.took1, m.took2 = 0, 0
	start := time.Now()
	var first, last float64
	for step := range steps {
		vram.Tidy(func() {
			loss := nn.MSELoss(m.Forward(x), y.To(dev2))
			loss.Backward()
			opt.Step()
			opt.ZeroGrad()
			last = loss.Item()
			if step == 0 {
				first = last
			}
			if step%10 == 0 || step == steps-1 {
				fmt.Fprintf(w, "step %2d: loss %.4f\n", step, last)
			}
		})
	}
	total := time.Since(start)
	fmt.Fprintf(w, "trained: the loss went from %.4f to %.4f in %d steps (%v)\n", first, last, steps, total.Round(time.Millisecond))
	fwd := m.took1 + m.took2
	fmt.Fprintf(w, "forward passes: sub-network 1 on %v took %v, sub-network 2 on %v took %v;\n", dev1, m.took1.Round(time.Millisecond), dev2, m.took2.Round(time.Millisecond))
	fmt.Fprintf(w, "  during the forward passes %v waited %.0f%% of the time and %v %.0f%%: each waits while the other works\n",
		dev1, 100*float64(m.took2)/float64(fwd), dev2, 100*float64(m.took1)/float64(fwd))
	for _, d := range []vram.Device{dev1, dev2} {
		fmt.Fprintf(w, "%v peak: %.2f MiB\n", d, float64(vram.MaxMemoryAllocated(d))/(1<<20))
	}
	return nil
}

// maxGradDiff returns the largest difference between a's and b's gradients.
func maxGradDiff(a, b nn.Module) float64 {
	d := 0.0
	for i, p := range a.Parameters() {
		g, h := p.Grad().Float64s(), b.Parameters()[i].Grad().Float64s()
		for j := range g {
			d = math.Max(d, math.Abs(g[j]-h[j]))
		}
	}
	return d
}
