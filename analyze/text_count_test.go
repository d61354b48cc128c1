package analyze

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteTextCountsInSingular checks that the text report and the HTML
// page write a count of one with the singular noun: "1 segment, 2 blocks,
// 1 history event", not "1 segments".
func TestWriteTextCountsInSingular(t *testing.T) {
	snap := `{"format": "vram-memory-snapshot", "version": 1, "device": 0,
		"segments": [{"address": 2097152, "size": 2097152, "stream": 0, "pool": "small",
			"blocks": [
				{"address": 2097152, "size": 512, "requested_size": 100, "state": "active_allocated", "region": "conv1"},
				{"address": 2097664, "size": 2096640, "requested_size": 0, "state": "inactive"}]}],
		"history": [{"action": "alloc", "address": 2097152, "size": 100, "stream": 0, "region": "conv1"}]}`
	path := filepath.Join(t.TempDir(), "one.json")
	if err := os.WriteFile(path, []byte(snap), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := File(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{": 1 segment, 2 blocks, 1 history event", " 1 block "} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{" 1 segments", " 1 blocks", " 1 history events", " 1 more frames", " 1 more out-of-memory events"} {
		if strings.Contains(out, bad) {
			t.Errorf("report has %q:\n%s", bad, out)
		}
	}
	b.Reset()
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); !strings.Contains(page, "1 segment, 2 blocks, 1 event") {
		t.Errorf("the page's heading does not say 1 segment, 2 blocks, 1 event")
	}
}

func TestNOf(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 blocks"}, {1, "1 block"}, {2, "2 blocks"}, {-1, "-1 blocks"}} {
		if got := nOf(tc.n, "block", "blocks"); got != tc.want {
			t.Errorf("nOf(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
