package cuda

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// MemAlloc allocates size bytes of device memory in the current context.
// It calls cuMemAlloc_v2. The memory must be freed with [MemFree]; an
// allocation that does not fit fails with [ErrOutOfMemory].
func MemAlloc(size uint64) (DevicePtr, error) {
	var p DevicePtr
	err := call("cuMemAlloc_v2", func() Result { return cuMemAlloc(&p, size) })
	return p, err
}

// MemFree frees memory from [MemAlloc]. It calls cuMemFree_v2.
func MemFree(p DevicePtr) error {
	return call("cuMemFree_v2", func() Result { return cuMemFree(p) })
}

// MemGetInfo returns the free and total bytes of the current context's
// device, as the driver sees them (every process counted). It calls
// cuMemGetInfo_v2.
func MemGetInfo() (free, total uint64, err error) {
	err = call("cuMemGetInfo_v2", func() Result { return cuMemGetInfo(&free, &total) })
	return free, total, err
}

// MemAllocHost allocates size bytes of page-locked host memory, outside
// the Go heap, that every context can copy from at full speed. It calls
// cuMemAllocHost_v2. The memory must be freed with [MemFreeHost]; view it
// with unsafe.Slice((*byte)(p), size).
func MemAllocHost(size uint64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := call("cuMemAllocHost_v2", func() Result { return cuMemAllocHost(&p, size) })
	return p, err
}

// MemHostAlloc allocates size bytes of page-locked host memory, outside
// the Go heap, with the given flags ([HostAllocPortable],
// [HostAllocDeviceMap], [HostAllocWriteCombined], or 0 for memory pinned
// for the current context only). It calls cuMemHostAlloc. The memory must
// be freed with [MemFreeHost]; asynchronous copies from it overlap with
// kernels.
func MemHostAlloc(size uint64, flags uint32) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := call("cuMemHostAlloc", func() Result { return cuMemHostAlloc(&p, size, flags) })
	return p, err
}

// MemFreeHost frees memory from [MemAllocHost] or [MemHostAlloc]. It calls
// cuMemFreeHost.
func MemFreeHost(p unsafe.Pointer) error {
	return call("cuMemFreeHost", func() Result { return cuMemFreeHost(p) })
}

// MemHostRegister page-locks the existing host range [p, p+size) for fast
// and asynchronous copies. It calls cuMemHostRegister_v2. When p is Go
// memory, the caller must pin it (runtime.Pinner) and keep it alive until
// [MemHostUnregister].
func MemHostRegister(p unsafe.Pointer, size uint64, flags uint32) error {
	return call("cuMemHostRegister_v2", func() Result { return cuMemHostRegister(p, size, flags) })
}

// MemHostUnregister undoes [MemHostRegister]. It calls cuMemHostUnregister.
func MemHostUnregister(p unsafe.Pointer) error {
	return call("cuMemHostUnregister", func() Result { return cuMemHostUnregister(p) })
}

// MemcpyHtoD copies n bytes from host memory at src to the device. It
// calls cuMemcpyHtoD_v2 and returns once src may be reused.
func MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, n uint64) error {
	return call("cuMemcpyHtoD_v2", func() Result { return cuMemcpyHtoD(dst, src, n) })
}

// MemcpyDtoH copies n bytes from the device to host memory at dst. It
// calls cuMemcpyDtoH_v2 and returns when the data is there.
func MemcpyDtoH(dst unsafe.Pointer, src DevicePtr, n uint64) error {
	return call("cuMemcpyDtoH_v2", func() Result { return cuMemcpyDtoH(dst, src, n) })
}

// MemcpyDtoD copies n bytes between device addresses (any devices with
// unified addressing). It calls cuMemcpyDtoD_v2.
func MemcpyDtoD(dst, src DevicePtr, n uint64) error {
	return call("cuMemcpyDtoD_v2", func() Result { return cuMemcpyDtoD(dst, src, n) })
}

// MemsetD8 sets n bytes at dst to value. It calls cuMemsetD8_v2.
func MemsetD8(dst DevicePtr, value uint8, n uint64) error {
	return call("cuMemsetD8_v2", func() Result { return cuMemsetD8(dst, value, n) })
}

// MemcpyHtoDAsync queues a copy of n bytes from host memory at src to the
// device on stream s. It calls cuMemcpyHtoDAsync_v2 through
// purego.SyscallN. The copy is asynchronous only from page-locked memory;
// src must stay valid (pinned, if Go memory) until the stream has run it.
func MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) error {
	return call("cuMemcpyHtoDAsync_v2", func() Result {
		return result(purego.SyscallN(addrMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
	})
}

// MemcpyDtoHAsync queues a copy of n bytes from the device to host memory
// at dst on stream s. It calls cuMemcpyDtoHAsync_v2 through
// purego.SyscallN. dst must stay valid (pinned, if Go memory) until the
// stream has run it, and must not be read before.
func MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) error {
	return call("cuMemcpyDtoHAsync_v2", func() Result {
		return result(purego.SyscallN(addrMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
	})
}

// MemcpyDtoDAsync queues a device-to-device copy of n bytes on stream s.
// It calls cuMemcpyDtoDAsync_v2 through purego.SyscallN.
func MemcpyDtoDAsync(dst, src DevicePtr, n uint64, s Stream) error {
	return call("cuMemcpyDtoDAsync_v2", func() Result {
		return result(purego.SyscallN(addrMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
	})
}

// MemcpyPeerAsync queues a copy of n bytes from src in srcCtx to dst in
// dstCtx on stream s (a stream of the current context). It calls
// cuMemcpyPeerAsync through purego.SyscallN. It works without peer access
// (the driver stages through the host) and copies directly with it.
func MemcpyPeerAsync(dst DevicePtr, dstCtx Context, src DevicePtr, srcCtx Context, n uint64, s Stream) error {
	return call("cuMemcpyPeerAsync", func() Result {
		return result(purego.SyscallN(addrMemcpyPeerAsync, uintptr(dst), uintptr(dstCtx), uintptr(src), uintptr(srcCtx), uintptr(n), uintptr(s)))
	})
}

// MemsetD8Async queues setting n bytes at dst to value on stream s. It
// calls cuMemsetD8Async through purego.SyscallN.
func MemsetD8Async(dst DevicePtr, value uint8, n uint64, s Stream) error {
	return call("cuMemsetD8Async", func() Result {
		return result(purego.SyscallN(addrMemsetD8Async, uintptr(dst), uintptr(value), uintptr(n), uintptr(s)))
	})
}
