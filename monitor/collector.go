package monitor

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names of [NewCollector], all gauges. Labels: gpu (NVML's index)
// and uuid on every GPU metric; name and pci_bus_id on vram_gpu_info;
// clock (graphics, sm, memory) on vram_gpu_clock_hertz; pid and process on
// vram_gpu_process_memory_bytes. A value the device does not report is
// left out rather than exported as -1. A GPU listed twice under one index
// and UUID, or a process twice on one GPU, is exported once. Bytes of a
// name that are not UTF-8 are exported as U+FFFD; a process without a name
// as [UnknownProcess].
//
// vram_monitor_up says whether the source could be read at all;
// vram_gpu_up, per GPU, whether every query of that GPU succeeded (0 when
// one failed, [GPU.Errors], whose values are then left out).
var (
	descUp        = prometheus.NewDesc("vram_monitor_up", "1 if the last read of the GPUs succeeded, 0 if not (then no GPU metric is exported).", nil, nil)
	descGPUUp     = prometheus.NewDesc("vram_gpu_up", "1 if every query of the GPU succeeded in the last read, 0 if one failed (its values are left out; vram smi shows the errors).", []string{"gpu", "uuid"}, nil)
	descReadSecs  = prometheus.NewDesc("vram_monitor_read_seconds", "Time the last read of every GPU took.", nil, nil)
	descDriver    = prometheus.NewDesc("vram_driver_info", "The NVIDIA driver: always 1, with its versions as labels.", []string{"driver_version", "cuda_version"}, nil)
	gpuLabels     = []string{"gpu", "uuid"}
	descInfo      = prometheus.NewDesc("vram_gpu_info", "A GPU: always 1, with its name and PCI address as labels.", []string{"gpu", "uuid", "name", "pci_bus_id"}, nil)
	descMemTotal  = prometheus.NewDesc("vram_gpu_memory_total_bytes", "Physical device memory.", gpuLabels, nil)
	descMemUsed   = prometheus.NewDesc("vram_gpu_memory_used_bytes", "Device memory in use by processes and contexts (the driver's reserve left out where it is known).", gpuLabels, nil)
	descMemFree   = prometheus.NewDesc("vram_gpu_memory_free_bytes", "Device memory no one holds.", gpuLabels, nil)
	descMemRes    = prometheus.NewDesc("vram_gpu_memory_reserved_bytes", "Device memory the driver and firmware reserve for themselves.", gpuLabels, nil)
	descUtil      = prometheus.NewDesc("vram_gpu_utilization_ratio", "Fraction of the last sample period during which one or more kernels ran (not the share of compute used).", gpuLabels, nil)
	descMemBW     = prometheus.NewDesc("vram_gpu_memory_bandwidth_utilization_ratio", "Fraction of the last sample period during which device memory was read or written.", gpuLabels, nil)
	descTemp      = prometheus.NewDesc("vram_gpu_temperature_celsius", "GPU die temperature.", gpuLabels, nil)
	descPower     = prometheus.NewDesc("vram_gpu_power_watts", "Board power draw.", gpuLabels, nil)
	descPowerLim  = prometheus.NewDesc("vram_gpu_power_limit_watts", "Power limit the driver enforces.", gpuLabels, nil)
	descClock     = prometheus.NewDesc("vram_gpu_clock_hertz", "Current clock of a clock domain.", []string{"gpu", "uuid", "clock"}, nil)
	descVisible   = prometheus.NewDesc("vram_gpu_processes_visible", "1 if the process list accounts for the device's used memory, 0 if processes are hidden (another PID namespace, no permission).", gpuLabels, nil)
	descProcMem   = prometheus.NewDesc("vram_gpu_process_memory_bytes", "Device memory a process holds.", []string{"gpu", "uuid", "pid", "process"}, nil)
	collectorDesc = []*prometheus.Desc{descUp, descGPUUp, descReadSecs, descDriver, descInfo, descMemTotal, descMemUsed, descMemFree,
		descMemRes, descUtil, descMemBW, descTemp, descPower, descPowerLim, descClock, descVisible, descProcMem}
)

// Collector is a prometheus.Collector of the GPUs a [Source] reads: one
// Read per scrape. Create it with [NewCollector].
type Collector struct {
	src Source
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector that reads src on every scrape. When a
// read fails, the scrape still succeeds with vram_monitor_up 0 and no GPU
// metrics; a nil src counts as a read that fails. The collector does not
// close src.
func NewCollector(src Source) *Collector { return &Collector{src: src} }

// Describe sends the descriptors of every metric the collector may export.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range collectorDesc {
		ch <- d
	}
}

// Collect reads the source and sends the metrics. A nil *Collector reads
// as a collector of a nil source: vram_monitor_up 0.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	var src Source
	if c != nil {
		src = c.src
	}
	start := time.Now()
	r, err := read(src)
	took := time.Since(start).Seconds()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labelValues(labels)...)
	}
	if err != nil {
		gauge(descUp, 0)
		return
	}
	gauge(descUp, 1)
	gauge(descReadSecs, took)
	if r.DriverVersion != "" || r.CUDAVersion != "" {
		gauge(descDriver, 1, r.DriverVersion, r.CUDAVersion)
	}
	known := func(d *prometheus.Desc, v float64, labels ...string) {
		if v != Unknown {
			gauge(d, v, labels...)
		}
	}
	// A constant metric may appear once per label set: a GPU a source
	// lists twice under one index and UUID (NVML and checked recordings
	// never do) is exported once, as first listed, so that the scrape
	// holds no duplicate series and gathers without error.
	type gpuID struct {
		index int
		uuid  string
	}
	gpus := map[gpuID]bool{}
	for _, g := range r.GPUs {
		if gpus[gpuID{g.Index, g.UUID}] {
			continue
		}
		gpus[gpuID{g.Index, g.UUID}] = true
		id := strconv.Itoa(g.Index)
		gauge(descInfo, 1, id, g.UUID, g.Name, g.PCIBusID)
		up := 1.0
		if len(g.Errors) > 0 {
			up = 0
		}
		gauge(descGPUUp, up, id, g.UUID)
		known(descMemTotal, float64(g.Memory.TotalBytes), id, g.UUID)
		known(descMemUsed, float64(g.Memory.UsedBytes), id, g.UUID)
		known(descMemFree, float64(g.Memory.FreeBytes), id, g.UUID)
		known(descMemRes, float64(g.Memory.ReservedBytes), id, g.UUID)
		known(descUtil, ratio(g.Utilization.ComputePercent), id, g.UUID)
		known(descMemBW, ratio(g.Utilization.MemoryBandwidthPercent), id, g.UUID)
		known(descTemp, float64(g.TemperatureC), id, g.UUID)
		known(descPower, g.Power.DrawW, id, g.UUID)
		known(descPowerLim, g.Power.LimitW, id, g.UUID)
		known(descClock, hertz(g.Clocks.GraphicsMHz), id, g.UUID, "graphics")
		known(descClock, hertz(g.Clocks.SMMHz), id, g.UUID, "sm")
		known(descClock, hertz(g.Clocks.MemoryMHz), id, g.UUID, "memory")
		vis := 0.0
		if g.ProcessesVisible {
			vis = 1
		}
		gauge(descVisible, vis, id, g.UUID)
		seen := map[int]bool{}
		for _, p := range g.Processes {
			if seen[p.PID] { // a constant metric may appear once per label set
				continue
			}
			seen[p.PID] = true
			known(descProcMem, float64(p.Bytes), id, g.UUID, strconv.Itoa(p.PID), ProcessName(p))
		}
	}
}

// ratio returns a percent as a fraction, Unknown as Unknown. It divides
// by 100 rather than multiply by 0.01, which binary floating point does
// not hold exactly: 35 × 0.01 is 0.35000000000000003, which a dashboard
// shows and a PromQL comparison with 0.35 sees; 35 / 100 is 0.35.
func ratio(percent int) float64 {
	if percent == Unknown {
		return Unknown
	}
	return float64(percent) / 100
}

// hertz returns a clock in MHz in hertz, Unknown as Unknown.
func hertz(mhz int) float64 {
	if mhz == Unknown {
		return Unknown
	}
	return float64(mhz) * 1e6
}

// labelValues returns labels with every byte sequence that is not UTF-8
// replaced by U+FFFD. Process and device names come from the driver as raw
// bytes (a process may give itself any name), and a label value that is not
// UTF-8 makes a metric invalid, which would end the collector's scrape at
// that metric and drop every later one.
func labelValues(labels []string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = strings.ToValidUTF8(l, "\uFFFD")
	}
	return out
}

// read reads src, which may be nil: that is an error, not a panic, so that
// a scrape of a collector made with no source reports vram_monitor_up 0.
func read(src Source) (Reading, error) {
	if src == nil {
		return Reading{}, errNil("source")
	}
	return src.Read()
}
