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
	m := regexp.MustCompile(`\(([0-9.]+)x smaller\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no memory ratio in the output:\n%s", out)
	}
	if f, _ := strconv.ParseFloat(m[1], 64); f < 3.5 {
		t.Errorf("parameters only %vx smaller:\n%s", f, out)
	}
	a := regexp.MustCompile(`float32 ([0-9.]+)%, int8 ([0-9.]+)%`).FindStringSubmatch(out)
	if a == nil {
		t.Fatalf("no accuracies in the output:\n%s", out)
	}
	fa, _ := strconv.ParseFloat(a[1], 64)
	ia, _ := strconv.ParseFloat(a[2], 64)
	if fa < 85 || ia < fa-1 {
		t.Errorf("accuracy float32 %v%%, int8 %v%%:\n%s", fa, ia, out)
	}
}
