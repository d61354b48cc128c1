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

func TestDiagnosis(t *testing.T) {
	var b strings.Builder
	if err := run(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"caught: true", "activations", "expandable_segments", "a small tensor still fits: 1024"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
