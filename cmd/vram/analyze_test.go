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
