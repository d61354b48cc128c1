package monitor_test

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/monitor"
)

// GPUtil's showUtilization, through NVML.
func ExampleShowUtilization() {
	if err := monitor.ShowUtilization(os.Stdout); err != nil {
		fmt.Println(err) // without a driver: "monitor: no NVIDIA driver: ..."
	}
}

// Pick GPUs from readings, as GPUtil.getAvailable does: here from readings
// recorded on a machine with two H200s.
func ExampleAvailable() {
	src, err := monitor.OpenRecorded("testdata/h200x2.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	r, _ := src.Read()
	fmt.Println(monitor.Available(r.GPUs, monitor.Options{}))
	fmt.Println(monitor.Available(r.GPUs, monitor.Options{Order: monitor.OrderLoad, Limit: -1, MaxLoad: 0.9}))
	fmt.Println(monitor.Available(r.GPUs, monitor.Options{MinFreeBytes: 130 << 30, Limit: -1}))
	// Output:
	// [0]
	// [0 1]
	// [0]
}

// Expose a program's allocator statistics to Prometheus. With vram's root
// package the function is func() memory.Stats { return vram.MemoryStats(dev) }.
func ExampleRegisterAllocator() {
	alloc := memory.New(memory.NewSimArena(64<<20), memory.Config{})
	reg := prometheus.NewRegistry()
	if err := monitor.RegisterAllocator(reg, "sim:0", 0, alloc.Stats); err != nil {
		fmt.Println(err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go monitor.Serve(ctx, ln, reg) // metrics at http://ADDR/metrics until cancel
}
