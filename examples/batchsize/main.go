// Batchsize finds the largest batch whose training step of an MLP fits on a
// 64 MiB simulated GPU with tune.FindBatchSize (doubling until the first
// out-of-memory, then bisecting), keeps a 10% margin, runs a step at the
// batch found, and then reaches a larger batch than fits with gradient
// accumulation (nn.Accumulate), whose gradients equal the large batch's.
//
//	go run ./examples/batchsize
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
	"github.com/vramgo/vram/tune"
)

func main() {
	cmdline.NoArgs("Batchsize finds the largest batch whose training step fits on a 64 MiB simulated GPU (tune.FindBatchSize), then reaches a larger one with gradient accumulation.")
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "batchsize:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "batchsize:", err)
		os.Exit(1)
	}
}

// setup gives the process a 64 MiB simulated GPU; it must run before any
// device is used.
func setup() error {
	return vram.Configure(vram.Config{SimDevices: []int64{64 << 20}})
}

const (
	in, hidden, out = 32, 2048, 32
	accumulated     = 4 // micro-batches per optimizer step
)

func run(w io.Writer) error {
	var err error
	if e := vram.Catch(func() { err = search(w) }); e != nil {
		return e
	}
	return err
}

func search(w io.Writer) error {
	dev := vram.Sim(0)
	g := vram.NewGenerator(1)
	model := nn.NewSequential(nn.NewLinear(in, hidden, dev, vram.WithGenerator(g)), nn.NewReLU(),
		nn.NewLinear(hidden, out, dev, vram.WithGenerator(g)))
	defer nn.Release(model)
	opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.01})
	if err != nil {
		return err
	}
	lossOf := func(batch int) *vram.Tensor {
		x := vram.Full(vram.Shape{batch, in}, 0.5, dev)
		y := vram.Zeros(vram.Shape{batch, out}, dev)
		return nn.MSELoss(model.Forward(x), y)
	}
	// One training step; running out of memory panics, and FindBatchSize
	// catches it, releases the tensors the step made and empties the cache.
	// The gradients belong to the model, so the step drops them itself,
	// even when its backward runs out of memory halfway.
	step := func(batch int) error {
		defer opt.ZeroGrad()
		lossOf(batch).Backward()
		return nil
	}
	base := vram.MemoryAllocated(dev)
	start := time.Now()
	batch, rep, err := tune.FindBatchSize(dev, step, tune.Options{Margin: 0.9})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "trials:")
	for _, t := range rep.Trials {
		mark := "fits"
		if !t.Fit {
			mark = "OOM"
		}
		fmt.Fprintf(w, " %d %s,", t.Batch, mark)
	}
	fmt.Fprintf(w, "\nlargest batch that fits: %d (%d trials, %v); with a 10%% margin: %d\n",
		rep.Largest, len(rep.Trials), time.Since(start).Round(time.Millisecond), batch)
	fmt.Fprintf(w, "allocated after the search: %d bytes above the model (want 0)\n", vram.MemoryAllocated(dev)-base)

	vram.Tidy(func() {
		lossOf(batch).Backward()
		opt.Step()
		opt.ZeroGrad()
	})
	fmt.Fprintf(w, "a step at batch %d ran\n", batch)

	// A batch larger than fits, as accumulated micro-batches.
	loss, err := nn.Accumulate(accumulated, nil, func(int) *vram.Tensor { return lossOf(batch) })
	if err != nil {
		return err
	}
	opt.Step()
	opt.ZeroGrad()
	fmt.Fprintf(w, "an accumulated step of %d × %d = %d samples ran (loss %.3f)\n", accumulated, batch, accumulated*batch, loss)
	return nil
}
