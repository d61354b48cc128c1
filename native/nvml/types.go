package nvml

// Device is an nvmlDevice_t: an opaque handle to one GPU, valid between
// [Init] and [Shutdown].
type Device uintptr

// Buffer sizes from nvml.h, in bytes, NUL terminator included.
const (
	// DeviceNameBufferSize is NVML_DEVICE_NAME_V2_BUFFER_SIZE.
	DeviceNameBufferSize = 96
	// DeviceUUIDBufferSize is NVML_DEVICE_UUID_V2_BUFFER_SIZE.
	DeviceUUIDBufferSize = 96
	// SystemDriverVersionBufferSize is NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE.
	SystemDriverVersionBufferSize = 80
	// SystemNVMLVersionBufferSize is NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE.
	SystemNVMLVersionBufferSize = 80
	// ProcessNameBufferSize is the buffer [SystemGetProcessName] uses:
	// NVML crops longer names.
	ProcessNameBufferSize = 256
	// PciBusIDBufferSize is NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE.
	PciBusIDBufferSize = 32
	// PciBusIDLegacyBufferSize is NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE.
	PciBusIDLegacyBufferSize = 16
)

// ValueNotAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned long long:
// [ProcessInfo.UsedGPUMemory] holds it when the driver does not account
// the process's memory (Windows WDDM).
const ValueNotAvailable = ^uint64(0)

// InstanceIDNone is the gpuInstanceId and computeInstanceId of a process on
// a GPU that is not in MIG mode (0xFFFFFFFF).
const InstanceIDNone = ^uint32(0)

// Memory is nvmlMemory_t, what nvmlDeviceGetMemoryInfo reports, in bytes.
// Used includes the memory the driver reserves for itself.
type Memory struct {
	Total uint64 // total physical device memory
	Free  uint64 // unallocated device memory
	Used  uint64 // allocated device memory, the driver's reserve included
}

// MemoryV2 is nvmlMemory_v2_t, what nvmlDeviceGetMemoryInfo_v2 reports, in
// bytes. Version must be [MemoryV2Version] when it is passed in;
// [DeviceGetMemoryInfoV2] sets it.
type MemoryV2 struct {
	Version  uint32 // structure format version: MemoryV2Version
	_        uint32 // C alignment padding before the unsigned long longs
	Total    uint64 // total physical device memory
	Reserved uint64 // memory reserved for system use (driver or firmware)
	Free     uint64 // unallocated device memory
	Used     uint64 // allocated device memory; with Reserved, what Memory.Used counts
}

// MemoryV2Version is nvml.h's nvmlMemory_v2 macro,
// NVML_STRUCT_VERSION(Memory, 2): sizeof(nvmlMemory_v2_t) = 40 in the low
// bits, the version 2 in the top byte.
const MemoryV2Version = uint32(40) | 2<<24

// Utilization is nvmlUtilization_t: percentages of time over the last
// sample period (1/6 s to 1 s, depending on the product).
type Utilization struct {
	// GPU is the percent of time one or more kernels were executing.
	// It is not the share of the GPU's compute that was used.
	GPU uint32
	// Memory is the percent of time device memory was being read or
	// written (memory bandwidth busy time), not the share of memory used.
	Memory uint32
}

// ProcessInfo is nvmlProcessInfo_t (nvmlProcessInfo_v2_t), what
// nvmlDeviceGetComputeRunningProcesses_v3 returns per process.
type ProcessInfo struct {
	PID               uint32 // process id, in the driver's (the host's) PID namespace
	_                 uint32 // C alignment padding
	UsedGPUMemory     uint64 // bytes, or ValueNotAvailable
	GPUInstanceID     uint32 // MIG GPU instance, InstanceIDNone without MIG
	ComputeInstanceID uint32 // MIG compute instance, InstanceIDNone without MIG
}

// PciInfo is nvmlPciInfo_t, what nvmlDeviceGetPciInfo_v3 reports.
type PciInfo struct {
	BusIDLegacy    [PciBusIDLegacyBufferSize]byte // "domain:bus:device.function", 4-digit domain, NUL-terminated
	Domain         uint32                         // PCI domain, 0 to 0xffffffff
	Bus            uint32                         // bus, 0 to 0xff
	Device         uint32                         // device id on the bus, 0 to 31
	PciDeviceID    uint32                         // 16-bit device id and 16-bit vendor id combined
	PciSubSystemID uint32                         // 32-bit sub system device id
	BusID          [PciBusIDBufferSize]byte       // "domain:bus:device.function", 8-digit domain, NUL-terminated
}

// BusIDString returns BusID as a Go string, e.g. "00000000:19:00.0".
func (p *PciInfo) BusIDString() string { return cString(p.BusID[:]) }

// TemperatureSensor is an nvmlTemperatureSensors_t.
type TemperatureSensor uint32

// TemperatureGPU is NVML_TEMPERATURE_GPU, the sensor on the GPU die.
const TemperatureGPU TemperatureSensor = 0

// ClockType is an nvmlClockType_t, a clock domain.
type ClockType uint32

// Clock domains (nvml.h's nvmlClockType_t).
const (
	ClockGraphics ClockType = 0 // NVML_CLOCK_GRAPHICS
	ClockSM       ClockType = 1 // NVML_CLOCK_SM
	ClockMem      ClockType = 2 // NVML_CLOCK_MEM
	ClockVideo    ClockType = 3 // NVML_CLOCK_VIDEO: video encoder/decoder
)

// cString returns the bytes of b before the first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
