package main

import (
	"strings"
	"testing"

	"github.com/vramgo/vram/parallel"
)

func TestCheck(t *testing.T) {
	good := options{mode: "ddp", width: 8, batch: 4, steps: 1, sizeMiB: 1, reps: 1, backend: "tcp"}
	if err := good.check(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*options)
		want string
	}{
		{"mode", func(o *options) { o.mode = "dp" }, "-mode"},
		{"zero width", func(o *options) { o.width = 0 }, "-width"},
		{"huge width", func(o *options) { o.width = 1 << 20 }, "-width"},
		{"negative batch", func(o *options) { o.batch = -1 }, "-batch"},
		{"zero steps", func(o *options) { o.steps = 0 }, "-steps"},
		{"huge size", func(o *options) { o.sizeMiB = 1 << 30 }, "-size-mib"},
		{"zero reps", func(o *options) { o.reps = 0 }, "-reps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.edit(&o)
			if err := o.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestOneRank runs both modes as a job of one rank, small, on whatever
// device the machine has.
func TestOneRank(t *testing.T) {
	for _, mode := range []string{"ddp", "allreduce"} {
		t.Run(mode, func(t *testing.T) {
			o := options{mode: mode, width: 16, batch: 8, steps: 2, sizeMiB: 1, reps: 2, backend: "tcp"}
			if err := run(parallel.LaunchInfo{WorldSize: 1}, o); err != nil {
				t.Fatal(err)
			}
		})
	}
}
