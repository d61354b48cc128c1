//go:build linux

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestStdinFromTerminal gives "-" to every command that reads it while
// standard input is a terminal: nobody types a snapshot or readings, so
// rather than wait in silence for input that does not come, each fails at
// once with a usage error that says how to give it the input.
func TestStdinFromTerminal(t *testing.T) {
	tests := [][]string{
		{"analyze", "-"},
		{"analyze", "--html", "-", "-"},
		{"replay", "-"},
		{"replay", resnetTrace, "-"},
		{"replay", "--fit", "-"},
		{"smi", "--source", "-"},
		{"smi", "-L", "--source", "-"},
		{"watch", "--count", "1", "--source", "-"},
		{"exporter", "--listen", "127.0.0.1:0", "--source", "-"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			master, tty := openPTY(t, 80, 24)
			go readPTY(master)
			var stdout, stderr bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- run(context.Background(), args, tty, &stdout, &stderr) }()
			var code int
			select {
			case code = <-done:
			case <-time.After(5 * time.Second):
				tty.Close() // so that the command's read fails and it ends
				select {
				case <-done:
				case <-time.After(5 * time.Second):
				}
				t.Fatal("still waiting for input from the terminal after 5 s")
			}
			if code != exitUsage {
				t.Errorf("exit %d, want %d (stderr %q)", code, exitUsage, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty:\n%s", stdout.String())
			}
			checkErrorLine(t, stderr.String(), "standard input, which is a terminal")
			if !strings.Contains(stderr.String(), "< ") {
				t.Errorf("stderr %q does not show how to redirect the input", stderr.String())
			}
		})
	}
}
