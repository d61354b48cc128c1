// Package monitor reads the state of a machine's NVIDIA GPUs (memory,
// utilization, temperature, power, clocks and the processes holding
// memory) through NVML, offers GPUtil's helpers on top, and exports GPUs
// and vram's allocators to Prometheus.
//
// The simplest calls mirror GPUtil, without starting an nvidia-smi
// process:
//
//	monitor.ShowUtilization(os.Stdout) // | ID | GPU | MEM |
//	ids, err := monitor.GetAvailable(monitor.Options{Order: monitor.OrderMemory, Limit: 2})
//	id, err := monitor.GetFirstAvailable(monitor.Options{MaxMemory: 0.2})
//
// [FirstAvailable] waits and retries as getFirstAvailable's attempts and
// interval do; an Order that is not one of the Order constants is an error
// wrapping [ErrInvalidOptions].
//
// For control, open a [Source] and read it: [OpenNVML] for the machine's
// GPUs, [NewRecorded] or [OpenRecorded] to play back readings recorded
// earlier (tests, demos, a machine without a GPU). A [Reading] holds one
// [GPU] per device, plain values with units in their names; a value the
// device does not report is [Unknown] (-1).
//
//	src, err := monitor.OpenNVML()
//	if errors.Is(err, monitor.ErrNoDriver) {
//		... // no NVIDIA driver on this machine
//	}
//	defer src.Close()
//	r, err := src.Read()
//	for _, g := range r.GPUs {
//		fmt.Println(g.Index, g.Name, g.Memory.UsedBytes, g.Utilization.ComputePercent)
//	}
//
// # Processes
//
// NVML lists the processes that have a CUDA context on a device, with
// their PIDs as the host numbers them. Inside a container with its own PID
// namespace the list is often empty though the card is busy. A [GPU] says
// so rather than show an empty list: ProcessesVisible is false when memory
// is in use that no listed process accounts for, or when NVML refused the
// query, and ProcessesNote explains. Each process is a
// [memory.ProcessMemory], the type that vram's out-of-memory errors and
// vram.DeviceMemory list processes with.
//
// # Utilization
//
// NVML's utilization is the share of time something ran, not the share of
// capacity used: [Utilization.ComputePercent] is the percent of time one or
// more kernels ran (a single small kernel running all the time reads
// 100%), [Utilization.MemoryBandwidthPercent] the percent of time device
// memory was read or written. Neither is the share of memory in use: that
// is [Memory.UsedFraction].
//
// # Prometheus
//
// [NewCollector] exports the GPUs of a Source ("vram exporter" serves it),
// [RegisterAllocator] exports the statistics of vram's caching allocator,
// per device and rank, from any function returning [memory.Stats], and
// [RegisterDeviceMemory] a program's view of a device's memory
// ([memory.DeviceMemory]: its allocator's reserve, the rest of the process,
// other processes). In a distributed job, give each process's rank and
// [LocalRank] (parallel.LaunchEnv reads them from the launcher), so that
// one scrape configuration covers the whole job:
//
//	reg := prometheus.NewRegistry()
//	l, _ := parallel.LaunchEnv() // rank 0 of 1 without a launcher
//	dev := vram.CUDA(l.LocalRank)
//	lr := monitor.LocalRank(l.LocalRank)
//	monitor.RegisterAllocator(reg, dev.String(), l.Rank, func() memory.Stats { return vram.MemoryStats(dev) }, lr)
//	monitor.RegisterDeviceMemory(reg, dev.String(), l.Rank, func() (memory.DeviceMemory, error) { return vram.DeviceMemory(dev) }, lr)
//	ln, _ := net.Listen("tcp", ":9400")
//	go monitor.Serve(ctx, ln, reg)
//
// A collector that fails does not fail the scrape; [Serve] and [Handler]
// count such scrapes in promhttp_metric_handler_errors_total{cause}, and
// vram_gpu_up says which GPU's queries failed.
//
// # Errors
//
// Every call returns an error instead of panicking. Without a driver the
// error wraps [ErrNoDriver] (and the loader's or NVML's own error); with a
// driver and no GPU, [ErrNoGPU]. A file of readings that is not one, or
// holds values no device reports, is refused with an error wrapping
// [ErrInvalidRecording].
//
// # Concurrency
//
// Sources, collectors and the package functions are safe for concurrent
// use. NVML itself is thread-safe and needs no locked OS thread.
package monitor
