package vram_test

import (
	"fmt"

	"github.com/vramgo/vram"
)

// ConfigFromLookup reads vram's variables from any source; the program
// then gives the Config, changed where it wants, to vram.Configure before
// its first use of a device.
func ExampleConfigFromLookup() {
	env := map[string]string{
		"VRAM_SIM_DEVICES": "2x24GiB,80GiB",
		"VRAM_ALLOC_CONF":  "policy:pytorch,expandable_segments:True",
	}
	cfg, err := vram.ConfigFromLookup(func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.SimDevices)
	fmt.Println(cfg.Alloc)

	env["VRAM_SIM_DEVICES"] = "lots"
	_, err = vram.ConfigFromLookup(func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
	fmt.Println(err != nil)
	// Output:
	// [25769803776 25769803776 85899345920]
	// policy:pytorch,expandable_segments:True
	// true
}

// The caching allocator keeps the memory of released tensors for the next
// ones; EmptyCache gives it back to the device (torch.cuda.empty_cache).
func ExampleEmptyCache() {
	dev := vram.Sim(3)
	vram.EmptyCache(dev)
	before := vram.MemoryReserved(dev)

	mib := func() int64 { return (vram.MemoryReserved(dev) - before) >> 20 }

	t := vram.Empty(vram.Shape{16 << 20}, dev) // 64 MiB of float32
	fmt.Println("reserved with the tensor:", mib(), "MiB")
	t.Release()
	fmt.Println("after Release:", mib(), "MiB")
	vram.EmptyCache(dev)
	fmt.Println("after EmptyCache:", mib(), "MiB")
	// Output:
	// reserved with the tensor: 64 MiB
	// after Release: 64 MiB
	// after EmptyCache: 0 MiB
}
