package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func TestRun(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"gather, 6 steps of a batch of 768",
		"loss on each device, 6 steps of a batch of 768",
		"replicas in step: true",
		"all-reduce",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Both ways train like one device with the whole batch.
	for _, m := range regexp.MustCompile(`whole batch: (\S+)`).FindAllStringSubmatch(out, -1) {
		if d, err := strconv.ParseFloat(m[1], 64); err != nil || d > 1e-4 {
			t.Errorf("difference from one device %s:\n%s", m[1], out)
		}
	}
	// Gathering loads the first device more than computing the loss on
	// each device does.
	peaks := regexp.MustCompile(`(?m)^  (\S+): peak (\S+) MiB`).FindAllStringSubmatch(out, -1)
	if len(peaks) != 6 {
		t.Fatalf("%d peaks:\n%s", len(peaks), out)
	}
	gather, _ := strconv.ParseFloat(peaks[0][2], 64)
	local, _ := strconv.ParseFloat(peaks[3][2], 64)
	if !(gather > local) {
		t.Errorf("the first device's peak is %v MiB when gathering and %v MiB with the loss on each device:\n%s", gather, local, out)
	}
}
