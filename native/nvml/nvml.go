package nvml

import "github.com/vramgo/vram/native/load"

// Init initialises NVML for this process (nvmlInit_v2). NVML counts Init
// and Shutdown calls; every successful Init should be matched by a
// [Shutdown]. Without a running kernel driver it fails with
// [ErrDriverNotLoaded].
func Init() error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	return check("nvmlInit_v2", nvmlInit())
}

// Shutdown releases what [Init] set up (nvmlShutdown). NVML really shuts
// down only when Shutdown has been called as often as Init.
func Shutdown() error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	return check("nvmlShutdown", nvmlShutdown())
}

// ErrorString returns NVML's description of r (nvmlErrorString), or r's
// name before [Load] succeeded.
func ErrorString(r Return) string {
	if !ready.Load() {
		return r.Name()
	}
	return goString(nvmlErrorString(r))
}

// SystemGetDriverVersion returns the kernel driver's version, e.g.
// "580.95.05" (nvmlSystemGetDriverVersion).
func SystemGetDriverVersion() (string, error) {
	return stringCall("nvmlSystemGetDriverVersion", SystemDriverVersionBufferSize, nvmlSystemGetDriverVersion)
}

// SystemGetNVMLVersion returns NVML's version, e.g. "13.580.95.05"
// (nvmlSystemGetNVMLVersion).
func SystemGetNVMLVersion() (string, error) {
	return stringCall("nvmlSystemGetNVMLVersion", SystemNVMLVersionBufferSize, nvmlSystemGetNVMLVersion)
}

// SystemGetCudaDriverVersion returns the newest CUDA version the driver
// supports, as 1000*major + 10*minor (13000 for CUDA 13.0), from
// nvmlSystemGetCudaDriverVersion_v2.
func SystemGetCudaDriverVersion() (int, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var v int32
	err := check("nvmlSystemGetCudaDriverVersion_v2", nvmlSystemGetCudaDriverVersion(&v))
	return int(v), err
}

// SystemGetProcessName returns the name of process pid, cropped to
// [ProcessNameBufferSize]-1 bytes (nvmlSystemGetProcessName). It fails with
// [ErrNotFound] when the process does not exist and [ErrNoPermission] when
// the caller may not see it.
func SystemGetProcessName(pid uint32) (string, error) {
	if !ready.Load() {
		return "", ErrNotLoaded
	}
	var buf [ProcessNameBufferSize]byte
	err := check("nvmlSystemGetProcessName", nvmlSystemGetProcessName(pid, &buf[0], uint32(len(buf))))
	if err != nil {
		return "", err
	}
	return cString(buf[:]), nil
}

// DeviceGetCount returns the number of GPUs this process may see
// (nvmlDeviceGetCount_v2). CUDA_VISIBLE_DEVICES does not apply to NVML.
func DeviceGetCount() (int, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var n uint32
	err := check("nvmlDeviceGetCount_v2", nvmlDeviceGetCount(&n))
	return int(n), err
}

// DeviceGetHandleByIndex returns the handle of GPU index, numbered as
// NVML numbers them, 0 to [DeviceGetCount]-1 (nvmlDeviceGetHandleByIndex_v2).
// NVML's order is by PCI bus id, which may differ from CUDA's default
// order (fastest first) unless CUDA_DEVICE_ORDER=PCI_BUS_ID.
func DeviceGetHandleByIndex(index int) (Device, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var d Device
	err := check("nvmlDeviceGetHandleByIndex_v2", nvmlDeviceGetHandleByIndex(uint32(index), &d))
	return d, err
}

// DeviceGetName returns the product name, e.g. "NVIDIA H200"
// (nvmlDeviceGetName).
func DeviceGetName(d Device) (string, error) {
	return deviceStringCall("nvmlDeviceGetName", d, DeviceNameBufferSize, nvmlDeviceGetName)
}

// DeviceGetUUID returns the device's UUID as nvidia-smi prints it,
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvmlDeviceGetUUID).
func DeviceGetUUID(d Device) (string, error) {
	return deviceStringCall("nvmlDeviceGetUUID", d, DeviceUUIDBufferSize, nvmlDeviceGetUUID)
}

// DeviceGetPciInfo returns the device's PCI address and ids
// (nvmlDeviceGetPciInfo_v3).
func DeviceGetPciInfo(d Device) (PciInfo, error) {
	var p PciInfo
	if !ready.Load() {
		return p, ErrNotLoaded
	}
	err := check("nvmlDeviceGetPciInfo_v3", nvmlDeviceGetPciInfo(d, &p))
	return p, err
}

// DeviceGetMemoryInfo returns the device's total, free and used memory in
// bytes (nvmlDeviceGetMemoryInfo); used includes the driver's reserve.
func DeviceGetMemoryInfo(d Device) (Memory, error) {
	var m Memory
	if !ready.Load() {
		return m, ErrNotLoaded
	}
	err := check("nvmlDeviceGetMemoryInfo", nvmlDeviceGetMemoryInfo(d, &m))
	return m, err
}

// DeviceGetMemoryInfoV2 returns the device's memory in bytes with the
// driver's reserve counted apart (nvmlDeviceGetMemoryInfo_v2, with Version
// set to [MemoryV2Version]). It returns [ErrFunctionNotFound] when the
// loaded library lacks the function (drivers before R510).
func DeviceGetMemoryInfoV2(d Device) (MemoryV2, error) {
	m := MemoryV2{Version: MemoryV2Version}
	if !ready.Load() {
		return m, ErrNotLoaded
	}
	if nvmlDeviceGetMemoryInfoV2 == nil {
		return m, &Error{Code: ErrFunctionNotFound.Code, Name: ErrFunctionNotFound.Name, Func: "nvmlDeviceGetMemoryInfo_v2"}
	}
	err := check("nvmlDeviceGetMemoryInfo_v2", nvmlDeviceGetMemoryInfoV2(d, &m))
	return m, err
}

// DeviceGetUtilizationRates returns the percent of time, over the last
// sample period, that kernels ran and that device memory was read or
// written (nvmlDeviceGetUtilizationRates). It fails with [ErrNotSupported]
// on MIG-enabled GPUs.
func DeviceGetUtilizationRates(d Device) (Utilization, error) {
	var u Utilization
	if !ready.Load() {
		return u, ErrNotLoaded
	}
	err := check("nvmlDeviceGetUtilizationRates", nvmlDeviceGetUtilizationRates(d, &u))
	return u, err
}

// DeviceGetTemperature returns the temperature of sensor in degrees Celsius
// (nvmlDeviceGetTemperature; deprecated in NVML 13 in favour of
// nvmlDeviceGetTemperatureV, and still exported).
func DeviceGetTemperature(d Device, sensor TemperatureSensor) (uint32, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var t uint32
	err := check("nvmlDeviceGetTemperature", nvmlDeviceGetTemperature(d, sensor, &t))
	return t, err
}

// DeviceGetPowerUsage returns the power drawn by the board in milliwatts
// (nvmlDeviceGetPowerUsage): averaged over one second on Ampere (but GA100)
// and newer, instantaneous on older GPUs.
func DeviceGetPowerUsage(d Device) (uint32, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var mw uint32
	err := check("nvmlDeviceGetPowerUsage", nvmlDeviceGetPowerUsage(d, &mw))
	return mw, err
}

// DeviceGetEnforcedPowerLimit returns the power limit the driver enforces,
// in milliwatts, after every limiter (nvmlDeviceGetEnforcedPowerLimit).
func DeviceGetEnforcedPowerLimit(d Device) (uint32, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var mw uint32
	err := check("nvmlDeviceGetEnforcedPowerLimit", nvmlDeviceGetEnforcedPowerLimit(d, &mw))
	return mw, err
}

// DeviceGetClockInfo returns the current clock of domain c in MHz
// (nvmlDeviceGetClockInfo).
func DeviceGetClockInfo(d Device, c ClockType) (uint32, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var mhz uint32
	err := check("nvmlDeviceGetClockInfo", nvmlDeviceGetClockInfo(d, c, &mhz))
	return mhz, err
}

// DeviceGetMaxClockInfo returns the highest clock of domain c in MHz
// (nvmlDeviceGetMaxClockInfo).
func DeviceGetMaxClockInfo(d Device, c ClockType) (uint32, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var mhz uint32
	err := check("nvmlDeviceGetMaxClockInfo", nvmlDeviceGetMaxClockInfo(d, c, &mhz))
	return mhz, err
}

// DeviceGetComputeRunningProcesses fills infos with the processes that
// have a compute context on d (nvmlDeviceGetComputeRunningProcesses_v3)
// and returns how many it wrote. When infos is too small it returns
// [ErrInsufficientSize] and the number of entries needed at that moment
// (the list can grow before the next call); a nil or empty infos asks for
// the count alone, and then a nil error means no process is running.
//
// Inside a container with its own PID namespace the PIDs are the host's,
// and the list may be empty though processes use the GPU.
func DeviceGetComputeRunningProcesses(d Device, infos []ProcessInfo) (int, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	n := uint32(len(infos))
	var p *ProcessInfo
	if n > 0 {
		p = &infos[0]
	}
	err := check("nvmlDeviceGetComputeRunningProcesses_v3", nvmlDeviceGetComputeRunningProcesses(d, &n, p))
	return int(n), err
}

// stringCall calls a system function that writes a C string into a
// buffer of size bytes.
func stringCall(name string, size int, fn func(*byte, uint32) Return) (string, error) {
	if !ready.Load() {
		return "", ErrNotLoaded
	}
	buf := make([]byte, size)
	if err := check(name, fn(&buf[0], uint32(size))); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// deviceStringCall calls a device function that writes a C string into a
// buffer of size bytes.
func deviceStringCall(name string, d Device, size int, fn func(Device, *byte, uint32) Return) (string, error) {
	if !ready.Load() {
		return "", ErrNotLoaded
	}
	buf := make([]byte, size)
	if err := check(name, fn(d, &buf[0], uint32(size))); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// goString copies a C string owned by NVML; "" for nil.
func goString(p *byte) string { return load.GoString(p) }
