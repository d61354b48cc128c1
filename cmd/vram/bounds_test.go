package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFile writes b to name in a temporary directory and returns its path.
func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// gzipped returns b gzip-compressed.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// allocPickle returns a PyTorch snapshot pickle (protocol 2) whose device 0
// trace allocates each of sizes.
func allocPickle(sizes ...int64) []byte {
	b := []byte{0x80, 2, '}'} // PROTO 2, EMPTY_DICT
	str := func(s string) {
		b = append(b, 'X')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	long := func(v int64) {
		b = append(b, 0x8a, 8) // LONG1 of 8 bytes
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	str("device_traces")
	b = append(b, ']', ']') // the list of traces, device 0's trace
	for i, size := range sizes {
		b = append(b, '}')
		str("action")
		str("alloc")
		b = append(b, 's')
		str("addr")
		long(int64(4096 * (i + 1)))
		b = append(b, 's')
		str("size")
		long(size)
		b = append(b, 's', 'a') // SETITEM, APPEND to the trace
	}
	return append(b, 'a', 's', '.') // APPEND the trace, SETITEM, STOP
}

// TestClaimedHugeSizes gives every input kind capacities and sizes no
// device has: capacities are refused with one line that names the limit and
// how to raise it; requests are out-of-memory events, replayed quickly;
// sums that pass int64 are an error.
func TestClaimedHugeSizes(t *testing.T) {
	hugeSnapshot := writeFile(t, "huge.json", []byte(fmt.Sprintf(`{"format": "vram-memory-snapshot", "version": 1, "capacity_bytes": %d,
		"history": [{"action": "alloc", "address": 4096, "size": %d}]}`, int64(math.MaxInt64), int64(math.MaxInt64))))
	code, stdout, stderr := runCLI(t, "replay", hugeSnapshot)
	if code != exitFailure || stdout != "" || !strings.Contains(stderr, "huge.json") || !strings.Contains(stderr, "capacity_bytes") ||
		!strings.Contains(stderr, "the limit is 4.00 TiB") || !strings.Contains(stderr, "--max-capacity") {
		t.Errorf("snapshot claiming 8 EiB: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if first := strings.SplitN(stderr, "\n", 2)[0]; !strings.HasPrefix(first, "vram: replay: ") || !strings.Contains(first, "--max-capacity") {
		t.Errorf("first line %q: want the whole reason in one line", first)
	}

	trace := writeFile(t, "huge.trace", []byte(fmt.Sprintf("alloc 4096 %d 0\nalloc 8192 %d 0\nalloc 12288 1152921504606846976 0\n", int64(math.MaxInt64), int64(1)<<62)))
	for _, args := range [][]string{
		{"replay", "--capacity", "4194304TiB", trace},
		{"replay", "--capacity", "5TiB", trace},
		{"replay", "--max-capacity", "100GiB", "--capacity", "141GB", trace},
		{"replay", "--max-capacity", "lots", trace},
		{"replay", "--max-capacity", "0", trace},
		{"replay", "--max-input", "-1", trace},
		{"analyze", "--max-input", "many", trace},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != exitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q: want a one-line usage error", args, code, stderr)
		}
	}
	// A smaller limit applies to snapshots' capacities and the default.
	if code, _, stderr := runCLI(t, "replay", "--max-capacity", "1TiB", hugeSnapshot); code != exitFailure || !strings.Contains(stderr, "the limit is 1.00 TiB") {
		t.Errorf("--max-capacity 1TiB: exit %d, %q", code, stderr)
	}
	code, stdout, stderr = runCLI(t, "replay", "--json", "--max-capacity", "64GiB", trace)
	var r struct {
		Capacity int64 `json:"capacity_bytes"`
		OOMs     int64 `json:"num_ooms"`
	}
	if code != 0 {
		t.Fatalf("replay under --max-capacity 64GiB: exit %d, %s", code, stderr)
	}
	decodeOne(t, stdout, &r)
	if r.Capacity != 64<<30 || r.OOMs != 3 {
		t.Errorf("default capacity under --max-capacity 64GiB: %+v", r)
	}

	// The requests themselves replay as out-of-memory events, on every
	// policy, from text, JSON and pickle alike.
	okSnapshot := writeFile(t, "ok.json", []byte(fmt.Sprintf(`{"format": "vram-memory-snapshot", "version": 1, "capacity_bytes": %d,
		"history": [{"action": "alloc", "address": 4096, "size": %d}, {"action": "alloc", "address": 8192, "size": %d}]}`, int64(80)<<30, int64(math.MaxInt64), int64(1)<<62)))
	pickle := writeFile(t, "huge.pickle", allocPickle(math.MaxInt64, 1<<62))
	for _, path := range []string{trace, okSnapshot, pickle} {
		code, stdout, stderr := runCLI(t, "replay", "--compare", "--json", path)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", path, code, stderr)
		}
		var r struct {
			Policies map[string]struct {
				OOMs int64 `json:"num_ooms"`
			} `json:"policies"`
		}
		decodeOne(t, stdout, &r)
		for name, p := range r.Policies {
			if p.OOMs < 2 {
				t.Errorf("%s, %s: %d OOMs, want every huge request to fail", path, name, p.OOMs)
			}
		}
		// Their sum passes int64: analyze says so instead of a negative peak.
		code, stdout, stderr = runCLI(t, "analyze", path)
		if code != exitFailure || stdout != "" || !strings.Contains(stderr, "pass 2^63-1 bytes") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("analyze %s: exit %d, stdout %q, stderr %q", path, code, stdout, stderr)
		}
	}
}

// TestOOMBomb replays and analyzes a small gzip file that expands to a
// million "oom 0 0 0" lines: both stream it, and analyze explains the first
// --top events and counts the rest.
func TestOOMBomb(t *testing.T) {
	bomb := writeFile(t, "bomb.trace.gz", gzipped(bytes.Repeat([]byte("oom 0 0 0\n"), 1_000_000)))
	code, stdout, stderr := runCLI(t, "replay", "--json", bomb)
	var r struct {
		Events int64 `json:"events"`
	}
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	decodeOne(t, stdout, &r)
	if r.Events != 1_000_000 {
		t.Errorf("replay read %d events", r.Events)
	}
	for _, tc := range []struct {
		args  []string
		shown int
	}{
		{[]string{"analyze", bomb}, 10},
		{[]string{"analyze", "--top", "2", bomb}, 2},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr)
		}
		more := fmt.Sprintf("%d more out-of-memory events not shown", 1_000_000-tc.shown)
		if n := strings.Count(stdout, "out of memory at event"); n != tc.shown || !strings.Contains(stdout, more) || strings.Count(stdout, "\n") > 30 {
			t.Errorf("%v: %d OOM paragraphs, %d lines; want %d and %q:\n%s", tc.args, n, strings.Count(stdout, "\n"), tc.shown, more, stdout)
		}
	}
	code, stdout, _ = runCLI(t, "analyze", "--json", "--top", "1", bomb)
	if code != 0 || !strings.Contains(stdout, `"oom_events": 1000000`) || strings.Count(stdout, `"explanation"`) != 1 {
		t.Errorf("analyze --json: exit %d, %.300s", code, stdout)
	}
}

// TestReaderErrors checks the messages for inputs that are almost a trace.
func TestReaderErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"garbage.gz", gzipped([]byte("\x7fELF\x02\x01\x01\x00 not a trace")), "valid gzip, but what it holds is not a PyTorch pickle, a vram JSON snapshot or a text trace"},
		// A JSON array is PyTorch's list of segments, which a history is not.
		{"array.json", []byte(`[{"action": "alloc", "address": 1, "size": 2}]`), `a JSON array, read as the list of segments of torch.cuda.memory_snapshot(): not a PyTorch memory snapshot: segments[0]: no "total_size" key`},
		{"version.json", []byte(`{"format": "vram-memory-snapshot", "version": "1"}`), `"1" is not a number`},
	}
	for _, tc := range tests {
		path := writeFile(t, tc.name, tc.in)
		for _, cmd := range []string{"replay", "analyze"} {
			code, stdout, stderr := runCLI(t, cmd, path)
			if code != exitFailure || stdout != "" || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, tc.name) {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want %q", cmd, tc.name, code, stdout, stderr, tc.want)
			}
			if strings.Contains(stderr, "unknown action") || strings.Contains(stderr, "not gzip") {
				t.Errorf("%s %s: misleading %q", cmd, tc.name, stderr)
			}
		}
	}
}

// TestMaxInput refuses snapshots larger than --max-input, naming the flag.
func TestMaxInput(t *testing.T) {
	for _, cmd := range []string{"replay", "analyze"} {
		code, _, stderr := runCLI(t, cmd, "--max-input", "4KiB", snapshotFile)
		if code != exitFailure || !strings.Contains(stderr, "larger than 4.00 KiB") || !strings.Contains(stderr, "--max-input") {
			t.Errorf("%s --max-input 4KiB: exit %d, %q", cmd, code, stderr)
		}
		if code, _, stderr := runCLI(t, cmd, "--max-input", "10MiB", snapshotFile); code != 0 {
			t.Errorf("%s --max-input 10MiB: exit %d, %q", cmd, code, stderr)
		}
	}
	// Text traces are streamed: the limit does not apply.
	if code, _, stderr := runCLI(t, "replay", "--max-input", "1KiB", resnetTrace); code != 0 {
		t.Errorf("replay of a text trace under --max-input 1KiB: exit %d, %q", code, stderr)
	}
}
