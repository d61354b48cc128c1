package cuda

import "fmt"

// Device is a CUdevice: a device ordinal as the driver numbers it.
type Device int32

// Context is a CUcontext handle.
type Context uintptr

// Stream is a CUstream handle; the zero Stream is the legacy default
// stream.
type Stream uintptr

// Event is a CUevent handle.
type Event uintptr

// Module is a CUmodule handle.
type Module uintptr

// Function is a CUfunction handle.
type Function uintptr

// DevicePtr is a CUdeviceptr: an address in the unified virtual address
// space. It is a plain integer, never a Go pointer.
type DevicePtr uint64

// MemHandle is a CUmemGenericAllocationHandle from [MemCreate].
type MemHandle uint64

// UUID is a CUuuid: the 16 bytes that identify a GPU.
type UUID [16]byte

// String formats the UUID as nvidia-smi does:
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func (u UUID) String() string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Dim3 is a grid or block shape for [LaunchKernel].
type Dim3 struct{ X, Y, Z uint32 }

// DeviceAttribute is a CUdevice_attribute for [DeviceGetAttribute].
type DeviceAttribute int32

// Device attributes (the values of cuda.h's CUdevice_attribute).
const (
	AttrMaxThreadsPerBlock               DeviceAttribute = 1   // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	AttrMaxBlockDimX                     DeviceAttribute = 2   // CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X
	AttrMaxBlockDimY                     DeviceAttribute = 3   // CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y
	AttrMaxBlockDimZ                     DeviceAttribute = 4   // CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z
	AttrMaxGridDimX                      DeviceAttribute = 5   // CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X
	AttrMaxGridDimY                      DeviceAttribute = 6   // CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y
	AttrMaxGridDimZ                      DeviceAttribute = 7   // CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z
	AttrMaxSharedMemoryPerBlock          DeviceAttribute = 8   // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK (bytes)
	AttrTotalConstantMemory              DeviceAttribute = 9   // CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY (bytes)
	AttrWarpSize                         DeviceAttribute = 10  // CU_DEVICE_ATTRIBUTE_WARP_SIZE
	AttrMaxRegistersPerBlock             DeviceAttribute = 12  // CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK
	AttrMultiprocessorCount              DeviceAttribute = 16  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	AttrIntegrated                       DeviceAttribute = 18  // CU_DEVICE_ATTRIBUTE_INTEGRATED
	AttrCanMapHostMemory                 DeviceAttribute = 19  // CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY
	AttrConcurrentKernels                DeviceAttribute = 31  // CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS
	AttrECCEnabled                       DeviceAttribute = 32  // CU_DEVICE_ATTRIBUTE_ECC_ENABLED
	AttrPCIBusID                         DeviceAttribute = 33  // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
	AttrPCIDeviceID                      DeviceAttribute = 34  // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
	AttrGlobalMemoryBusWidth             DeviceAttribute = 37  // CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH (bits)
	AttrL2CacheSize                      DeviceAttribute = 38  // CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE (bytes)
	AttrMaxThreadsPerMultiprocessor      DeviceAttribute = 39  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
	AttrAsyncEngineCount                 DeviceAttribute = 40  // CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT
	AttrUnifiedAddressing                DeviceAttribute = 41  // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	AttrPCIDomainID                      DeviceAttribute = 50  // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
	AttrComputeCapabilityMajor           DeviceAttribute = 75  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	AttrComputeCapabilityMinor           DeviceAttribute = 76  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	AttrMaxSharedMemoryPerMultiprocessor DeviceAttribute = 81  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR (bytes)
	AttrMaxSharedMemoryPerBlockOptin     DeviceAttribute = 97  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (bytes)
	AttrVirtualMemoryManagementSupported DeviceAttribute = 102 // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
	AttrMaxPersistingL2CacheSize         DeviceAttribute = 108 // CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE (bytes)
)

// FunctionAttribute is a CUfunction_attribute for [FuncGetAttribute].
type FunctionAttribute int32

// Function attributes (the values of cuda.h's CUfunction_attribute).
const (
	FuncAttrMaxThreadsPerBlock        FunctionAttribute = 0 // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	FuncAttrSharedSizeBytes           FunctionAttribute = 1 // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	FuncAttrConstSizeBytes            FunctionAttribute = 2 // CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES
	FuncAttrLocalSizeBytes            FunctionAttribute = 3 // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
	FuncAttrNumRegs                   FunctionAttribute = 4 // CU_FUNC_ATTRIBUTE_NUM_REGS
	FuncAttrPTXVersion                FunctionAttribute = 5 // CU_FUNC_ATTRIBUTE_PTX_VERSION (major*10+minor)
	FuncAttrBinaryVersion             FunctionAttribute = 6 // CU_FUNC_ATTRIBUTE_BINARY_VERSION (major*10+minor)
	FuncAttrMaxDynamicSharedSizeBytes FunctionAttribute = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
)

// Flags of [StreamCreate] and [StreamCreateWithPriority] (CUstream_flags).
const (
	StreamDefault     uint32 = 0 // CU_STREAM_DEFAULT: synchronises with the legacy default stream
	StreamNonBlocking uint32 = 1 // CU_STREAM_NON_BLOCKING
)

// Flags of [EventCreate] (CUevent_flags), to be or'ed together.
const (
	EventDefault       uint32 = 0 // CU_EVENT_DEFAULT: timed, synchronised by spinning
	EventBlockingSync  uint32 = 1 // CU_EVENT_BLOCKING_SYNC: EventSynchronize sleeps instead of spinning
	EventDisableTiming uint32 = 2 // CU_EVENT_DISABLE_TIMING: no timing data, cheaper to record and wait on
	EventInterprocess  uint32 = 4 // CU_EVENT_INTERPROCESS: shareable between processes (needs EventDisableTiming)
)

// Flags of [MemHostAlloc] (CU_MEMHOSTALLOC_*), to be or'ed together.
const (
	HostAllocPortable      uint32 = 0x01 // CU_MEMHOSTALLOC_PORTABLE: pinned for every context, not only the current one
	HostAllocDeviceMap     uint32 = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP: mapped into the device address space
	HostAllocWriteCombined uint32 = 0x04 // CU_MEMHOSTALLOC_WRITECOMBINED: fast for the device to read, slow for the host to read
)

// Flags of [MemHostRegister] (CU_MEMHOSTREGISTER_*).
const (
	HostRegisterPortable  uint32 = 0x01 // CU_MEMHOSTREGISTER_PORTABLE: pinned for every context
	HostRegisterDeviceMap uint32 = 0x02 // CU_MEMHOSTREGISTER_DEVICEMAP
	HostRegisterIOMemory  uint32 = 0x04 // CU_MEMHOSTREGISTER_IOMEMORY
	HostRegisterReadOnly  uint32 = 0x08 // CU_MEMHOSTREGISTER_READ_ONLY
)
