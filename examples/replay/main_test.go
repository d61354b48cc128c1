package main

import (
	"strings"
	"testing"
)

func TestReplay(t *testing.T) {
	var b strings.Builder
	if err := run(&b, "testdata/resnet50_train.trace.gz"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"8504 events", "policy:pytorch ", "1.206", "1.020", "policy:vram"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err := run(&b, "testdata/missing.trace"); err == nil || !strings.Contains(err.Error(), "missing.trace") {
		t.Errorf("a missing file: %v", err)
	}
}
