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

// TestDefaultTrace checks that the trace is found both from the repository
// root and from this directory, where go test runs.
func TestDefaultTrace(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{"from the repository root, here missing", defaultTraces, "testdata/resnet50_train.trace.gz"},
		{"the first that exists", []string{"testdata/resnet50_train.trace.gz", "main.go"}, "testdata/resnet50_train.trace.gz"},
		{"none exists: the documented one", []string{"no/such.trace", "nor/this.trace"}, "no/such.trace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultTrace(tt.paths); got != tt.want {
				t.Errorf("defaultTrace(%q) = %q, want %q", tt.paths, got, tt.want)
			}
		})
	}
}

func TestTracePath(t *testing.T) {
	defaults := []string{"no/such.trace", "testdata/resnet50_train.trace.gz"}
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{"none: the default", nil, "testdata/resnet50_train.trace.gz", false},
		{"one", []string{"my.trace"}, "my.trace", false},
		{"two", []string{"a.trace", "b.trace"}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tracePath(tc.args, defaults)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("tracePath(%q) = %q, %v; want %q, error %v", tc.args, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
