// Emptycache walks through the usual PyTorch demonstration of GPU memory
// (allocate ten large tensors, del them, torch.cuda.empty_cache()) on a
// simulated GPU (or on cuda:0 when there is one): the memory reserved on the
// device rises when tensors are allocated, stays up after they are
// released (the caching allocator keeps it for the next tensors), and falls
// after EmptyCache gives it back to the device.
//
//	go run ./examples/emptycache
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
)

func main() {
	cmdline.NoArgs("Emptycache shows the reserved memory of a device rise on allocation, stay after release, and fall after EmptyCache.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "emptycache:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	dev := vram.Sim(0)
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	return vram.Catch(func() { walkthrough(w, dev) })
}

func walkthrough(w io.Writer, dev vram.Device) {
	show := func(what string) {
		fmt.Fprintf(w, "%-42s allocated %9.1f MiB   reserved %9.1f MiB\n", what,
			float64(vram.MemoryAllocated(dev))/(1<<20), float64(vram.MemoryReserved(dev))/(1<<20))
	}
	show("initial usage on " + dev.String() + ":")

	// The demonstration's loop: ten tensors of 10,000,000 x 10 float32 (about 381 MiB
	// each) from torch.randn in PyTorch; a tenth of that here so that it runs
	// anywhere, and uninitialised (torch.empty): the values do not change the
	// memory, and drawing 100 million normal numbers on the CPU takes seconds.
	var tensors []*vram.Tensor
	for range 10 {
		tensors = append(tensors, vram.Empty(vram.Shape{1_000_000, 10}, dev))
	}
	show("after allocating 10 tensors:")

	for _, t := range tensors { // Python: del tensorList
		t.Release()
	}
	show("after releasing them:")

	vram.EmptyCache(dev) // torch.cuda.empty_cache()
	show("after EmptyCache:")
}
