package cuda

import (
	"unsafe"

	"github.com/vramgo/vram/native/load"
)

// The C functions, declared with Go types of the C widths: int and enums
// are int32 or uint32, size_t and unsigned long long are uint64, pointers
// are pointers or uintptr handles. bindings.tsv lists the same signatures
// and a CPU test holds the two together.
var (
	cuInit                        func(flags uint32) Result
	cuDriverGetVersion            func(version *int32) Result
	cuDeviceGetCount              func(count *int32) Result
	cuDeviceGet                   func(dev *Device, ordinal int32) Result
	cuDeviceGetName               func(name *byte, n int32, dev Device) Result
	cuDeviceTotalMem              func(bytes *uint64, dev Device) Result
	cuDeviceGetAttribute          func(v *int32, attr DeviceAttribute, dev Device) Result
	cuDeviceGetUuid               func(uuid *UUID, dev Device) Result
	cuDevicePrimaryCtxRetain      func(ctx *Context, dev Device) Result
	cuDevicePrimaryCtxRelease     func(dev Device) Result
	cuCtxGetCurrent               func(ctx *Context) Result
	cuCtxSynchronize              func() Result
	cuProfilerStart               func() Result
	cuProfilerStop                func() Result
	cuDeviceCanAccessPeer         func(can *int32, dev, peer Device) Result
	cuCtxEnablePeerAccess         func(peer Context, flags uint32) Result
	cuMemAlloc                    func(p *DevicePtr, size uint64) Result
	cuMemFree                     func(p DevicePtr) Result
	cuMemGetInfo                  func(free, total *uint64) Result
	cuMemAllocHost                func(pp *unsafe.Pointer, size uint64) Result
	cuMemHostAlloc                func(pp *unsafe.Pointer, size uint64, flags uint32) Result
	cuMemFreeHost                 func(p unsafe.Pointer) Result
	cuMemHostRegister             func(p unsafe.Pointer, size uint64, flags uint32) Result
	cuMemHostUnregister           func(p unsafe.Pointer) Result
	cuMemcpyHtoD                  func(dst DevicePtr, src unsafe.Pointer, n uint64) Result
	cuMemcpyDtoH                  func(dst unsafe.Pointer, src DevicePtr, n uint64) Result
	cuMemcpyDtoD                  func(dst, src DevicePtr, n uint64) Result
	cuMemsetD8                    func(dst DevicePtr, value uint8, n uint64) Result
	cuStreamCreate                func(s *Stream, flags uint32) Result
	cuStreamCreateWithPriority    func(s *Stream, flags uint32, priority int32) Result
	cuCtxGetStreamPriorityRange   func(least, greatest *int32) Result
	cuStreamGetPriority           func(s Stream, priority *int32) Result
	cuStreamDestroy               func(s Stream) Result
	cuStreamSynchronize           func(s Stream) Result
	cuEventCreate                 func(e *Event, flags uint32) Result
	cuEventDestroy                func(e Event) Result
	cuEventSynchronize            func(e Event) Result
	cuEventElapsedTime            func(ms *float32, start, end Event) Result
	cuModuleLoadData              func(m *Module, image unsafe.Pointer) Result
	cuModuleUnload                func(m Module) Result
	cuModuleGetFunction           func(f *Function, m Module, name string) Result
	cuFuncGetAttribute            func(v *int32, attr FunctionAttribute, f Function) Result
	cuMemAddressReserve           func(p *DevicePtr, size, alignment uint64, addr DevicePtr, flags uint64) Result
	cuMemAddressFree              func(p DevicePtr, size uint64) Result
	cuMemCreate                   func(h *MemHandle, size uint64, prop *MemAllocationProp, flags uint64) Result
	cuMemRelease                  func(h MemHandle) Result
	cuMemMap                      func(p DevicePtr, size, offset uint64, h MemHandle, flags uint64) Result
	cuMemUnmap                    func(p DevicePtr, size uint64) Result
	cuMemSetAccess                func(p DevicePtr, size uint64, desc *MemAccessDesc, count uint64) Result
	cuMemGetAllocationGranularity func(g *uint64, prop *MemAllocationProp, option GranularityFlags) Result
	cuGetErrorName                func(r Result, s **byte) Result
	cuGetErrorString              func(r Result, s **byte) Result
	cuStreamBeginCapture          func(s Stream, mode StreamCaptureMode) Result
	cuStreamEndCapture            func(s Stream, g *Graph) Result
	cuStreamIsCapturing           func(s Stream, status *StreamCaptureStatus) Result
	cuGraphInstantiateWithFlags   func(e *GraphExec, g Graph, flags uint64) Result
	cuGraphGetNodes               func(g Graph, nodes *GraphNode, n *uint64) Result
	cuGraphExecDestroy            func(e GraphExec) Result
	cuGraphDestroy                func(g Graph) Result
)

// Hot calls go through purego.SyscallN with these addresses. The sig*
// variables are never assigned: their types document the C signatures for
// bindings.tsv and its test.
var (
	addrMemcpyHtoDAsync, addrMemcpyDtoHAsync, addrMemcpyDtoDAsync, addrMemcpyPeerAsync uintptr
	addrMemsetD8Async, addrStreamQuery, addrStreamWaitEvent                            uintptr
	addrEventRecord, addrEventQuery, addrLaunchKernel, addrCtxSetCurrent               uintptr
	addrGraphLaunch                                                                    uintptr

	sigMemcpyHtoDAsync func(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) Result
	sigMemcpyDtoHAsync func(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) Result
	sigMemcpyDtoDAsync func(dst, src DevicePtr, n uint64, s Stream) Result
	sigMemcpyPeerAsync func(dst DevicePtr, dstCtx Context, src DevicePtr, srcCtx Context, n uint64, s Stream) Result
	sigMemsetD8Async   func(dst DevicePtr, value uint8, n uint64, s Stream) Result
	sigStreamQuery     func(s Stream) Result
	sigStreamWaitEvent func(s Stream, e Event, flags uint32) Result
	sigEventRecord     func(e Event, s Stream) Result
	sigEventQuery      func(e Event) Result
	sigCtxSetCurrent   func(ctx Context) Result
	sigLaunchKernel    func(f Function, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedMemBytes uint32,
		s Stream, params, extra unsafe.Pointer) Result
	sigGraphLaunch func(e GraphExec, s Stream) Result
)

const libName = "libcuda"

// bindings is every driver symbol bound, under the versioned names that
// cuda.h maps the plain names to in CUDA 12 and 13.
var bindings = []load.Binding{
	{Lib: libName, Names: []string{"cuGetErrorName"}, Fn: &cuGetErrorName},
	{Lib: libName, Names: []string{"cuGetErrorString"}, Fn: &cuGetErrorString},
	{Lib: libName, Names: []string{"cuInit"}, Fn: &cuInit},
	{Lib: libName, Names: []string{"cuDriverGetVersion"}, Fn: &cuDriverGetVersion},
	{Lib: libName, Names: []string{"cuDeviceGetCount"}, Fn: &cuDeviceGetCount},
	{Lib: libName, Names: []string{"cuDeviceGet"}, Fn: &cuDeviceGet},
	{Lib: libName, Names: []string{"cuDeviceGetName"}, Fn: &cuDeviceGetName},
	{Lib: libName, Names: []string{"cuDeviceTotalMem_v2"}, Fn: &cuDeviceTotalMem},
	{Lib: libName, Names: []string{"cuDeviceGetAttribute"}, Fn: &cuDeviceGetAttribute},
	{Lib: libName, Names: []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, Fn: &cuDeviceGetUuid},
	{Lib: libName, Names: []string{"cuDevicePrimaryCtxRetain"}, Fn: &cuDevicePrimaryCtxRetain},
	{Lib: libName, Names: []string{"cuDevicePrimaryCtxRelease_v2"}, Fn: &cuDevicePrimaryCtxRelease},
	{Lib: libName, Names: []string{"cuCtxSetCurrent"}, Fn: &sigCtxSetCurrent, Addr: &addrCtxSetCurrent},
	{Lib: libName, Names: []string{"cuCtxGetCurrent"}, Fn: &cuCtxGetCurrent},
	{Lib: libName, Names: []string{"cuCtxSynchronize"}, Fn: &cuCtxSynchronize},
	{Lib: libName, Names: []string{"cuDeviceCanAccessPeer"}, Fn: &cuDeviceCanAccessPeer},
	{Lib: libName, Names: []string{"cuCtxEnablePeerAccess"}, Fn: &cuCtxEnablePeerAccess},
	{Lib: libName, Names: []string{"cuMemAlloc_v2"}, Fn: &cuMemAlloc},
	{Lib: libName, Names: []string{"cuMemFree_v2"}, Fn: &cuMemFree},
	{Lib: libName, Names: []string{"cuMemGetInfo_v2"}, Fn: &cuMemGetInfo},
	{Lib: libName, Names: []string{"cuMemAllocHost_v2"}, Fn: &cuMemAllocHost},
	{Lib: libName, Names: []string{"cuMemHostAlloc"}, Fn: &cuMemHostAlloc},
	{Lib: libName, Names: []string{"cuMemFreeHost"}, Fn: &cuMemFreeHost},
	{Lib: libName, Names: []string{"cuMemHostRegister_v2"}, Fn: &cuMemHostRegister},
	{Lib: libName, Names: []string{"cuMemHostUnregister"}, Fn: &cuMemHostUnregister},
	{Lib: libName, Names: []string{"cuMemcpyHtoD_v2"}, Fn: &cuMemcpyHtoD},
	{Lib: libName, Names: []string{"cuMemcpyDtoH_v2"}, Fn: &cuMemcpyDtoH},
	{Lib: libName, Names: []string{"cuMemcpyDtoD_v2"}, Fn: &cuMemcpyDtoD},
	{Lib: libName, Names: []string{"cuMemsetD8_v2"}, Fn: &cuMemsetD8},
	{Lib: libName, Names: []string{"cuMemcpyHtoDAsync_v2"}, Fn: &sigMemcpyHtoDAsync, Addr: &addrMemcpyHtoDAsync},
	{Lib: libName, Names: []string{"cuMemcpyDtoHAsync_v2"}, Fn: &sigMemcpyDtoHAsync, Addr: &addrMemcpyDtoHAsync},
	{Lib: libName, Names: []string{"cuMemcpyDtoDAsync_v2"}, Fn: &sigMemcpyDtoDAsync, Addr: &addrMemcpyDtoDAsync},
	{Lib: libName, Names: []string{"cuMemcpyPeerAsync"}, Fn: &sigMemcpyPeerAsync, Addr: &addrMemcpyPeerAsync},
	{Lib: libName, Names: []string{"cuMemsetD8Async"}, Fn: &sigMemsetD8Async, Addr: &addrMemsetD8Async},
	{Lib: libName, Names: []string{"cuStreamCreate"}, Fn: &cuStreamCreate},
	{Lib: libName, Names: []string{"cuStreamCreateWithPriority"}, Fn: &cuStreamCreateWithPriority},
	{Lib: libName, Names: []string{"cuCtxGetStreamPriorityRange"}, Fn: &cuCtxGetStreamPriorityRange},
	{Lib: libName, Names: []string{"cuStreamGetPriority"}, Fn: &cuStreamGetPriority},
	{Lib: libName, Names: []string{"cuStreamDestroy_v2"}, Fn: &cuStreamDestroy},
	{Lib: libName, Names: []string{"cuStreamSynchronize"}, Fn: &cuStreamSynchronize},
	{Lib: libName, Names: []string{"cuStreamQuery"}, Fn: &sigStreamQuery, Addr: &addrStreamQuery},
	{Lib: libName, Names: []string{"cuStreamWaitEvent"}, Fn: &sigStreamWaitEvent, Addr: &addrStreamWaitEvent},
	{Lib: libName, Names: []string{"cuEventCreate"}, Fn: &cuEventCreate},
	{Lib: libName, Names: []string{"cuEventDestroy_v2"}, Fn: &cuEventDestroy},
	{Lib: libName, Names: []string{"cuEventRecord"}, Fn: &sigEventRecord, Addr: &addrEventRecord},
	{Lib: libName, Names: []string{"cuEventSynchronize"}, Fn: &cuEventSynchronize},
	{Lib: libName, Names: []string{"cuEventQuery"}, Fn: &sigEventQuery, Addr: &addrEventQuery},
	{Lib: libName, Names: []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, Fn: &cuEventElapsedTime},
	{Lib: libName, Names: []string{"cuModuleLoadData"}, Fn: &cuModuleLoadData},
	{Lib: libName, Names: []string{"cuModuleUnload"}, Fn: &cuModuleUnload},
	{Lib: libName, Names: []string{"cuModuleGetFunction"}, Fn: &cuModuleGetFunction},
	{Lib: libName, Names: []string{"cuFuncGetAttribute"}, Fn: &cuFuncGetAttribute},
	{Lib: libName, Names: []string{"cuLaunchKernel"}, Fn: &sigLaunchKernel, Addr: &addrLaunchKernel},
	{Lib: libName, Names: []string{"cuMemAddressReserve"}, Fn: &cuMemAddressReserve},
	{Lib: libName, Names: []string{"cuMemAddressFree"}, Fn: &cuMemAddressFree},
	{Lib: libName, Names: []string{"cuMemCreate"}, Fn: &cuMemCreate},
	{Lib: libName, Names: []string{"cuMemRelease"}, Fn: &cuMemRelease},
	{Lib: libName, Names: []string{"cuMemMap"}, Fn: &cuMemMap},
	{Lib: libName, Names: []string{"cuMemUnmap"}, Fn: &cuMemUnmap},
	{Lib: libName, Names: []string{"cuMemSetAccess"}, Fn: &cuMemSetAccess},
	{Lib: libName, Names: []string{"cuMemGetAllocationGranularity"}, Fn: &cuMemGetAllocationGranularity},
	{Lib: libName, Names: []string{"cuStreamBeginCapture_v2"}, Fn: &cuStreamBeginCapture},
	{Lib: libName, Names: []string{"cuStreamEndCapture"}, Fn: &cuStreamEndCapture},
	{Lib: libName, Names: []string{"cuStreamIsCapturing"}, Fn: &cuStreamIsCapturing},
	{Lib: libName, Names: []string{"cuGraphInstantiateWithFlags"}, Fn: &cuGraphInstantiateWithFlags},
	{Lib: libName, Names: []string{"cuGraphGetNodes"}, Fn: &cuGraphGetNodes},
	{Lib: libName, Names: []string{"cuGraphLaunch"}, Fn: &sigGraphLaunch, Addr: &addrGraphLaunch},
	{Lib: libName, Names: []string{"cuGraphExecDestroy"}, Fn: &cuGraphExecDestroy},
	{Lib: libName, Names: []string{"cuGraphDestroy"}, Fn: &cuGraphDestroy},
	{Lib: libName, Names: []string{"cuProfilerStart"}, Fn: &cuProfilerStart},
	{Lib: libName, Names: []string{"cuProfilerStop"}, Fn: &cuProfilerStop},
}

// Spec is how [Load] searches for the driver library: libcuda.so.1 only,
// never the toolkit's stub, in VRAM_CUDA_LIBS, the loader's search, then
// the folders where containers and WSL mount the driver.
var Spec = load.Spec{
	Name:          libName,
	Sonames:       []string{"libcuda.so.1"},
	ExtraDirs:     []string{"/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"},
	NoToolkitDirs: true,
}

// driver holds the loaded libcuda.so.1 and whether the bindings are ready.
var driver = load.Loader{Spec: &Spec, Bindings: bindings}

// Load finds libcuda.so.1 as the package load describes, resolves every
// binding and returns the library it loaded. Once it has succeeded, later
// calls return the same library at once; after a failure the next call
// searches again. It does not call cuInit (see [Init]).
//
// The error is a *load.NotFoundError when no libcuda.so.1 could be opened
// (no NVIDIA driver), or a *load.MissingSymbolError when the driver is too
// old for these bindings (older than CUDA 12).
//
// Load is safe for concurrent use.
func Load() (*load.Library, error) { return driver.Load() }

// Resolved returns, for each bound C symbol, the name found in the loaded
// library (a fallback name where the library lacks the newer one), or nil
// before [Load] succeeded. For diagnostics.
func Resolved() map[string]string { return driver.Resolved() }

// call returns [ErrNotLoaded] before [Load] succeeded; else it calls c,
// which calls the C function fn, and turns the CUresult into an error.
func call(fn string, c func() Result) error {
	if !driver.Ready() {
		return ErrNotLoaded
	}
	return check(fn, c())
}

// result is the CUresult of a call through purego.SyscallN: the low 32
// bits of its first return value.
func result(r1, _, _ uintptr) Result { return Result(int32(r1)) }

// goString copies a C string owned by the driver.
func goString(p *byte) string { return load.GoString(p) }
