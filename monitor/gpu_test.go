package monitor_test

import (
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vramgo/vram/monitor"
)

// The tests and benchmarks in this file need an NVIDIA driver and GPU:
// they skip without one, and fail instead when VRAM_REQUIRE_CUDA=1 (as
// scripts/gpu-test.sh sets on the GPU machine).

func openNVML(t testing.TB) *monitor.NVML {
	t.Helper()
	src, err := monitor.OpenNVML()
	if err != nil {
		if os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
			t.Fatalf("OpenNVML: %v", err)
		}
		if !errors.Is(err, monitor.ErrNoDriver) && !errors.Is(err, monitor.ErrNoGPU) {
			t.Errorf("without a GPU OpenNVML must wrap ErrNoDriver or ErrNoGPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func TestNVMLReading(t *testing.T) {
	src := openNVML(t)
	r, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if r.DriverVersion == "" || r.CUDAVersion == "" || len(r.GPUs) == 0 {
		t.Fatalf("reading %+v", r)
	}
	for _, g := range r.GPUs {
		m := g.Memory
		if g.Name == "" || !strings.HasPrefix(g.UUID, "GPU-") || m.TotalBytes < 1<<30 || m.FreeBytes <= 0 || m.UsedBytes < 0 {
			t.Errorf("GPU %d: %+v", g.Index, g)
		}
		if m.ReservedBytes != monitor.Unknown && m.UsedBytes+m.FreeBytes+m.ReservedBytes != m.TotalBytes {
			t.Errorf("GPU %d: used %d + free %d + reserved %d != total %d", g.Index, m.UsedBytes, m.FreeBytes, m.ReservedBytes, m.TotalBytes)
		}
		if g.TemperatureC < 5 || g.Power.DrawW <= 0 || g.Power.LimitW < g.Power.DrawW/2 || g.Clocks.MaxSMMHz <= 0 {
			t.Errorf("GPU %d: sensors %+v %+v %+v", g.Index, g.TemperatureC, g.Power, g.Clocks)
		}
		if len(g.Errors) > 0 {
			t.Errorf("GPU %d: failed queries: %v", g.Index, g.Errors)
		}
		t.Logf("GPU %d %s %s: used %d MiB, free %d MiB, reserved %d MiB; util %d%%/%d%%; %d C; %.0f/%.0f W; %d processes (visible %v %q)",
			g.Index, g.Name, g.UUID, m.UsedBytes>>20, m.FreeBytes>>20, m.ReservedBytes>>20, g.Utilization.ComputePercent,
			g.Utilization.MemoryBandwidthPercent, g.TemperatureC, g.Power.DrawW, g.Power.LimitW, len(g.Processes), g.ProcessesVisible, g.ProcessesNote)
	}
	ids := monitor.Available(r.GPUs, monitor.Options{Limit: -1, MaxLoad: 1, MaxMemory: 1})
	t.Logf("available with no limits: %v", ids)
	if err := monitor.ShowUtilization(io.Discard); err != nil {
		t.Errorf("ShowUtilization: %v", err)
	}
}

// BenchmarkNVMLRead is one full reading of every GPU: memory, utilization,
// temperature, power, clocks and processes (names and UUIDs are read once,
// when the source opens).
func BenchmarkNVMLRead(b *testing.B) {
	src := openNVML(b)
	for b.Loop() {
		if _, err := src.Read(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScrape is one Prometheus scrape of every GPU through the
// exporter's handler, text format included.
func BenchmarkScrape(b *testing.B) {
	src := openNVML(b)
	reg := prometheus.NewRegistry()
	reg.MustRegister(monitor.NewCollector(src))
	srv := httptest.NewServer(monitor.Handler(reg))
	defer srv.Close()
	for b.Loop() {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkNvidiaSMI is GPUtil's way: start nvidia-smi and parse its CSV.
func BenchmarkNvidiaSMI(b *testing.B) {
	openNVML(b)
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		b.Skip("no nvidia-smi on PATH")
	}
	for b.Loop() {
		out, err := exec.Command("nvidia-smi", "--query-gpu=index,uuid,utilization.gpu,memory.total,memory.used,memory.free,driver_version,name,gpu_serial,display_active,display_mode,temperature.gpu",
			"--format=csv,noheader,nounits").Output()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if len(strings.Split(line, ", ")) != 12 {
				b.Fatalf("unexpected line %q", line)
			}
		}
	}
}
