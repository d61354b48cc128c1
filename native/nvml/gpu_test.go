package nvml_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/vramgo/vram/native/internal/cudatest"
	"github.com/vramgo/vram/native/nvml"
)

// The tests in this file need an NVIDIA driver: they skip without one, and
// fail instead when VRAM_REQUIRE_CUDA=1. Together they call every binding.

// require loads and initialises NVML for one test and returns the device
// count, skipping (or failing) without a driver.
func require(t testing.TB) int {
	t.Helper()
	if _, err := nvml.Load(); err != nil {
		cudatest.SkipOrFail(t, "no NVML: %v", err)
	}
	if err := nvml.Init(); err != nil {
		cudatest.SkipOrFail(t, "nvmlInit_v2: %v", err)
	}
	t.Cleanup(func() {
		if err := nvml.Shutdown(); err != nil {
			t.Errorf("nvmlShutdown: %v", err)
		}
	})
	n, err := nvml.DeviceGetCount()
	if err != nil || n == 0 {
		cudatest.SkipOrFail(t, "no GPU (count %d, %v)", n, err)
	}
	return n
}

func TestSystem(t *testing.T) {
	require(t)
	lib, _ := nvml.Load()
	drv, err := nvml.SystemGetDriverVersion()
	if err != nil || drv == "" {
		t.Errorf("nvmlSystemGetDriverVersion: %q, %v", drv, err)
	}
	ver, err := nvml.SystemGetNVMLVersion()
	if err != nil || !strings.Contains(ver, ".") {
		t.Errorf("nvmlSystemGetNVMLVersion: %q, %v", ver, err)
	}
	cv, err := nvml.SystemGetCudaDriverVersion()
	if err != nil || cv < 12000 {
		t.Errorf("nvmlSystemGetCudaDriverVersion_v2: %d, %v", cv, err)
	}
	t.Logf("driver %s, NVML %s, CUDA %d.%d; %s from %s (%s)", drv, ver, cv/1000, cv%1000/10, lib.Soname, lib.Path, lib.Where)
	for sym, got := range nvml.Resolved() {
		if got != sym {
			t.Logf("%s resolved as %q", sym, got)
		}
	}
	if s := nvml.ErrorString(3); s == "" || s == "NVML_ERROR_NOT_SUPPORTED" {
		t.Errorf("nvmlErrorString(3) = %q, want NVML's own text", s)
	}
	name, err := nvml.SystemGetProcessName(uint32(os.Getpid()))
	t.Logf("nvmlSystemGetProcessName(self) = %q, %v", name, err)
	if _, err := nvml.SystemGetProcessName(0x7ffffff0); err == nil {
		t.Error("nvmlSystemGetProcessName of a process that does not exist succeeded")
	}
}

func TestDevices(t *testing.T) {
	n := require(t)
	for i := 0; i < n; i++ {
		d, err := nvml.DeviceGetHandleByIndex(i)
		if err != nil {
			t.Fatalf("nvmlDeviceGetHandleByIndex_v2(%d): %v", i, err)
		}
		name, err := nvml.DeviceGetName(d)
		if err != nil || name == "" {
			t.Errorf("nvmlDeviceGetName: %q, %v", name, err)
		}
		uuid, err := nvml.DeviceGetUUID(d)
		if err != nil || !strings.HasPrefix(uuid, "GPU-") {
			t.Errorf("nvmlDeviceGetUUID: %q, %v", uuid, err)
		}
		pci, err := nvml.DeviceGetPciInfo(d)
		if err != nil || pci.BusIDString() == "" {
			t.Errorf("nvmlDeviceGetPciInfo_v3: %+v, %v", pci, err)
		}
		mem, err := nvml.DeviceGetMemoryInfo(d)
		if err != nil || mem.Total < 1<<30 || mem.Free+mem.Used != mem.Total {
			t.Errorf("nvmlDeviceGetMemoryInfo: %+v, %v", mem, err)
		}
		m2, err := nvml.DeviceGetMemoryInfoV2(d)
		switch {
		case errors.Is(err, nvml.ErrFunctionNotFound):
			t.Logf("nvmlDeviceGetMemoryInfo_v2 missing: %v", err)
		case err != nil:
			t.Errorf("nvmlDeviceGetMemoryInfo_v2: %v", err)
		case m2.Total != mem.Total || m2.Free+m2.Used+m2.Reserved != m2.Total:
			t.Errorf("nvmlDeviceGetMemoryInfo_v2: %+v (v1 %+v): total != free+used+reserved", m2, mem)
		}
		u, err := nvml.DeviceGetUtilizationRates(d)
		if err != nil && !errors.Is(err, nvml.ErrNotSupported) || u.GPU > 100 || u.Memory > 100 {
			t.Errorf("nvmlDeviceGetUtilizationRates: %+v, %v", u, err)
		}
		temp, err := nvml.DeviceGetTemperature(d, nvml.TemperatureGPU)
		if err != nil || temp < 5 || temp > 110 {
			t.Errorf("nvmlDeviceGetTemperature: %d, %v", temp, err)
		}
		mw, err := nvml.DeviceGetPowerUsage(d)
		lim, err2 := nvml.DeviceGetEnforcedPowerLimit(d)
		if err != nil || err2 != nil || mw == 0 || lim < mw/2 {
			t.Errorf("power: %d mW (%v), limit %d mW (%v)", mw, err, lim, err2)
		}
		sm, err := nvml.DeviceGetClockInfo(d, nvml.ClockSM)
		memClk, err2 := nvml.DeviceGetClockInfo(d, nvml.ClockMem)
		maxSM, err3 := nvml.DeviceGetMaxClockInfo(d, nvml.ClockSM)
		if err := errors.Join(err, err2, err3); err != nil || sm == 0 || memClk == 0 || maxSM < sm {
			t.Errorf("clocks: sm %d, mem %d, max sm %d MHz: %v", sm, memClk, maxSM, err)
		}
		count, err := nvml.DeviceGetComputeRunningProcesses(d, nil)
		if err != nil && !errors.Is(err, nvml.ErrInsufficientSize) {
			t.Errorf("nvmlDeviceGetComputeRunningProcesses_v3(count): %v", err)
		}
		procs := make([]nvml.ProcessInfo, count+8)
		got, err := nvml.DeviceGetComputeRunningProcesses(d, procs)
		if err != nil {
			t.Errorf("nvmlDeviceGetComputeRunningProcesses_v3: %v", err)
		}
		for _, p := range procs[:got] {
			pname, err := nvml.SystemGetProcessName(p.PID)
			t.Logf("  pid %d (%q, %v): %d bytes, GI %#x CI %#x", p.PID, pname, err, p.UsedGPUMemory, p.GPUInstanceID, p.ComputeInstanceID)
		}
		t.Logf("GPU %d: %s %s %s; %d/%d MiB used (v2: reserved %d MiB); util %d%% mem %d%%; %d C; %.1f/%.1f W; sm %d/%d MHz mem %d MHz; %d processes",
			i, name, uuid, pci.BusIDString(), mem.Used>>20, mem.Total>>20, m2.Reserved>>20, u.GPU, u.Memory, temp,
			float64(mw)/1000, float64(lim)/1000, sm, maxSM, memClk, got)
	}
	if _, err := nvml.DeviceGetHandleByIndex(n + 100); !errors.Is(err, nvml.ErrInvalidArgument) {
		t.Errorf("nvmlDeviceGetHandleByIndex_v2(out of range): %v, want NVML_ERROR_INVALID_ARGUMENT", err)
	}
}

// BenchmarkQueryAll reads what GPUtil reads (memory, utilization,
// temperature, name, UUID) from every GPU, as one op.
func BenchmarkQueryAll(b *testing.B) {
	n := require(b)
	devs := make([]nvml.Device, n)
	for i := range devs {
		devs[i], _ = nvml.DeviceGetHandleByIndex(i)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, d := range devs {
			if _, err := nvml.DeviceGetMemoryInfo(d); err != nil {
				b.Fatal(err)
			}
			nvml.DeviceGetUtilizationRates(d)
			nvml.DeviceGetTemperature(d, nvml.TemperatureGPU)
			nvml.DeviceGetName(d)
			nvml.DeviceGetUUID(d)
		}
	}
}
