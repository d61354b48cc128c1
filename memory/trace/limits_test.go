package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// repeatGzip returns a gzip stream of s repeated n times.
func repeatGzip(t *testing.T, prefix, s, suffix string, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	bw := bufio.NewWriter(zw)
	bw.WriteString(prefix)
	for range n {
		bw.WriteString(s)
	}
	bw.WriteString(suffix)
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

func TestLimitsMaxBytes(t *testing.T) {
	snap := `{"format": "vram-memory-snapshot", "version": 1, "history": [` +
		strings.Repeat(`{"action": "oom"}, `, 99) + `{"action": "oom"}]}`
	text := strings.Repeat("oom 0 0 0\n", 200)
	var pickle bytes.Buffer
	zr, _ := gzip.NewReader(bytes.NewReader(readFile(t, "snapshot_p4.pickle.gz")))
	io.Copy(&pickle, zr)
	tests := []struct {
		name string
		in   []byte
	}{
		{"json", []byte(snap)},
		{"gzip json", gz([]byte(snap))},
		{"text", []byte(text)},
		{"pickle", pickle.Bytes()},
		{"gzip pickle", readFile(t, "snapshot_p4.pickle.gz")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := (Limits{MaxBytes: -1}).Read(bytes.NewReader(tc.in), tc.name); err != nil {
				t.Fatal(err)
			}
			raw := tc.in
			if bytes.HasPrefix(raw, gzipMagic) {
				zr, _ := gzip.NewReader(bytes.NewReader(raw))
				raw, _ = io.ReadAll(zr)
			}
			size := len(raw)
			// Exactly the limit reads; one byte less does not.
			if _, err := (Limits{MaxBytes: int64(size)}).Read(bytes.NewReader(tc.in), tc.name); err != nil {
				t.Errorf("limit = size %d: %v", size, err)
			}
			_, err := (Limits{MaxBytes: int64(size - 1)}).Read(bytes.NewReader(tc.in), tc.name)
			var le *LimitError
			var pe *ParseError
			if !errors.As(err, &le) || !errors.As(err, &pe) || le.Limit != int64(size-1) {
				t.Fatalf("limit = size-1: err = %v, want a *ParseError wrapping a *LimitError", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "trace: "+tc.name+": ") || strings.Count(msg, "trace:") != 1 || strings.Contains(msg, "\n") ||
				!strings.Contains(msg, "trace.Limits.MaxBytes") || !strings.Contains(msg, "--max-input") {
				t.Errorf("message %q: want one line naming the file, the limit and how to raise it", msg)
			}
		})
	}
	// The default applies to Read, ReadJSON and ReadPickle.
	if (Limits{}).maxBytes() != DefaultMaxBytes || (Limits{MaxBytes: -3}).maxBytes() != -1 {
		t.Error("Limits defaults")
	}
}

// TestDecompressionBombs reads small gzip files that expand to far more than
// the limit: each fails once the limit is read, in memory of the order of
// the limit, never of the expanded size.
func TestDecompressionBombs(t *testing.T) {
	const limit = 1 << 20
	lim := Limits{MaxBytes: limit}
	bombs := []struct {
		name string
		in   []byte
	}{
		{"json history", repeatGzip(t, `{"format": "vram-memory-snapshot", "version": 1, "history": [`, `{"action": "oom"}, `, `{"action": "oom"}]}`, 300_000)},
		{"json blanks", repeatGzip(t, `{"format": "vram-memory-snapshot", "version": 1, "config": "`, "x", `"}`, 8_000_000)},
		{"text", repeatGzip(t, "", "oom 0 0 0\n", "", 1_000_000)},
		{"pickle", repeatGzip(t, "\x80\x04]", "\x94", ".", 8_000_000)}, // MEMOIZE, again and again
	}
	for _, tc := range bombs {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = lim.Read(bytes.NewReader(tc.in), tc.name) })
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("%d-byte bomb: err = %v, want a *LimitError", len(tc.in), err)
			}
			// Text events take 8 bytes per byte of "oom 0 0 0" lines, and
			// growing their slice allocates as much again.
			if n > 48*limit {
				t.Errorf("%d-byte bomb allocated %d MB before failing (limit %d MB)", len(tc.in), n>>20, limit>>20)
			}
		})
	}
	// Streamed, a text trace has no limit: all 1,000,000 events come.
	path := filepath.Join(t.TempDir(), "oom.trace.gz")
	if err := os.WriteFile(path, bombs[2].in, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := lim.OpenStream(path)
	if err != nil {
		t.Fatal(err)
	}
	var count int
	n := allocated(func() {
		err = f.History().Each(func(e *Event) error {
			if e.Action != ActionOOM {
				t.Fatalf("event %d: %v", count, e.Action)
			}
			count++
			return nil
		})
	})
	if err != nil || count != 1_000_000 {
		t.Fatalf("streamed %d events: %v", count, err)
	}
	if n > 1<<20 {
		t.Errorf("streaming 1,000,000 events allocated %d KB; want about the buffers only", n>>10)
	}
}

// TestPickleExpansion feeds pickles whose values take far more memory than
// their bytes: they fail after the floor of pickleBudget, whatever their
// length, while real snapshots of any size read.
func TestPickleExpansion(t *testing.T) {
	lists := func(n int) []byte { // n empty lists on the stack: 1 byte each
		return append(append([]byte{opProto, 4}, bytes.Repeat([]byte{opEmptyList}, n)...), opStop)
	}
	nested := func(n int) []byte { // a list nested n deep
		b := append([]byte{opProto, 4}, bytes.Repeat([]byte{opEmptyList}, n)...)
		b = append(b, bytes.Repeat([]byte{opAppend}, n-1)...)
		return append(b, opStop)
	}
	marks := func(n int) []byte { // n open MARKs
		return append(append([]byte{opProto, 4}, bytes.Repeat([]byte{opMark}, n)...), opNone, opStop)
	}
	// repeat returns a pickle of head, then body n times, then tail.
	repeat := func(head string, body string, n int, tail string) []byte {
		b := append([]byte{opProto, 4}, head...)
		b = append(b, bytes.Repeat([]byte(body), n)...)
		return append(append(b, tail...), opStop)
	}
	tests := []struct {
		name string
		in   []byte
		want string // substring; "" means the LimitError
	}{
		{"empty lists", lists(2_000_000), ""},
		{"deep nesting", nested(300_000), "segments[0]: is a list, want a dict"},
		{"open marks", marks(1_000_000), "STOP with an empty stack or an open MARK"},
		// Values that cost nothing but their slot, and one-at-a-time
		// appends: the slices that hold them grow by copying, and every
		// copy counts until the collector frees the old one.
		{"Nones on the stack", repeat("", "N", 8_000_000, ""), ""},
		{"small ints on the stack", repeat("", "K\x01", 4_000_000, ""), ""},
		{"DUP", repeat("N", "2", 8_000_000, ""), ""},
		{"memo GET", repeat("]q\x00", "h\x00", 4_000_000, ""), ""},
		{"empty tuples", repeat("", ")", 8_000_000, ""), ""},
		{"APPEND one by one", repeat("]", "Na", 4_000_000, ""), ""},
		{"SETITEM one by one", repeat("}", "NNs", 3_000_000, ""), ""},
		{"APPENDS of one", repeat("]", "(Ne", 3_000_000, ""), ""},
		{"SETITEMS of one", repeat("}", "(NNu", 2_000_000, ""), ""},
		{"huge BINBYTES8", append(pk().proto(4).op(opBinBytes8).u64(1<<63), "short"...), "input ends early"},
		{"huge LONG4", binaryAppend(pk().proto(4).op(opLong4), 0x7fffffff), "input ends early"},
		{"huge BINUNICODE", binaryAppend(pk().proto(4).op(opBinUnicode), 0xffffffff), "input ends early"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = ReadPickle(bytes.NewReader(gz(tc.in))) })
			var le *LimitError
			switch {
			case err == nil:
				t.Fatal("no error")
			case tc.want == "" && (!errors.As(err, &le) || !le.Pickle):
				t.Fatalf("err = %v, want a *LimitError of the pickle's memory", err)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if n > 3*pickleFloorBytes {
				t.Errorf("allocated %d MB for a %d-byte pickle", n>>20, len(tc.in))
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line message %q", err)
			}
		})
	}
	if _, err := ReadPickle(bytes.NewReader(syntheticPickle(20000))); err != nil {
		t.Errorf("a PyTorch-like pickle: %v", err)
	}
}

func binaryAppend(p pickleBuilder, v uint32) []byte {
	return append(p, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}
