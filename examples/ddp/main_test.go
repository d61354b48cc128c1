package main

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vramgo/vram/parallel"
)

var checksumLine = regexp.MustCompile(`rank (\d+) of (\d+) on \S+: final loss \S+, parameter checksum (\S+),`)

// checksums returns each rank's parameter checksum printed in out.
func checksums(t *testing.T, out string, ranks int) []float64 {
	t.Helper()
	sums := make([]float64, ranks)
	found := 0
	for _, m := range checksumLine.FindAllStringSubmatch(out, -1) {
		r, _ := strconv.Atoi(m[1])
		if m[2] != strconv.Itoa(ranks) || r >= ranks {
			t.Fatalf("unexpected line %q", m[0])
		}
		sums[r], _ = strconv.ParseFloat(m[3], 64)
		found++
	}
	if found != ranks {
		t.Fatalf("%d result lines, want %d:\n%s", found, ranks, out)
	}
	return sums
}

// singleProcess trains as a job of one rank, in this process.
func singleProcess(t *testing.T, steps int) float64 {
	t.Helper()
	var b strings.Builder
	if err := run(&b, parallel.LaunchInfo{}, options{steps: steps, accumulate: 1, backend: "tcp"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "1 rank, tcp backend") {
		t.Errorf("output:\n%s", b.String())
	}
	return checksums(t, b.String(), 1)[0]
}

func TestOptionsCheck(t *testing.T) {
	good := options{steps: 30, accumulate: 1, backend: "auto"}
	for _, tc := range []struct {
		name string
		o    options
		args []string
		want string // in the error; "" for none
	}{
		{"defaults", good, nil, ""},
		{"metrics port", options{steps: 1, accumulate: 2, metricsPort: 9500, backend: "tcp"}, nil, ""},
		{"unknown backend", options{steps: 1, accumulate: 1, backend: "gloo"}, nil, `--backend "gloo"`},
		{"no steps", options{steps: 0, accumulate: 1}, nil, "--steps 0"},
		{"negative steps", options{steps: -3, accumulate: 1}, nil, "--steps -3"},
		{"no micro-batches", options{steps: 5, accumulate: 0}, nil, "--accumulate 0"},
		{"negative port", options{steps: 5, accumulate: 1, metricsPort: -1}, nil, "--metrics-port -1"},
		{"port too large", options{steps: 5, accumulate: 1, metricsPort: 70000}, nil, "--metrics-port 70000"},
		{"an argument", good, []string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.check(tc.args)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("check: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestSingleProcess(t *testing.T) {
	var b strings.Builder
	if err := run(&b, parallel.LaunchInfo{}, options{steps: 20, accumulate: 1, backend: "tcp"}); err != nil {
		t.Fatal(err)
	}
	losses := regexp.MustCompile(`step +(\d+)  loss (\S+)`).FindAllStringSubmatch(b.String(), -1)
	if len(losses) != 3 {
		t.Fatalf("output:\n%s", b.String())
	}
	first, _ := strconv.ParseFloat(losses[0][2], 64)
	last, _ := strconv.ParseFloat(losses[2][2], 64)
	if !(last < first/10) {
		t.Errorf("the loss went from %v to %v in 20 steps:\n%s", first, last, b.String())
	}
}

// TestUnderVramRun builds vram and the example and runs
// "vram run --nproc-per-node 2 ddp": both ranks end with the same
// parameters, those of one process training on whole batches, also when
// each rank accumulates two micro-batches with NoSync.
func TestUnderVramRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example with")
	}
	const steps = 12
	want := singleProcess(t, steps)
	dir := t.TempDir()
	build := exec.Command(goTool, "build", "-o", dir+string(filepath.Separator), "github.com/vramgo/vram/cmd/vram", "github.com/vramgo/vram/examples/ddp")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, accumulate := range []string{"1", "2"} {
		t.Run("accumulate "+accumulate, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(filepath.Join(dir, "vram"), "run", "--nproc-per-node", "2",
				filepath.Join(dir, "ddp"), "--backend", "tcp", "--steps", strconv.Itoa(steps), "--accumulate", accumulate)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("vram run: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
			}
			out := stdout.String()
			if !strings.Contains(out, "[rank 0] 2 ranks, tcp backend") || !strings.Contains(out, "[rank 1] rank 1 of 2") {
				t.Errorf("output:\n%s", out)
			}
			for r, s := range checksums(t, out, 2) {
				if math.Abs(s-want) > 1e-4*(1+math.Abs(want)) {
					t.Errorf("rank %d: parameter checksum %v, one process %v", r, s, want)
				}
			}
		})
	}
}

// TestUsage checks that -h says what the example does before listing its
// flags with their defaults, as the other examples' -h does, and that a
// collective backend the example has not is refused before training.
func TestUsage(t *testing.T) {
	var o options
	var b bytes.Buffer
	fs := newFlags(&o, &b, flag.ContinueOnError)
	if err := fs.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, w := range []string{"usage: ddp [flags]", "distributed data parallelism", "vram run --nproc-per-node 2", "-steps int", "(default 30)", `(default "auto")`} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("-h lacks %q:\n%s", w, b.String())
		}
	}
	if err := fs.Parse([]string{"--backend", "gloo"}); err != nil {
		t.Fatal(err)
	}
	if err := o.check(nil); err == nil || !strings.Contains(err.Error(), `--backend "gloo"`) {
		t.Errorf("check with --backend gloo: %v, want an error naming it", err)
	}
}
