// Newtensors shows the tensor methods NewOnes, NewZeros, NewFull, NewEmpty,
// NewTensor and NewRandn, which create a tensor with the
// dtype and device of the tensor they are called on (PyTorch's new_ones,
// new_zeros, new_full, new_empty, new_tensor), and the ...Like factories,
// which also take its shape (zeros_like, ones_like, full_like, ...), so code
// stays device-agnostic.
//
//	go run ./examples/newtensors
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
)

func main() {
	cmdline.NoArgs("Newtensors shows the New... methods and ...Like factories that take a tensor's dtype and device.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "newtensors:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	return vram.Catch(func() { newTensors(w) })
}

func describe(w io.Writer, what string, t *vram.Tensor) {
	fmt.Fprintf(w, "%-51s shape %-7v %-8s on %s\n", what, t.Shape(), t.DType(), t.Device())
}

func newTensors(w io.Writer) {
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	// ones = torch.ones((2,), dtype=torch.float64).cuda(0)
	ones := vram.Ones(vram.Shape{2}, vram.Float64, dev)
	defer ones.Release()
	describe(w, "ones := vram.Ones(vram.Shape{2}, vram.Float64, dev)", ones)

	// Each New... call takes a vram.Shape, like the factories, and inherits
	// float64 and the device from ones.
	made := []struct {
		what string
		t    *vram.Tensor
	}{
		{"ones.NewOnes(vram.Shape{3, 4})", ones.NewOnes(vram.Shape{3, 4})},
		{"ones.NewZeros(vram.Shape{2, 2})", ones.NewZeros(vram.Shape{2, 2})},
		{"ones.NewFull(vram.Shape{3}, 7)", ones.NewFull(vram.Shape{3}, 7)},
		{"ones.NewEmpty(vram.Shape{5})", ones.NewEmpty(vram.Shape{5})},
		{"ones.NewTensor([]int{1, 2, 3}, nil)", ones.NewTensor([]int{1, 2, 3}, nil)},
		{"ones.NewRandn(vram.Shape{2, 4})", ones.NewRandn(vram.Shape{2, 4})},
	}
	for _, m := range made {
		describe(w, m.what, m.t)
		defer m.t.Release()
	}
	fmt.Fprintf(w, "ones.NewFull(vram.Shape{3}, 7) holds %v\n", made[2].t.Float64s())

	// The ...Like factories take the shape too (torch.zeros_like), and
	// options override what is inherited.
	like := []struct {
		what string
		t    *vram.Tensor
	}{
		{"vram.ZerosLike(ones)", vram.ZerosLike(ones)},
		{"vram.FullLike(ones, 7, vram.Int64)", vram.FullLike(ones, 7, vram.Int64)},
		{"vram.RandnLike(ones)", vram.RandnLike(ones)},
	}
	for _, m := range like {
		describe(w, m.what, m.t)
		defer m.t.Release()
	}

	// A plain factory uses the defaults instead: float32 on the default
	// device, whatever device ones is on.
	r := vram.Randn(vram.Shape{2, 4})
	defer r.Release()
	describe(w, "vram.Randn(vram.Shape{2, 4})", r)
}
