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
	for _, want := range []string{"holds", "gradients flowed back from", "trained: the loss went from", "each waits while the other works", "peak"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`largest difference from the network on the CPU: (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no comparison:\n%s", out)
	}
	if d, err := strconv.ParseFloat(m[1], 64); err != nil || d > 1e-5 {
		t.Errorf("gradients differ from the CPU's by %s:\n%s", m[1], out)
	}
	l := regexp.MustCompile(`loss went from (\S+) to (\S+) in`).FindStringSubmatch(out)
	first, _ := strconv.ParseFloat(l[1], 64)
	last, _ := strconv.ParseFloat(l[2], 64)
	if !(last < first/2) {
		t.Errorf("the loss went from %v to %v:\n%s", first, last, out)
	}
}
