package main

import (
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func TestFit(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "batch 8192, float32, AdamW on an 80 GiB GPU:\n  fits") {
		t.Errorf("batch 8192 should fit:\n%s", out)
	}
	if !strings.Contains(out, "batch 131072, float32, AdamW on an 80 GiB GPU:\n  does not fit") {
		t.Errorf("batch 131072 should not fit:\n%s", out)
	}
}
