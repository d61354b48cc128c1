package monitor

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramgo/vram/memory"
)

// DeviceMemoryCollector is a prometheus.Collector of one device's memory as
// a program using vram sees it ([memory.DeviceMemory], from
// vram.DeviceMemory), labelled with the device and the rank of the
// process. Create it with [NewDeviceMemoryCollector] or register it with
// [RegisterDeviceMemory].
//
// The gauges are vram_device_memory_total_bytes, _free_bytes,
// _reserved_bytes (this process's caching allocator), _process_other_bytes
// (the rest of this process: context, kernels, libraries),
// _other_processes_bytes and _unattributed_bytes; a part that the device
// does not report (see [memory.DeviceMemory]) is left out of the scrape,
// and vram_device_memory_other_process_bytes{pid,process} gives each other
// process (bytes of its name that are not UTF-8 read U+FFFD; a process
// without a name is [UnknownProcess]). A failing
// read is reported as a scrape error of this collector, which [Handler]
// and [Serve] count in promhttp_metric_handler_errors_total.
type DeviceMemoryCollector struct {
	read                                                   func() (memory.DeviceMemory, error)
	total, free, reserved, own, others, unattributed, proc *prometheus.Desc
}

var _ prometheus.Collector = (*DeviceMemoryCollector)(nil)

// NewDeviceMemoryCollector returns a collector that calls read on every
// scrape and exports the result under the labels device and rank, and
// those of opts ([LocalRank]). read must be safe to call from any
// goroutine (vram.DeviceMemory is); with a nil read every scrape of the
// collector fails with an error saying so.
func NewDeviceMemoryCollector(device string, rank int, read func() (memory.DeviceMemory, error), opts ...LabelOption) *DeviceMemoryCollector {
	l := processLabels(device, rank, opts)
	desc := func(name, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc("vram_device_memory_"+name, help, vars, l)
	}
	return &DeviceMemoryCollector{
		read:         read,
		total:        desc("total_bytes", "The device's memory."),
		free:         desc("free_bytes", "Memory free on the device, as its driver reports it."),
		reserved:     desc("reserved_bytes", "Memory this process's caching allocator holds, in use or cached."),
		own:          desc("process_other_bytes", "Memory this process holds outside its caching allocator (context, kernels, libraries)."),
		others:       desc("other_processes_bytes", "Memory the other processes on the device hold."),
		unattributed: desc("unattributed_bytes", "Used memory that neither this process nor the listed other processes account for."),
		proc:         desc("other_process_bytes", "Memory one other process holds on the device.", "pid", "process"),
	}
}

// Describe sends the descriptors of every metric; a nil or zero
// *DeviceMemoryCollector, not made by [NewDeviceMemoryCollector], has
// none.
func (c *DeviceMemoryCollector) Describe(ch chan<- *prometheus.Desc) {
	if c == nil || c.total == nil {
		return
	}
	for _, d := range []*prometheus.Desc{c.total, c.free, c.reserved, c.own, c.others, c.unattributed, c.proc} {
		ch <- d
	}
}

// Collect calls the read function and sends the metrics; a nil or zero
// *DeviceMemoryCollector sends none.
func (c *DeviceMemoryCollector) Collect(ch chan<- prometheus.Metric) {
	if c == nil || c.total == nil {
		return
	}
	if c.read == nil {
		ch <- prometheus.NewInvalidMetric(c.total, errNil("read function"))
		return
	}
	m, err := c.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.total, err)
		return
	}
	known := func(d *prometheus.Desc, v int64, labels ...string) {
		if v >= 0 {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labelValues(labels)...)
		}
	}
	known(c.total, m.Total)
	known(c.free, m.Free)
	known(c.reserved, m.Reserved)
	known(c.own, m.ProcessOther())
	known(c.others, m.OtherProcesses())
	known(c.unattributed, m.Unattributed())
	seen := map[int]bool{}
	for _, p := range m.Others {
		if !seen[p.PID] { // a constant metric may appear once per label set
			seen[p.PID] = true
			known(c.proc, p.Bytes, strconv.Itoa(p.PID), ProcessName(p))
		}
	}
}

// RegisterDeviceMemory registers with reg a collector of the device memory
// that read returns, labelled with device and rank, and with local_rank
// when [LocalRank] is given (see [DeviceMemoryCollector] for the metrics).
// Two with the same labels are an error (prometheus.AlreadyRegisteredError),
// and a negative rank or local rank is one wrapping [ErrInvalidOptions].
//
//	dev := vram.CUDA(0)
//	err := monitor.RegisterDeviceMemory(reg, dev.String(), rank,
//		func() (memory.DeviceMemory, error) { return vram.DeviceMemory(dev) })
func RegisterDeviceMemory(reg prometheus.Registerer, device string, rank int, read func() (memory.DeviceMemory, error), opts ...LabelOption) error {
	if read == nil {
		return errors.New("monitor: RegisterDeviceMemory: nil read function")
	}
	if reg == nil {
		return errors.New("monitor: RegisterDeviceMemory: nil registerer")
	}
	if err := checkRanks("RegisterDeviceMemory", rank, opts); err != nil {
		return err
	}
	return reg.Register(NewDeviceMemoryCollector(device, rank, read, opts...))
}
