package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	news := 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "ones.New") && !strings.Contains(l, "holds"):
			news++
			if !strings.Contains(l, "float64") {
				t.Errorf("a New... tensor did not inherit float64: %q", l)
			}
		case strings.HasPrefix(l, "vram.ZerosLike"), strings.HasPrefix(l, "vram.RandnLike"):
			if !strings.Contains(l, "float64") || !strings.Contains(l, "shape [2]") {
				t.Errorf("a ...Like tensor did not inherit the shape and float64: %q", l)
			}
		case strings.HasPrefix(l, "vram.FullLike"):
			if !strings.Contains(l, "int64") || strings.Contains(l, "float64") {
				t.Errorf("the dtype option did not override: %q", l)
			}
		case strings.HasPrefix(l, "vram.Randn"):
			if !strings.Contains(l, "float32") {
				t.Errorf("vram.Randn should use the default float32: %q", l)
			}
		}
	}
	if news != 6 {
		t.Errorf("found %d New... lines, want 6:\n%s", news, out.String())
	}
	if !strings.Contains(out.String(), "holds [7 7 7]") {
		t.Errorf("NewFull values missing:\n%s", out.String())
	}
}
