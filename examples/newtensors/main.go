// Newtensors shows the New... methods, which create a tensor with the
// dtype and device of the tensor they are called on (PyTorch's new_ones,
// new_zeros, new_full, new_empty, new_tensor), so code stays device-agnostic.
//
//	go run ./examples/newtensors
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "newtensors:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	return vram.Catch(func() { newTensors(w) })
}

func describe(w io.Writer, what string, t *vram.Tensor) {
	fmt.Fprintf(w, "%-34s shape %-7v %-8s on %s\n", what, t.Shape(), t.DType(), t.Device())
}

func newTensors(w io.Writer) {
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	// ones = torch.ones((2,), dtype=torch.float64).cuda(0)
	ones := vram.Ones(vram.Shape{2}, vram.Float64, dev)
	defer ones.Release()
	describe(w, "ones := vram.Ones(2, Float64, dev)", ones)

	// Each New... call inherits float64 and the device from ones.
	made := []struct {
		what string
		t    *vram.Tensor
	}{
		{"ones.NewOnes(3, 4)", ones.NewOnes(3, 4)},
		{"ones.NewZeros(2, 2)", ones.NewZeros(2, 2)},
		{"ones.NewFull([]int{3}, 7)", ones.NewFull([]int{3}, 7)},
		{"ones.NewEmpty(5)", ones.NewEmpty(5)},
		{"ones.NewTensor([]int{1, 2, 3})", ones.NewTensor([]int{1, 2, 3})},
		{"ones.NewRandn(2, 4)", ones.NewRandn(2, 4)},
	}
	for _, m := range made {
		describe(w, m.what, m.t)
		defer m.t.Release()
	}
	fmt.Fprintf(w, "ones.NewFull([]int{3}, 7) holds %v\n", made[2].t.Float64s())

	// A plain factory uses the defaults instead: float32 on the default
	// device, whatever device ones is on.
	r := vram.Randn(vram.Shape{2, 4})
	defer r.Release()
	describe(w, "vram.Randn(2, 4)", r)
}
