package memory_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

// The allocator over a simulated 1 GiB device: a freed block stays cached
// (reserved) until EmptyCache gives it back.
func Example() {
	a := memory.New(memory.NewSimArena(1<<30), memory.Config{})
	b, err := a.Alloc(100<<20, 0, "weights")
	if err != nil {
		panic(err)
	}
	s := a.Stats()
	fmt.Println("allocated:", s.AllocatedBytes[memory.StatAll].Current>>20, "MiB, reserved:", s.ReservedBytes[memory.StatAll].Current>>20, "MiB")
	a.Free(b)
	s = a.Stats()
	fmt.Println("after Free: allocated", s.AllocatedBytes[memory.StatAll].Current>>20, "MiB, reserved", s.ReservedBytes[memory.StatAll].Current>>20, "MiB")
	a.EmptyCache()
	fmt.Println("after EmptyCache: reserved", a.Stats().ReservedBytes[memory.StatAll].Current>>20, "MiB")
	// Output:
	// allocated: 100 MiB, reserved: 100 MiB
	// after Free: allocated 0 MiB, reserved 100 MiB
	// after EmptyCache: reserved 0 MiB
}

func ExampleParseConfig() {
	cfg, err := memory.ParseConfig("policy:pytorch,expandable_segments:True,max_split_size_mb:512")
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Policy, cfg.ExpandableSegments, cfg.MaxSplitSizeMB)
	_, err = memory.ParseConfig("max_split_size_mb:10")
	fmt.Println(err)
	// Output:
	// pytorch true 512
	// memory: VRAM_ALLOC_CONF: max_split_size_mb:10: expected a whole number of MiB of at least 20 (the large segment size) and at most 1099511627776
}

func ExampleOutOfMemoryError() {
	a := memory.New(memory.NewSimArena(64<<20), memory.Config{})
	if _, err := a.Alloc(40<<20, 0, "weights"); err != nil {
		panic(err)
	}
	_, err := a.Alloc(40<<20, 0, "activations")
	var oom *memory.OutOfMemoryError
	if errors.As(err, &oom) {
		fmt.Println("asked", oom.Requested>>20, "MiB with", oom.Allocated>>20, "MiB allocated of", oom.Capacity>>20)
		fmt.Println(oom.Fix)
	}
	// Output:
	// asked 40 MiB with 40 MiB allocated of 64
	// no setting makes it fit: it needs 16.00 MiB more memory under the current settings; release tensors, or ask for at most 24.00 MiB, or use a larger device
}

// Replaying the ResNet-50 trace under PyTorch's policy and vram's.
func ExampleReplay() {
	f, err := os.Open("testdata/resnet50_train.trace.gz")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	events, err := trace.ReadTextAll(f)
	if err != nil {
		panic(err)
	}
	for _, conf := range []string{"policy:pytorch", "policy:vram"} {
		cfg, _ := memory.ParseConfig(conf)
		r, err := memory.Replay(events, memory.NewSimArena(80<<30), cfg)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: reserved %.3fx the peak requested\n", conf, float64(r.PeakReserved)/float64(r.PeakRequested))
	}
	// Output:
	// policy:pytorch: reserved 1.206x the peak requested
	// policy:vram: reserved 1.018x the peak requested
}
