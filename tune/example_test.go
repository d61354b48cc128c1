package tune_test

import (
	"fmt"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/tune"
)

// FindBatchSize on the 64 MiB simulated GPU of this package's tests: a step
// that holds 200,000 bytes a sample (an input and an activation) fits
// up to the batch it returns, and the search leaves nothing allocated.
func ExampleFindBatchSize() {
	dev := vram.Sim(0)
	step := func(batch int) error {
		// A real step would compute; allocating what it holds is enough here.
		x := vram.Empty(vram.Shape{batch, 25_000}, dev) // the input, 100,000 bytes a sample
		h := vram.Empty(vram.Shape{batch, 25_000}, dev) // an activation, as much again
		_, _ = x, h
		return nil // the search releases x and h: each step runs inside vram.Tidy
	}
	batch, rep, err := tune.FindBatchSize(dev, step, tune.Options{Margin: 0.9})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("largest batch that fits: %d, with a 10%% margin: %d, after %d trials\n", rep.Largest, batch, len(rep.Trials))
	fmt.Println("allocated after the search:", vram.MemoryAllocated(dev))
	// Output:
	// largest batch that fits: 335, with a 10% margin: 301, after 18 trials
	// allocated after the search: 0
}
