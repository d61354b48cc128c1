package nvml

import "github.com/vramgo/vram/native/load"

// The C functions, declared with Go types of the C widths: unsigned int and
// enums are uint32 (or their named types), nvmlDevice_t is a pointer-sized
// handle, char* buffers are *byte. bindings.tsv lists the same signatures
// and a CPU test holds the two together.
var (
	nvmlInit                             func() Return
	nvmlShutdown                         func() Return
	nvmlErrorString                      func(r Return) *byte
	nvmlSystemGetDriverVersion           func(buf *byte, length uint32) Return
	nvmlSystemGetNVMLVersion             func(buf *byte, length uint32) Return
	nvmlSystemGetCudaDriverVersion       func(v *int32) Return
	nvmlSystemGetProcessName             func(pid uint32, buf *byte, length uint32) Return
	nvmlDeviceGetCount                   func(n *uint32) Return
	nvmlDeviceGetHandleByIndex           func(index uint32, d *Device) Return
	nvmlDeviceGetName                    func(d Device, buf *byte, length uint32) Return
	nvmlDeviceGetUUID                    func(d Device, buf *byte, length uint32) Return
	nvmlDeviceGetPciInfo                 func(d Device, pci *PciInfo) Return
	nvmlDeviceGetMemoryInfo              func(d Device, m *Memory) Return
	nvmlDeviceGetMemoryInfoV2            func(d Device, m *MemoryV2) Return
	nvmlDeviceGetUtilizationRates        func(d Device, u *Utilization) Return
	nvmlDeviceGetTemperature             func(d Device, sensor TemperatureSensor, temp *uint32) Return
	nvmlDeviceGetPowerUsage              func(d Device, milliwatts *uint32) Return
	nvmlDeviceGetEnforcedPowerLimit      func(d Device, milliwatts *uint32) Return
	nvmlDeviceGetClockInfo               func(d Device, clock ClockType, mhz *uint32) Return
	nvmlDeviceGetMaxClockInfo            func(d Device, clock ClockType, mhz *uint32) Return
	nvmlDeviceGetComputeRunningProcesses func(d Device, count *uint32, infos *ProcessInfo) Return
)

const libName = "libnvidia-ml"

// bindings is every NVML symbol bound, under the versioned names that
// nvml.h (API version 13, driver R580) maps the plain names to.
var bindings = []load.Binding{
	{Lib: libName, Names: []string{"nvmlInit_v2"}, Fn: &nvmlInit},
	{Lib: libName, Names: []string{"nvmlShutdown"}, Fn: &nvmlShutdown},
	{Lib: libName, Names: []string{"nvmlErrorString"}, Fn: &nvmlErrorString},
	{Lib: libName, Names: []string{"nvmlSystemGetDriverVersion"}, Fn: &nvmlSystemGetDriverVersion},
	{Lib: libName, Names: []string{"nvmlSystemGetNVMLVersion"}, Fn: &nvmlSystemGetNVMLVersion},
	{Lib: libName, Names: []string{"nvmlSystemGetCudaDriverVersion_v2"}, Fn: &nvmlSystemGetCudaDriverVersion},
	{Lib: libName, Names: []string{"nvmlSystemGetProcessName"}, Fn: &nvmlSystemGetProcessName},
	{Lib: libName, Names: []string{"nvmlDeviceGetCount_v2"}, Fn: &nvmlDeviceGetCount},
	{Lib: libName, Names: []string{"nvmlDeviceGetHandleByIndex_v2"}, Fn: &nvmlDeviceGetHandleByIndex},
	{Lib: libName, Names: []string{"nvmlDeviceGetName"}, Fn: &nvmlDeviceGetName},
	{Lib: libName, Names: []string{"nvmlDeviceGetUUID"}, Fn: &nvmlDeviceGetUUID},
	{Lib: libName, Names: []string{"nvmlDeviceGetPciInfo_v3"}, Fn: &nvmlDeviceGetPciInfo},
	{Lib: libName, Names: []string{"nvmlDeviceGetMemoryInfo"}, Fn: &nvmlDeviceGetMemoryInfo},
	{Lib: libName, Names: []string{"nvmlDeviceGetMemoryInfo_v2"}, Fn: &nvmlDeviceGetMemoryInfoV2, Optional: true},
	{Lib: libName, Names: []string{"nvmlDeviceGetUtilizationRates"}, Fn: &nvmlDeviceGetUtilizationRates},
	{Lib: libName, Names: []string{"nvmlDeviceGetTemperature"}, Fn: &nvmlDeviceGetTemperature},
	{Lib: libName, Names: []string{"nvmlDeviceGetPowerUsage"}, Fn: &nvmlDeviceGetPowerUsage},
	{Lib: libName, Names: []string{"nvmlDeviceGetEnforcedPowerLimit"}, Fn: &nvmlDeviceGetEnforcedPowerLimit},
	{Lib: libName, Names: []string{"nvmlDeviceGetClockInfo"}, Fn: &nvmlDeviceGetClockInfo},
	{Lib: libName, Names: []string{"nvmlDeviceGetMaxClockInfo"}, Fn: &nvmlDeviceGetMaxClockInfo},
	{Lib: libName, Names: []string{"nvmlDeviceGetComputeRunningProcesses_v3"}, Fn: &nvmlDeviceGetComputeRunningProcesses},
}

// Spec is how [Load] searches for NVML: libnvidia-ml.so.1 only, installed
// with the driver (never a toolkit's stub), in VRAM_CUDA_LIBS, the loader's
// search, then the folders where containers and WSL mount the driver.
var Spec = load.Spec{
	Name:          libName,
	Sonames:       []string{"libnvidia-ml.so.1"},
	ExtraDirs:     []string{"/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"},
	NoToolkitDirs: true,
}

// driver holds the loaded libnvidia-ml.so.1 and whether the bindings are
// ready.
var driver = load.Loader{Spec: &Spec, Bindings: bindings}

// Load finds libnvidia-ml.so.1 as package load describes, resolves every
// binding and returns the library it loaded. Once it has succeeded, later
// calls return the same library at once; after a failure the next call
// searches again. It does not call nvmlInit_v2 (see [Init]).
//
// The error is a *load.NotFoundError when no libnvidia-ml.so.1 could be
// opened (no NVIDIA driver on this machine), or a *load.MissingSymbolError
// when the driver is too old for these bindings (it lacks one of the
// versioned symbols, such as nvmlDeviceGetComputeRunningProcesses_v3).
//
// Load is safe for concurrent use.
func Load() (*load.Library, error) { return driver.Load() }

// Resolved returns, for each bound C symbol, the name found in the loaded
// library ("" for an optional symbol it lacks), or nil before [Load]
// succeeded. For diagnostics.
func Resolved() map[string]string { return driver.Resolved() }

// call returns [ErrNotLoaded] before [Load] succeeded; else it calls c,
// which calls the C function fn, and turns the nvmlReturn_t into an error.
func call(fn string, c func() Return) error {
	if !driver.Ready() {
		return ErrNotLoaded
	}
	return check(fn, c())
}
