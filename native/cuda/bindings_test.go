package cuda

import (
	"math"
	"testing"
	"unsafe"

	"github.com/vramgo/vram/native/internal/bindtest"
)

// TestBindingTable holds every Go declaration and struct to bindings.tsv.
func TestBindingTable(t *testing.T) {
	bindtest.Table(t, bindings, map[string]uintptr{
		"CUmemLocation":       unsafe.Sizeof(MemLocation{}),
		"CUmemAllocationProp": unsafe.Sizeof(MemAllocationProp{}),
		"CUmemAccessDesc":     unsafe.Sizeof(MemAccessDesc{}),
		"CUuuid":              unsafe.Sizeof(UUID{}),
	})
}

// TestSymbolsNamed checks that every wrapper reports the C symbol of the
// binding it calls.
func TestSymbolsNamed(t *testing.T) {
	bindtest.Uses(t, bindings, map[string]string{"call": libName}, "call", "check")
}

// TestNotLoaded checks that every wrapper fails with ErrNotLoaded, instead
// of calling through a nil function or address, before Load.
func TestNotLoaded(t *testing.T) {
	if driver.Ready() {
		t.Skip("the driver is loaded")
	}
	bindtest.NotLoaded(t, ErrNotLoaded, []any{
		Init, DriverGetVersion, DeviceGetCount, DeviceGet, DeviceGetName, DeviceTotalMem,
		DeviceGetAttribute, DeviceGetUUID, DeviceCanAccessPeer, DevicePrimaryCtxRetain,
		DevicePrimaryCtxRelease, CtxSetCurrent, CtxGetCurrent, CtxSynchronize, CtxEnablePeerAccess, ProfilerStart, ProfilerStop,
		MemAlloc, MemFree, MemGetInfo, MemAllocHost, MemHostAlloc, MemFreeHost, MemHostRegister,
		MemHostUnregister, MemcpyHtoD, MemcpyDtoH, MemcpyDtoD, MemsetD8, MemcpyHtoDAsync,
		MemcpyDtoHAsync, MemcpyDtoDAsync, MemcpyPeerAsync, MemsetD8Async,
		StreamCreate, StreamCreateWithPriority, CtxGetStreamPriorityRange, StreamGetPriority,
		StreamDestroy, StreamSynchronize, StreamQuery, StreamWaitEvent,
		EventCreate, EventDestroy, EventRecord, EventQuery, EventSynchronize, EventElapsedTime,
		ModuleLoadData, ModuleUnload, ModuleGetFunction, FuncGetAttribute, LaunchKernel,
		MemAddressReserve, MemAddressFree, MemCreate, MemRelease, MemMap, MemUnmap, MemSetAccess,
		MemGetAllocationGranularity, StreamBeginCapture, StreamEndCapture, StreamIsCapturing,
		GraphInstantiate, GraphNodeCount, GraphLaunch, GraphExecDestroy, GraphDestroy,
	}, "Load")
	if Resolved() != nil {
		t.Error("Resolved before Load is not nil")
	}
}

// TestStructLayout checks field offsets against cuda.h's layout.
func TestStructLayout(t *testing.T) {
	var p MemAllocationProp
	var d MemAccessDesc
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"CUmemLocation.type", unsafe.Offsetof(p.Location.Type), 0},
		{"CUmemLocation.id", unsafe.Offsetof(p.Location.ID), 4},
		{"CUmemAllocationProp.type", unsafe.Offsetof(p.Type), 0},
		{"CUmemAllocationProp.requestedHandleTypes", unsafe.Offsetof(p.RequestedHandleTypes), 4},
		{"CUmemAllocationProp.location", unsafe.Offsetof(p.Location), 8},
		{"CUmemAllocationProp.win32HandleMetaData", unsafe.Offsetof(p.Win32HandleMetaData), 16},
		{"CUmemAllocationProp.allocFlags", unsafe.Offsetof(p.AllocFlags), 24},
		{"allocFlags.compressionType", unsafe.Offsetof(p.AllocFlags.CompressionType), 0},
		{"allocFlags.gpuDirectRDMACapable", unsafe.Offsetof(p.AllocFlags.GPUDirectRDMACapable), 1},
		{"allocFlags.usage", unsafe.Offsetof(p.AllocFlags.Usage), 2},
		{"allocFlags.reserved", unsafe.Offsetof(p.AllocFlags.Reserved), 4},
		{"CUmemAccessDesc.location", unsafe.Offsetof(d.Location), 0},
		{"CUmemAccessDesc.flags", unsafe.Offsetof(d.Flags), 8},
		{"sizeof CUmemAllocationProp", unsafe.Sizeof(p), 32},
		{"sizeof CUmemAccessDesc", unsafe.Sizeof(d), 12},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	bindtest.Errors[Result, *Error](t, "cuda", check, Success, ErrUnknown, driver.Ready(), []bindtest.ErrorCase[Result]{
		{Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Sentinel: ErrOutOfMemory},
		{Code: 201, Name: "CUDA_ERROR_INVALID_CONTEXT", Sentinel: ErrInvalidContext},
		{Code: 3, Name: "CUDA_ERROR_NOT_INITIALIZED", Sentinel: ErrNotInitialized},
		{Code: 100, Name: "CUDA_ERROR_NO_DEVICE", Sentinel: ErrNoDevice},
		{Code: 600, Name: "CUDA_ERROR_NOT_READY", Sentinel: ErrNotReady},
		{Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS", Sentinel: ErrIllegalAddress},
		{Code: 999, Name: "CUDA_ERROR_UNKNOWN", Sentinel: ErrUnknown},
		{Code: 12345, Name: "CUDA_ERROR_12345"},
	})
}

// TestResultNamesUnique guards the checked-in table against copy slips.
func TestResultNamesUnique(t *testing.T) {
	bindtest.Names(t, resultNames, "CUDA_")
}

func TestKernelArgs(t *testing.T) {
	a := NewKernelArgs(6)
	defer a.Free()
	a.Ptr(0xdead_beef_0000).Float32(1.5).Int32(-2).Uint64(1 << 40).Float64(math.Pi).Uint32(7)
	if a.Len() != 6 || a.over {
		t.Fatalf("len %d, overflow %v", a.Len(), a.over)
	}
	for i := 0; i < a.n; i++ {
		if a.ptrs[i] != uintptr(unsafe.Pointer(&a.vals[i])) {
			t.Fatalf("slot %d does not point at its value", i)
		}
	}
	if *(*uint64)(unsafe.Pointer(&a.vals[0])) != 0xdead_beef_0000 {
		t.Error("pointer slot")
	}
	if *(*float32)(unsafe.Pointer(&a.vals[1])) != 1.5 {
		t.Error("float slot is not read as a float by its first 4 bytes")
	}
	if *(*int32)(unsafe.Pointer(&a.vals[2])) != -2 {
		t.Error("int slot is not read as an int by its first 4 bytes")
	}
	if *(*float64)(unsafe.Pointer(&a.vals[4])) != math.Pi {
		t.Error("double slot")
	}
	a.Uint32(8)
	if !a.over {
		t.Error("seventh argument did not overflow a capacity of 6")
	}
	a.Reset()
	if a.Len() != 0 || a.over {
		t.Error("Reset")
	}
}

func TestUUIDString(t *testing.T) {
	u := UUID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	if got, want := u.String(), "GPU-01234567-89ab-cdef-0123-456789abcdef"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
