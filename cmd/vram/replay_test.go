package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cudabackend "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

const resnetTrace = "testdata/resnet50_train.trace.gz"

// unmapTrace is a trace on which policy:vram unmaps memory mid-run.
const unmapTrace = "../../memory/testdata/synth_resnet50_infer_varbatch.trace.gz"

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
	// The bound of twice policy:pytorch's driver time is checked
	// on every trace by memory's TestPolicies (policyGaps lists the
	// traces that miss it); here the replay must price the vram policy's
	// mappings, within 1.5x of expandable segments'.
	if vr.Fragmentation > 1.02 || vr.DriverTimeUS <= 0 || vr.DriverTimeUS*2 > 3*ex.DriverTimeUS {
		t.Errorf("vram policy: fragmentation %.3f (want <= 1.02), driver time %d us (expandable segments %d, pytorch %d)",
			vr.Fragmentation, vr.DriverTimeUS, ex.DriverTimeUS, pt.DriverTimeUS)
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
	// Each input's error is an error line of the documented form, as the
	// summary after them is.
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if !strings.HasPrefix(line, "vram: replay: ") {
			t.Errorf("error line %q does not start with \"vram: replay: \"", line)
		}
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

// TestReplayFitNowhere checks what --fit says when a trace fits on no
// device it may search: a limit of --max-capacity is named as the cause.
func TestReplayFitNowhere(t *testing.T) {
	huge := writeFile(t, "huge.trace", []byte(fmt.Sprintf("alloc 4096 %d 0\n", int64(2)<<40)))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--fit", "--max-capacity", "1GiB", resnetTrace}, "even on 1.00 GiB, the most --max-capacity allows: raise it"},
		{[]string{"replay", "--fit", huge}, "even on 1.00 TiB; a request larger than any device?"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitFailure || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitFailure, tc.want)
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
	// The ResNet trace only grows; the varying-batch one makes policy:vram
	// unmap, so that every call but cuMemAddressFree mid-run is measured.
	code, stdout, stderr := runCLI(t, "replay", "--device", "cuda:0", "--compare", resnetTrace, unmapTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Log("\n" + stdout)
	want := []string{"| pytorch | 1.206 |", "| pytorch+expandable |", "| vram |", "driver calls measured on cuda:0", unmapTrace,
		"all 2 inputs on cuda:0", "| resnet50_train.trace.gz | pytorch | 1.206 |", "| synth_resnet50_infer_varbatch.trace.gz | vram |"}
	for _, c := range memory.DriverCalls() {
		want = append(want, "| "+c.String()+" |")
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	// Every call is made, by the replays or by giving back what they held.
	if strings.Contains(stdout, "| 0 |") {
		t.Errorf("a call was not measured:\n%s", stdout)
	}
	code, stdout, stderr = runCLI(t, "replay", "--device", "cuda:0", "--json", "--compare", unmapTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	type rows []struct {
		Call  string `json:"call"`
		Count int64  `json:"count"`
	}
	var r struct {
		GPU struct {
			Policies map[string]struct {
				Result     memory.Result `json:"result"`
				MeasuredUS int64         `json:"measured_us"`
				ModelUS    int64         `json:"model_us"`
				Calls      rows          `json:"calls"`
				CloseCalls rows          `json:"close_calls"`
			} `json:"policies"`
		} `json:"gpu"`
	}
	decodeOne(t, stdout, &r)
	if len(r.GPU.Policies) != len(comparePolicies) {
		t.Fatalf("JSON has %d policies, want %d: %s", len(r.GPU.Policies), len(comparePolicies), stdout)
	}
	for name, p := range r.GPU.Policies {
		n := map[string]int64{}
		for _, c := range p.Calls {
			n[c.Call] += c.Count
		}
		res := p.Result
		if p.MeasuredUS <= 0 || p.ModelUS <= 0 || len(p.Calls) == 0 || len(p.CloseCalls) == 0 ||
			n["cuMemAlloc"] != res.DeviceAllocs-res.DeviceMaps || n["cuMemFree"] != res.DeviceFrees-res.DeviceUnmaps ||
			n["cuMemMap"] != res.DeviceMaps || n["cuMemUnmap"] != res.DeviceUnmaps || n["cuMemRelease"] != res.DeviceUnmaps {
			t.Errorf("%s: measured calls %v do not match the replay's counts %+v", name, n, res)
		}
		if name == "vram" && res.DeviceUnmaps == 0 {
			t.Errorf("vram: no unmap on %s: the test needs a trace that unmaps", unmapTrace)
		}
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

// TestPrintCallTable checks the table of measured calls without a GPU:
// every kind of call has a row, the ones never made with a count of 0 and
// the model's figure.
func TestPrintCallTable(t *testing.T) {
	var ct memory.CallTimes
	ct.Add(memory.CallMap, 20<<20, 3*time.Microsecond)
	ct.Add(memory.CallMap, 2<<20, 2*time.Microsecond)
	ct.Add(memory.CallAlloc, 64<<20, 60*time.Microsecond)
	var out strings.Builder
	printCallTable(&out, "cuda:0 (test)", &ct)
	got := out.String()
	for _, want := range []string{
		"| cuMemAlloc | <=128MiB | 1 | 60.0 µs |",
		"| cuMemMap | <=2MiB | 1 | 2.0 µs |",
		"| cuMemMap | <=20MiB | 1 | 3.0 µs |",
		"| cuMemFree | any | 0 | | | | | | by size | not measured |",
		"| cuMemUnmap | any | 0 | | | | | | 29.0 µs | not measured |",
		"| cuMemRelease | any | 0 | | | | | | by size | not measured |",
		"| cuMemAddressFree | any | 0 | | | | | | not modelled | not measured |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	for _, c := range memory.DriverCalls() {
		if !strings.Contains(got, "| "+c.String()+" |") {
			t.Errorf("table lacks a row for %s:\n%s", c, got)
		}
	}
	out.Reset()
	printCallTable(&out, "cuda:0 (test)", &memory.CallTimes{})
	if out.Len() != 0 {
		t.Errorf("a table with nothing measured:\n%s", out.String())
	}
}

func TestPrintDeviceSummary(t *testing.T) {
	res := func(maps, unmaps int64) deviceResult {
		return deviceResult{Result: memory.Result{PeakRequested: 1000, PeakReserved: 1020, DeviceAllocs: maps + 3, DeviceFrees: unmaps + 1,
			DeviceMaps: maps, DeviceUnmaps: unmaps}, MeasuredUS: 2500, ModelUS: 3000, ModelError: 0.2, SimModelUS: 3100}
	}
	pols := map[string]deviceResult{"pytorch": res(0, 0), "pytorch+expandable": res(10, 0), "vram": res(12, 4)}
	var reports []replayReport
	for _, f := range []string{"a/x.trace.gz", "b/y.trace.gz"} {
		reports = append(reports, replayReport{File: f, GPU: &deviceReport{Device: "cuda:0", Name: "H", Policies: pols}})
	}
	var out strings.Builder
	printDeviceSummary(&out, reports)
	got := out.String()
	for _, want := range []string{"all 2 inputs on cuda:0 (H)",
		"| x.trace.gz | pytorch | 1.020 | 3 / 1 | 0 / 0 | 2.5 ms | 3.0 ms | +20.0% | 3.1 ms |",
		"| y.trace.gz | vram | 1.020 | 3 / 1 | 12 / 4 | 2.5 ms | 3.0 ms | +20.0% | 3.1 ms |"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n| "); n != 1+6 {
		t.Errorf("summary has %d rows, want a header and 6:\n%s", n, got)
	}
}

// TestReplayFitFailedRequest runs --fit on PyTorch's own out-of-memory
// snapshots (analyze/testdata, recorded on an H200 under a 2 GiB
// set_per_process_memory_fraction cap): the capacities found must serve
// the request that failed, so that they agree with what vram analyze says
// of the same OOMs.
func TestReplayFitFailedRequest(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		file  string
		check func(pt, ex, vr int64) bool
		want  string
	}{
		// 252 MiB were missing: nothing fits under 2 GiB + 252 MiB.
		{"pytorch_oom_missing.pickle.gz", func(pt, ex, vr int64) bool { return min(pt, ex, vr) >= 2*gib+250<<20 }, "2.25 GiB"},
		// Fragmentation: expandable segments fit under the 2 GiB cap,
		// PyTorch's default does not.
		{"pytorch_oom_fragmented.pickle.gz", func(pt, ex, vr int64) bool { return pt > 2*gib && ex < 2*gib && vr <= ex }, ""},
		{"pytorch_oom_train.pickle.gz", func(pt, ex, vr int64) bool { return vr <= ex && ex <= pt }, ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("..", "..", "analyze", "testdata", tc.file)
			code, stdout, stderr := runCLI(t, "replay", "--fit", "--json", path)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var r struct {
				Fit struct {
					Policies map[string]struct {
						Capacity int64 `json:"capacity_bytes"`
					} `json:"policies"`
				} `json:"fit"`
			}
			decodeOne(t, stdout, &r)
			p := r.Fit.Policies
			pt, ex, vr := p["pytorch"].Capacity, p["pytorch+expandable"].Capacity, p["vram"].Capacity
			if !tc.check(pt, ex, vr) {
				t.Errorf("smallest capacities %d (policy:pytorch), %d (expandable), %d (policy:vram)", pt, ex, vr)
			}
			code, stdout, stderr = runCLI(t, "replay", "--fit", path)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, want := range []string{"hit 1 out-of-memory error; the capacities above also serve the request that failed", tc.want} {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}
		})
	}
}

// TestReplayFitRecordedFrees runs --fit on snapshots that PyTorch 2.11
// recorded on an H100 under the settings users change
// (analyze/testdata/pytorch_snapshot_variants.json): what it says of the
// segments each run gave back, and the settings that reproduce a run that
// gave them back under its cap: the snapshot's own, with policy:pytorch.
func TestReplayFitRecordedFrees(t *testing.T) {
	for _, tc := range []struct {
		file      string
		want, not []string
	}{
		// Under a 1.5 GiB cap, 24 segments given back at once to make
		// room for the next.
		{"pytorch_v_oom_train_max_split.pickle.gz",
			[]string{"gave 24 segments back while it ran, 1 time right before taking a new one: it ran out of room",
				"its reserve peaked at 1.50 GiB: `vram replay --capacity 1608515584 --conf policy:pytorch,max_split_size_mb:64` reproduces it"},
			[]string{"not for lack of room"}},
		// garbage_collection_threshold:0.6 frees cached blocks before
		// new segments while the reserve is below the cap; the last run
		// of frees comes before the OOM.
		{"pytorch_v_oom_train_gc_threshold.pickle.gz",
			[]string{"gave 25 segments back while it ran, 1 time right before taking a new one: it ran out of room",
				"; 8 times not for lack of room (empty_cache(), garbage_collection_threshold or a CUDA graph's capture)",
				"--conf policy:pytorch,garbage_collection_threshold:0.6` reproduces it"},
			nil},
		// torch.cuda.graph empties the cache before its capture takes
		// a segment of its own: no cap, nor a full device.
		{"pytorch_v_train_cuda_graph.pickle.gz",
			[]string{"gave 17 segments back while it ran; 1 time not for lack of room"},
			[]string{"ran out of room", "reproduces it"}},
		{"pytorch_v_train_empty_cache.pickle.gz",
			[]string{"gave 43 segments back while it ran; 1 time not for lack of room"},
			[]string{"ran out of room", "reproduces it"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("..", "..", "analyze", "testdata", tc.file)
			code, stdout, stderr := runCLI(t, "replay", "--fit", path)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(stdout, not) {
					t.Errorf("output says %q:\n%s", not, stdout)
				}
			}
		})
	}
}

// TestReplayTruncatedHistory checks that replay says when the figures of
// a PyTorch snapshot cover only the end of its run: a history whose ring
// of max_entries wrapped, or no history at all; and that it says nothing
// of the kind for a history recorded from the start.
func TestReplayTruncatedHistory(t *testing.T) {
	const (
		midRun    = "the history starts mid-run (its ring of entries wrapped, as max_entries allowed, or recording started late): the figures above hold from the blocks live when it starts, not for the run before"
		noHistory = "the snapshot holds no history: the figures above hold its live blocks alone, not the run that made them"
	)
	for _, tc := range []struct {
		file string
		want string // "" for none
	}{
		{"pytorch_v_train_ring_wrapped.pickle.gz", midRun},
		{"pytorch_v_train_history_restarted.pickle.gz", midRun},
		{"pytorch_v_train_no_history.pickle.gz", noHistory},
		{"pytorch_v_train_python_stacks.pickle.gz", ""},
	} {
		for _, mode := range [][]string{{"replay"}, {"replay", "--compare"}, {"replay", "--fit"}} {
			t.Run(tc.file+" "+strings.Join(mode[1:], " "), func(t *testing.T) {
				path := filepath.Join("..", "..", "analyze", "testdata", tc.file)
				code, stdout, stderr := runCLI(t, append(mode, path)...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				for _, line := range []string{midRun, noHistory} {
					if got := strings.Contains(stdout, line); got != (line == tc.want) {
						t.Errorf("output says %q: %v, want %v:\n%s", line, got, !got, stdout)
					}
				}
			})
		}
		t.Run(tc.file+" --json", func(t *testing.T) {
			path := filepath.Join("..", "..", "analyze", "testdata", tc.file)
			code, stdout, stderr := runCLI(t, "replay", "--json", path)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var r struct {
				Truncated bool `json:"history_truncated"`
			}
			decodeOne(t, stdout, &r)
			if r.Truncated != (tc.want != "") {
				t.Errorf("history_truncated %v, want %v", r.Truncated, tc.want != "")
			}
		})
	}
}

// TestReplayNamesPyTorchsSetting checks that a PyTorch snapshot replayed
// under vram's default says so and gives the setting that replays it as
// PyTorch ran it, which a replay under --conf or of a trace does not.
func TestReplayNamesPyTorchsSetting(t *testing.T) {
	const snap = "testdata/snapshot_p4_expandable.pickle"
	const hint = "to replay it as PyTorch ran it: --conf policy:pytorch,expandable_segments:True"
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{"pickle", []string{"replay", snap}, true},
		{"pickle with --conf", []string{"replay", "--conf", "policy:pytorch", snap}, false},
		{"pickle with a blank --conf", []string{"replay", "--conf", " \t", snap}, true},
		{"pickle with an empty --conf", []string{"replay", "--conf", "", snap}, true},
		{"text trace", []string{"replay", "testdata/resnet50_train.trace.gz"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := strings.Contains(out, hint); got != tc.want {
				t.Errorf("hint shown: %v, want %v:\n%s", got, tc.want, out)
			}
			if tc.want && !strings.Contains(out, "policy:vram") {
				t.Errorf("the column does not name vram's policy:\n%s", out)
			}
		})
	}
	code, out, _ := runCLI(t, "replay", "--json", snap)
	if code != 0 || !strings.Contains(out, `"as_recorded_conf":"policy:pytorch,expandable_segments:True"`) {
		t.Errorf("--json: exit %d, %s", code, out)
	}
}

// TestReplayNamesDevice checks that every report of a snapshot of several
// devices says which device it is about.
func TestReplayNamesDevice(t *testing.T) {
	const two = "testdata/snapshot_p4_expandable.pickle" // devices 0 and 1
	for _, args := range [][]string{
		{"replay", two},
		{"replay", "--compare", two},
		{"replay", "--fit", two},
		{"replay", "--fit", "1GiB", two},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, d := range []string{"0", "1"} {
				if !strings.Contains(stdout, two+" (device "+d) {
					t.Errorf("no report headed %q:\n%s", two+" (device "+d, stdout)
				}
			}
		})
	}
}

// TestReplaySaysFailedRequestsSkipped checks that a replay of a run that
// ran out of memory says its failed requests are not replayed, so that its
// peaks are not read as what the run needed, and that one without does not.
func TestReplaySaysFailedRequestsSkipped(t *testing.T) {
	const note = "the recorded run hit 1 out-of-memory error: its request failed and is not replayed here"
	oom := filepath.Join("..", "..", "analyze", "testdata", "oom_device_fragmented.pickle")
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{"plain", []string{"replay", oom}, true},
		{"under a capacity", []string{"replay", "--capacity", "1000MiB", "--conf", "policy:pytorch", oom}, true},
		{"compare", []string{"replay", "--compare", oom}, true},
		{"no OOM", []string{"replay", "testdata/resnet50_train.trace.gz"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := strings.Contains(out, note); got != tc.want {
				t.Errorf("note shown: %v, want %v:\n%s", got, tc.want, out)
			}
		})
	}
	code, out, _ := runCLI(t, "replay", "--json", oom)
	if code != 0 || !strings.Contains(out, `"recorded_ooms":1`) {
		t.Errorf("--json: exit %d, %s", code, out)
	}
}

// TestPyTorchJSON checks that replay and analyze read a PyTorch snapshot
// saved with json.dump as they read the pickle of the same dict: the same
// output but for the file's name and format, and the hint naming the
// recorded settings.
func TestPyTorchJSON(t *testing.T) {
	dir := filepath.Join("..", "..", "analyze", "testdata")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"pytorch_oom_fragmented", []string{"replay", "--fit", "--json"}, `"capacity_bytes"`},
		{"pytorch_oom_fragmented", []string{"replay", "--fit"}, "hit 1 out-of-memory error; the capacities above also serve the request that failed"},
		{"pytorch_oom_fragmented", []string{"analyze"}, "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run fits under a limit of 1.82 GiB"},
		{"pytorch_v_oom_train_expandable", []string{"replay"}, "to replay it as PyTorch ran it: --conf policy:pytorch,expandable_segments:True"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " ")+" "+tc.name, func(t *testing.T) {
			var outs [2]string
			for i, ext := range []string{".pickle.gz", ".json.gz"} {
				path := filepath.Join(dir, tc.name+ext)
				code, stdout, stderr := runCLI(t, append(tc.args, path)...)
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", path, code, stderr)
				}
				if !strings.Contains(stdout, tc.want) {
					t.Errorf("%s: output lacks %q:\n%s", path, tc.want, stdout)
				}
				outs[i] = strings.ReplaceAll(strings.ReplaceAll(stdout, tc.name+ext, "FILE"), "pytorch-json", "pickle")
			}
			if outs[0] != outs[1] {
				t.Errorf("the pickle gives\n%s\nthe JSON\n%s", outs[0], outs[1])
			}
		})
	}
}

// TestReplaySettingsChanged replays snapshots of PyTorch runs: one that
// switched expandable_segments on while it ran holds fixed and expandable
// segments, which no one setting replays as PyTorch ran it, and the
// report says so (in --json too); one that ran with a single setting says
// nothing of the kind.
func TestReplaySettingsChanged(t *testing.T) {
	dir := filepath.Join("..", "..", "analyze", "testdata")
	const note = "expandable_segments changed while the run went on"
	tests := []struct {
		file    string
		args    []string
		want    []string
		changed bool
	}{
		{"pytorch_v_train_settings_changed.pickle.gz", []string{"replay"}, []string{note, "under the settings PyTorch had last: --conf policy:pytorch,expandable_segments:True"}, true},
		{"pytorch_v_train_settings_changed.pickle.gz", []string{"replay", "--json"}, []string{`"settings_changed_mid_run":true`}, true},
		{"pytorch_v_train_expandable.pickle.gz", []string{"replay"}, []string{"to replay it as PyTorch ran it"}, false},
		{"pytorch_v_train_python_stacks.pickle.gz", []string{"replay"}, []string{"to replay it as PyTorch ran it"}, false},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " ")+" "+tc.file, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(tc.args, filepath.Join(dir, tc.file))...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
			if !tc.changed && (strings.Contains(stdout, note) || strings.Contains(stdout, "settings_changed")) {
				t.Errorf("a run with one setting is said to have changed it:\n%s", stdout)
			}
		})
	}
}

// TestReplaySaysDefaultCapacity checks that the header of a replay says
// when its capacity is vram's default, not the card's: a PyTorch snapshot
// records none, and 1 TiB read as the card would mislead.
func TestReplaySaysDefaultCapacity(t *testing.T) {
	const file = "../../analyze/testdata/pytorch_v_train_compiled.pickle.gz"
	const note = "capacity 1.00 TiB: none given or recorded, so nothing runs out"
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"replay", file}, true},
		{[]string{"replay", "--compare", file}, true},
		{[]string{"replay", "--capacity", "24GiB", file}, false},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if strings.Contains(stdout, note) != tc.want {
				t.Errorf("says %q: %v, want %v:\n%s", note, !tc.want, tc.want, stdout)
			}
		})
	}
	code, stdout, stderr := runCLI(t, "replay", "--json", file)
	if code != 0 || !strings.Contains(stdout, `"capacity_default":true`) {
		t.Errorf("--json: exit %d, no capacity_default: %s%s", code, stdout, stderr)
	}
}

// TestReplayDefaultCapacityRanOut checks that the header of a replay on
// vram's default capacity does not say that nothing runs out when a
// request larger than it did: an 8 EiB alloc was reported as one
// out-of-memory error under "so nothing runs out".
func TestReplayDefaultCapacityRanOut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "huge.trace")
	if err := os.WriteFile(file, []byte("alloc 4096 9223372036854775807 0 1\nalloc 8192 512 0 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"replay", file}, {"replay", "--compare", file}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if strings.Contains(stdout, "nothing runs out") {
			t.Errorf("%v says nothing runs out, but a request did:\n%s", args, stdout)
		}
		if !strings.Contains(stdout, "capacity 1.00 TiB: none given or recorded, and still too small: the run ran out of it") {
			t.Errorf("%v does not say why it ran out:\n%s", args, stdout)
		}
	}
}

// TestReplayJSONKeysDocumented checks that --help names every key of the
// objects replay --json prints, under each of its modes, and says where
// the nested objects are documented: the keys were documented nowhere a
// user of the command could read.
func TestReplayJSONKeysDocumented(t *testing.T) {
	const file = "../../analyze/testdata/pytorch_v_train_ring_wrapped.pickle.gz"
	code, help, stderr := runCLI(t, "replay", "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d: %s", code, stderr)
	}
	for _, ref := range []string{"memory.Result", "memory.Fit", "memory.Recorded"} {
		if !strings.Contains(help, ref) {
			t.Errorf("--help does not point to %s", ref)
		}
	}
	for _, mode := range [][]string{nil, {"--compare"}, {"--fit", "24GiB"}, {"--conf", "garbage_collection_threshold:0.5"}} {
		args := append(append([]string{"replay", "--json"}, mode...), file)
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(stdout), &obj); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for k := range obj {
			if !strings.Contains(help, k) {
				t.Errorf("%v: key %q is not in --help", mode, k)
			}
		}
	}
}

// TestAnalyzeJSONDocumented checks that analyze --help says where the
// fields of its --json object are documented.
func TestAnalyzeJSONDocumented(t *testing.T) {
	code, help, stderr := runCLI(t, "analyze", "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d: %s", code, stderr)
	}
	if !strings.Contains(help, "analyze.Report") {
		t.Errorf("--help does not say that --json prints an analyze.Report:\n%s", help)
	}
}

// TestReplayFitNumbersFileEvents checks that an error in a snapshot's
// history names the event as the file numbers it under --fit too: --fit
// replays the requests that failed as added events, and its error named
// event 4 of a history of 3.
func TestReplayFitNumbersFileEvents(t *testing.T) {
	file := filepath.Join(t.TempDir(), "contra.json")
	const snap = `{"segments": [], "device_traces": [[{"action": "oom", "device_free": 0, "size": 1024, "stream": 0},
		{"action": "free_completed", "addr": 4096, "size": 512, "stream": 0}, {"action": "alloc", "addr": 8192, "size": 512, "stream": 0}]]}`
	if err := os.WriteFile(file, []byte(snap), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"replay", file}, {"replay", "--fit", file}, {"replay", "--fit", "1GiB", file}} {
		code, _, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, "history event 2: history contradicts the segments: alloc at 0x2000") {
			t.Errorf("%v: exit %d, want 1 and the error at history event 2:\n%s", args[1:], code, stderr)
		}
	}
}
