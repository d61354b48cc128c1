package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStdinInput checks that "-" reads the input of analyze and replay,
// and the --source of smi and watch, from standard input, and that --html
// - writes the page to standard output, as cat and most tools read them, rather than opening a file
// named "-" or writing one.
func TestStdinInput(t *testing.T) {
	pickle, err := filepath.Abs(filepath.Join("testdata", "snapshot_p4_expandable.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	snapshot, err := os.ReadFile(pickle)
	if err != nil {
		t.Fatal(err)
	}
	traceFile, err := filepath.Abs(filepath.Join("testdata", "resnet50_train.trace.gz"))
	if err != nil {
		t.Fatal(err)
	}
	gzTrace, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	readings, err := os.ReadFile(filepath.Join("testdata", "readings_h200x2.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		stdin      []byte
		args       []string
		code       int
		stdout     string // a prefix of stdout
		stderr     string // in stderr
		stdoutHas  string // in stdout
		stdoutLack string // not in stdout
	}{
		{name: "analyze a pickle", stdin: snapshot, args: []string{"analyze", "-"}, stdout: "stdin: pickle"},
		{name: "analyze as JSON", stdin: snapshot, args: []string{"analyze", "--json", "-"}, stdout: "{", stdoutHas: `"file": "stdin"`},
		{name: "analyze a gzip text trace", stdin: gzTrace, args: []string{"analyze", "-"}, stdout: "stdin: text"},
		{name: "analyze nothing", stdin: nil, args: []string{"analyze", "-"}, code: exitFailure, stderr: "stdin: empty input"},
		{name: "page to stdout", args: []string{"analyze", "--html", "-", pickle}, stdout: "<!doctype html>", stdoutLack: "wrote"},
		{name: "page and input on stdin", stdin: snapshot, args: []string{"analyze", "--html", "-", "-"}, stdout: "<!doctype html>"},
		{name: "page and JSON both on stdout", args: []string{"analyze", "--html", "-", "--json", pickle}, code: exitUsage, stderr: "both write to standard output"},
		{name: "replay a pickle", stdin: snapshot, args: []string{"replay", "-"}, stdout: "stdin (device 0"},
		{name: "replay a gzip text trace", stdin: gzTrace, args: []string{"replay", "--compare", "-"}, stdout: "stdin (device 0"},
		{name: "fit", stdin: snapshot, args: []string{"replay", "--fit", "-"}, stdout: "stdin (device 0)"},
		{name: "fit on a size", stdin: snapshot, args: []string{"replay", "--fit", "24GiB", "-"}, stdoutHas: "fits on 24.00 GiB"},
		{name: "smi", stdin: readings, args: []string{"smi", "--source", "-"}, stdout: "vram smi", stdoutHas: "NVIDIA H200"},
		{name: "smi as JSON", stdin: readings, args: []string{"smi", "--json", "--source", "-"}, stdout: "{", stdoutHas: `"name": "NVIDIA H200"`},
		{name: "smi list", stdin: readings, args: []string{"smi", "-L", "--source", "-"}, stdout: "GPU 0: NVIDIA H200"},
		{name: "smi nothing", stdin: nil, args: []string{"smi", "--source", "-"}, code: exitFailure, stderr: "smi: standard input: invalid recording: empty input"},
		{name: "watch", stdin: readings, args: []string{"watch", "--count", "2", "--interval", "10ms", "--source", "-"}, stdout: "vram watch", stdoutHas: "NVIDIA H200"},
		{name: "watch garbage", stdin: []byte("\x00"), args: []string{"watch", "--count", "1", "--source", "-"}, code: exitFailure, stderr: "watch: standard input: invalid recording"},
		{name: "stdin twice", stdin: snapshot, args: []string{"replay", "-", "-"}, code: exitUsage, stderr: "it can be read once"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			code, stdout, stderr := runCLIInput(t, bytes.NewReader(tc.stdin), tc.args...)
			if code != tc.code {
				t.Fatalf("vram %v: exit %d, want %d; stderr:\n%s", tc.args, code, tc.code, stderr)
			}
			if !strings.HasPrefix(stdout, tc.stdout) {
				t.Errorf("stdout starts %.80q, want %q", stdout, tc.stdout)
			}
			if !strings.Contains(stdout, tc.stdoutHas) {
				t.Errorf("stdout lacks %q:\n%.400s", tc.stdoutHas, stdout)
			}
			if tc.stdoutLack != "" && strings.Contains(stdout+stderr, tc.stdoutLack) {
				t.Errorf("output holds %q", tc.stdoutLack)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q lacks %q", stderr, tc.stderr)
			}
			if _, err := os.Lstat("-"); err == nil {
				t.Errorf("a file named - was written")
			}
		})
	}
}
