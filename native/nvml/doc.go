// Package nvml binds NVML, the NVIDIA Management Library
// (libnvidia-ml.so.1, installed with the driver), with purego and without
// cgo: the driver's version, the devices with their names, UUIDs, PCI
// addresses, memory, utilization, temperature, power and clocks, and the
// processes that hold memory on each.
//
// Bindings only: each function calls the C function its doc comment names
// (with its _v2 or _v3 suffix where nvml.h maps the plain name to one) and
// returns an error for a failed nvmlReturn_t. Start with [Load] and [Init],
// then [DeviceGetCount] and [DeviceGetHandleByIndex]; end with [Shutdown].
// Package monitor builds readings of every GPU on top of these calls.
//
//	if _, err := nvml.Load(); err != nil {
//		return err // *load.NotFoundError: no NVIDIA driver on this machine
//	}
//	if err := nvml.Init(); err != nil {
//		return err
//	}
//	defer nvml.Shutdown()
//	dev, err := nvml.DeviceGetHandleByIndex(0)
//	...
//	mem, err := nvml.DeviceGetMemoryInfo(dev)
//
// # Versioned symbols
//
// nvml.h maps nvmlInit to nvmlInit_v2, nvmlDeviceGetCount to
// nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex to
// nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetPciInfo to
// nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetComputeRunningProcesses to
// nvmlDeviceGetComputeRunningProcesses_v3 (whose nvmlProcessInfo_t has the
// MIG instance ids); the plain names are older ABIs. This package binds the
// versioned names only. nvmlDeviceGetMemoryInfo_v2 (the driver's reserved
// memory, R510 and later) is optional: [DeviceGetMemoryInfoV2] returns
// [ErrFunctionNotFound] when the library lacks it.
//
// The file bindings.tsv lists every symbol with its argument widths,
// return width and call style, and the size of every struct passed by
// pointer; a CPU test holds the Go declarations to it.
//
// # Errors
//
// A failed call returns an *[Error] holding the numeric nvmlReturn_t, its
// name in nvml.h (NVML_ERROR_NOT_SUPPORTED), the C function and NVML's own
// description (nvmlErrorString); errors.Is matches the sentinels
// ([ErrNotSupported], [ErrNoPermission], [ErrInsufficientSize], ...) by
// code. Calls made before [Load] succeeded return [ErrNotLoaded].
// NVML_ERROR_NOT_SUPPORTED is common and not a failure of the machine: a
// card without a power sensor, or a query that a MIG instance or a virtual
// GPU does not answer.
//
// # Concurrency
//
// NVML is thread-safe and needs no current context or locked OS thread:
// every function may be called from any goroutine. [Init] and [Shutdown]
// are reference-counted by NVML itself.
package nvml
