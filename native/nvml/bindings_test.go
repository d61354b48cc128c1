package nvml

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/vramgo/vram/native/internal/bindtest"
	"github.com/vramgo/vram/native/load"
)

// TestBindingTable holds every Go declaration and struct to bindings.tsv.
func TestBindingTable(t *testing.T) {
	bindtest.Table(t, bindings, map[string]uintptr{
		"nvmlMemory_t":      unsafe.Sizeof(Memory{}),
		"nvmlMemory_v2_t":   unsafe.Sizeof(MemoryV2{}),
		"nvmlUtilization_t": unsafe.Sizeof(Utilization{}),
		"nvmlProcessInfo_t": unsafe.Sizeof(ProcessInfo{}),
		"nvmlPciInfo_t":     unsafe.Sizeof(PciInfo{}),
	})
}

// TestSymbolsNamed checks that every wrapper reports the C symbol of the
// binding it calls.
func TestSymbolsNamed(t *testing.T) {
	bindtest.Uses(t, bindings, map[string]string{"call": libName, "callString": libName}, "call", "callString", "check", "ErrorString")
}

// TestStructLayout checks field offsets against nvml.h's layout.
func TestStructLayout(t *testing.T) {
	var m Memory
	var m2 MemoryV2
	var u Utilization
	var p ProcessInfo
	var pci PciInfo
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"nvmlMemory_t.total", unsafe.Offsetof(m.Total), 0},
		{"nvmlMemory_t.free", unsafe.Offsetof(m.Free), 8},
		{"nvmlMemory_t.used", unsafe.Offsetof(m.Used), 16},
		{"nvmlMemory_v2_t.version", unsafe.Offsetof(m2.Version), 0},
		{"nvmlMemory_v2_t.total", unsafe.Offsetof(m2.Total), 8},
		{"nvmlMemory_v2_t.reserved", unsafe.Offsetof(m2.Reserved), 16},
		{"nvmlMemory_v2_t.free", unsafe.Offsetof(m2.Free), 24},
		{"nvmlMemory_v2_t.used", unsafe.Offsetof(m2.Used), 32},
		{"nvmlUtilization_t.gpu", unsafe.Offsetof(u.GPU), 0},
		{"nvmlUtilization_t.memory", unsafe.Offsetof(u.Memory), 4},
		{"nvmlProcessInfo_t.pid", unsafe.Offsetof(p.PID), 0},
		{"nvmlProcessInfo_t.usedGpuMemory", unsafe.Offsetof(p.UsedGPUMemory), 8},
		{"nvmlProcessInfo_t.gpuInstanceId", unsafe.Offsetof(p.GPUInstanceID), 16},
		{"nvmlProcessInfo_t.computeInstanceId", unsafe.Offsetof(p.ComputeInstanceID), 20},
		{"nvmlPciInfo_t.busIdLegacy", unsafe.Offsetof(pci.BusIDLegacy), 0},
		{"nvmlPciInfo_t.domain", unsafe.Offsetof(pci.Domain), 16},
		{"nvmlPciInfo_t.bus", unsafe.Offsetof(pci.Bus), 20},
		{"nvmlPciInfo_t.device", unsafe.Offsetof(pci.Device), 24},
		{"nvmlPciInfo_t.pciDeviceId", unsafe.Offsetof(pci.PciDeviceID), 28},
		{"nvmlPciInfo_t.pciSubSystemId", unsafe.Offsetof(pci.PciSubSystemID), 32},
		{"nvmlPciInfo_t.busId", unsafe.Offsetof(pci.BusID), 36},
		{"nvmlMemory_v2 version macro", uintptr(MemoryV2Version), 0x02000028},
		{"NVML_STRUCT_VERSION(Memory, 2) size", uintptr(MemoryV2Version & 0xffffff), unsafe.Sizeof(m2)},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	bindtest.Errors[Return, *Error](t, "nvml", check, Success, ErrUnknown, false, []bindtest.ErrorCase[Return]{
		{Code: 3, Name: "NVML_ERROR_NOT_SUPPORTED", Sentinel: ErrNotSupported},
		{Code: 4, Name: "NVML_ERROR_NO_PERMISSION", Sentinel: ErrNoPermission},
		{Code: 7, Name: "NVML_ERROR_INSUFFICIENT_SIZE", Sentinel: ErrInsufficientSize},
		{Code: 9, Name: "NVML_ERROR_DRIVER_NOT_LOADED", Sentinel: ErrDriverNotLoaded},
		{Code: 15, Name: "NVML_ERROR_GPU_IS_LOST", Sentinel: ErrGPUIsLost},
		{Code: 999, Name: "NVML_ERROR_UNKNOWN", Sentinel: ErrUnknown},
		{Code: 4242, Name: "NVML_ERROR_4242"},
	})
	if !IsNoDriver(fmt.Errorf("x: %w", &load.NotFoundError{Name: libName})) || !IsNoDriver(check("nvmlInit_v2", 9)) {
		t.Error("IsNoDriver missed a missing driver")
	}
	if IsNoDriver(check("nvmlDeviceGetPowerUsage", 3)) {
		t.Error("IsNoDriver(NVML_ERROR_NOT_SUPPORTED) = true")
	}
}

// TestReturnNamesUnique guards the checked-in table against copy slips.
func TestReturnNamesUnique(t *testing.T) {
	bindtest.Names(t, returnNames, "NVML_")
}

// TestNotLoaded checks that calls before Load fail cleanly instead of
// calling through nil function pointers.
func TestNotLoaded(t *testing.T) {
	if driver.Ready() {
		t.Skip("the library is loaded")
	}
	bindtest.NotLoaded(t, ErrNotLoaded, []any{
		Init, Shutdown, SystemGetDriverVersion, SystemGetNVMLVersion, SystemGetCudaDriverVersion,
		SystemGetProcessName, DeviceGetCount, DeviceGetHandleByIndex, DeviceGetName, DeviceGetUUID,
		DeviceGetPciInfo, DeviceGetMemoryInfo, DeviceGetMemoryInfoV2, DeviceGetUtilizationRates,
		DeviceGetTemperature, DeviceGetPowerUsage, DeviceGetEnforcedPowerLimit, DeviceGetClockInfo,
		DeviceGetMaxClockInfo, DeviceGetComputeRunningProcesses,
	}, "Load")
	if n, err := DeviceGetComputeRunningProcesses(0, make([]ProcessInfo, 4)); n != 0 || !errors.Is(err, ErrNotLoaded) {
		t.Errorf("DeviceGetComputeRunningProcesses: %d, %v", n, err)
	}
	if got := ErrorString(3); got != "NVML_ERROR_NOT_SUPPORTED" {
		t.Errorf("ErrorString: %q", got)
	}
	if Resolved() != nil {
		t.Error("Resolved before Load is not nil")
	}
}

func TestCString(t *testing.T) {
	var p PciInfo
	copy(p.BusID[:], "00000000:19:00.0\x00junk")
	if got := p.BusIDString(); got != "00000000:19:00.0" {
		t.Errorf("%q", got)
	}
	if got := cString([]byte("abc")); got != "abc" {
		t.Errorf("unterminated: %q", got)
	}
}
