package monitor

import (
	"errors"
	"time"

	"github.com/vramgo/vram/memory"
)

// Source gives readings of every GPU of a machine at once. Implementations
// are safe for concurrent use: a Prometheus scrape and a live view may read
// one source together.
type Source interface {
	// Read returns the state of every GPU now. It fails when the source
	// can no longer be read (the driver went away, the source was closed);
	// a value one GPU does not report is marked unknown in the reading
	// instead.
	Read() (Reading, error)
	// Close releases the source. Read fails after Close.
	Close() error
}

// Errors returned when there is nothing to monitor; test with errors.Is.
var (
	// ErrNoDriver: NVML (libnvidia-ml.so.1) could not be loaded or
	// initialised, so this machine has no usable NVIDIA driver. The error
	// that wraps it gives the loader's or NVML's reason.
	ErrNoDriver = errors.New("no NVIDIA driver")
	// ErrNoGPU: the driver is there but reports no GPU.
	ErrNoGPU = errors.New("no NVIDIA GPU")
	// ErrClosed: Read was called on a closed source.
	ErrClosed = errors.New("monitor: source is closed")
)

// errNil returns the error of a call given a nil what (a source, a writer):
// the package returns errors rather than panicking (see # Errors in the
// package doc).
func errNil(what string) error {
	return errors.New("monitor: nil " + what)
}

// Unknown is the value of a numeric field that the driver does not report
// for a GPU (NVML_ERROR_NOT_SUPPORTED, or a query that failed: see
// [GPU.Errors]).
const Unknown = -1

// Reading is the state of every GPU of one machine at one moment.
type Reading struct {
	// Time is when the reading was taken.
	Time time.Time `json:"time"`
	// DriverVersion is the kernel driver's version, e.g. "580.95.05".
	DriverVersion string `json:"driver_version,omitempty"`
	// CUDAVersion is the newest CUDA the driver supports, e.g. "13.0".
	CUDAVersion string `json:"cuda_version,omitempty"`
	// NVMLVersion is the NVML library's version.
	NVMLVersion string `json:"nvml_version,omitempty"`
	// GPUs are the devices in NVML's order (by PCI bus id).
	GPUs []GPU `json:"gpus"`
}

// GPU is the state of one device. Numeric fields hold [Unknown] (-1) when
// the driver does not report them.
type GPU struct {
	// Index is NVML's index of the device (nvidia-smi's), ordered by PCI
	// bus id. CUDA numbers devices the same way only with
	// CUDA_DEVICE_ORDER=PCI_BUS_ID; match by UUID to be sure.
	Index int `json:"index"`
	// Name is the product name, e.g. "NVIDIA H200".
	Name string `json:"name"`
	// UUID is the device's UUID, "GPU-xxxxxxxx-...".
	UUID string `json:"uuid"`
	// PCIBusID is the PCI address, e.g. "00000000:19:00.0".
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// Memory is the device memory in bytes.
	Memory Memory `json:"memory"`
	// Utilization is how busy the device was over the driver's last
	// sample period (1/6 s to 1 s).
	Utilization Utilization `json:"utilization"`
	// TemperatureC is the GPU die's temperature in degrees Celsius.
	TemperatureC int `json:"temperature_c"`
	// Power is the board's power draw and limit.
	Power Power `json:"power"`
	// Clocks are the current clocks.
	Clocks Clocks `json:"clocks"`
	// ProcessesVisible reports whether Processes can be trusted to list
	// every process holding memory on the device. It is false when NVML
	// refused the query or when memory is in use that no listed process
	// accounts for, typically because the processes run in another PID
	// namespace (a container); ProcessesNote then says why. Where the
	// driver does not report the memory of some listed processes, which
	// may hold it, it stays true and ProcessesNote says so.
	ProcessesVisible bool `json:"processes_visible"`
	// ProcessesNote explains an empty or partial process list; "" when
	// the list is complete.
	ProcessesNote string `json:"processes_note,omitempty"`
	// Processes are the processes with a compute context on the device,
	// largest memory first; a process's Bytes is Unknown when the driver
	// does not account its memory.
	Processes []memory.ProcessMemory `json:"processes"`
	// Errors lists the queries that failed for a reason other than being
	// unsupported on this device, as "what: error".
	Errors []string `json:"errors,omitempty"`
}

// Memory is a device's memory, in bytes, as the driver accounts it.
type Memory struct {
	// TotalBytes is the device's physical memory (less ECC's share).
	TotalBytes int64 `json:"total_bytes"`
	// UsedBytes is the memory in use by processes and contexts, as NVML
	// reports it: it leaves out ReservedBytes when the driver reports that
	// apart. What vram's tools show as used is [Memory.Used].
	UsedBytes int64 `json:"used_bytes"`
	// FreeBytes is the memory no one holds: what a new allocation can get.
	FreeBytes int64 `json:"free_bytes"`
	// ReservedBytes is the memory the driver and firmware set aside for
	// themselves (nvmlDeviceGetMemoryInfo_v2), Unknown on drivers before
	// R510.
	ReservedBytes int64 `json:"reserved_bytes"`
}

// Used returns the memory in use, the one definition that vram's tools
// show (vram smi, vram watch, [Available]): UsedBytes, the memory that
// processes and contexts hold, as nvidia-smi and GPUtil count it. The
// driver's reserve (ReservedBytes) is not in it where the driver reports
// that apart. When UsedBytes is Unknown it is derived from the total, free
// and reserved memory; it is Unknown when those are too.
func (m Memory) Used() int64 {
	switch {
	case m.TotalBytes <= 0:
		return Unknown
	case m.UsedBytes != Unknown:
		return m.UsedBytes
	case m.FreeBytes == Unknown:
		return Unknown
	}
	used := m.TotalBytes - m.FreeBytes
	if m.ReservedBytes != Unknown {
		used -= m.ReservedBytes
	}
	return max(used, 0)
}

// UsedFraction returns [Memory.Used] as a share of the device's memory, 0
// to 1 (GPUtil's memoryUtil); 0 when it is unknown.
func (m Memory) UsedFraction() float64 {
	used := m.Used()
	if used == Unknown {
		return 0
	}
	return float64(used) / float64(m.TotalBytes)
}

// Utilization is the share of time a device was busy, in percent (0 to
// 100), over the driver's last sample period. Neither value says how much
// of the device's compute or memory capacity was used.
type Utilization struct {
	// ComputePercent is the percent of time one or more kernels were
	// running (nvidia-smi's "GPU-Util", GPUtil's load).
	ComputePercent int `json:"compute_percent"`
	// MemoryBandwidthPercent is the percent of time device memory was
	// being read or written (nvidia-smi's utilization.memory); it is not
	// the share of memory in use.
	MemoryBandwidthPercent int `json:"memory_bandwidth_percent"`
}

// Power is a board's power draw and the limit the driver enforces, in
// watts; Unknown (-1) when the board has no sensor.
type Power struct {
	DrawW  float64 `json:"draw_w"`
	LimitW float64 `json:"limit_w"`
}

// Clocks are a device's current clocks and its highest SM clock, in MHz.
type Clocks struct {
	GraphicsMHz int `json:"graphics_mhz"`
	SMMHz       int `json:"sm_mhz"`
	MemoryMHz   int `json:"memory_mhz"`
	MaxSMMHz    int `json:"max_sm_mhz"`
}
