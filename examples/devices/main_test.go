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
	for _, want := range []string{
		"a.Device() = cpu",
		"a.GetDevice()                      -> -1",
		"does not exist",
		"parameter weight on",
		"y := clf.Forward(b)",
		"shape [4, 2]",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
