package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vramgo/vram"
)

// helperEnv makes the test binary run the vram command line in
// VRAM_TEST_ARGS instead of the tests, as main does (Ctrl-C included), so
// that a test can start it as a separate process (with another
// GOMAXPROCS, say, or to send it signals).
const helperEnv = "VRAM_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		args := strings.Fields(os.Getenv("VRAM_TEST_ARGS"))
		ctx, stop := interruptContext()
		code := run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// runCLI runs the command line in process and returns its exit status and
// output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runCLIInput(t, strings.NewReader(""), args...)
}

// runCLIInput is runCLI with stdin as the command's standard input.
func runCLIInput(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, stdin, &out, &errOut)
	return code, out.String(), errOut.String()
}

// decodeOne decodes stdout as exactly one JSON object into v.
func decodeOne(t *testing.T, stdout string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, stdout)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		t.Fatalf("stdout holds more than one JSON value:\n%s", stdout)
	}
}

func runDemoJSON(t *testing.T, args ...string) demoResult {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"demo", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("vram demo %v: exit %d, stderr:\n%s", args, code, stderr)
	}
	if stderr != "" {
		t.Errorf("vram demo --json wrote to stderr:\n%s", stderr)
	}
	var r demoResult
	decodeOne(t, stdout, &r)
	return r
}

func TestDemoJSONFields(t *testing.T) {
	code, stdout, stderr := runCLI(t, "demo", "--device", "cpu", "--json", "--steps", "30", "--batch", "16", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var m map[string]any
	decodeOne(t, stdout, &m)
	for _, k := range []string{"device", "device_reason", "steps", "batch", "seed", "final_loss", "accuracy",
		"train_accuracy", "peak_bytes", "duration_ms", "phases", "step_end_bytes", "leaked_storages"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q:\n%s", k, stdout)
		}
	}
	phases, _ := m["phases"].(map[string]any)
	for _, p := range []string{"forward", "backward", "optimizer", "eval"} {
		ph, ok := phases[p].(map[string]any)
		if !ok {
			t.Errorf("JSON lacks phases.%s", p)
			continue
		}
		for _, k := range []string{"peak_bytes", "before_bytes", "after_bytes"} {
			if _, ok := ph[k]; !ok {
				t.Errorf("JSON lacks phases.%s.%s", p, k)
			}
		}
	}

	var r demoResult
	decodeOne(t, stdout, &r)
	if r.Device != "cpu" || r.Steps != 30 || r.Batch != 16 || r.Seed != 3 {
		t.Errorf("device %q, steps %d, batch %d, seed %d; want cpu, 30, 16, 3", r.Device, r.Steps, r.Batch, r.Seed)
	}
	if r.FinalLoss == nil || r.Accuracy == nil || r.TrainAccuracy == nil || r.ShapeOnly || len(r.Notes) != 0 {
		t.Fatalf("final loss %v, accuracy %v, train accuracy %v, shape-only %v, notes %q", r.FinalLoss, r.Accuracy, r.TrainAccuracy, r.ShapeOnly, r.Notes)
	}
	if !(*r.FinalLoss > 0) || *r.Accuracy < 0 || *r.Accuracy > 1 {
		t.Errorf("final loss %v, accuracy %v", *r.FinalLoss, *r.Accuracy)
	}
	ph := r.Phases
	for name, p := range map[string]phaseMemory{"forward": ph.Forward, "backward": ph.Backward, "optimizer": ph.Optimizer, "eval": ph.Eval} {
		if p.PeakBytes <= 0 || p.PeakBytes < p.BeforeBytes || p.PeakBytes < p.AfterBytes || p.PeakBytes > r.PeakBytes {
			t.Errorf("%s: peak %d, before %d, after %d, overall peak %d", name, p.PeakBytes, p.BeforeBytes, p.AfterBytes, r.PeakBytes)
		}
	}
	// The forward pass holds activations for backward; the optimizer step
	// leaves what it found (AdamW's state is created at the first step).
	if ph.Forward.AfterBytes <= ph.Forward.BeforeBytes {
		t.Errorf("forward: %d bytes after, not more than %d before", ph.Forward.AfterBytes, ph.Forward.BeforeBytes)
	}
	if ph.Optimizer.AfterBytes != ph.Optimizer.BeforeBytes {
		t.Errorf("optimizer step: %d bytes after, %d before; want equal after the first step", ph.Optimizer.AfterBytes, ph.Optimizer.BeforeBytes)
	}
	if r.StepEndBytes.First != r.StepEndBytes.Last {
		t.Errorf("memory not flat: %d bytes after the first step, %d after the last", r.StepEndBytes.First, r.StepEndBytes.Last)
	}
	if r.LeakedStorages != 0 {
		t.Errorf("%d storages leaked to the garbage collector", r.LeakedStorages)
	}
	if n := vram.MemoryAllocated(vram.CPU); n != 0 {
		t.Errorf("%d bytes still allocated on the CPU after the demo", n)
	}
}

func TestDemoDeterministic(t *testing.T) {
	args := []string{"--device", "cpu", "--steps", "40", "--batch", "32", "--seed", "11"}
	a, b := runDemoJSON(t, args...), runDemoJSON(t, args...)
	if !sameResults(a, b) {
		t.Errorf("same seed, different results: loss %v vs %v, accuracy %v vs %v", *a.FinalLoss, *b.FinalLoss, *a.Accuracy, *b.Accuracy)
	}
	c := runDemoJSON(t, "--device", "cpu", "--steps", "40", "--batch", "32", "--seed", "12")
	if *c.FinalLoss == *a.FinalLoss {
		t.Errorf("seeds 11 and 12 gave the same loss %v", *a.FinalLoss)
	}
}

// TestDemoSameOnAnyCores runs the demo in separate processes with 1 and 4
// cores and compares the results.
func TestDemoSameOnAnyCores(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var results []demoResult
	for _, procs := range []string{"1", "4"} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"=1", "GOMAXPROCS="+procs,
			"VRAM_TEST_ARGS=demo --device cpu --json --steps 60 --batch 128 --seed 5")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOMAXPROCS=%s: %v\n%s", procs, err, stderr.String())
		}
		var r demoResult
		decodeOne(t, string(out), &r)
		results = append(results, r)
	}
	a, b := results[0], results[1]
	if !sameResults(a, b) {
		t.Errorf("1 core: loss %v, accuracy %v; 4 cores: loss %v, accuracy %v", *a.FinalLoss, *a.Accuracy, *b.FinalLoss, *b.Accuracy)
	}
}

func TestDemoText(t *testing.T) {
	code, stdout, stderr := runCLI(t, "demo", "--device", "cpu", "--steps", "5")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("no progress bar expected when stderr is not a terminal, got:\n%s", stderr)
	}
	for _, want := range []string{"device:", "cpu (--device cpu)", "final loss:", "accuracy:", "time:",
		"forward", "backward", "optimizer step", "evaluation", "overall peak", ": flat"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestDemoSim(t *testing.T) {
	if !vram.Sim(0).Available() {
		t.Skip("no sim device")
	}
	r := runDemoJSON(t, "--device", "sim:0", "--steps", "10")
	if r.Device != "sim:0" || r.PeakBytes <= 0 {
		t.Errorf("device %q, peak %d", r.Device, r.PeakBytes)
	}
}

// TestDemoDefault runs the demo with its default settings, which must reach
// 95% held-out accuracy.
func TestDemoDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("full training run")
	}
	r := runDemoJSON(t, "--device", "cpu")
	if r.Steps != demoSteps || r.Batch != demoBatch {
		t.Errorf("steps %d, batch %d; want the defaults %d, %d", r.Steps, r.Batch, demoSteps, demoBatch)
	}
	if r.Accuracy == nil || *r.Accuracy < 0.95 {
		t.Fatalf("held-out accuracy %v, want at least 0.95", r.Accuracy)
	}
	t.Logf("accuracy %.4f, final loss %.4f, %d ms", *r.Accuracy, *r.FinalLoss, r.DurationMS)
}

// sameResults reports whether two runs computed the same loss and
// accuracies.
func sameResults(a, b demoResult) bool {
	if a.FinalLoss == nil || b.FinalLoss == nil || a.Accuracy == nil || b.Accuracy == nil || a.TrainAccuracy == nil || b.TrainAccuracy == nil {
		return false
	}
	return *a.FinalLoss == *b.FinalLoss && *a.Accuracy == *b.Accuracy && *a.TrainAccuracy == *b.TrainAccuracy
}

func TestChooseDevice(t *testing.T) {
	d, reason, err := chooseDevice("auto")
	if err != nil {
		t.Fatal(err)
	}
	if vram.CUDAAvailable() {
		if d != vram.CUDA(0) {
			t.Errorf("auto chose %s with CUDA available, want cuda:0", d)
		}
	} else if d != vram.CPU || reason != "no CUDA device found" {
		t.Errorf("auto chose %s (%s) without CUDA, want cpu (no CUDA device found)", d, reason)
	}
}

func TestBadCommandLines(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the one-line message
	}{
		{"zero steps", []string{"demo", "--steps", "0"}, "--steps must be positive, got 0"},
		{"negative batch", []string{"demo", "--batch", "-1"}, "--batch must be positive, got -1"},
		{"unknown device kind", []string{"demo", "--device", "foo"}, `bad device "foo"`},
		{"missing device", []string{"demo", "--device", "sim:7"}, "--device sim:7: device not available"},
		{"unknown flag", []string{"demo", "--bogus"}, "unknown flag: --bogus"},
		{"bad number", []string{"demo", "--steps", "many"}, `--steps "many": want a whole number`},
		{"extra argument", []string{"demo", "extra"}, `unknown command "extra"`},
		{"unknown command", []string{"dmeo"}, "did you mean demo?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			if !strings.HasPrefix(stderr, "vram: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q, want one line starting with \"vram: \" containing %q", stderr, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "version", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var v versionInfo
	decodeOne(t, stdout, &v)
	if v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version %+v", v)
	}
	code, stdout, _ = runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "vram ") {
		t.Errorf("exit %d, output %q", code, stdout)
	}
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		c, out, errOut := runCLI(t, args...)
		if c != 0 || out != stdout || errOut != "" {
			t.Errorf("vram %s: exit %d, output %q, stderr %q; want exit 0 and %q, as vram version", args[0], c, out, errOut, stdout)
		}
	}
}
