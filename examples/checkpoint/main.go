// Checkpoint trains one step of a deep stack of Linear + GELU + Dropout
// blocks twice, plainly and with every block wrapped in nn.Checkpoint, and
// shows that checkpointing gives the same gradients (dropout masks
// included: they are replayed in the recompute) for a fraction of the
// memory above the parameters, at the cost of a second forward. It runs on
// a simulated GPU, or on the first CUDA device when there is one.
//
//	go run ./examples/checkpoint
package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/nn"
)

func main() {
	cmdline.NoArgs("Checkpoint runs a training step of a deep stack of blocks with and without activation checkpointing and compares their memory and gradients.")
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint:", err)
		os.Exit(1)
	}
}

// setup gives the process a small simulated GPU; it must run before any
// device is used.
func setup() error {
	return vram.Configure(vram.Config{SimDevices: []int64{512 << 20}})
}

const (
	depth = 12
	width = 256
	batch = 1024
)

func run(w io.Writer) error {
	return vram.Catch(func() { compare(w) })
}

// model returns the stack, its blocks checkpointed or not; the same seed
// gives the same weights.
func model(dev vram.Device, checkpointed bool) *nn.Sequential {
	g := vram.NewGenerator(1)
	m := nn.NewSequential()
	for range depth {
		var blk nn.Module = nn.NewSequential(nn.NewLinear(width, width, dev, vram.WithGenerator(g)), nn.NewGELU(), nn.NewDropout(0.1))
		if checkpointed {
			blk = nn.Checkpoint(blk)
		}
		m.Append(blk)
	}
	return m
}

type result struct {
	peak  int64
	took  time.Duration
	grads [][]float64
}

// step runs one forward and backward and measures the peak memory above
// the parameters and input.
func step(dev vram.Device, checkpointed bool) result {
	m := model(dev, checkpointed)
	defer nn.Release(m)
	x := vram.Randn(vram.Shape{batch, width}, dev, vram.WithGenerator(vram.NewGenerator(2)))
	defer x.Release()
	vram.ManualSeed(3) // the same dropout masks in both runs
	vram.Synchronize(dev)
	base := vram.MemoryAllocated(dev)
	vram.ResetPeakMemoryStats(dev)
	start := time.Now()
	vram.Tidy(func() {
		y := m.Forward(x)
		y.Mul(y).Mean().Backward()
	})
	vram.Synchronize(dev)
	r := result{peak: vram.MaxMemoryAllocated(dev) - base, took: time.Since(start)}
	for _, p := range m.Parameters() {
		r.grads = append(r.grads, p.Grad().Float64s())
	}
	return r
}

func compare(w io.Writer) {
	dev := vram.Sim(0)
	if vram.CUDAAvailable() {
		dev = vram.CUDA(0)
	}
	fmt.Fprintf(w, "%d × (Linear %d + GELU + Dropout 0.1), batch %d, on %s\n", depth, width, batch, dev)
	plain := step(dev, false)
	ck := step(dev, true)
	diff := 0.0
	for i := range plain.grads {
		for j := range plain.grads[i] {
			diff = math.Max(diff, math.Abs(plain.grads[i][j]-ck.grads[i][j]))
		}
	}
	fmt.Fprintf(w, "plain:        peak %6.1f MiB above the parameters, %v\n", mib(plain.peak), plain.took.Round(time.Millisecond))
	fmt.Fprintf(w, "checkpointed: peak %6.1f MiB above the parameters, %v\n", mib(ck.peak), ck.took.Round(time.Millisecond))
	fmt.Fprintf(w, "memory saved: %.1fx\n", float64(plain.peak)/float64(ck.peak))
	fmt.Fprintf(w, "largest gradient difference: %g\n", diff)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
