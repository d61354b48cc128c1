// Pipeline splits a network into two stages on two devices and a batch
// into micro-batches, so that both devices work at once: while stage 1
// computes micro-batch 0, stage 0 computes micro-batch 1. Each stage runs
// on its own goroutine. The devices still wait at the start and end of
// each batch, the pipeline's bubble, a fraction (S-1)/(M+S-1) of the time
// with S stages and M micro-batches; the example prints that expectation
// next to the bubble it measured, for several M. It compares the two
// schedules: GPipe (every forward, then every backward) holds the
// activations of all micro-batches at once, 1F1B (one forward, one
// backward) at most S per stage, and both give the gradients of the
// sequential network on one device. It uses GPUs 0 and 1 when the machine
// has two, else two simulated GPUs.
//
//	go run ./examples/pipeline
package main

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
	"github.com/vramgo/vram/parallel"
)

func main() {
	cmdline.NoArgs("Pipeline trains a network split into two stages on two devices with micro-batches, and reports the pipeline's bubble.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	var err error
	if e := vram.Catch(func() { err = pipeline(w) }); e != nil {
		return e
	}
	return err
}

const (
	width  = 128
	layers = 8 // four per stage
	batch  = 512
	micro  = 8
)

// newLayers returns the network's layers.
func newLayers() []nn.Module {
	var ls []nn.Module
	for range layers {
		ls = append(ls, nn.NewSequential(nn.NewLinear(width, width), nn.NewTanh()))
	}
	return ls
}

func pipeline(w io.Writer) error {
	devs := []vram.Device{vram.Sim(0), vram.Sim(1)}
	if vram.DeviceCount() >= 2 {
		devs = []vram.Device{vram.CUDA(0), vram.CUDA(1)}
	}
	vram.ManualSeed(5)
	ls := newLayers()
	// The sequential network on the CPU, for comparison.
	seq, err := nn.Replicate(nn.NewSequential(ls...), vram.CPU)
	if err != nil {
		return err
	}
	defer nn.Release(seq)
	stages := []parallel.Stage{
		{Module: nn.NewSequential(ls[:layers/2]...), Device: devs[0]},
		{Module: nn.NewSequential(ls[layers/2:]...), Device: devs[1]},
	}

	gen := vram.NewGenerator(6)
	x := vram.Randn(vram.Shape{batch, width}, vram.WithGenerator(gen))
	defer x.Release()
	var y *vram.Tensor // a smooth function of x to learn
	vram.NoGrad(func() {
		s := x.Sin()
		defer s.Release()
		y = s.MulScalar(0.5)
	})
	defer y.Release()

	var want float64
	vram.Tidy(func() {
		l := nn.MSELoss(seq.Forward(x), y)
		l.Backward()
		want = l.Item()
	})

	for _, sched := range []parallel.Schedule{parallel.GPipe, parallel.OneFOneB} {
		p, err := parallel.NewPipeline(stages, parallel.MicroBatches(micro), parallel.WithSchedule(sched))
		if err != nil {
			return err
		}
		for _, d := range devs {
			vram.ResetPeakMemoryStats(d)
		}
		base := []int64{vram.MemoryAllocated(devs[0]), vram.MemoryAllocated(devs[1])}
		got := p.ForwardBackward(x, y, nn.MSELoss)
		fmt.Fprintf(w, "%v, %d micro-batches of %d: loss %.6f (the sequential network: %.6f), largest gradient difference %.2g\n",
			sched, micro, batch/micro, got, want, maxGradDiff(p, seq))
		rep := p.Report()
		for s, sr := range rep.StageReports {
			held := fmt.Sprintf("%d micro-batches'", sr.MaxHeld)
			if sr.MaxHeld == 1 {
				held = "1 micro-batch's"
			}
			fmt.Fprintf(w, "  stage %d on %v held at most %s activations; peak %.2f MiB above its parameters\n",
				s, sr.Device, held, float64(sr.MaxAllocated-base[s])/(1<<20))
		}
		fmt.Fprint(w, indent(rep.String()))
		for _, prm := range p.Parameters() {
			prm.ZeroGrad()
		}
	}

	// The bubble shrinks as the micro-batches grow in number.
	fmt.Fprintln(w, "GPipe's bubble by number of micro-batches (2 stages):")
	for _, m := range []int{1, 2, 4, 8, 16} {
		p, err := parallel.NewPipeline(stages, parallel.MicroBatches(m))
		if err != nil {
			return err
		}
		p.ForwardBackward(x, y, nn.MSELoss)
		rep := p.Report()
		fmt.Fprintf(w, "  %2d micro-batches: expected %4.1f%%, measured %4.1f%%\n", m, 100*rep.ExpectedBubble, 100*rep.MeasuredBubble)
		for _, prm := range p.Parameters() {
			prm.ZeroGrad()
		}
	}

	// Training: ForwardBackward, then the optimizer, as usual.
	p, err := parallel.NewPipeline(stages, parallel.MicroBatches(micro), parallel.WithSchedule(parallel.OneFOneB))
	if err != nil {
		return err
	}
	opt, err := optim.NewAdam(p.Parameters(), optim.AdamConfig{LR: 3e-3})
	if err != nil {
		return err
	}
	defer opt.Release()
	var first, last float64
	for step := range 10 {
		last = p.ForwardBackward(x, y, nn.MSELoss)
		opt.Step()
		opt.ZeroGrad()
		if step == 0 {
			first = last
		}
	}
	fmt.Fprintf(w, "training with 1F1B: the loss went from %.4f to %.4f in 10 steps\n", first, last)
	nn.Release(p)
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

func indent(s string) string {
	out := "  "
	for i, c := range s {
		out += string(c)
		if c == '\n' && i < len(s)-1 {
			out += "  "
		}
	}
	return out
}
