package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/backend/selftest"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/load"
)

const noDriverLine = "vram: doctor: no NVIDIA driver found (libcuda.so.1 not loadable): "

// fakeDoctor replaces the self-tests for one test.
func fakeDoctor(t *testing.T, cpuChecks, simChecks []selftest.Check, report func() *cuda.SelfTestReport) {
	t.Helper()
	oldCPU, oldSim, oldCUDA := cpuSelfTest, simSelfTest, cudaSelfTest
	cpuSelfTest = func() []selftest.Check { return cpuChecks }
	simSelfTest = func() []selftest.Check { return simChecks }
	cudaSelfTest = report
	t.Cleanup(func() { cpuSelfTest, simSelfTest, cudaSelfTest = oldCPU, oldSim, oldCUDA })
}

// passing returns checks that passed.
func passing(names ...string) []selftest.Check {
	var out []selftest.Check
	for _, n := range names {
		out = append(out, selftest.Check{Name: n, Status: selftest.Pass, Detail: n + " fine", Duration: 1500 * time.Microsecond})
	}
	return out
}

// noDriverReport is the CUDA part of a machine without libcuda, as
// cuda.SelfTest reports it.
func noDriverReport(reason string) *cuda.SelfTestReport {
	return &cuda.SelfTestReport{
		Driver: cuda.DriverInfo{Error: "no NVIDIA driver found (libcuda.so.1 not loadable): " + reason,
			Tried: []load.Attempt{{Where: "loader", Path: "libcuda.so.1", Err: reason}}},
		Libraries: []cuda.LibraryInfo{}, GPUs: []cuda.GPUSelfTest{}, PeerAccess: [][]bool{},
		PeerCopies: []selftest.Check{selftest.Skipped("peer copies", "no usable NVIDIA driver")},
	}
}

// noDriver makes the machine one without libcuda for one test, with CPU
// and sim checks that pass, whatever the machine has.
func noDriver(t *testing.T) {
	fakeDoctor(t, passing("alloc", "copies"), passing("alloc", "caching allocator"),
		func() *cuda.SelfTestReport { return noDriverReport("libcuda.so.1: cannot open shared object file") })
}

// gpuReport is the CUDA part of a machine with n GPUs; fail names a check
// of GPU 0 that fails, missing a library that did not load.
func gpuReport(n int, fail, missing string) func() *cuda.SelfTestReport {
	return func() *cuda.SelfTestReport {
		r := &cuda.SelfTestReport{
			Driver: cuda.DriverInfo{Usable: true, Path: "/usr/lib/libcuda.so.580.95.05", Version: "580.95.05", CUDAVersion: "13.0"},
			Libraries: []cuda.LibraryInfo{
				{Name: "libnvrtc", Needed: "compiling the kernels", Found: true, Soname: "libnvrtc.so.13", Path: "/x/libnvrtc.so.13", Where: "loader", Version: "13.0"},
				{Name: "libcublasLt", Needed: "matrix products", Found: true, Soname: "libcublasLt.so.13", Path: "/x/libcublasLt.so.13", Where: "python", Version: "13.1.0"},
				{Name: "libnvidia-ml", Needed: "the processes on each GPU", Optional: true, Error: "libnvidia-ml.so.1 not found"},
			},
			GPUs: []cuda.GPUSelfTest{}, PeerAccess: [][]bool{}, PeerCopies: []selftest.Check{},
		}
		if missing != "" {
			r.Libraries[0] = cuda.LibraryInfo{Name: missing, Needed: "compiling the kernels", Error: missing + ".so.13 not found", Install: "install NVRTC"}
		}
		for i := range n {
			g := cuda.GPUSelfTest{Index: i, Name: "NVIDIA H200", UUID: "GPU-0000", ComputeCapability: "9.0", Multiprocessors: 132,
				Memory: memory.DeviceMemory{Total: 150 << 30, Free: 140 << 30, ThisProcess: -1},
				Checks: passing("alloc", "copies", "kernel compiler", "cublaslt", "caching allocator")}
			if i == 0 && fail != "" {
				g.Checks = append(g.Checks, selftest.Check{Name: fail, Status: selftest.Fail, Detail: "C[0,0,0] = NaN"})
			}
			r.GPUs = append(r.GPUs, g)
			row := make([]bool, n)
			for j := range row {
				row[j] = i != j
			}
			r.PeerAccess = append(r.PeerAccess, row)
		}
		if n < 2 {
			r.PeerCopies = append(r.PeerCopies, selftest.Skipped("peer copies", "1 GPU: peer copies need two"))
		} else {
			for i := range n {
				r.PeerCopies = append(r.PeerCopies, passing("peer copy")[0])
				r.PeerCopies[i].Name += " " + string(rune('0'+i))
			}
		}
		return r
	}
}

func TestDoctorNoDriver(t *testing.T) {
	const reason = "libcuda.so.1: cannot open shared object file: No such file or directory"
	fakeDoctor(t, passing("alloc", "copies", "kernels"), passing("alloc", "caching allocator", "out-of-memory error"),
		func() *cuda.SelfTestReport { return noDriverReport(reason) })
	t.Run("text", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "doctor")
		if code != exitFailure {
			t.Errorf("exit %d", code)
		}
		if stderr != noDriverLine+reason+"\n" {
			t.Errorf("stderr %q, want one line %q", stderr, noDriverLine+reason)
		}
		// The CPU and sim checks are reported, and the CUDA ones say why
		// they did not run.
		for _, want := range []string{"\ncpu\n", "  kernels ", "\nsim ", "  out-of-memory error ", " ok ",
			"driver  not usable: no NVIDIA driver found", "  tried libcuda.so.1 (loader): " + reason,
			"GPU checks skipped: no usable NVIDIA driver", "peer copies skipped: no usable NVIDIA driver", "CUDA not checked: no NVIDIA driver found", "1 check failed\n"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		if strings.Contains(stdout, "FAILED") {
			t.Errorf("a check is marked failed:\n%s", stdout)
		}
	})
	t.Run("json", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "doctor", "--json")
		if code != exitFailure || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, noDriverLine) {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
		var rep doctorReport
		decodeOne(t, stdout, &rep)
		if rep.CUDA == nil || rep.CUDA.Driver.Usable || len(rep.CUDA.Driver.Tried) != 1 || rep.CUDA.Driver.Tried[0].Err != reason ||
			rep.CUDA.GPUs == nil || len(rep.CPU) != 3 || len(rep.Sim) != 3 || rep.Failed != 1 {
			t.Errorf("report %+v", rep)
		}
		if !strings.Contains(stdout, `"pass"`) || !strings.Contains(stdout, `"skip"`) {
			t.Errorf("statuses are not spelled pass and skip:\n%s", stdout)
		}
	})
}

func TestDoctorDriverTooOld(t *testing.T) {
	fakeDoctor(t, passing("alloc"), passing("alloc"), func() *cuda.SelfTestReport {
		r := noDriverReport("")
		r.Driver = cuda.DriverInfo{Path: "/old/libcuda.so.1", Error: "the NVIDIA driver cannot be used: load: libcuda (/old/libcuda.so.1) lacks cuMemCreate"}
		return r
	})
	code, stdout, stderr := runCLI(t, "doctor")
	if code != exitFailure || strings.Count(stderr, "\n") != 1 ||
		!strings.HasPrefix(stderr, "vram: doctor: the NVIDIA driver cannot be used: ") || !strings.Contains(stderr, "cuMemCreate") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "driver  not usable: the NVIDIA driver cannot be used") {
		t.Errorf("stdout:\n%s", stdout)
	}
}

// TestDoctorOutcomes checks the exit status, the last line and the count
// of failures for each kind of machine.
func TestDoctorOutcomes(t *testing.T) {
	tests := []struct {
		name              string
		cpu               []selftest.Check
		report            func() *cuda.SelfTestReport
		code              int
		failed            int
		stderr            string
		stdout, notStdout []string
	}{
		{"two good GPUs", passing("alloc"), gpuReport(2, "", ""), 0, 0, "",
			[]string{"GPU 0  NVIDIA H200  GPU-0000  150.0 GiB (140.0 GiB free)  compute capability 9.0  132 multiprocessors",
				"GPU 1  NVIDIA H200", "peer access (row can access column)", "  peer copy 0 ", "libnvidia-ml  missing (optional)", "all checks passed"},
			[]string{"FAILED", "CUDA not checked"}},
		{"one GPU", passing("alloc"), gpuReport(1, "", ""), 0, 0, "",
			[]string{"GPU 0  NVIDIA H200", "peer copies skipped: 1 GPU: peer copies need two", "all checks passed"},
			[]string{"peer access", "FAILED"}},
		{"a failed GPU check", passing("alloc"), gpuReport(2, "cublaslt", ""), exitFailure, 1, "vram: doctor: 1 check failed\n",
			[]string{"  cublaslt ", "FAILED", "C[0,0,0] = NaN", "1 check failed"}, nil},
		{"a missing library", passing("alloc"), gpuReport(1, "", "libnvrtc"), exitFailure, 1, "vram: doctor: 1 check failed\n",
			[]string{"libnvrtc|missing|libnvrtc.so.13 not found", "needed for compiling the kernels", "install NVRTC"}, nil},
		{"a failed CPU check", []selftest.Check{{Name: "matmul", Status: selftest.Fail, Detail: "C wrong"}}, gpuReport(1, "", ""), exitFailure, 1,
			"vram: doctor: 1 check failed\n", []string{"  matmul ", "FAILED", "C wrong"}, nil},
		{"no cuDNN", passing("alloc"), func() *cuda.SelfTestReport {
			r := gpuReport(1, "", "")()
			r.Libraries = append(r.Libraries, cuda.LibraryInfo{Name: "libcudnn", Optional: true, Error: "libcudnn.so.9 not found",
				Needed: "convolutions, pooling and batch norm on cuDNN (without it they use vram's composed kernels)", Install: "install cuDNN 9"})
			r.GPUs[0].Checks = append(r.GPUs[0].Checks, selftest.Skipped("cudnn", "cuDNN 9 was not found: convolutions use vram's composed kernels"))
			return r
		}, 0, 0, "",
			[]string{"libcudnn|missing (optional)|libcudnn.so.9 not found", "needed for convolutions, pooling and batch norm on cuDNN (without it they use vram's composed kernels)",
				"  cudnn |skip|convolutions use vram's composed kernels", "all checks passed"}, []string{"FAILED"}},
		{"cuDNN found", passing("alloc"), func() *cuda.SelfTestReport {
			r := gpuReport(1, "", "")()
			r.Libraries = append(r.Libraries, cuda.LibraryInfo{Name: "libcudnn", Optional: true, Found: true, Soname: "libcudnn.so.9",
				Path: "/venv/nvidia/cudnn/lib/libcudnn.so.9", Where: "python", Version: "9.10.2"})
			r.GPUs[0].Checks = append(r.GPUs[0].Checks, passing("cudnn")...)
			return r
		}, 0, 0, "",
			[]string{"libcudnn|9.10.2|libcudnn.so.9|/venv/nvidia/cudnn/lib/libcudnn.so.9 (python)", "  cudnn |ok|cudnn fine", "all checks passed"}, nil},
		{"no GPU", passing("alloc"), func() *cuda.SelfTestReport {
			r := gpuReport(0, "", "")()
			r.NoGPU = "cuda: the driver reports no GPU"
			return r
		}, exitFailure, 1, "vram: doctor: cuda: the driver reports no GPU\n",
			[]string{"no GPU: cuda: the driver reports no GPU", "CUDA not checked: cuda: the driver reports no GPU"}, []string{"all checks passed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeDoctor(t, tc.cpu, passing("alloc"), tc.report)
			code, stdout, stderr := runCLI(t, "doctor")
			if code != tc.code || stderr != tc.stderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr, tc.code, tc.stderr)
			}
			for _, want := range tc.stdout {
				if !hasLine(stdout, strings.Split(want, "|")...) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, bad := range tc.notStdout {
				if strings.Contains(stdout, bad) {
					t.Errorf("stdout has %q:\n%s", bad, stdout)
				}
			}
			code, js, _ := runCLI(t, "doctor", "--json")
			var rep doctorReport
			decodeOne(t, js, &rep)
			if code != tc.code || rep.Failed != tc.failed {
				t.Errorf("--json: exit %d, failed %d; want %d, %d", code, rep.Failed, tc.code, tc.failed)
			}
		})
	}
}

// hasLine reports whether a line of text holds every part, in order.
func hasLine(text string, parts ...string) bool {
	for _, line := range strings.Split(text+"\n", "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}

// TestDoctorPrintsSafely feeds names and details with terminal escapes, as
// a hostile driver or library path could have them.
func TestDoctorPrintsSafely(t *testing.T) {
	fakeDoctor(t, []selftest.Check{{Name: "x\x1b[2J", Status: selftest.Pass, Detail: "d\x1b]0;t\x07"}}, passing("alloc"), func() *cuda.SelfTestReport {
		r := gpuReport(1, "", "")()
		r.GPUs[0].Name = "H200\x1b[31m"
		r.Driver.Path = "/lib\rcuda"
		return r
	})
	_, stdout, _ := runCLI(t, "doctor")
	if strings.ContainsAny(stdout, "\x1b\x07\r") {
		t.Errorf("control characters reach the terminal: %q", stdout)
	}
}

// TestDoctor runs the real thing. Without a driver the CPU and sim checks
// must pass and the CUDA checks say, in one line, why they did not run;
// with one (VRAM_REQUIRE_CUDA=1 on the GPU machine) every library must be
// found and every check pass.
func TestDoctor(t *testing.T) {
	n, probeErr := cuda.Probe()
	code, stdout, stderr := runCLI(t, "doctor", "--json")
	var rep doctorReport
	decodeOne(t, stdout, &rep)
	for _, part := range [][]selftest.Check{rep.CPU, rep.Sim} {
		for _, c := range part {
			t.Logf("%s: %s: %s", c.Name, c.Status, c.Detail)
			if c.Status != selftest.Pass {
				t.Errorf("%s: %s: %s", c.Name, c.Status, c.Detail)
			}
		}
	}
	if len(rep.CPU) == 0 || len(rep.Sim) == 0 {
		t.Fatalf("%d cpu and %d sim checks", len(rep.CPU), len(rep.Sim))
	}
	if n == 0 {
		if requireCUDA() {
			t.Fatalf("no GPU with VRAM_REQUIRE_CUDA=1: %v", probeErr)
		}
		p := rep.CUDA.Problem()
		if code != exitFailure || p == "" || stderr != "vram: doctor: "+p+"\n" || rep.Failed != 1 {
			t.Errorf("exit %d, problem %q, failed %d, stderr %q", code, p, rep.Failed, stderr)
		}
		_, text, _ := runCLI(t, "doctor")
		if !strings.Contains(text, "CUDA not checked: "+p) || strings.Contains(text, "FAILED") {
			t.Errorf("text:\n%s", text)
		}
		return
	}
	for _, l := range rep.CUDA.Libraries {
		t.Logf("%s: found %v, %s %s %s", l.Name, l.Found, l.Version, l.Path, l.Error)
	}
	for _, g := range rep.CUDA.GPUs {
		for _, c := range g.Checks {
			t.Logf("GPU %d %s: %s: %s", g.Index, c.Name, c.Status, c.Detail)
		}
	}
	for _, c := range rep.CUDA.PeerCopies {
		t.Logf("%s: %s: %s", c.Name, c.Status, c.Detail)
	}
	if requireCUDA() && (code != 0 || rep.Failed != 0 || len(rep.CUDA.GPUs) != n) {
		t.Errorf("exit %d, %d failed, %d GPUs of %d, stderr %q", code, rep.Failed, len(rep.CUDA.GPUs), n, stderr)
	}
	code, text, _ := runCLI(t, "doctor")
	if requireCUDA() && (code != 0 || !strings.Contains(text, "all checks passed")) {
		t.Errorf("text exit %d:\n%s", code, text)
	}
}

// requireCUDA reports whether VRAM_REQUIRE_CUDA=1 is set, as on the GPU
// machine: then the CUDA tests fail rather than skip.
func requireCUDA() bool { return os.Getenv("VRAM_REQUIRE_CUDA") == "1" }
