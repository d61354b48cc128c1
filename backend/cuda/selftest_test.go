package cuda

import (
	"strings"
	"testing"

	"github.com/vramgo/vram/backend/selftest"
	"github.com/vramgo/vram/native/load"
)

// TestSelfTest runs the self-test of every GPU and the peer copies, as
// vram doctor does, and requires every check to pass. It skips without a
// GPU (fails with VRAM_REQUIRE_CUDA=1).
func TestSelfTest(t *testing.T) {
	n, err := Probe()
	if n == 0 {
		skipOrFail(t, "no GPU: %v", err)
	}
	rep := SelfTest()
	for _, l := range rep.Libraries {
		t.Logf("%s: found %v %s %s %s %s", l.Name, l.Found, l.Version, l.Path, l.Warning, l.Error)
		if !l.Found && !l.Optional {
			t.Errorf("%s (needed for %s) did not load: %s", l.Name, l.Needed, l.Error)
		}
	}
	if !rep.Driver.Usable || rep.Driver.Version == "" || rep.Driver.CUDAVersion == "" || rep.Problem() != "" {
		t.Errorf("driver %+v, problem %q", rep.Driver, rep.Problem())
	}
	if len(rep.GPUs) != n || len(rep.PeerAccess) != n {
		t.Fatalf("%d GPUs and a %d-row peer matrix reported, the machine has %d", len(rep.GPUs), len(rep.PeerAccess), n)
	}
	want := []string{"alloc", "copies", "pinned copies", "kernel compiler", "kernels", "cublaslt", "cudnn", "caching allocator", "sync"}
	for _, g := range rep.GPUs {
		t.Logf("GPU %d: %s %s sm %s, %d SMs, %v", g.Index, g.Name, g.UUID, g.ComputeCapability, g.Multiprocessors, g.Memory)
		if g.Name == "" || !strings.HasPrefix(g.UUID, "GPU-") || g.ComputeCapability == "" || g.Multiprocessors <= 0 ||
			g.Memory.Total <= 0 || g.Memory.Free < 0 || g.Memory.Device == "" {
			t.Errorf("GPU %d described as %+v", g.Index, g)
		}
		if len(g.Checks) != len(want) {
			t.Errorf("GPU %d: %d checks, want %v", g.Index, len(g.Checks), want)
		}
		for i, c := range g.Checks {
			t.Logf("GPU %d %s: %s (%v): %s", g.Index, c.Name, c.Status, c.Duration, c.Detail)
			noDNN := c.Name == "cudnn" && c.Status == selftest.Skip && loadCuDNN() != nil // a machine without cuDNN
			if i < len(want) && c.Name != want[i] || c.Status != selftest.Pass && !noDNN {
				t.Errorf("GPU %d check %d: %+v, want %q to pass", g.Index, i, c, want[min(i, len(want)-1)])
			}
		}
	}
	for _, c := range rep.PeerCopies {
		t.Logf("%s: %s (%v): %s", c.Name, c.Status, c.Duration, c.Detail)
		switch {
		case n < 2 && c.Status != selftest.Skip:
			t.Errorf("%s on one GPU: %+v, want skipped", c.Name, c)
		case n >= 2 && c.Status != selftest.Pass:
			t.Errorf("%s: %+v", c.Name, c)
		}
	}
	if n >= 2 && len(rep.PeerCopies) != n {
		t.Errorf("%d peer copies on %d GPUs", len(rep.PeerCopies), n)
	}
	if f := rep.Failed(); f != 0 {
		t.Errorf("Failed = %d", f)
	}
}

// TestSelfTestWithoutDriver checks what the report says on machines where
// the driver is missing or unusable, with the driver's loader replaced;
// it needs no GPU.
func TestSelfTestWithoutDriver(t *testing.T) {
	const reason = "libcuda.so.1: cannot open shared object file: No such file or directory"
	tests := []struct {
		name    string
		load    func() (*load.Library, error)
		problem string
		path    string
	}{
		{"not found", func() (*load.Library, error) {
			return nil, &load.NotFoundError{Name: "libcuda", Sonames: []string{"libcuda.so.1"},
				Tried: []load.Attempt{{Where: "loader", Path: "libcuda.so.1", Err: reason}}}
		}, "no NVIDIA driver found (libcuda.so.1 not loadable): " + reason, ""},
		{"too old", func() (*load.Library, error) {
			return &load.Library{Name: "libcuda", Path: "/old/libcuda.so.1"},
				&load.MissingSymbolError{Library: "libcuda", Path: "/old/libcuda.so.1", Symbols: []string{"cuMemCreate"}}
		}, "the NVIDIA driver cannot be used: ", "/old/libcuda.so.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := selfTest(tc.load)
			p := rep.Problem()
			if rep.Driver.Usable || !strings.HasPrefix(p, tc.problem) || strings.Contains(p, "\n") || rep.Driver.Path != tc.path {
				t.Errorf("driver %+v, problem %q, want %q", rep.Driver, p, tc.problem)
			}
			if tc.name == "too old" && !strings.Contains(p, "cuMemCreate") {
				t.Errorf("the problem does not name the missing symbol: %q", p)
			}
			if rep.GPUs == nil || len(rep.GPUs) != 0 || rep.Libraries == nil || rep.PeerAccess == nil {
				t.Errorf("report %+v: want empty, non-nil lists", rep)
			}
			if len(rep.PeerCopies) != 1 || rep.PeerCopies[0].Status != selftest.Skip || rep.PeerCopies[0].Detail == "" {
				t.Errorf("peer copies %+v, want one skipped with a reason", rep.PeerCopies)
			}
			if rep.Failed() != 1 {
				t.Errorf("Failed = %d, want 1 (the driver)", rep.Failed())
			}
		})
	}
}

// TestSelfTestHere runs the real SelfTest on whatever this machine has:
// without a driver the report says so in one line and tests nothing.
func TestSelfTestHere(t *testing.T) {
	rep := SelfTest()
	if _, err := Probe(); err == nil {
		t.Skip("a driver and GPU are here: TestSelfTest covers them")
	}
	if rep.Problem() == "" || strings.Contains(rep.Problem(), "\n") || rep.Failed() == 0 || len(rep.GPUs) != 0 {
		t.Errorf("problem %q, %d failed, %d GPUs: want one line saying why nothing ran", rep.Problem(), rep.Failed(), len(rep.GPUs))
	}
	t.Log(rep.Problem())
}

func TestLibraryStatus(t *testing.T) {
	tests := []struct {
		name                   string
		load                   func() (*load.Library, error)
		cudaMajor              int
		found                  bool
		version, warning, errs string
	}{
		{"not found", func() (*load.Library, error) {
			return nil, &load.NotFoundError{Name: "libnvrtc", Sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12"}}
		}, 13, false, "", "", "libnvrtc.so.13 or libnvrtc.so.12 not found"},
		{"version from the file name", func() (*load.Library, error) {
			return &load.Library{Name: "libcublasLt", Soname: "libcublasLt.so.13", Path: "/x/libcublasLt.so.13.1.0.3", Where: "loader"}, nil
		}, 13, true, "13.1.0.3", "", ""},
		{"newer than the driver", func() (*load.Library, error) {
			return &load.Library{Name: "libnvrtc", Soname: "libnvrtc.so.13", Path: "/x/libnvrtc.so.13"}, nil
		}, 12, true, "13", "CUDA 13 library with a driver that supports CUDA 12", ""},
		{"missing symbol", func() (*load.Library, error) {
			return &load.Library{Name: "libnvrtc", Soname: "libnvrtc.so.12", Path: "/x/libnvrtc.so.12"},
				&load.MissingSymbolError{Library: "libnvrtc", Path: "/x/libnvrtc.so.12", Symbols: []string{"nvrtcGetCUBIN"}}
		}, 12, false, "", "", "nvrtcGetCUBIN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := libraryStatus(tc.load, tc.cudaMajor, nil, "testing", false, "the thing")
			if l.Found != tc.found || l.Version != tc.version || !strings.Contains(l.Warning, tc.warning) || !strings.Contains(l.Error, tc.errs) ||
				(tc.warning == "") != (l.Warning == "") || (tc.errs == "") != (l.Error == "") || l.Needed != "testing" {
				t.Errorf("%+v", l)
			}
			if !tc.found && tc.name == "not found" && !strings.Contains(l.Install, "the thing") {
				t.Errorf("no install hint: %+v", l)
			}
		})
	}
}

func TestParseDriverVersion(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"open module", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Oct  2 2025\nGCC version:  gcc version 12.3.0\n", "580.159.04"},
		{"proprietary", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n", "550.54.15"},
		{"garbage", "no version here\n1.2.3 on the second line\n", ""},
		{"empty", "", ""},
		{"dots only", "NVRM version: . .. 1. .2\n", ""},
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
