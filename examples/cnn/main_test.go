package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestRun trains the network as "go run ./examples/cnn" does (on cuda:0
// when there is one, else on the CPU) and checks that it learned: a
// falling loss and at least 95% accuracy on the held-out images.
func TestRun(t *testing.T) {
	var b strings.Builder
	if err := run(&b, device()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	m := regexp.MustCompile(`test accuracy: ([0-9.]+)%`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no accuracy in the output:\n%s", out)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 95 {
		t.Errorf("test accuracy %v%%, want at least 95%%", acc)
	}
	var losses []float64
	for _, l := range regexp.MustCompile(`mean loss ([0-9.]+)`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(l[1], 64)
		losses = append(losses, v)
	}
	if len(losses) != epochs || losses[len(losses)-1] >= losses[0] {
		t.Errorf("losses %v do not fall over %d epochs", losses, epochs)
	}
	for _, want := range []string{"training took", "peak memory allocated"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
