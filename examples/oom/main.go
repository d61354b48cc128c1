// Oom runs a simulated 1 GiB GPU out of memory through fragmentation and
// prints the diagnosis: what was asked for, what the device and this process
// hold, how much of the reserve is fragmented, the largest live allocations
// by region, and a setting that the allocator checked would have made the
// request fit. It uses PyTorch's policy (policy:pytorch), which fragments on
// this pattern: half of the memory is free, in holes too small to use.
//
//	go run ./examples/oom
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/examples/internal/cmdline"
	"github.com/vramgo/vram/memory"
)

func main() {
	cmdline.NoArgs("Oom runs a simulated 1 GiB GPU out of memory through fragmentation and prints the diagnosis.")
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "oom:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "oom:", err)
		os.Exit(1)
	}
}

// setup makes sim:0 a 1 GiB device with PyTorch's allocator policy,
// before its first use.
func setup() error {
	return vram.Configure(vram.Config{
		SimDevices: []int64{1 << 30},
		Alloc:      memory.Config{Policy: memory.PolicyPyTorch},
	})
}

func run(w io.Writer) error {
	dev := vram.Sim(0)
	var keep []*vram.Tensor
	defer func() {
		for _, t := range keep {
			t.Release()
		}
	}()
	// Fragment the device: 8 MiB activations come two to a 20 MiB segment;
	// freeing every other one leaves a live block in each segment, so none
	// can go back to the device, and the 12 MiB holes are too small for a
	// 100 MiB request.
	vram.Region("activations", func() {
		var all []*vram.Tensor
		for range 100 {
			all = append(all, vram.Empty(vram.Shape{8 << 18}, dev)) // 8 MiB of float32
		}
		for i, t := range all {
			if i%2 == 0 {
				t.Release()
			} else {
				keep = append(keep, t)
			}
		}
	})
	err := vram.Catch(func() {
		vram.Region("logits", func() {
			keep = append(keep, vram.Empty(vram.Shape{100 << 18}, dev)) // 100 MiB
		})
	})
	var oom *memory.OutOfMemoryError
	if !errors.As(err, &oom) {
		return fmt.Errorf("expected an out-of-memory error, got %v", err)
	}
	fmt.Fprintln(w, "caught:", errors.Is(err, vram.ErrOutOfMemory))
	fmt.Fprintln(w, oom.Error())
	// The allocator keeps working after an OOM.
	small := vram.Ones(vram.Shape{1024}, dev)
	fmt.Fprintln(w, "a small tensor still fits:", small.Sum().Item())
	small.Release()
	return nil
}
