package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramgo/vram/analyze"
)

const snapshotFile = "testdata/snapshot_sim_train.json"

func TestAnalyzeText(t *testing.T) {
	code, stdout, stderr := runCLI(t, "analyze", snapshotFile)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"internal fragmentation", "external fragmentation", "largest 6.98 MiB", "out of memory at event 669", "in pieces", "optimizer"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestAnalyzeJSONAndHTML(t *testing.T) {
	page := filepath.Join(t.TempDir(), "page.html")
	code, stdout, stderr := runCLI(t, "analyze", "--json", "--html", page, snapshotFile)
	if code != 0 || stderr != "vram analyze: wrote "+page+"\n" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var rep analyze.Report
	decodeOne(t, stdout, &rep)
	if len(rep.Devices) != 1 || len(rep.Devices[0].OOMs) != 1 || rep.Devices[0].Fragmentation.FreeBlocks != 6 {
		t.Errorf("report %+v", rep)
	}
	b, err := os.ReadFile(page)
	if err != nil || !strings.HasPrefix(string(b), "<!doctype html>") || !strings.Contains(string(b), "<svg class=\"chart timeline\"") {
		t.Errorf("page: %v, %.200s", err, b)
	}
}

func TestAnalyzeBadFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.bin")
	os.WriteFile(junk, []byte{0x80, 0x04, 0xff, 0xff, 0xff}, 0o644)
	notes := filepath.Join(dir, "notes.json")
	os.WriteFile(notes, []byte(`{"hello": "world"}`), 0o644)
	for _, f := range []string{junk, notes, filepath.Join(dir, "missing.pickle")} {
		code, stdout, stderr := runCLI(t, "analyze", f)
		if code != exitFailure || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, f) || !strings.HasPrefix(stderr, "vram: analyze: ") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", f, code, stdout, stderr)
		}
	}
	if code, _, _ := runCLI(t, "analyze"); code != exitUsage {
		t.Errorf("no file: exit %d", code)
	}
}

// TestAnalyzeFixCheck runs vram analyze on a PyTorch snapshot that ran out
// of memory under a limit, as a PyTorch user would: with the limit
// inferred, with --limit, and with the checks off; and refuses bad values.
func TestAnalyzeFixCheck(t *testing.T) {
	pickle := filepath.Join("..", "..", "analyze", "testdata", "oom_fraction_fragmented.pickle")
	tests := []struct {
		args  []string
		want  []string
		avoid []string
	}{
		{[]string{"analyze", pickle}, []string{"fix: checked by replaying", "at least 800.00 MiB", "expandable_segments:True this run fits under a limit of 960.00 MiB",
			"the allocation before it was at forward (proj/model.py:31)"}, []string{"at torch::unwind"}},
		{[]string{"analyze", "--limit", "1000MiB", pickle}, []string{"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 960.00 MiB, under the 1000.00 MiB allowed"}, nil},
		{[]string{"analyze", "--replay-events", "0", pickle}, []string{"out of memory at event 10"}, []string{"fix:"}},
	}
	for _, tc := range tests {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, stdout)
			}
		}
		for _, w := range tc.avoid {
			if strings.Contains(stdout, w) {
				t.Errorf("%v: output says %q:\n%s", tc.args, w, stdout)
			}
		}
	}
	for _, bad := range [][]string{{"--limit", "0"}, {"--limit", "lots"}, {"--replay-events", "-1"}} {
		code, _, stderr := runCLI(t, append(append([]string{"analyze"}, bad...), pickle)...)
		if code != exitUsage || !strings.Contains(stderr, bad[0]) {
			t.Errorf("%v: exit %d, stderr %q", bad, code, stderr)
		}
	}
}

// TestAnalyzeRecordedPyTorch runs vram analyze, text and HTML, on
// snapshots that PyTorch 2.11 recorded on an H200 with the default
// _record_memory_history() (analyze/testdata/record_snapshots.py's
// output, copied there), as a PyTorch user would after an OOM under
// set_per_process_memory_fraction: the OOM at the script's line, the fix
// in PYTORCH_CUDA_ALLOC_CONF's terms under the limit the run had (given,
// or inferred within a range), and the backward pass's memory under the
// autograd functions' names.
func TestAnalyzeRecordedPyTorch(t *testing.T) {
	dir := filepath.Join("..", "..", "analyze", "testdata")
	frag := filepath.Join(dir, "pytorch_oom_fragmented.pickle.gz")
	train := filepath.Join(dir, "pytorch_oom_train.pickle.gz")
	tests := []struct {
		args  []string
		want  []string
		avoid []string
	}{
		{[]string{"analyze", frag}, []string{"at mib (testdata/record_snapshots.py:59)", "at run (testdata/record_snapshots.py:109)",
			"at least 1.66 GiB and at most 2.15 GiB", "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run fits under a limit of 1.82 GiB"},
			[]string{"at torch::", "at c10::", "at gather_with_cpp"}},
		{[]string{"analyze", "--limit", "2GiB", frag}, []string{"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 1.82 GiB, under the 2.00 GiB allowed"}, nil},
		{[]string{"analyze", "--limit", "1.5GiB", train}, []string{"at train_step (testdata/record_snapshots.py:70)",
			"with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this run peaks at 1.48 GiB, under the 1.50 GiB allowed",
			"AddmmBackward0 (autograd backward)"}, []string{"pthread", "none checked"}},
	}
	for _, tc := range tests {
		page := filepath.Join(t.TempDir(), "page.html")
		args := append([]string{tc.args[0], "--html", page}, tc.args[1:]...)
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || stderr != "vram analyze: wrote "+page+"\n" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, stdout)
			}
		}
		for _, w := range tc.avoid {
			if strings.Contains(stdout, w) {
				t.Errorf("%v: output says %q:\n%s", tc.args, w, stdout)
			}
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		html := string(b)
		for _, w := range []string{`<details class="stack">`, "torch::unwind::unwind()", "Fix: checked by replaying", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"} {
			if !strings.Contains(html, w) {
				t.Errorf("%v: the page lacks %q", tc.args, w)
			}
		}
	}
}

// TestAnalyzeHTMLPathRefused checks that --html refuses, before reading
// the input, a path that is the input itself (the page would replace the
// snapshot) or a directory, and leaves the input as it was.
func TestAnalyzeHTMLPathRefused(t *testing.T) {
	dir := t.TempDir()
	orig, err := os.ReadFile(snapshotFile)
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "run.json")
	if err := os.WriteFile(input, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(input, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, page, want string
	}{
		{"the input", input, "is the input file; the page would replace it: give another name, such as " + filepath.Join(dir, "run.html")},
		{"the input by another path", filepath.Join(dir, ".", "run.json"), "is the input file"},
		{"a link to the input", link, "is the input file"},
		{"a directory", dir, "is a directory; give the name of the page to write, such as " + filepath.Join(dir, "memory.html")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "analyze", "--html", tc.page, input)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, exitUsage, tc.want)
			}
			if b, err := os.ReadFile(input); err != nil || string(b) != string(orig) {
				t.Fatalf("the input changed (err %v)", err)
			}
		})
	}
}

// TestAnalyzeLimitBeyondDevices checks that a --limit beyond what the fix
// checks replay (analyze.MaxLimit, more than any device) is a usage error
// before the input is read: 80TiB typed for 80GiB ran the whole analysis
// and then said of every fix "none checked", with status 0.
func TestAnalyzeLimitBeyondDevices(t *testing.T) {
	const pickle = "../../analyze/testdata/pytorch_oom_fragmented.pickle.gz"
	code, _, stderr := runCLI(t, "analyze", "--limit", "80TiB", pickle)
	if code != exitUsage || !strings.Contains(stderr, `--limit "80TiB": more than any device`) || !strings.Contains(stderr, "1.00 TiB") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "analyze", "--limit", "1TiB", pickle)
	if code != 0 {
		t.Errorf("--limit 1TiB: exit %d, stderr %q", code, stderr)
	}
}
