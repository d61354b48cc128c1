package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"GPipe, 8 micro-batches of 64",
		"1F1B, 8 micro-batches of 64",
		"held at most 8 micro-batches' activations", // GPipe
		"held at most 2 micro-batches' activations", // 1F1B, stage 0
		"1 micro-batches: expected 50.0%",
		"16 micro-batches: expected  5.9%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Both schedules give the sequential network's loss and gradients.
	for _, m := range regexp.MustCompile(`loss (\S+) \(the sequential network: (\S+)\), largest gradient difference (\S+)`).FindAllStringSubmatch(out, -1) {
		d, _ := strconv.ParseFloat(m[3], 64)
		if m[1] != m[2] || d > 1e-6 {
			t.Errorf("%s:\n%s", m[0], out)
		}
	}
	l := regexp.MustCompile(`loss went from (\S+) to (\S+) in`).FindStringSubmatch(out)
	first, _ := strconv.ParseFloat(l[1], 64)
	last, _ := strconv.ParseFloat(l[2], 64)
	if !(last < 0.9*first) {
		t.Errorf("the loss went from %v to %v:\n%s", first, last, out)
	}
}
