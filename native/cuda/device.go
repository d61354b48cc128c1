package cuda

import (
	"runtime"

	"github.com/ebitengine/purego"
)

// Init initialises the driver; flags must be 0. It calls cuInit. Every
// other driver call but [DriverGetVersion] fails with [ErrNotInitialized]
// before it. Calling it again is harmless.
func Init(flags uint32) error {
	return call("cuInit", func() Result { return cuInit(flags) })
}

// DriverGetVersion returns the newest CUDA version the driver supports, as
// 1000*major + 10*minor (13000 for CUDA 13.0). It calls cuDriverGetVersion
// and works before [Init].
func DriverGetVersion() (int, error) {
	var v int32
	err := call("cuDriverGetVersion", func() Result { return cuDriverGetVersion(&v) })
	return int(v), err
}

// DeviceGetCount returns the number of CUDA devices. It calls
// cuDeviceGetCount.
func DeviceGetCount() (int, error) {
	var n int32
	err := call("cuDeviceGetCount", func() Result { return cuDeviceGetCount(&n) })
	return int(n), err
}

// DeviceGet returns the device with the given ordinal. It calls
// cuDeviceGet.
func DeviceGet(ordinal int) (Device, error) {
	var d Device
	err := call("cuDeviceGet", func() Result { return cuDeviceGet(&d, int32(ordinal)) })
	return d, err
}

// DeviceGetName returns the device's product name, e.g. "NVIDIA H200". It
// calls cuDeviceGetName.
func DeviceGetName(dev Device) (string, error) {
	var buf [256]byte
	if err := call("cuDeviceGetName", func() Result { return cuDeviceGetName(&buf[0], int32(len(buf)), dev) }); err != nil {
		return "", err
	}
	return goString(&buf[0]), nil
}

// DeviceTotalMem returns the device's memory in bytes. It calls
// cuDeviceTotalMem_v2.
func DeviceTotalMem(dev Device) (uint64, error) {
	var n uint64
	err := call("cuDeviceTotalMem_v2", func() Result { return cuDeviceTotalMem(&n, dev) })
	return n, err
}

// DeviceGetAttribute returns one attribute of the device. It calls
// cuDeviceGetAttribute.
func DeviceGetAttribute(attr DeviceAttribute, dev Device) (int, error) {
	var v int32
	err := call("cuDeviceGetAttribute", func() Result { return cuDeviceGetAttribute(&v, attr, dev) })
	return int(v), err
}

// DeviceGetUUID returns the device's UUID. It calls cuDeviceGetUuid_v2
// (cuDeviceGetUuid on drivers older than CUDA 11.4, which lack it).
func DeviceGetUUID(dev Device) (UUID, error) {
	var u UUID
	err := call("cuDeviceGetUuid_v2", func() Result { return cuDeviceGetUuid(&u, dev) })
	return u, err
}

// DeviceCanAccessPeer reports whether contexts on dev can access memory on
// peer once peer access is enabled. It calls cuDeviceCanAccessPeer.
func DeviceCanAccessPeer(dev, peer Device) (bool, error) {
	var v int32
	err := call("cuDeviceCanAccessPeer", func() Result { return cuDeviceCanAccessPeer(&v, dev, peer) })
	return v != 0, err
}

// DevicePrimaryCtxRetain retains the device's primary context (the one
// cuBLAS, NCCL and the CUDA runtime share) and returns it, creating it on
// first use. It calls cuDevicePrimaryCtxRetain. Each call must be matched
// by [DevicePrimaryCtxRelease].
func DevicePrimaryCtxRetain(dev Device) (Context, error) {
	var c Context
	err := call("cuDevicePrimaryCtxRetain", func() Result { return cuDevicePrimaryCtxRetain(&c, dev) })
	return c, err
}

// DevicePrimaryCtxRelease releases a reference taken by
// [DevicePrimaryCtxRetain]; the context is destroyed with the last one. It
// calls cuDevicePrimaryCtxRelease_v2.
func DevicePrimaryCtxRelease(dev Device) error {
	return call("cuDevicePrimaryCtxRelease_v2", func() Result { return cuDevicePrimaryCtxRelease(dev) })
}

// CtxSetCurrent makes ctx current on the calling OS thread (0 unbinds).
// It calls cuCtxSetCurrent through purego.SyscallN: every op of the CUDA
// backend makes its context current first. The goroutine must hold its
// thread with runtime.LockOSThread for the setting to mean anything: see
// [Context.Do].
func CtxSetCurrent(ctx Context) error {
	return call("cuCtxSetCurrent", func() Result { return result(purego.SyscallN(addrCtxSetCurrent, uintptr(ctx))) })
}

// CtxGetCurrent returns the context current on the calling OS thread, 0 if
// none. It calls cuCtxGetCurrent.
func CtxGetCurrent() (Context, error) {
	var c Context
	err := call("cuCtxGetCurrent", func() Result { return cuCtxGetCurrent(&c) })
	return c, err
}

// CtxSynchronize blocks until the current context's work is done and
// returns the first asynchronous error, if any. It calls cuCtxSynchronize.
func CtxSynchronize() error {
	return call("cuCtxSynchronize", func() Result { return cuCtxSynchronize() })
}

// CtxEnablePeerAccess lets the current context access memory of the peer
// context; flags must be 0. It calls cuCtxEnablePeerAccess. Enabling it a
// second time fails with [ErrPeerAccessAlreadyEnabled].
func CtxEnablePeerAccess(peer Context, flags uint32) error {
	return call("cuCtxEnablePeerAccess", func() Result { return cuCtxEnablePeerAccess(peer, flags) })
}

// Do runs fn on the calling goroutine with its OS thread locked and c
// current on that thread, and returns fn's error (or the error of making
// c current). The thread stays locked only for the call; Do may be nested
// (the lock is counted) and leaves c current when it returns.
//
// Every driver call that uses the current context (allocations, copies,
// launches, module loads) must run inside Do or on a goroutine that has
// locked its thread and made the context current itself.
func (c Context) Do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := CtxSetCurrent(c); err != nil {
		return err
	}
	return fn()
}

// ProfilerStart starts the collection of an attached profiler (Nsight
// Compute or Systems started with profiling from the start off) for the
// current context, so that a program can profile one part of its run. It
// calls cuProfilerStart; without a profiler it does nothing.
func ProfilerStart() error {
	return call("cuProfilerStart", func() Result { return cuProfilerStart() })
}

// ProfilerStop stops what [ProfilerStart] started. It calls
// cuProfilerStop.
func ProfilerStop() error {
	return call("cuProfilerStop", func() Result { return cuProfilerStop() })
}
