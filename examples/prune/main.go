// Prune trains a small classifier on the CPU, prunes 80% of its weights by
// magnitude across all layers together (package nn/prune), fine-tunes it
// with the masks applied in every forward pass, and makes the pruning
// permanent. It prints the accuracy at each stage, the sparsity of each
// parameter, and, on a simulated GPU, the memory the masks take while the
// model is pruned and that Remove gives back.
//
//	go run ./examples/prune
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/prune"
	"github.com/vramgo/vram/optim"
)

func main() {
	cmdline.NoArgs("Prune trains a classifier, prunes 80% of its weights across layers, fine-tunes it and makes the pruning permanent.")
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "prune:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "prune:", err)
		os.Exit(1)
	}
}

// setup gives the process a small simulated GPU; it must run before any
// device is used.
func setup() error {
	return vram.Configure(vram.Config{SimDevices: []int64{256 << 20}})
}

const (
	features = 32
	classes  = 8
	hidden   = 128
)

// data returns n points labelled by the argmax of a fixed random linear
// map: a task a small MLP learns well.
func data(n int, seed uint64) (x, y *vram.Tensor) {
	teacher := vram.Randn(vram.Shape{features, classes}, vram.WithGenerator(vram.NewGenerator(42)))
	defer teacher.Release()
	x = vram.Randn(vram.Shape{n, features}, vram.WithGenerator(vram.NewGenerator(seed)))
	s := x.MatMul(teacher)
	defer s.Release()
	return x, s.ArgMax(1, false)
}

func run(w io.Writer) error {
	return vram.Catch(func() { demo(w) })
}

func demo(w io.Writer) {
	g := vram.WithGenerator(vram.NewGenerator(1))
	model := nn.NewSequential(
		nn.NewLinear(features, hidden, g), nn.NewReLU(),
		nn.NewLinear(hidden, hidden, g), nn.NewReLU(),
		nn.NewLinear(hidden, classes, g))
	defer nn.Release(model)
	x, y := data(2048, 2)
	defer x.Release()
	defer y.Release()
	xt, yt := data(2048, 3)
	defer xt.Release()
	defer yt.Release()
	opt, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-4})
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	train := func(steps int) {
		for range steps {
			vram.Tidy(func() {
				opt.ZeroGrad()
				nn.CrossEntropyLoss(model.Forward(x), y).Backward()
				opt.Step()
			})
		}
		opt.ZeroGrad()
	}

	train(60)
	fmt.Fprintf(w, "trained:           accuracy %.2f%%\n", 100*accuracy(model, xt, yt))

	// 80% of all the weights, smallest magnitudes first, across layers.
	if err := prune.GlobalUnstructured(prune.Params(model, "weight"), prune.Fraction(0.8)); err != nil {
		panic(err)
	}
	fmt.Fprintf(w, "pruned 80%%:        accuracy %.2f%%\n", 100*accuracy(model, xt, yt))
	train(30) // the same optimizer: it holds the same weight tensors
	fmt.Fprintf(w, "fine-tuned:        accuracy %.2f%%\n", 100*accuracy(model, xt, yt))

	stats, total := prune.Sparsity(model)
	for _, s := range stats {
		fmt.Fprintf(w, "  %-9s %5d of %5d zero (%.1f%%)\n", s.Name, s.Zeros, s.Total, 100*s.Fraction())
	}
	fmt.Fprintf(w, "  %-9s %5d of %5d zero (%.1f%%)\n", total.Name, total.Zeros, total.Total, 100*total.Fraction())

	// The masks move with the model; Remove folds them in and frees them.
	dev := vram.Sim(0)
	base := vram.MemoryAllocated(dev)
	model.To(dev)
	withMasks := vram.MemoryAllocated(dev) - base
	n, err := prune.RemoveAll(model)
	if err != nil {
		panic(err)
	}
	permanent := vram.MemoryAllocated(dev) - base
	fmt.Fprintf(w, "on %s: %d bytes with masks, %d after removing %d masks\n", dev, withMasks, permanent, n)
	xd, yd := xt.To(dev), yt.To(dev)
	defer xd.Release()
	defer yd.Release()
	_, after := prune.Sparsity(model)
	fmt.Fprintf(w, "permanent:         accuracy %.2f%%, %.1f%% of the parameters zero\n", 100*accuracy(model, xd, yd), 100*after.Fraction())
}

// accuracy returns the share of x's rows that model classifies as y.
func accuracy(model nn.Module, x, y *vram.Tensor) (acc float64) {
	vram.NoGrad(func() {
		vram.Tidy(func() {
			acc = model.Forward(x).ArgMax(1, false).Eq(y).Float().Mean().Item()
		})
	})
	return acc
}
