package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cudabackend "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

const resnetTrace = "testdata/resnet50_train.trace.gz"

func TestReplayJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "replay", "--json", resnetTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r map[string]any
	decodeOne(t, stdout, &r)
	for _, key := range []string{"file", "device", "events", "peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
		"device_allocs", "device_frees", "device_maps", "device_unmaps", "driver_time_us", "num_alloc_retries",
		"num_ooms", "unmatched_frees"} {
		if _, ok := r[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, stdout)
		}
	}
	if r["events"].(float64) != 8504 {
		t.Errorf("events = %v, want 8504", r["events"])
	}
}

func TestReplayCompare(t *testing.T) {
	code, stdout, stderr := runCLI(t, "replay", "--compare", "--json", resnetTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Policies map[string]struct {
			PeakRequested int64   `json:"peak_requested_bytes"`
			PeakReserved  int64   `json:"peak_reserved_bytes"`
			DriverTimeUS  int64   `json:"driver_time_us"`
			Fragmentation float64 `json:"fragmentation"`
		} `json:"policies"`
	}
	decodeOne(t, stdout, &r)
	pt, ex, vr := r.Policies["pytorch"], r.Policies["pytorch+expandable"], r.Policies["vram"]
	// PyTorch 2.11 measured 1.206 and 1.020 on this run.
	if pt.Fragmentation < 1.20 || pt.Fragmentation > 1.21 || ex.Fragmentation < 1.01 || ex.Fragmentation > 1.03 {
		t.Errorf("PyTorch-like policies: %.3f and %.3f, want about 1.206 and 1.020", pt.Fragmentation, ex.Fragmentation)
	}
	if vr.Fragmentation > 1.02 || vr.DriverTimeUS > 2*pt.DriverTimeUS {
		t.Errorf("vram policy: fragmentation %.3f (want <= 1.02), driver time %d us (pytorch %d)", vr.Fragmentation, vr.DriverTimeUS, pt.DriverTimeUS)
	}
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.trace")
	os.WriteFile(corrupt, []byte("alloc 1 2 3\nallocx 4 5 6\n"), 0o644)
	unmatched := filepath.Join(dir, "unmatched.trace")
	os.WriteFile(unmatched, []byte("alloc 4096 100 0\nfree_completed 4096 100 0\nfree_completed 8192 100 0\n"), 0o644)

	code, stdout, stderr := runCLI(t, "replay", "--json", corrupt, unmatched, filepath.Join(dir, "missing"))
	if code == 0 {
		t.Fatal("a corrupt and a missing file must give a non-zero exit")
	}
	if !strings.Contains(stderr, "corrupt.trace") || !strings.Contains(stderr, "line 2") || !strings.Contains(stderr, "missing") {
		t.Errorf("errors should name the files and the line:\n%s", stderr)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &r); err != nil {
		t.Fatalf("the good file must still be replayed: %v\n%s", err, stdout)
	}
	if r["unmatched_frees"].(float64) != 1 {
		t.Errorf("unmatched frees %v, want 1", r["unmatched_frees"])
	}
	for _, args := range [][]string{
		{"replay"},
		{"replay", "--capacity", "lots", resnetTrace},
		{"replay", "--conf", "bogus_key:1", resnetTrace},
		{"replay", "--compare", "--conf", "policy:vram", resnetTrace},
	} {
		if code, _, stderr := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, stderr)
		}
	}
}

func TestReplayTable(t *testing.T) {
	code, stdout, stderr := runCLI(t, "replay", "--capacity", "80GiB", "--conf", "expandable_segments:True", resnetTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"capacity 80.00 GiB", "peak reserved", "driver time"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

func TestReplayFit(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "--fit", "6GB", resnetTrace},
		{"replay", "--fit=6GB", resnetTrace},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		for _, want := range []string{"fits on 5.59 GiB: no with policy:pytorch, yes with expandable_segments:True, yes with policy:vram",
			"smallest capacity: 5.60 GiB (policy:pytorch)", "peak reserved there"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, stdout)
			}
		}
	}
	code, stdout, stderr := runCLI(t, "replay", "--fit", "--json", resnetTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Fit struct {
			Policies map[string]struct {
				Capacity int64 `json:"capacity_bytes"`
				Fits     *bool `json:"fits"`
				Replays  int   `json:"replays"`
			} `json:"policies"`
		} `json:"fit"`
	}
	decodeOne(t, stdout, &r)
	if len(r.Fit.Policies) != 3 {
		t.Fatalf("want three policies: %s", stdout)
	}
	for name, p := range r.Fit.Policies {
		if p.Capacity < 5<<30 || p.Capacity > 7<<30 || p.Fits != nil || p.Replays == 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	for _, args := range [][]string{
		{"replay", "--fit", "--capacity", "24GiB", resnetTrace},
		{"replay", "--fit=lots", resnetTrace},
		{"replay", "--fit", "24GB"},
		{"replay", "--fit", "--conf", "expandable_segments:True", resnetTrace},
		{"replay", "--fit=8TiB", resnetTrace},
	} {
		if code, _, stderr := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, stderr)
		}
	}
}

// TestReplayFitRecordedCap records the ResNet-50 trace on a 5.6 GiB device
// with the PyTorch policy, as PyTorch would record a run under a cap, and
// checks that --fit says the run gave segments back to make room and which
// capacity reproduces it.
func TestReplayFitRecordedCap(t *testing.T) {
	f, err := os.Open(resnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := trace.NewTextReader(f)
	if err != nil {
		t.Fatal(err)
	}
	a := memory.New(memory.NewSimArena(5900<<20), memory.Config{Policy: memory.PolicyPyTorch})
	a.SetHistory(true, 1<<20, false)
	live := map[uint64]*memory.Block{}
	for {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e.Action {
		case trace.ActionAlloc:
			b, err := a.Alloc(e.Size, memory.Stream(e.Stream), "")
			if err != nil {
				t.Fatal(err)
			}
			live[e.Addr] = b
		case trace.ActionFreeCompleted:
			a.Free(live[e.Addr])
			delete(live, e.Addr)
		}
	}
	path := filepath.Join(t.TempDir(), "capped.trace")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.WriteText(out, a.Snapshot().History); err != nil {
		t.Fatal(err)
	}
	out.Close()
	code, stdout, stderr := runCLI(t, "replay", "--fit", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"gave 105 segments back while it ran, 6 times right before taking a new one: it ran out of room",
		"vram replay --capacity 6140461056 --conf policy:pytorch` reproduces it with 183 segment allocations and 105 frees (recorded: 183 and 105)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestReplayDevice runs vram replay --device cuda:0 on the GPU when there
// is one (a GPU test: scripts/gpu-test.sh runs it with VRAM_REQUIRE_CUDA=1)
// and checks the tables; without a GPU it checks the error.
func TestReplayDevice(t *testing.T) {
	if n, _ := cudabackend.Probe(); n == 0 {
		if os.Getenv("VRAM_REQUIRE_CUDA") == "1" {
			t.Fatal("no GPU, and VRAM_REQUIRE_CUDA=1")
		}
		code, _, stderr := runCLI(t, "replay", "--device", "cuda:0", resnetTrace)
		if code != 1 || !strings.Contains(stderr, "--device cuda:0: no CUDA GPU here") || !strings.Contains(stderr, "without --device") {
			t.Fatalf("exit %d, want 1 with a clear message: %s", code, stderr)
		}
		return
	}
	code, stdout, stderr := runCLI(t, "replay", "--device", "cuda:0", "--compare", resnetTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	for _, want := range []string{"| pytorch | 1.206 |", "| pytorch+expandable |", "| vram |", "driver calls measured on cuda:0",
		"| cuMemAlloc |", "| cuMemMap |", "| cuMemUnmap |"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	code, stdout, stderr = runCLI(t, "replay", "--device", "cuda:0", "--json", resnetTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		GPU struct {
			Policies map[string]struct {
				MeasuredUS int64 `json:"measured_us"`
				ModelUS    int64 `json:"model_us"`
				Calls      []any `json:"calls"`
			} `json:"policies"`
		} `json:"gpu"`
	}
	decodeOne(t, stdout, &r)
	d := r.GPU.Policies["default"]
	if d.MeasuredUS <= 0 || d.ModelUS <= 0 || len(d.Calls) == 0 {
		t.Errorf("JSON: %s", stdout)
	}
}

func TestReplayDeviceFlags(t *testing.T) {
	for _, args := range [][]string{
		{"replay", "--device", "gpu0", resnetTrace},
		{"replay", "--device", "cuda:-1", resnetTrace},
		{"replay", "--device", "cuda:0", "--fit", resnetTrace},
		{"replay", "--device", "cuda:0", "--capacity", "8GiB", resnetTrace},
	} {
		if code, _, stderr := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, stderr)
		}
	}
}
