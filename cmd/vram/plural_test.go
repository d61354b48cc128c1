package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory"
)

// onePlural matches a count of 1 before a plural noun, as in "1 times" or
// "1 out-of-memory errors".
var onePlural = regexp.MustCompile(`(^|[^\d.])1 [a-z][a-z-]*s\b`)

// TestCountsAgree checks that the reports count in words that agree with
// their numbers: one of a thing is singular, several plural.
func TestCountsAgree(t *testing.T) {
	fitWith := func(n int64) *fitReport {
		return &fitReport{
			Policies:  map[string]fitPolicy{},
			Recorded:  &memory.Recorded{MidRunFrees: n, RoomBursts: n, OtherBursts: n, OOMs: n},
			Reproduce: &reproduceReport{Capacity: 1 << 30, Config: "policy:pytorch", SegmentAllocs: n, SegmentFrees: n},
		}
	}
	demoWith := func(n int) *demoResult {
		loss, acc := 0.5, 0.5
		return &demoResult{Device: "cpu", Steps: n, Batch: n, Parameters: n, TrainExamples: n, TestExamples: n,
			KernelModules: n, LeakedStorages: int64(n), FinalLoss: &loss, Accuracy: &acc, TrainAccuracy: &acc}
	}
	replayWith := func(n int64) replayReport {
		return replayReport{File: "t", Result: &memory.Result{RecordedOOMs: n}}
	}
	tests := []struct {
		name  string
		print func(w *bytes.Buffer)
		want  []string
	}{
		{"fit, one", func(w *bytes.Buffer) { printFit(w, "t", 0, fitWith(1)) }, []string{
			"gave 1 segment back", ", 1 time right before", "; 1 time not for lack of room",
			"1 segment allocation and 1 free", "hit 1 out-of-memory error;", "serve the request that failed, so the run goes on past it"}},
		{"fit, two", func(w *bytes.Buffer) { printFit(w, "t", 0, fitWith(2)) }, []string{
			"gave 2 segments back", ", 2 times right before", "2 segment allocations and 2 frees", "hit 2 out-of-memory errors;", "past them"}},
		{"demo, one", func(w *bytes.Buffer) { printDemo(w, demoWith(1)) }, []string{
			"1 parameter\n", "1 step of 1 example,", "1 training example\n", "on 1 held-out example (", "1 CUDA kernel module compiled", "1 storage was never released"}},
		{"demo, two", func(w *bytes.Buffer) { printDemo(w, demoWith(2)) }, []string{
			"2 parameters", "2 steps of 2 examples", "2 held-out examples", "2 CUDA kernel modules", "2 storages were never released"}},
		{"replay, one", func(w *bytes.Buffer) { printReplay(w, replayWith(1)) }, []string{"hit 1 out-of-memory error: its request failed and is not replayed"}},
		{"replay, two", func(w *bytes.Buffer) { printReplay(w, replayWith(2)) }, []string{"hit 2 out-of-memory errors: their requests failed and are not replayed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.print(&b)
			out := b.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if m := onePlural.FindString(out); m != "" {
				t.Errorf("%q: one of a thing in the plural:\n%s", m, out)
			}
		})
	}
	// A replay whose only input is missing.
	_, _, stderr := runCLI(t, "replay", "testdata/no-such-trace.gz")
	if !strings.Contains(stderr, "1 of 1 input could not be replayed") {
		t.Errorf("stderr %q, want the count of inputs in the singular", stderr)
	}
}
