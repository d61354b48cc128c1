package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestInterruptedExitStatus runs a command whose context is already
// cancelled: by Ctrl-C it ends with 128 + SIGINT, as a shell reports a
// program the signal stopped, so that a script running it in a loop stops
// too; cancelled otherwise it fails with status 1. Either way it says
// where it stopped, in one line that does not read "context canceled"
// after "interrupted".
func TestInterruptedExitStatus(t *testing.T) {
	tests := []struct {
		name  string
		cause error
		code  int
		want  string
	}{
		{"ctrl-c", errInterrupted, exitInterrupted, "demo: interrupted at step 1 of 5"},
		{"ctrl-c, json", errInterrupted, exitInterrupted, "demo: interrupted at step 1 of 5"},
		{"cancelled", errors.New("deadline of the caller"), exitFailure, "demo: stopped at step 1 of 5: deadline of the caller"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(tc.cause)
			args := []string{"demo", "--device", "cpu", "--steps", "5"}
			if strings.HasSuffix(tc.name, "json") {
				args = append(args, "--json")
			}
			var stdout, stderr bytes.Buffer
			code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty:\n%s", stdout.String())
			}
			checkErrorLine(t, stderr.String(), tc.want)
			if strings.Contains(stderr.String(), "context canceled") {
				t.Errorf("stderr %q says \"context canceled\"", stderr.String())
			}
		})
	}
}
