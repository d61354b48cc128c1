// Release shows how device memory is given back: Release is Python's del,
// views share their base's storage, and Tidy releases every tensor created
// inside it except those passed to Keep.
//
//	go run ./examples/release
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
)

func main() {
	cmdline.NoArgs("Release shows how Release, views and Tidy give device memory back.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	return vram.Catch(func() { release(w) })
}

// mib formats bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func release(w io.Writer) {
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	used := func() string { return mib(vram.MemoryAllocated(dev)) }
	fmt.Fprintf(w, "on %s, at start:                           %s\n", dev, used())

	// Go's garbage collector does not see device memory: release what you
	// are done with, as `del out, loss` does in Python.
	out := vram.Randn(vram.Shape{1024, 1024}, dev) // 4 MiB of float32
	fmt.Fprintf(w, "out := vram.Randn(vram.Shape{1024, 1024}):  %s\n", used())
	sq := out.Square()
	loss := sq.Mean()
	fmt.Fprintf(w, "sq := out.Square(); loss := sq.Mean():      %s\n", used())
	sq.Release()
	fmt.Fprintf(w, "sq.Release():                               %s\n", used())

	// A view shares its base's storage: releasing the base alone frees
	// nothing while the view still needs the memory.
	flat := out.Reshape(-1)
	out.Release()
	fmt.Fprintf(w, "flat := out.Reshape(-1); out.Release():     %s (flat still holds the storage)\n", used())
	flat.Release()
	loss.Release()
	loss.Release() // Release is idempotent
	fmt.Fprintf(w, "flat.Release(); loss.Release():             %s\n", used())

	// Tidy releases every tensor created inside it, except those passed to
	// Keep, which the caller then owns.
	var kept *vram.Tensor
	vram.Tidy(func() {
		x := vram.Randn(vram.Shape{512, 512}, dev)
		y := x.MatMul(x).Relu()
		kept = vram.Keep(y.Sum())
		fmt.Fprintf(w, "inside Tidy, after x, x@x, relu, sum:       %s\n", used())
	})
	fmt.Fprintf(w, "after Tidy (only the kept sum is left):     %s, sum = %.1f\n", used(), kept.Item())
	kept.Release()
	fmt.Fprintf(w, "kept.Release():                             %s\n", used())

	// A training loop that wraps each step in Tidy stays flat.
	for step := range 3 {
		vram.Tidy(func() {
			x := vram.Randn(vram.Shape{256, 256}, dev)
			x.MatMul(x).Mean()
		})
		fmt.Fprintf(w, "after step %d in Tidy:                       %s\n", step, used())
	}
	st := vram.Storage(dev)
	fmt.Fprintf(w, "storages created %d, freed %d, leaked to the garbage collector %d\n", st.Allocs, st.Frees, st.Leaked)
}
