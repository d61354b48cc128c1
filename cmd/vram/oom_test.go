package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vramgo/vram/memory"
)

// TestOneLineKeepsOutOfMemoryLines checks that an out-of-memory error,
// however wrapped, is printed with its lines, and that other multi-line
// errors still become one line.
func TestOneLineKeepsOutOfMemoryLines(t *testing.T) {
	a := memory.New(memory.NewSimArena(64<<20), memory.Config{})
	if _, err := a.Alloc(40<<20, 0, "weights"); err != nil {
		t.Fatal(err)
	}
	_, oomErr := a.Alloc(40<<20, 0, "activations")
	var oom *memory.OutOfMemoryError
	if !errors.As(oomErr, &oom) {
		t.Fatalf("test setup: %v", oomErr)
	}
	lines := strings.Count(oomErr.Error(), "\n") + 1
	for _, tc := range []struct {
		name  string
		err   error
		lines int
	}{
		{"bare", oomErr, lines},
		{"wrapped", fmt.Errorf("demo: %w", oomErr), lines},
		{"joined", errors.Join(errors.New("step 3"), oomErr), lines + 1},
		{"ordinary", errors.New("analyze: trace.gz:\n  line 3: bad size"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := oneLine(tc.err)
			if n := strings.Count(got, "\n") + 1; n != tc.lines {
				t.Errorf("%d lines, want %d:\n%s", n, tc.lines, got)
			}
			if strings.HasSuffix(got, "\n") {
				t.Errorf("ends in a newline: %q", got)
			}
		})
	}
}

// TestOutOfMemoryPrintedAsParagraph runs a demo that does not fit on a tiny
// simulated device and checks the error comes out with its lines, and names
// the other simulated device that has room.
func TestOutOfMemoryPrintedAsParagraph(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1", "VRAM_SIM_DEVICES=256KiB,64MiB", "VRAM_ALLOC_CONF=",
		"VRAM_TEST_ARGS=demo --device sim:0 --steps 2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailure {
		t.Fatalf("exit: %v, want status %d\nstderr:\n%s", err, exitFailure, stderr.String())
	}
	msg := stderr.String()
	if !strings.HasPrefix(msg, "vram: ") || strings.Count(msg, "\n") < 4 || !strings.HasSuffix(msg, "\n") ||
		strings.HasSuffix(msg, "\n\n") {
		t.Errorf("want a paragraph starting with vram: and ending in one newline, got:\n%q", msg)
	}
	for _, want := range []string{"memory: out of memory", "\n  device: 256.00 KiB total", "\n  fix (checked by replaying", "or use sim:1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr lacks %q:\n%s", want, msg)
		}
	}
}
