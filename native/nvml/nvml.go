package nvml

import "github.com/vramgo/vram/native/load"

// Init initialises NVML for this process (nvmlInit_v2). NVML counts Init
// and Shutdown calls; every successful Init should be matched by a
// [Shutdown]. Without a running kernel driver it fails with
// [ErrDriverNotLoaded].
func Init() error {
	return call("nvmlInit_v2", func() Return { return nvmlInit() })
}

// Shutdown releases what [Init] set up (nvmlShutdown). NVML really shuts
// down only when Shutdown has been called as often as Init.
func Shutdown() error {
	return call("nvmlShutdown", func() Return { return nvmlShutdown() })
}

// ErrorString returns NVML's description of r (nvmlErrorString), or r's
// name before [Load] succeeded.
func ErrorString(r Return) string {
	if !driver.Ready() {
		return r.Name()
	}
	return goString(nvmlErrorString(r))
}

// SystemGetDriverVersion returns the kernel driver's version, e.g.
// "580.95.05" (nvmlSystemGetDriverVersion).
func SystemGetDriverVersion() (string, error) {
	return callString("nvmlSystemGetDriverVersion", SystemDriverVersionBufferSize, func(buf *byte, n uint32) Return {
		return nvmlSystemGetDriverVersion(buf, n)
	})
}

// SystemGetNVMLVersion returns NVML's version, e.g. "13.580.95.05"
// (nvmlSystemGetNVMLVersion).
func SystemGetNVMLVersion() (string, error) {
	return callString("nvmlSystemGetNVMLVersion", SystemNVMLVersionBufferSize, func(buf *byte, n uint32) Return {
		return nvmlSystemGetNVMLVersion(buf, n)
	})
}

// SystemGetCudaDriverVersion returns the newest CUDA version the driver
// supports, as 1000*major + 10*minor (13000 for CUDA 13.0), from
// nvmlSystemGetCudaDriverVersion_v2.
func SystemGetCudaDriverVersion() (int, error) {
	var v int32
	err := call("nvmlSystemGetCudaDriverVersion_v2", func() Return { return nvmlSystemGetCudaDriverVersion(&v) })
	return int(v), err
}

// SystemGetProcessName returns the name of process pid, cropped to
// [ProcessNameBufferSize]-1 bytes (nvmlSystemGetProcessName). It fails with
// [ErrNotFound] when the process does not exist and [ErrNoPermission] when
// the caller may not see it.
func SystemGetProcessName(pid uint32) (string, error) {
	return callString("nvmlSystemGetProcessName", ProcessNameBufferSize, func(buf *byte, n uint32) Return {
		return nvmlSystemGetProcessName(pid, buf, n)
	})
}

// DeviceGetCount returns the number of GPUs this process may see
// (nvmlDeviceGetCount_v2). CUDA_VISIBLE_DEVICES does not apply to NVML.
func DeviceGetCount() (int, error) {
	var n uint32
	err := call("nvmlDeviceGetCount_v2", func() Return { return nvmlDeviceGetCount(&n) })
	return int(n), err
}

// DeviceGetHandleByIndex returns the handle of GPU index, numbered as
// NVML numbers them, 0 to [DeviceGetCount]-1 (nvmlDeviceGetHandleByIndex_v2).
// NVML's order is by PCI bus id, which may differ from CUDA's default
// order (fastest first) unless CUDA_DEVICE_ORDER=PCI_BUS_ID.
func DeviceGetHandleByIndex(index int) (Device, error) {
	var d Device
	err := call("nvmlDeviceGetHandleByIndex_v2", func() Return { return nvmlDeviceGetHandleByIndex(uint32(index), &d) })
	return d, err
}

// DeviceGetName returns the product name, e.g. "NVIDIA H200"
// (nvmlDeviceGetName).
func DeviceGetName(d Device) (string, error) {
	return callString("nvmlDeviceGetName", DeviceNameBufferSize, func(buf *byte, n uint32) Return {
		return nvmlDeviceGetName(d, buf, n)
	})
}

// DeviceGetUUID returns the device's UUID as nvidia-smi prints it,
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvmlDeviceGetUUID).
func DeviceGetUUID(d Device) (string, error) {
	return callString("nvmlDeviceGetUUID", DeviceUUIDBufferSize, func(buf *byte, n uint32) Return {
		return nvmlDeviceGetUUID(d, buf, n)
	})
}

// DeviceGetPciInfo returns the device's PCI address and ids
// (nvmlDeviceGetPciInfo_v3).
func DeviceGetPciInfo(d Device) (PciInfo, error) {
	var p PciInfo
	err := call("nvmlDeviceGetPciInfo_v3", func() Return { return nvmlDeviceGetPciInfo(d, &p) })
	return p, err
}

// DeviceGetMemoryInfo returns the device's total, free and used memory in
// bytes (nvmlDeviceGetMemoryInfo); used includes the driver's reserve.
func DeviceGetMemoryInfo(d Device) (Memory, error) {
	var m Memory
	err := call("nvmlDeviceGetMemoryInfo", func() Return { return nvmlDeviceGetMemoryInfo(d, &m) })
	return m, err
}

// DeviceGetMemoryInfoV2 returns the device's memory in bytes with the
// driver's reserve counted apart (nvmlDeviceGetMemoryInfo_v2, with Version
// set to [MemoryV2Version]). It returns [ErrFunctionNotFound] when the
// loaded library lacks the function (drivers before R510).
func DeviceGetMemoryInfoV2(d Device) (MemoryV2, error) {
	m := MemoryV2{Version: MemoryV2Version}
	if !driver.Ready() {
		return m, ErrNotLoaded
	}
	if nvmlDeviceGetMemoryInfoV2 == nil {
		return m, &Error{Code: ErrFunctionNotFound.Code, Name: ErrFunctionNotFound.Name, Func: "nvmlDeviceGetMemoryInfo_v2"}
	}
	err := call("nvmlDeviceGetMemoryInfo_v2", func() Return { return nvmlDeviceGetMemoryInfoV2(d, &m) })
	return m, err
}

// DeviceGetUtilizationRates returns the percent of time, over the last
// sample period, that kernels ran and that device memory was read or
// written (nvmlDeviceGetUtilizationRates). It fails with [ErrNotSupported]
// on MIG-enabled GPUs.
func DeviceGetUtilizationRates(d Device) (Utilization, error) {
	var u Utilization
	err := call("nvmlDeviceGetUtilizationRates", func() Return { return nvmlDeviceGetUtilizationRates(d, &u) })
	return u, err
}

// DeviceGetTemperature returns the temperature of sensor in degrees Celsius
// (nvmlDeviceGetTemperature; deprecated in NVML 13 in favour of
// nvmlDeviceGetTemperatureV, and still exported).
func DeviceGetTemperature(d Device, sensor TemperatureSensor) (uint32, error) {
	var t uint32
	err := call("nvmlDeviceGetTemperature", func() Return { return nvmlDeviceGetTemperature(d, sensor, &t) })
	return t, err
}

// DeviceGetPowerUsage returns the power drawn by the board in milliwatts
// (nvmlDeviceGetPowerUsage): averaged over one second on Ampere (but GA100)
// and newer, instantaneous on older GPUs.
func DeviceGetPowerUsage(d Device) (uint32, error) {
	var mw uint32
	err := call("nvmlDeviceGetPowerUsage", func() Return { return nvmlDeviceGetPowerUsage(d, &mw) })
	return mw, err
}

// DeviceGetEnforcedPowerLimit returns the power limit the driver enforces,
// in milliwatts, after every limiter (nvmlDeviceGetEnforcedPowerLimit).
func DeviceGetEnforcedPowerLimit(d Device) (uint32, error) {
	var mw uint32
	err := call("nvmlDeviceGetEnforcedPowerLimit", func() Return { return nvmlDeviceGetEnforcedPowerLimit(d, &mw) })
	return mw, err
}

// DeviceGetClockInfo returns the current clock of domain c in MHz
// (nvmlDeviceGetClockInfo).
func DeviceGetClockInfo(d Device, c ClockType) (uint32, error) {
	var mhz uint32
	err := call("nvmlDeviceGetClockInfo", func() Return { return nvmlDeviceGetClockInfo(d, c, &mhz) })
	return mhz, err
}

// DeviceGetMaxClockInfo returns the highest clock of domain c in MHz
// (nvmlDeviceGetMaxClockInfo).
func DeviceGetMaxClockInfo(d Device, c ClockType) (uint32, error) {
	var mhz uint32
	err := call("nvmlDeviceGetMaxClockInfo", func() Return { return nvmlDeviceGetMaxClockInfo(d, c, &mhz) })
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
	var p *ProcessInfo
	if len(infos) > 0 {
		p = &infos[0]
	}
	var n uint32
	err := call("nvmlDeviceGetComputeRunningProcesses_v3", func() Return {
		n = uint32(len(infos))
		return nvmlDeviceGetComputeRunningProcesses(d, &n, p)
	})
	return int(n), err
}

// callString calls, as [call] does, a function c of the C function fn that
// writes a C string into a buffer of size bytes, and returns the string
// ("" on failure).
func callString(fn string, size int, c func(buf *byte, n uint32) Return) (string, error) {
	buf := make([]byte, size)
	if err := call(fn, func() Return { return c(&buf[0], uint32(size)) }); err != nil {
		return "", err
	}
	return cString(buf), nil
}

// goString copies a C string owned by NVML; "" for nil.
func goString(p *byte) string { return load.GoString(p) }
