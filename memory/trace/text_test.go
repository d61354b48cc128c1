package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const resnetTrace = "testdata/resnet50_train.trace.gz"

func readResnet(t testing.TB) []Event {
	t.Helper()
	f, err := os.Open(resnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := ReadTextAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

func TestReadTextResnet(t *testing.T) {
	events := readResnet(t)
	if len(events) != 8504 {
		t.Fatalf("got %d events, want 8504", len(events))
	}
	counts := map[Action]int{}
	for _, e := range events {
		counts[e.Action]++
	}
	want := map[Action]int{ActionAlloc: 3228, ActionFreeRequested: 2583, ActionFreeCompleted: 2583, ActionSegmentAlloc: 110}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("counts = %v, want %v", counts, want)
	}
	first := Event{Action: ActionSegmentAlloc, Addr: 139638008184832, Size: 2097152, Stream: 0}
	if !reflect.DeepEqual(events[0], first) {
		t.Errorf("first event = %+v, want %+v", events[0], first)
	}
	if !StartsEmpty(events, nil) {
		t.Error("StartsEmpty(resnet trace) = false; the trace was recorded from process start")
	}
}

func TestTextReaderHeader(t *testing.T) {
	f, err := os.Open(resnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewTextReader(f)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if len(h) != 1 || !strings.Contains(h[0], "PyTorch 2.11.0") {
		t.Errorf("Header() = %q", h)
	}
	e, err := r.Next()
	if err != nil || e.Action != ActionSegmentAlloc || r.Line() != 2 {
		t.Errorf("first Next = %+v, %v at line %d", e, err, r.Line())
	}
}

func TestTextRoundTrip(t *testing.T) {
	events := readResnet(t)
	events = append(events,
		Event{Action: ActionOOM, Addr: 1 << 30, Size: 1 << 40, Stream: 7, TimeUS: -5},
		Event{Action: ActionSegmentMap, Addr: 1<<64 - 1, Size: 1<<63 - 1, Stream: 1<<64 - 1, TimeUS: 1700000000000000},
		Event{Action: ActionSegmentUnmap, Addr: 0, Size: 0, Stream: 0},
		Event{Action: ActionSnapshot},
		Event{Action: ActionSegmentFree, Addr: 5, Size: 6, Stream: 7, TimeUS: 8},
	)
	for _, compress := range []bool{false, true} {
		var buf bytes.Buffer
		var w io.Writer = &buf
		var zw *gzip.Writer
		if compress {
			zw = gzip.NewWriter(&buf)
			w = zw
		}
		if err := WriteText(w, events); err != nil {
			t.Fatal(err)
		}
		if zw != nil {
			zw.Close()
		}
		got, err := ReadTextAll(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, events) {
			t.Errorf("gzip=%v: round trip differs", compress)
		}
	}
}

func TestTextWriterHeaderAndDrops(t *testing.T) {
	var buf bytes.Buffer
	w := NewTextWriter(&buf, "recorded by vram", "two\nlines")
	e := Event{Action: ActionAlloc, Addr: 512, Size: 100, Stream: 1, Region: "r", Frames: []Frame{{"f", "x.go", 1}}}
	if err := w.Write(e); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "# action addr size stream [time_us]\n# recorded by vram\n# two\n# lines\nalloc 512 100 1\n"
	if buf.String() != want {
		t.Errorf("wrote %q, want %q", buf.String(), want)
	}
	r, err := NewTextReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); !reflect.DeepEqual(h, []string{"action addr size stream [time_us]", "recorded by vram", "two", "lines"}) {
		t.Errorf("Header() = %q", h)
	}
	for _, bad := range []Event{{Action: 0}, {Action: 200}, {Action: ActionAlloc, Size: -1}} {
		if err := w.Write(bad); err == nil {
			t.Errorf("Write(%+v) succeeded", bad)
		}
	}
}

func TestReadTextForms(t *testing.T) {
	in := "\n  # comment\r\n\talloc\t1  2 3\r\n\n# later comment\nfree_requested 1 2 3 -9   \nfree_completed 1 2 3 9"
	got, err := ReadTextAll(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Action: ActionAlloc, Addr: 1, Size: 2, Stream: 3},
		{Action: ActionFreeRequested, Addr: 1, Size: 2, Stream: 3, TimeUS: -9},
		{Action: ActionFreeCompleted, Addr: 1, Size: 2, Stream: 3, TimeUS: 9},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, in := range []string{"", "# only a comment\n", "\n\n"} {
		got, err := ReadTextAll(strings.NewReader(in))
		if err != nil || len(got) != 0 {
			t.Errorf("ReadTextAll(%q) = %v, %v; want no events", in, got, err)
		}
	}
}

func TestReadTextErrors(t *testing.T) {
	tests := []struct {
		name, in string
		line     int
		msg      string
	}{
		{"unknown action", "# h\nalloc 1 2 3\nallocx 1 2 3\n", 3, `trace: line 3: unknown action "allocx"`},
		{"first line", "allocx 1 2 3\n", 1, `trace: line 1: unknown action "allocx"`},
		{"too few", "alloc 1 2\n", 1, "trace: line 1: alloc: 3 fields, want 4 or 5: action addr size stream [time_us]"},
		{"too many", "alloc 1 2 3 4 5\n", 1, "trace: line 1: too many fields: want action addr size stream [time_us]"},
		{"hex addr", "alloc 0x10 2 3\n", 1, `trace: line 1: alloc: addr "0x10": not a decimal number`},
		{"negative size", "alloc 1 -2 3\n", 1, `trace: line 1: alloc: size "-2": not a decimal number`},
		{"size range", "alloc 1 9223372036854775808 3\n", 1, `trace: line 1: alloc: size "9223372036854775808": out of range`},
		{"addr range", "alloc 18446744073709551616 1 3\n", 1, `trace: line 1: alloc: addr "18446744073709551616": out of range`},
		{"stream", "alloc 1 2 x\n", 1, `trace: line 1: alloc: stream "x": not a decimal number`},
		{"time", "alloc 1 2 3 1.5\n", 1, `trace: line 1: alloc: time_us "1.5": not a decimal number`},
		{"time range", "alloc 1 2 3 -9223372036854775809\n", 1, `trace: line 1: alloc: time_us "-9223372036854775809": out of range`},
		{"case", "ALLOC 1 2 3\n", 1, `trace: line 1: unknown action "ALLOC"`},
		{"long line", strings.Repeat("a", 70000), 1, "trace: line 1: line longer than 65536 bytes (not a text trace?)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTextAll(strings.NewReader(tc.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if pe.Line != tc.line || pe.Kind != KindText {
				t.Errorf("Line, Kind = %d, %v; want %d, text", pe.Line, pe.Kind, tc.line)
			}
			if err.Error() != tc.msg {
				t.Errorf("message\n got %s\nwant %s", err, tc.msg)
			}
		})
	}
}

func TestTextReaderStickyError(t *testing.T) {
	r, err := NewTextReader(strings.NewReader("alloc 1 2 3\nbad\nalloc 1 2 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Errorf("errors %v then %v, want the same error twice", err1, err2)
	}
}

func TestReadTextTruncatedGzip(t *testing.T) {
	data, err := os.ReadFile(resnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ReadTextAll(bytes.NewReader(data[:len(data)/2]))
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, io.ErrUnexpectedEOF) || pe.Line == 0 {
		t.Fatalf("err = %v, want a *ParseError with a line wrapping io.ErrUnexpectedEOF", err)
	}
	// A corrupt gzip header.
	_, err = ReadTextAll(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}))
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *ParseError", err)
	}
}

func TestTextReaderNoAllocs(t *testing.T) {
	var buf bytes.Buffer
	for range 1000 {
		buf.WriteString("alloc 139638008184832 37632 0 123\nfree_completed 139638008184832 37632 0\n")
	}
	data := buf.Bytes()
	rd := bytes.NewReader(data)
	r, err := NewTextReader(rd)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Next allocates %v times per event, want 0", allocs)
	}
}

// benchmarkText measures TextReader.Next over data, reporting events/s.
func benchmarkText(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		r, err := NewTextReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkReadText(b *testing.B) {
	gz, err := os.ReadFile(filepath.FromSlash(resnetTrace))
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		b.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	// 100 copies of the trace: 850,400 events, 37 MB.
	big := bytes.Repeat(plain, 100)
	b.Run("plain", func(b *testing.B) { benchmarkText(b, big) })
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write(big)
	zw.Close()
	b.Run("gzip", func(b *testing.B) { benchmarkText(b, zbuf.Bytes()) })
}

// TestTextHeaderBounded reads a trace of nothing but comments: the header
// keeps their first 64 KiB, not the whole file.
func TestTextHeaderBounded(t *testing.T) {
	in := strings.Repeat("# a comment line of some length\n", 100000) + "alloc 1 2 3\n"
	tr, err := NewTextReader(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, h := range tr.Header() {
		n += len(h)
	}
	if n > maxHeaderBytes || len(tr.Header()) < 1000 {
		t.Errorf("header of %d lines, %d bytes", len(tr.Header()), n)
	}
	if e, err := tr.Next(); err != nil || e.Action != ActionAlloc || tr.Line() != 100001 {
		t.Errorf("first event %+v at line %d: %v", e, tr.Line(), err)
	}
}
