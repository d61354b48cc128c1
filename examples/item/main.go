// Item shows why a running loss should be accumulated as a plain number
// with Item() (Python's .item()) rather than as a tensor: adding
// differentiable one-element tensors keeps growing their autograd graph,
// and vram warns about it.
//
//	go run ./examples/item
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
)

func main() {
	cmdline.NoArgs("Item shows why a running loss should be added up with Item() rather than as a tensor.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "item:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	return vram.Catch(func() { item(w) })
}

// iterations is how many losses each loop adds up; vram warns once a chain
// of 100 additions has grown without Backward.
const iterations = 150

func item(w io.Writer) {
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	// Collect vram's warnings instead of letting them go to the log.
	var warnings []vram.Warning
	old := vram.SetWarningHandler(func(wr vram.Warning) { warnings = append(warnings, wr) })
	defer vram.SetWarningHandler(old)

	liveStorages := func() int64 { s := vram.Storage(dev); return s.Allocs - s.Frees }
	start, startTensors := vram.MemoryAllocated(dev), liveStorages()

	// The wrong way: total += iter_loss. Each addition records a graph node
	// that keeps the previous ones, and every loss they reach, alive.
	vram.Tidy(func() {
		total := vram.Scalar(0, dev)
		for range iterations {
			iterLoss := vram.Randn(vram.Shape{3, 4}, dev, vram.WithGrad()).Mean()
			total = total.Add(iterLoss) // use total += iterLoss.Item() instead
		}
		fmt.Fprintf(w, "wrong: total = total.Add(iterLoss), %d times: %d more bytes and %d more tensors live, total is still a %s tensor (grad_fn %q)\n",
			iterations, vram.MemoryAllocated(dev)-start, liveStorages()-startTensors, total.Device(), total.GradFn())
	}) // Tidy releases all of it at last
	for _, wr := range warnings {
		fmt.Fprintf(w, "vram warned: %s\n", wr.Message)
	}
	if len(warnings) == 0 {
		fmt.Fprintln(w, "vram gave no warning")
	}

	// The right way: Item returns a float64 that holds no graph and no
	// device memory, and each iteration's tensors are released.
	warnings = nil
	var total float64
	for range iterations {
		vram.Tidy(func() {
			iterLoss := vram.Randn(vram.Shape{3, 4}, dev, vram.WithGrad()).Mean()
			total += iterLoss.Item()
		})
	}
	fmt.Fprintf(w, "right: total += iterLoss.Item(), %d times: %d more bytes and %d more tensors live, total = %.4f (a float64), %d warnings\n",
		iterations, vram.MemoryAllocated(dev)-start, liveStorages()-startTensors, total, len(warnings))
}
