// Devices shows how to choose a device, move tensors and modules between
// devices with To, CUDA and CPU, and ask a tensor where it lives
// (PyTorch's to(), cuda(), get_device and set_device).
//
//	go run ./examples/devices
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
	cmdline.NoArgs("Devices shows how to choose a device and move tensors and modules between devices.")
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devices:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	return vram.Catch(func() { devices(w) })
}

// show prints a line of code and what it gave.
func show(w io.Writer, code, result string) {
	fmt.Fprintf(w, "%-34s -> %s\n", code, result)
}

func devices(w io.Writer) {
	// torch.cuda.is_available(): pick cuda:0 when there is a GPU, else the CPU.
	dev := vram.CPU
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	fmt.Fprintf(w, "CUDA available: %v (%d GPUs); using %s\n", vram.CUDAAvailable(), vram.DeviceCount(), dev)

	// Devices can also come from strings, as torch.device("cuda:0") does.
	parsed, err := vram.ParseDevice("cpu")
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(w, "ParseDevice(%q) = %s\n", "cpu", parsed)

	// A tensor starts on the default device (the CPU unless
	// SetDefaultDevice changed it); To returns it on another device.
	a := vram.Zeros(vram.Shape{4, 3})
	defer a.Release()
	show(w, "a := vram.Zeros(vram.Shape{4, 3})", "a.Device() = "+a.Device().String())
	// get_device(): -1 on the CPU, the GPU's index otherwise.
	show(w, "a.GetDevice()", fmt.Sprint(a.GetDevice()))
	b := a.To(dev)
	defer b.Release()
	show(w, "b := a.To(dev)", "b.Device() = "+b.Device().String())

	// Or create it on the device directly: a Device is an option.
	c := vram.Ones(vram.Shape{4, 3}, dev)
	defer c.Release()

	// An operation on tensors of one device leaves its result there.
	sum := b.Add(c)
	defer sum.Release()
	show(w, "sum := b.Add(c)", "sum.Device() = "+sum.Device().String())

	// t.CUDA() and t.CUDA(1) are PyTorch's .cuda() and .cuda(1): without an
	// index they use the current device, which SetDevice changes
	// process-wide (torch.cuda.set_device).
	if vram.CUDAAvailable() {
		g := a.CUDA()
		defer g.Release()
		show(w, "g := a.CUDA()", fmt.Sprintf("%s (current device %d; g.GetDevice() = %d)", g.Device(), vram.CurrentDevice(), g.GetDevice()))
		back := g.CPU()
		defer back.Release()
		show(w, "g.CPU()", back.Device().String())
	} else {
		fmt.Fprintf(w, "a.CUDA() needs a GPU: this machine has none, so the code above used %s\n", dev)
	}
	// SetDevice refuses a GPU the machine does not have.
	if err := vram.SetDevice(vram.DeviceCount()); err != nil {
		show(w, fmt.Sprintf("vram.SetDevice(%d)", vram.DeviceCount()), err.Error())
	}

	// A simulated GPU computes on the CPU but allocates like a GPU; when
	// the sim backend is present, moving there and back shows the round trip.
	if sim := vram.Sim(0); sim.Available() {
		s := a.To(sim)
		defer s.Release()
		back := s.CPU()
		defer back.Release()
		show(w, "s := a.To(vram.Sim(0))", s.Device().String())
		show(w, "s.CPU()", back.Device().String())
	}

	// Modules move in place: every parameter keeps its identity, so an
	// optimizer that holds them sees the move (clf.to(device)).
	clf := nn.NewLinear(3, 2)
	defer nn.Release(clf)
	clf.To(dev)
	for _, p := range clf.NamedParameters() {
		show(w, "clf.To(dev)", fmt.Sprintf("parameter %s on %s", p.Name, p.Tensor.Device()))
	}
	if sim := vram.Sim(0); sim.Available() && dev != sim {
		clf.To(sim) // and back: modules move as often as needed
		show(w, "clf.To(vram.Sim(0))", "weight on "+clf.Weight.Device().String())
		clf.To(dev)
		show(w, "clf.To(dev)", "weight on "+clf.Weight.Device().String())
	}
	y := clf.Forward(b)
	defer y.Release()
	show(w, "y := clf.Forward(b)", fmt.Sprintf("shape %v on %s", y.Shape(), y.Device()))
}
