package cuda

import "unsafe"

// MemLocationType is a CUmemLocationType.
type MemLocationType int32

// Location types (CUmemLocationType).
const (
	MemLocationInvalid MemLocationType = 0 // CU_MEM_LOCATION_TYPE_INVALID
	MemLocationDevice  MemLocationType = 1 // CU_MEM_LOCATION_TYPE_DEVICE: ID is a device ordinal
)

// MemAllocationType is a CUmemAllocationType.
type MemAllocationType uint32

// MemAllocationPinned is CU_MEM_ALLOCATION_TYPE_PINNED, the only type
// cuMemCreate takes for device memory.
const MemAllocationPinned MemAllocationType = 1

// MemHandleType is a CUmemAllocationHandleType (for exporting handles).
type MemHandleType uint32

// MemHandleTypeNone is CU_MEM_HANDLE_TYPE_NONE: the allocation is not
// exportable.
const MemHandleTypeNone MemHandleType = 0

// MemAccessFlags is a CUmemAccess_flags.
type MemAccessFlags uint32

// Access flags (CUmemAccess_flags).
const (
	MemAccessNone      MemAccessFlags = 0 // CU_MEM_ACCESS_FLAGS_PROT_NONE
	MemAccessRead      MemAccessFlags = 1 // CU_MEM_ACCESS_FLAGS_PROT_READ
	MemAccessReadWrite MemAccessFlags = 3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
)

// GranularityFlags is a CUmemAllocationGranularity_flags.
type GranularityFlags int32

// Granularity options (CUmemAllocationGranularity_flags).
const (
	GranularityMinimum     GranularityFlags = 0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM
	GranularityRecommended GranularityFlags = 1 // CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
)

// MemLocation is a CUmemLocation: 8 bytes, {int type; int id}.
type MemLocation struct {
	Type MemLocationType // offset 0
	ID   int32           // offset 4: a device ordinal for MemLocationDevice
}

// MemAllocFlags is the allocFlags member of CUmemAllocationProp: 8 bytes.
type MemAllocFlags struct {
	CompressionType      uint8    // offset 0: CU_MEM_ALLOCATION_COMP_NONE (0) or _GENERIC (1)
	GPUDirectRDMACapable uint8    // offset 1
	Usage                uint16   // offset 2
	Reserved             [4]uint8 // offset 4
}

// MemAllocationProp is a CUmemAllocationProp: 32 bytes, laid out as in
// cuda.h (CUDA 12 and 13 agree).
type MemAllocationProp struct {
	Type                 MemAllocationType // offset 0
	RequestedHandleTypes MemHandleType     // offset 4
	Location             MemLocation       // offset 8
	Win32HandleMetaData  uintptr           // offset 16: void*, unused on Linux (keep 0)
	AllocFlags           MemAllocFlags     // offset 24
}

// MemAccessDesc is a CUmemAccessDesc: 12 bytes.
type MemAccessDesc struct {
	Location MemLocation    // offset 0
	Flags    MemAccessFlags // offset 8
}

// MemAddressReserve reserves size bytes of virtual address space aligned
// to alignment (0 for the default) near addr (0 for anywhere) and returns
// its start. flags must be 0. It calls cuMemAddressReserve. The range must
// be given back with [MemAddressFree].
func MemAddressReserve(size, alignment uint64, addr DevicePtr, flags uint64) (DevicePtr, error) {
	var p DevicePtr
	err := call("cuMemAddressReserve", func() Result { return cuMemAddressReserve(&p, size, alignment, addr, flags) })
	return p, err
}

// MemAddressFree frees a range reserved by [MemAddressReserve]. It calls
// cuMemAddressFree.
func MemAddressFree(p DevicePtr, size uint64) error {
	return call("cuMemAddressFree", func() Result { return cuMemAddressFree(p, size) })
}

// MemCreate creates size bytes of physical memory with the properties in
// prop (size a multiple of [MemGetAllocationGranularity]); flags must be 0.
// It calls cuMemCreate. The handle must be released with [MemRelease].
func MemCreate(size uint64, prop *MemAllocationProp, flags uint64) (MemHandle, error) {
	var h MemHandle
	err := call("cuMemCreate", func() Result { return cuMemCreate(&h, size, prop, flags) })
	return h, err
}

// MemRelease releases a handle from [MemCreate]; the memory is freed once
// no mapping uses it. It calls cuMemRelease.
func MemRelease(h MemHandle) error {
	return call("cuMemRelease", func() Result { return cuMemRelease(h) })
}

// MemMap maps size bytes of h, from offset (0), at p in a reserved range;
// flags must be 0. It calls cuMemMap. The mapping is not accessible until
// [MemSetAccess].
func MemMap(p DevicePtr, size, offset uint64, h MemHandle, flags uint64) error {
	return call("cuMemMap", func() Result { return cuMemMap(p, size, offset, h, flags) })
}

// MemUnmap unmaps the mapped range [p, p+size). It calls cuMemUnmap.
func MemUnmap(p DevicePtr, size uint64) error {
	return call("cuMemUnmap", func() Result { return cuMemUnmap(p, size) })
}

// MemSetAccess sets the access of the devices in desc to the mapped range
// [p, p+size). It calls cuMemSetAccess.
func MemSetAccess(p DevicePtr, size uint64, desc []MemAccessDesc) error {
	var d *MemAccessDesc
	if len(desc) > 0 {
		d = &desc[0]
	}
	return call("cuMemSetAccess", func() Result { return cuMemSetAccess(p, size, d, uint64(len(desc))) })
}

// MemGetAllocationGranularity returns the granularity in bytes that sizes
// and addresses of [MemCreate] and [MemMap] must be multiples of, for prop.
// It calls cuMemGetAllocationGranularity.
func MemGetAllocationGranularity(prop *MemAllocationProp, option GranularityFlags) (uint64, error) {
	var g uint64
	err := call("cuMemGetAllocationGranularity", func() Result { return cuMemGetAllocationGranularity(&g, prop, option) })
	return g, err
}

// Sizes of the structs handed to the driver by pointer, as cuda.h lays
// them out on 64-bit Linux; the CPU test checks the Go types against them.
const (
	sizeofMemLocation       = 8
	sizeofMemAllocationProp = 32
	sizeofMemAccessDesc     = 12
)

var (
	_ [unsafe.Sizeof(MemLocation{}) - sizeofMemLocation]struct{}
	_ [sizeofMemLocation - unsafe.Sizeof(MemLocation{})]struct{}
	_ [unsafe.Sizeof(MemAllocationProp{}) - sizeofMemAllocationProp]struct{}
	_ [sizeofMemAllocationProp - unsafe.Sizeof(MemAllocationProp{})]struct{}
	_ [unsafe.Sizeof(MemAccessDesc{}) - sizeofMemAccessDesc]struct{}
	_ [sizeofMemAccessDesc - unsafe.Sizeof(MemAccessDesc{})]struct{}
)
