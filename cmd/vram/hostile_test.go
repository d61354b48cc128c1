package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestHostileFiles gives every command that reads a file one that is not
// what it reads: missing, a directory, empty, /dev/null, bytes that are
// not text, a gzip stream cut short, a gzip stream of a few bytes. Each
// fails with status 1 and one line (replay: one per input, then its
// summary) that names the file, and the flag that gave it, never with a
// panic or a byte of the file printed raw.
func TestHostileFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	whole, err := os.ReadFile(resnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir.json")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []struct{ name, path string }{
		{"missing", filepath.Join(dir, "missing.json")},
		{"directory", sub},
		{"empty", write("empty.json", nil)},
		{"dev null", os.DevNull},
		{"binary", write("binary.json", []byte("\xbf\x00\xff\xfe\x1b[31m\x00garbage"))},
		{"cut gzip", write("cut.trace.gz", whole[:len(whole)/2])},
		{"gzip header", write("header.trace.gz", whole[:10])},
	}
	commands := []struct {
		args []string // the file follows
		flag string   // that names the file in the error, "" for an argument
	}{
		{[]string{"analyze"}, ""},
		{[]string{"replay"}, ""},
		{[]string{"smi", "--source"}, "--source"},
		{[]string{"watch", "--count", "1", "--source"}, "--source"},
		{[]string{"exporter", "--listen", "127.0.0.1:0", "--source"}, "--source"},
	}
	for _, c := range commands {
		for _, f := range files {
			t.Run(c.args[0]+"/"+f.name, func(t *testing.T) {
				code, stdout, stderr := runCLI(t, append(c.args, f.path)...)
				if code != exitFailure {
					t.Errorf("exit %d, want %d", code, exitFailure)
				}
				if stdout != "" {
					t.Errorf("stdout not empty:\n%s", stdout)
				}
				last := stderr
				if c.args[0] == "replay" {
					// One line for the input, then the summary.
					if strings.Count(stderr, "\n") != 2 {
						t.Errorf("stderr %q, want two lines", stderr)
					}
					last = stderr[strings.Index(stderr, "\n")+1:]
				}
				checkErrorLine(t, last, c.args[0]+": ")
				want := f.path
				if c.flag != "" {
					want = c.flag + " " + f.path
				}
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not name %q", stderr, want)
				}
				if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
					t.Errorf("stderr %q", stderr)
				}
				for _, r := range stderr {
					if r == utf8.RuneError || r == '\x1b' || r > '~' {
						t.Errorf("stderr holds %q: %q", r, stderr)
						break
					}
				}
			})
		}
	}
}

// TestHostileFlags gives flags values out of their range, of the wrong
// sign or that cannot be carried out: each is a usage error (status 2) of
// one line that names the flag, before anything is read or started.
func TestHostileFlags(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"watch", "--count", "1", "--pids", "2147483648000", "--source", readingsFile}, `--pids: "2147483648000" is not a process id`},
		{[]string{"watch", "--count", "1", "--pids", "0", "--source", readingsFile}, `--pids: "0" is not a process id`},
		{[]string{"watch", "--count", "1", "--interval", "-1s", "--source", readingsFile}, "--interval must be at least 10ms"},
		{[]string{"watch", "--count", "1", "--interval", "9999999999h", "--source", readingsFile}, "--interval"},
		{[]string{"watch", "--count", "-1", "--source", readingsFile}, "--count must not be negative"},
		{[]string{"analyze", "--html", filepath.Join(dir, "nodir", "page.html"), resnetTrace}, "--html " + filepath.Join(dir, "nodir", "page.html")},
		{[]string{"analyze", "--html", filepath.Join(resnetTrace, "page.html"), resnetTrace}, "--html " + filepath.Join(resnetTrace, "page.html")},
		{[]string{"analyze", "--top", "99999999999999999999", resnetTrace}, "--top"},
		{[]string{"analyze", "--replay-events", "-1", resnetTrace}, "--replay-events"},
		{[]string{"analyze", "--limit", "-1GiB", resnetTrace}, "--limit"},
		{[]string{"replay", "--capacity", "99EiB", resnetTrace}, "--capacity"},
		{[]string{"replay", "--max-input", "-1", resnetTrace}, "--max-input"},
		{[]string{"demo", "--steps", "99999999999999999999"}, "--steps"},
		{[]string{"demo", "--batch", "-1"}, "--batch"},
		{[]string{"run", "--stop-timeout", "-1s", "--nproc-per-node", "1", "true"}, "--stop-timeout"},
		{[]string{"run", "--nproc-per-node", "99999999999999999999", "true"}, "--nproc-per-node"},
		{[]string{"exporter", "--listen", "127.0.0.1:99999999999999999999", "--source", readingsFile}, "--listen"},
		{[]string{"smi", "--json", "-L", "--source", readingsFile}, "--json and --list"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			checkErrorLine(t, stderr, tc.want)
		})
	}
}

// TestEmptyCommand runs vram with a command that is empty ("$CMD" of an
// unset variable in a script) or "-": a usage error, where it printed the
// help and exited 0, as if the script had done what it meant.
func TestEmptyCommand(t *testing.T) {
	for _, args := range [][]string{{""}, {"-"}, {"", "extra"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			checkErrorLine(t, stderr, `unknown command "`+args[0]+`" (see 'vram --help')`)
		})
	}
}
