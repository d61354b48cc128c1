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
	for _, w := range []string{
		"vram warned: a one-element tensor that requires grad has been accumulated 100 times",
		"right: total += iterLoss.Item(), 150 times: 0 more bytes and 0 more tensors live",
		"0 warnings",
	} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "wrong: total = total.Add(iterLoss), 150 times: 0 more bytes") {
		t.Errorf("the wrong way should hold memory:\n%s", out.String())
	}
}
