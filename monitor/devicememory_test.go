package monitor

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vramgo/vram/memory"
)

func TestDeviceMemoryCollector(t *testing.T) {
	const mib = 1 << 20
	known := memory.DeviceMemory{Device: "cuda:0", Total: 1024 * mib, Free: 600 * mib, Reserved: 300 * mib, ThisProcess: 350 * mib,
		Others: []memory.ProcessMemory{{PID: 7, Name: "python3", Bytes: 60 * mib}, {PID: 8, Name: "x", Bytes: -1}, {PID: 7, Name: "python3", Bytes: 60 * mib}}}
	hidden := memory.DeviceMemory{Total: 1024 * mib, Free: 600 * mib, Reserved: 300 * mib, ThisProcess: -1}
	reg := prometheus.NewPedanticRegistry()
	for i, m := range []memory.DeviceMemory{known, hidden} {
		if err := RegisterDeviceMemory(reg, "cuda:"+string(rune('0'+i)), 0, func() (memory.DeviceMemory, error) { return m, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := RegisterDeviceMemory(reg, "cuda:0", 0, func() (memory.DeviceMemory, error) { return known, nil }); err == nil {
		t.Error("registering the same device and rank twice succeeded")
	}
	if err := RegisterDeviceMemory(reg, "cuda:9", 0, nil); err == nil {
		t.Error("nil read function accepted")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	tests := []struct {
		name   string
		labels []string
		want   float64
		ok     bool
	}{
		{"vram_device_memory_total_bytes", []string{"device", "cuda:0", "rank", "0"}, 1024 * mib, true},
		{"vram_device_memory_free_bytes", []string{"device", "cuda:0"}, 600 * mib, true},
		{"vram_device_memory_reserved_bytes", []string{"device", "cuda:0"}, 300 * mib, true},
		{"vram_device_memory_process_other_bytes", []string{"device", "cuda:0"}, 50 * mib, true},
		{"vram_device_memory_other_processes_bytes", []string{"device", "cuda:0"}, 120 * mib, true},
		{"vram_device_memory_unattributed_bytes", []string{"device", "cuda:0"}, 0, true},
		{"vram_device_memory_other_process_bytes", []string{"device", "cuda:0", "pid", "7", "process", "python3"}, 60 * mib, true},
		{"vram_device_memory_other_process_bytes", []string{"device", "cuda:0", "pid", "8"}, 0, false},
		// Unknown parts are left out, not exported as -1.
		{"vram_device_memory_process_other_bytes", []string{"device", "cuda:1"}, 0, false},
		{"vram_device_memory_other_processes_bytes", []string{"device", "cuda:1"}, 0, false},
		{"vram_device_memory_unattributed_bytes", []string{"device", "cuda:1"}, 124 * mib, true},
	}
	for _, tc := range tests {
		got, ok := value(byName, tc.name, tc.labels...)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v (present %v)", tc.name, tc.labels, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDeviceMemoryCollectorError(t *testing.T) {
	reg := prometheus.NewRegistry()
	fail := errors.New("memory information of cuda:0: device lost")
	if err := RegisterDeviceMemory(reg, "cuda:0", 1, func() (memory.DeviceMemory, error) { return memory.DeviceMemory{}, fail }); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "device lost") {
		t.Errorf("Gather: %v, want the read error", err)
	}
}
