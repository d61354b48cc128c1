package main

import (
	"strings"
	"testing"

	"github.com/vramgo/vram"
)

func TestRun(t *testing.T) {
	other, ok := secondDevice()
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := []string{"only one device here"}
	if ok {
		want = []string{
			"a.Add(b) failed: op \"add\", expected cpu, got " + other.String(),
			"errors.Is(err, vram.ErrDevice) = true",
			"a.Add(b.To(a.Device())) works: [2 2 2 2 2 2] on cpu",
		}
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

func TestSingleDevice(t *testing.T) {
	var out strings.Builder
	if err := show(&out, vram.Device{}, false); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"only one device here", "errors.Is(err, vram.ErrUnavailable) = true"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}
