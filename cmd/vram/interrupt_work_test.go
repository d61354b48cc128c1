package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInterruptStopsAnalyzeReplay checks that Ctrl-C stops analyze and
// replay while they read or work, with status 130 and one line saying
// what was stopped, and leaves no page behind: the interrupt cancelled a
// context that neither looked at, and later ones were ignored, so that a
// long analysis could only be killed. The input here is a pipe that never
// ends, standing for a long read or replay.
func TestInterruptStopsAnalyzeReplay(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.html")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"analyze", "-"}, "analyze: interrupted while analyzing -"},
		{[]string{"analyze", "--json", "-"}, "analyze: interrupted while analyzing -"},
		{[]string{"analyze", "--html", page, "-"}, "analyze: interrupted while analyzing -"},
		{[]string{"replay", "-"}, "replay: interrupted while replaying -"},
		{[]string{"replay", "--fit", "-"}, "replay: interrupted while replaying -"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			go pw.Write([]byte("alloc 4096 512 0\n")) // then nothing more
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(50*time.Millisecond, func() { cancel(errInterrupted) })
			var stdout, stderr bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- run(ctx, tc.args, pr, &stdout, &stderr) }()
			select {
			case code := <-done:
				if code != exitInterrupted {
					t.Errorf("exit %d, want %d (stderr %q)", code, exitInterrupted, stderr.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still running 10 s after Ctrl-C")
			}
			checkErrorLine(t, stderr.String(), tc.want)
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty:\n%s", stdout.String())
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left in the page's directory: %v", ents)
			}
		})
	}
}
