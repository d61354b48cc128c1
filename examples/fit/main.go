// Fit answers "does this model's training step fit in an 80 GiB GPU?" on any
// machine: a simulated 80 GiB device in shape-only mode keeps no data, so
// every operation only computes shapes and allocates through the caching
// allocator, as the real card would. It runs one AdamW training step of an
// MLP at two batch sizes and reports the peaks, or the out-of-memory
// diagnosis.
//
//	go run ./examples/fit
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

func main() {
	cmdline.NoArgs("Fit tells whether an MLP's training step fits in an 80 GiB GPU at two batch sizes, on a shape-only simulated GPU.")
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fit:", err)
		os.Exit(1)
	}
}

// setup makes sim:0 an 80 GiB shape-only device, before its first use.
func setup() error {
	return vram.Configure(vram.Config{SimDevices: []int64{80 << 30}, SimShapeOnly: true})
}

const (
	width  = 16384 // features per layer
	layers = 8
)

func run(w io.Writer) error {
	dev := vram.Sim(0)
	for _, batch := range []int{8192, 131072} {
		if err := step(w, dev, batch); err != nil {
			return err
		}
	}
	return nil
}

// step builds the model, runs one training step at the given batch size
// and reports what it needed.
func step(w io.Writer, dev vram.Device, batch int) error {
	var mods []nn.Module
	for i := range layers {
		mods = append(mods, nn.NewLinear(width, width, dev))
		if i < layers-1 {
			mods = append(mods, nn.NewReLU())
		}
	}
	model := nn.NewSequential(mods...)
	defer nn.Release(model)
	opt, err := optim.NewAdamW(model.Parameters(), optim.AdamConfig{})
	if err != nil {
		return err
	}
	defer opt.Release()
	vram.ResetPeakMemoryStats(dev)

	err = vram.Catch(func() {
		vram.Tidy(func() {
			x := vram.Randn(vram.Shape{batch, width}, dev)
			y := vram.Randn(vram.Shape{batch, width}, dev)
			var loss *vram.Tensor
			vram.Region("forward", func() { loss = nn.MSELoss(model.Forward(x), y) })
			loss.Backward()
			opt.Step()
			opt.ZeroGrad()
		})
	})
	fmt.Fprintf(w, "MLP %dx%d, batch %d, float32, AdamW on an 80 GiB GPU:\n", layers, width, batch)
	var oom *memory.OutOfMemoryError
	switch {
	case err == nil:
		fmt.Fprintf(w, "  fits: peak allocated %.1f GiB, peak reserved %.1f GiB\n",
			gib(vram.MaxMemoryAllocated(dev)), gib(vram.MaxMemoryReserved(dev)))
	case errors.As(err, &oom):
		fmt.Fprintf(w, "  does not fit:\n%s\n", indent(oom.Error()))
	default:
		return err
	}
	vram.EmptyCache(dev)
	return nil
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

func indent(s string) string {
	out := "    "
	for _, r := range s {
		out += string(r)
		if r == '\n' {
			out += "    "
		}
	}
	return out
}
