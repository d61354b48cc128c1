// Nograd shows what NoGrad (torch.no_grad) saves during inference: without
// it, a forward pass through a model whose parameters require grad records
// a graph that keeps activations alive for a backward pass that never comes.
//
//	go run ./examples/nograd
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
)

func main() {
	cmdline.NoArgs("Nograd shows the memory that NoGrad saves in a forward pass for inference.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nograd:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	return vram.Catch(func() { noGrad(w) })
}

// mib formats bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%6.2f MiB", float64(n)/(1<<20)) }

// inference runs model on x, inside NoGrad when noGrad is set, and returns
// the bytes the output held alive (with the graph behind it) and the peak
// of the forward pass, both above what was live before.
func inference(model nn.Module, x *vram.Tensor, noGrad bool) (held, peak int64, requiresGrad bool) {
	dev := x.Device()
	base := vram.MemoryAllocated(dev)
	vram.ResetPeakMemoryStats(dev)
	var out *vram.Tensor
	if noGrad {
		vram.NoGrad(func() { out = model.Forward(x) })
	} else {
		out = model.Forward(x)
	}
	held = vram.MemoryAllocated(dev) - base
	peak = vram.MaxMemoryAllocated(dev) - base
	requiresGrad = out.RequiresGrad()
	out.Release() // also frees the graph and the activations it saved
	return held, peak, requiresGrad
}

func noGrad(w io.Writer) {
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	vram.ManualSeed(1)
	model := nn.NewSequential(
		nn.NewLinear(256, 1024, dev), nn.NewReLU(),
		nn.NewLinear(1024, 1024, dev), nn.NewReLU(),
		nn.NewLinear(1024, 10, dev),
	)
	defer nn.Release(model)
	model.Eval()
	x := vram.Randn(vram.Shape{512, 256}, dev)
	defer x.Release()
	fmt.Fprintf(w, "model 256-1024-1024-10 on %s: parameters %s, input %s\n",
		dev, mib(vram.MemoryAllocated(dev)-x.Bytes()), mib(x.Bytes()))

	held, peak, rg := inference(model, x, false)
	fmt.Fprintf(w, "without NoGrad: output requires grad %-5v  held after forward %s  peak %s\n", rg, mib(held), mib(peak))
	heldNG, peakNG, rgNG := inference(model, x, true)
	fmt.Fprintf(w, "with NoGrad:    output requires grad %-5v  held after forward %s  peak %s\n", rgNG, mib(heldNG), mib(peakNG))
	fmt.Fprintf(w, "NoGrad kept %s less alive after the forward pass\n", mib(held-heldNG))
}
