package main

import (
	"os"
	"strings"
	"testing"

	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
)

const noDriverLine = "vram: doctor: no NVIDIA driver found (libcuda.so.1 not loadable): "

// withDriver replaces the driver loader for one test.
func withDriver(t *testing.T, fn func() (*load.Library, error)) {
	t.Helper()
	old := loadDriver
	loadDriver = fn
	t.Cleanup(func() { loadDriver = old })
}

func TestDoctorNoDriver(t *testing.T) {
	const reason = "libcuda.so.1: cannot open shared object file: No such file or directory"
	withDriver(t, func() (*load.Library, error) {
		return nil, &load.NotFoundError{Name: "libcuda", Sonames: []string{"libcuda.so.1"},
			Tried: []load.Attempt{{Where: "loader", Path: "libcuda.so.1", Err: reason}}}
	})
	t.Run("text", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "doctor")
		if code != exitFailure || stdout != "" {
			t.Errorf("exit %d, stdout %q", code, stdout)
		}
		if stderr != noDriverLine+reason+"\n" {
			t.Errorf("stderr %q, want one line %q", stderr, noDriverLine+reason)
		}
	})
	t.Run("json", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "doctor", "--json")
		if code != exitFailure || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, noDriverLine) {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
		var rep doctorReport
		decodeOne(t, stdout, &rep)
		if rep.Driver.Found || len(rep.Driver.Tried) != 1 || rep.Driver.Tried[0].Err != reason || rep.GPUs == nil {
			t.Errorf("report %+v", rep)
		}
	})
}

func TestDoctorDriverTooOld(t *testing.T) {
	withDriver(t, func() (*load.Library, error) {
		return &load.Library{Name: "libcuda", Path: "/old/libcuda.so.1"},
			&load.MissingSymbolError{Library: "libcuda", Path: "/old/libcuda.so.1", Symbols: []string{"cuMemCreate"}}
	})
	code, stdout, stderr := runCLI(t, "doctor")
	if code != exitFailure || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.HasPrefix(stderr, "vram: doctor: the NVIDIA driver cannot be used: ") || !strings.Contains(stderr, "cuMemCreate") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestDoctor runs the real thing: on a machine without a driver it must
// say so in one line; with one (VRAM_REQUIRE_CUDA=1 on the GPU machine),
// every library must be found and every check pass.
func TestDoctor(t *testing.T) {
	_, loadErr := cuda.Load()
	code, stdout, stderr := runCLI(t, "doctor", "--json")
	var rep doctorReport
	decodeOne(t, stdout, &rep)
	if loadErr != nil {
		if !load.IsNotFound(loadErr) {
			t.Skipf("driver present but unusable: %v", loadErr)
		}
		if requireCUDA() {
			t.Fatalf("no driver with VRAM_REQUIRE_CUDA=1: %v", loadErr)
		}
		if code != exitFailure || !strings.HasPrefix(stderr, noDriverLine) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
		return
	}
	for _, l := range rep.Libraries {
		t.Logf("%s: found %v, %s %s %s", l.Name, l.Found, l.Version, l.Path, l.Error)
	}
	for _, g := range rep.GPUs {
		for _, c := range g.Checks {
			t.Logf("GPU %d %s: ok %v: %s", g.Index, c.Name, c.OK, c.Detail)
		}
	}
	if requireCUDA() && (code != 0 || rep.Failed != 0 || len(rep.GPUs) == 0) {
		t.Errorf("exit %d, %d failed, %d GPUs, stderr %q", code, rep.Failed, len(rep.GPUs), stderr)
	}
	code, text, _ := runCLI(t, "doctor")
	if requireCUDA() && (code != 0 || !strings.Contains(text, "all checks passed")) {
		t.Errorf("text exit %d:\n%s", code, text)
	}
}

// requireCUDA reports whether VRAM_REQUIRE_CUDA=1 is set, as on the GPU
// machine: then the CUDA tests fail rather than skip.
func requireCUDA() bool { return os.Getenv("VRAM_REQUIRE_CUDA") == "1" }

func TestParseDriverVersion(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"open module", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Oct  2 2025\nGCC version:  gcc version 12.3.0\n", "580.159.04"},
		{"proprietary", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n", "550.54.15"},
		{"garbage", "no version here\n1.2.3 on the second line\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseDriverVersion(tc.text); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
	if got := driverVersion("/nonexistent/libcuda.so.580.159.04"); got != "580.159.04" && !strings.Contains(got, ".") {
		t.Errorf("from the file name: %q", got)
	}
}
