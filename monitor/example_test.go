package monitor_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

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

// Export GPUs to Prometheus. vram_monitor_up says whether the GPUs could
// be read; vram_gpu_up, per GPU, whether all of its queries succeeded.
// Here GPU 1's temperature query failed, as it does on a GPU fallen off
// the bus.
func ExampleNewCollector() {
	gpu := func(i int, errs ...string) monitor.GPU {
		return monitor.GPU{Index: i, UUID: fmt.Sprint("GPU-", i), Errors: errs,
			Memory: monitor.Memory{TotalBytes: 80 << 30, UsedBytes: 1 << 30, FreeBytes: 79 << 30, ReservedBytes: monitor.Unknown}}
	}
	src := monitor.NewRecorded([]monitor.Reading{{GPUs: []monitor.GPU{gpu(0), gpu(1, "temperature: NVML_ERROR_GPU_IS_LOST")}}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(monitor.NewCollector(src))
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range mfs {
		if name := mf.GetName(); name == "vram_monitor_up" || name == "vram_gpu_up" {
			for _, m := range mf.GetMetric() {
				labels := ""
				for _, l := range m.GetLabel() {
					labels += fmt.Sprintf(" %s=%q", l.GetName(), l.GetValue())
				}
				fmt.Printf("%s%s %g\n", name, labels, m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// vram_gpu_up gpu="0" uuid="GPU-0" 1
	// vram_gpu_up gpu="1" uuid="GPU-1" 0
	// vram_monitor_up 1
}

// Wait for a GPU to become free, as GPUtil.getFirstAvailable does with
// attempts and interval: here on readings recorded on two H200s, of which
// GPU 0 is idle.
func ExampleFirstAvailable() {
	src, err := monitor.OpenRecorded("testdata/h200x2.json") // monitor.Default() for the machine's GPUs
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	id, err := monitor.FirstAvailable(context.Background(), src, monitor.Options{MaxMemory: 0.1}, 3, time.Second)
	fmt.Println(id, err)
	// Output:
	// 0 <nil>
}
