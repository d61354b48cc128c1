// Devicemismatch shows the error an operation raises when its tensors live
// on different devices, how to catch it with vram.Catch and errors.As, and
// the fix: move one tensor first.
//
//	go run ./examples/devicemismatch
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
)

func main() {
	cmdline.NoArgs("Devicemismatch shows the error of an operation on tensors of different devices, how to catch it, and the fix.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devicemismatch:", err)
		os.Exit(1)
	}
}

// secondDevice returns a device other than the CPU to mix with it: a GPU
// when there is one, else the simulated GPU sim:0 when the sim backend is
// present.
func secondDevice() (vram.Device, bool) {
	if vram.CUDAAvailable() {
		return vram.CUDA(0), true
	}
	if sim := vram.Sim(0); sim.Available() {
		return sim, true
	}
	return vram.Device{}, false
}

func run(w io.Writer) error {
	other, ok := secondDevice()
	return show(w, other, ok)
}

// show demonstrates the mismatch between the CPU and other, or explains
// why it cannot when there is no other device (ok false).
func show(w io.Writer, other vram.Device, ok bool) error {
	if !ok {
		// With a single device nothing can be mixed. Asking for a missing
		// device is an error of its own kind, ErrUnavailable.
		fmt.Fprintln(w, "only one device here (cpu): a device mismatch needs two, such as cpu and cuda:0 or sim:0")
		err := vram.Catch(func() { vram.Zeros(vram.Shape{2}, vram.CUDA(0)) })
		fmt.Fprintf(w, "creating a tensor on cuda:0 instead: errors.Is(err, vram.ErrUnavailable) = %v\n  %v\n",
			errors.Is(err, vram.ErrUnavailable), err)
		fmt.Fprintln(w, "check vram.CUDAAvailable() first and fall back to vram.CPU")
		return nil
	}
	return vram.Catch(func() { mismatch(w, other) })
}

func mismatch(w io.Writer, other vram.Device) {
	a := vram.Ones(vram.Shape{2, 3}) // on the CPU
	defer a.Release()
	b := vram.Ones(vram.Shape{2, 3}, other)
	defer b.Release()
	fmt.Fprintf(w, "a is on %s, b is on %s\n", a.Device(), b.Device())

	// The operation panics with a *vram.DeviceMismatchError; Catch turns
	// the panic back into an error.
	err := vram.Catch(func() { a.Add(b) })
	var dm *vram.DeviceMismatchError
	if !errors.As(err, &dm) {
		panic(fmt.Sprintf("want a device mismatch, got %v", err))
	}
	fmt.Fprintf(w, "a.Add(b) failed: op %q, expected %s, got %s (errors.Is(err, vram.ErrDevice) = %v)\n",
		dm.Op, dm.Expected, dm.Got, errors.Is(err, vram.ErrDevice))
	fmt.Fprintf(w, "  %v\n", err)

	// The fix: bring b to a's device (or the other way round).
	bb := b.To(a.Device())
	defer bb.Release()
	sum := a.Add(bb)
	defer sum.Release()
	fmt.Fprintf(w, "a.Add(b.To(a.Device())) works: %v on %s\n", sum.Float64s(), sum.Device())
}
