package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vramgo/vram/internal/fuzztest"
)

// The fuzz targets of the readers. Each one skips inputs over a bound, so
// that an execution takes microseconds and a minimisation (which runs the
// target once per candidate, up to quadratically many times in the input's
// length) ends quickly; reads that need large inputs (buffer boundaries,
// long histories) are unit tests. Each checks properties, not only the
// absence of a panic: errors are one-line *ParseErrors, memory stays
// bounded by the input whatever sizes it claims, what is read is valid,
// and what is read writes back and reads the same. Seeds are under
// testdata/fuzz, built by TestFuzzSeeds.

// Input bounds of the targets, in bytes.
const (
	maxFuzzText  = 2 << 10 // a text trace: about 100 events
	maxFuzzInput = 4 << 10 // JSON, pickles and Read: room for a real snapshot
)

// Memory a read may allocate: a fixed allowance for buffers (64 KiB read
// buffers, the gzip state, the unpickler's memo and item chunks, 1 MiB
// read pieces), plus a multiple of the input. Claimed sizes (a string
// length, a segment size, a count) must not be allocated before the bytes
// arrive; a read that allocates more has taken a claim at its word.
const (
	allocFixed   = 16 << 20
	allocPerByte = 2 << 10
)

func heapAllocated() uint64 { return fuzztest.HeapAllocated() }

// checkAllocated fails t if a read of n input bytes allocated more than
// the bound, given the heap counter before it.
func checkAllocated(t *testing.T, what string, n int, before uint64) {
	t.Helper()
	fuzztest.CheckAllocated(t, what, n, before, allocFixed, allocPerByte)
}

// checkParseError fails t unless err is a *ParseError of kind (any kind
// for KindUnknown) whose message is one line of plain text (no control
// characters: bytes of the input are quoted) starting with prefix.
func checkParseError(t *testing.T, err error, kind Kind, prefix string) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ParseError", err, err)
	}
	if kind != KindUnknown && pe.Kind != kind {
		t.Fatalf("error %q has kind %v, want %v", err, pe.Kind, kind)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		t.Fatalf("error %q does not start with %q", msg, prefix)
	}
	if !utf8.ValidString(msg) || strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		t.Fatalf("error %q is not one line of plain text (input quoted raw?)", msg)
	}
}

// plainInput returns the input with a gzip layer removed: as much as
// decompresses (a reader may stop before a corrupt or missing end), at most
// 1 MiB.
func plainInput(data []byte) []byte {
	if !bytes.HasPrefix(data, gzipMagic) {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(zr, 1<<20))
	return b
}

// storedGzip wraps data in a gzip stream of stored (uncompressed) deflate
// blocks: a valid stream written in microseconds, without the compressor's
// state.
func storedGzip(data []byte) []byte {
	sum, size := crc32.ChecksumIEEE(data), uint32(len(data))
	out := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), 0xffff)
		final := byte(0)
		if n == len(data) {
			final = 1
		}
		out = append(out, final)
		out = binary.LittleEndian.AppendUint16(out, uint16(n))
		out = binary.LittleEndian.AppendUint16(out, ^uint16(n))
		out = append(out, data[:n]...)
		data = data[n:]
	}
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(out, sum), size)
}

// FuzzReadText reads text traces: a malformed one fails with a *ParseError
// naming its line, the streaming reader and ReadTextAll agree, every event
// is valid, and what is read writes back and reads the same.
func FuzzReadText(f *testing.F) {
	f.Add([]byte("alloc 1 2 3 4\nfree_completed 1 2 3\n# c\n"))
	f.Add([]byte("# header\n\nalloc 139638008184832 512 0 17\r\noom 0 1099511627776 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzText {
			return
		}
		before := heapAllocated()
		events, err := ReadTextAll(bytes.NewReader(data))
		checkAllocated(t, "ReadTextAll", len(data), before)

		// The streaming reader sees the same events and the same error,
		// and keeps returning that error.
		var streamed []Event
		var serr error
		if tr, err := NewTextReader(bytes.NewReader(data)); err != nil {
			serr = err
		} else {
			for {
				e, err := tr.Next()
				if err != nil {
					if err != io.EOF {
						serr = err
						if _, again := tr.Next(); again != err {
							t.Fatalf("Next after an error returned %v, then %v", err, again)
						}
					}
					break
				}
				streamed = append(streamed, e)
			}
		}
		if (err == nil) != (serr == nil) || err != nil && err.Error() != serr.Error() {
			t.Fatalf("ReadTextAll says %v, the TextReader %v", err, serr)
		}
		if err != nil {
			checkParseError(t, err, KindText, "trace: ")
			return
		}
		if !reflect.DeepEqual(events, streamed) {
			t.Fatalf("ReadTextAll and the TextReader read different events")
		}
		plain := plainInput(data)
		if lines := bytes.Count(plain, []byte("\n")) + 1; len(events) > lines {
			t.Fatalf("%d events from %d lines", len(events), lines)
		}
		for i, e := range events {
			if !e.Action.Valid() || e.Size < 0 {
				t.Fatalf("event %d is invalid: %+v", i, e)
			}
		}
		// What parses writes back, reads the same, and writes the same.
		var buf bytes.Buffer
		if err := WriteText(&buf, events); err != nil {
			t.Fatalf("WriteText of parsed events: %v", err)
		}
		text := buf.String()
		again, err := ReadTextAll(&buf)
		if err != nil || len(again) != len(events) {
			t.Fatalf("re-read: %d events, %v; want %d", len(again), err, len(events))
		}
		for i := range events {
			if !reflect.DeepEqual(again[i], events[i]) {
				t.Fatalf("event %d: %+v became %+v", i, events[i], again[i])
			}
		}
		buf.Reset()
		if WriteText(&buf, again); buf.String() != text {
			t.Fatalf("WriteText is not a fixed point:\n%s\nthen\n%s", text, buf.String())
		}
	})
}

// sameSnapshot reports whether a and b are equal once a nil and an empty
// Meta are taken as the same (WriteJSON writes both as {}).
func sameSnapshot(a, b *Snapshot) bool {
	x, y := *a, *b
	if len(x.Meta) == 0 {
		x.Meta = nil
	}
	if len(y.Meta) == 0 {
		y.Meta = nil
	}
	return reflect.DeepEqual(&x, &y)
}

// checkJSONRoundTrip fails t unless s writes as JSON, reads back equal, and
// writes the same bytes again.
func checkJSONRoundTrip(t *testing.T, s *Snapshot) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, s); err != nil {
		t.Fatalf("WriteJSON of a snapshot a reader accepted: %v", err)
	}
	first := buf.String()
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatalf("ReadJSON of what WriteJSON wrote: %v\n%s", err, first)
	}
	if !sameSnapshot(s, back) {
		t.Fatalf("JSON round trip changed the snapshot:\n%+v\nbecame\n%+v", s, back)
	}
	buf.Reset()
	if WriteJSON(&buf, back); buf.String() != first {
		t.Fatalf("WriteJSON is not a fixed point:\n%s\nthen\n%s", first, buf.String())
	}
}

// checkSnapshot fails t if s, which a reader returned, is invalid or its
// state cannot be computed.
func checkSnapshot(t *testing.T, s *Snapshot) {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("a reader returned an invalid snapshot: %v", err)
	}
	if _, err := StateAt(s, len(s.History)); err != nil {
		t.Fatalf("StateAt(end): %v", err)
	}
	held, err := StateAt(s, 0)
	var ise *InvalidSnapshotError
	if err != nil && !errors.As(err, &ise) {
		t.Fatalf("StateAt(0): %v is not an *InvalidSnapshotError", err)
	}
	for i := 1; i < len(held); i++ {
		if held[i].Addr <= held[i-1].Addr {
			t.Fatalf("StateAt(0) is not sorted by address: 0x%x then 0x%x", held[i-1].Addr, held[i].Addr)
		}
	}
	StartsEmpty(s.History, s.Segments)
}

// FuzzReadJSON reads vram JSON snapshots: a bad one fails with a
// *ParseError; an accepted one is valid JSON of the format, with the
// number 1 as its version, describes a valid snapshot, and writes back and
// reads the same.
func FuzzReadJSON(f *testing.F) {
	f.Add([]byte(`{"format": "vram-memory-snapshot", "version": 1}`))
	f.Add([]byte(`{"format": "vram-memory-snapshot", "version": 1, "capacity_bytes": 9223372036854775807, "segments": [` +
		`{"address": 4096, "size": 9223372036854775807, "pool": "large", "blocks": [{"address": 4096, "size": 9223372036854775807, "state": "active_allocated"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		before := heapAllocated()
		s, err := ReadJSON(bytes.NewReader(data))
		checkAllocated(t, "ReadJSON", len(data), before)
		if err != nil {
			checkParseError(t, err, KindJSON, "trace: ")
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			t.Fatalf("ReadJSON accepted what encoding/json rejects: %v", err)
		}
		if v := bytes.TrimSpace(top["version"]); string(v) != "1" && !isNumberOne(v) {
			t.Fatalf("ReadJSON accepted version %s; want the JSON number 1", v)
		}
		checkSnapshot(t, s)
		checkJSONRoundTrip(t, s)
	})
}

// isNumberOne reports whether v is a JSON number equal to 1 (1.0, 1e0).
func isNumberOne(v []byte) bool {
	var n json.Number
	if len(v) == 0 || v[0] == '"' || json.Unmarshal(v, &n) != nil {
		return false
	}
	f, err := n.Float64()
	return err == nil && f == 1
}

// FuzzReadPickle reads PyTorch snapshot pickles: a bad one fails with a
// *ParseError without allocating what it claims; accepted snapshots are
// valid, one per device in device order, hold no more entries than the
// input has bytes, and carry over to JSON unchanged.
func FuzzReadPickle(f *testing.F) {
	f.Add([]byte{0x80, 2, '}', '.'})
	f.Add([]byte{0x80, 2, ']', '(', 'K', 1, 'e', '.'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		before := heapAllocated()
		snaps, err := ReadPickle(bytes.NewReader(data))
		checkAllocated(t, "ReadPickle", len(data), before)
		if err != nil {
			checkParseError(t, err, KindPickle, "trace: ")
			return
		}
		entries := 0
		for i, s := range snaps {
			if i > 0 && s.Device <= snaps[i-1].Device {
				t.Fatalf("snapshots of devices %d then %d: want one per device, in order", snaps[i-1].Device, s.Device)
			}
			if s.Meta[MetaSource] != "pytorch" {
				t.Fatalf("snapshot of device %d: source %q, want pytorch", s.Device, s.Meta[MetaSource])
			}
			if s.Truncated != !StartsEmpty(s.History, s.Segments) {
				t.Fatalf("snapshot of device %d: Truncated is %v, StartsEmpty says the opposite", s.Device, s.Truncated)
			}
			entries += len(s.Segments) + len(s.History)
			for _, seg := range s.Segments {
				entries += len(seg.Blocks)
			}
			checkSnapshot(t, s)
			checkJSONRoundTrip(t, s)
		}
		if plain := plainInput(data); entries > len(plain) {
			t.Fatalf("%d segments, blocks and events from a %d-byte pickle", entries, len(plain))
		}
	})
}

// FuzzOpen reads any input the way `vram replay` and `vram analyze` do,
// with its format detected, and with gz also wrapped in gzip first: errors
// are *ParseErrors naming the input, the result is what the reader of the
// detected format returns, and compression changes nothing but Gzipped.
func FuzzOpen(f *testing.F) {
	f.Add([]byte("alloc 1 2 3\n"), false)
	f.Add([]byte(`{"format": "vram-memory-snapshot", "version": 1}`), true)
	f.Add([]byte{0x80, 2, '}', '.'}, true)
	f.Add([]byte(`{"segments": [{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": [{"size": 512, "state": "active_allocated", "frames": [{"name": "f", "filename": "a.py", "line": 1}]}]}],`+
		` "device_traces": [[{"action": "alloc", "addr": 4096, "size": 500, "frames": [{"name": "f", "filename": "a.py", "line": 1}]}]], "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "x": [1.5, null]}}`), false)
	f.Add([]byte(`[{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": []}]`), true)
	f.Fuzz(func(t *testing.T, data []byte, gz bool) {
		if len(data) > maxFuzzInput {
			return
		}
		in := data
		if gz {
			in = storedGzip(data)
		}
		before := heapAllocated()
		file, err := Read(bytes.NewReader(in), "fuzz")
		checkAllocated(t, "Read", len(in), before)
		if err != nil {
			if file != nil {
				t.Fatal("Read returned a File with an error")
			}
			checkParseError(t, err, KindUnknown, "trace: fuzz: ")
		} else {
			checkFile(t, in, file)
		}
		if !gz || bytes.HasPrefix(data, gzipMagic) {
			return
		}
		// Compression is transparent.
		plain, perr := Read(bytes.NewReader(data), "fuzz")
		if (err == nil) != (perr == nil) {
			t.Fatalf("gzip changed the outcome: %v, uncompressed %v", err, perr)
		}
		if err != nil {
			return
		}
		if !file.Gzipped || plain.Gzipped {
			t.Fatalf("Gzipped is %v for the gzip stream and %v for the plain input", file.Gzipped, plain.Gzipped)
		}
		plain.Gzipped = true
		if !reflect.DeepEqual(file, plain) {
			t.Fatalf("gzip changed what was read:\n%+v\nuncompressed\n%+v", file, plain)
		}
	})
}

// checkFile fails t unless file, which Read returned for in, is what the
// reader of its kind returns, with only that kind's fields set.
func checkFile(t *testing.T, in []byte, file *File) {
	t.Helper()
	if file.Name != "fuzz" {
		t.Fatalf("Name %q, want fuzz", file.Name)
	}
	if file.Gzipped != bytes.HasPrefix(in, gzipMagic) {
		t.Fatalf("Gzipped is %v for input starting % x", file.Gzipped, in[:min(len(in), 2)])
	}
	plain := plainInput(in)
	switch file.Kind {
	case KindText:
		if file.Snapshots != nil {
			t.Fatal("a text trace with snapshots")
		}
		events, err := ReadTextAll(bytes.NewReader(plain))
		if err != nil || !reflect.DeepEqual(events, file.Events) {
			t.Fatalf("Read and ReadTextAll disagree: %v", err)
		}
	case KindJSON:
		if file.Events != nil || file.Header != nil || len(file.Snapshots) != 1 {
			t.Fatalf("a JSON snapshot read as %d snapshots, %d events", len(file.Snapshots), len(file.Events))
		}
		s, err := ReadJSON(bytes.NewReader(plain))
		if err != nil || !reflect.DeepEqual(s, file.Snapshots[0]) {
			t.Fatalf("Read and ReadJSON disagree: %v", err)
		}
	case KindPickle:
		if file.Events != nil || file.Header != nil {
			t.Fatal("a pickle with events")
		}
		snaps, err := ReadPickle(bytes.NewReader(plain))
		if err != nil || len(snaps) != len(file.Snapshots) || len(snaps) > 0 && !reflect.DeepEqual(snaps, file.Snapshots) {
			t.Fatalf("Read and ReadPickle disagree: %v", err)
		}
	case KindPyTorchJSON:
		if file.Events != nil || file.Header != nil {
			t.Fatal("a PyTorch snapshot saved as JSON with events")
		}
		if _, err := ReadJSON(bytes.NewReader(plain)); err == nil {
			t.Fatal("ReadJSON reads a PyTorch snapshot saved as JSON")
		}
	default:
		t.Fatalf("Read succeeded with kind %v", file.Kind)
	}
	for _, s := range file.Snapshots {
		checkSnapshot(t, s)
	}
}

// TestStoredGzip checks the fuzz targets' gzip writer against the
// standard reader.
func TestStoredGzip(t *testing.T) {
	for _, n := range []int{0, 1, 100, 0xffff, 0x10000, 200000} {
		data := bytes.Repeat([]byte("alloc 1 2 3\n"), n/12+1)[:n]
		zr, err := gzip.NewReader(bytes.NewReader(storedGzip(data)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: read back %d bytes, %v", n, len(got), err)
		}
	}
}

// Seed corpora.

// seedSnapshot is a small snapshot with what real ones have: a small and an
// expandable large segment, held, pending and free blocks, a call stack, a
// region and the end of the history that led there. It is kept small
// (about 1 KiB as JSON): the engine minimises new inputs derived from
// it, in time quadratic in their length.
func seedSnapshot() *Snapshot {
	fr := []Frame{{Function: "main.forward", File: "train.go", Line: 42}}
	const a, b = 139638008184832, 139640000000000
	return &Snapshot{
		Capacity: 80 << 30,
		Config:   "expandable_segments:True",
		Meta:     map[string]string{MetaSource: "vram"},
		Segments: []Segment{
			{Addr: a, Size: 2 << 20, Pool: PoolSmall, Blocks: []Block{
				{Addr: a, Size: 512, Requested: 100, State: StateActiveAllocated, Region: "conv1", Frames: fr},
				{Addr: a + 512, Size: 1024, Requested: 1000, State: StateActivePendingFree},
				{Addr: a + 1536, Size: 2<<20 - 1536, State: StateInactive},
			}},
			{Addr: b, Size: 20 << 20, Stream: 7, Pool: PoolLarge, Expandable: true, Blocks: []Block{
				{Addr: b, Size: 20 << 20, Requested: 20 << 20, State: StateActiveAllocated},
			}},
		},
		History: []Event{
			{Action: ActionAlloc, Addr: a, Size: 100, Region: "conv1", Frames: fr, TimeUS: 2},
			{Action: ActionFreeRequested, Addr: a + 512, Size: 1000, TimeUS: 4},
			{Action: ActionSegmentMap, Addr: b, Size: 20 << 20, Stream: 7, TimeUS: 5},
			{Action: ActionOOM, Addr: 1 << 30, Size: 1 << 40, TimeUS: 7},
		},
		Truncated: true,
	}
}

func jsonOf(t testing.TB, s *Snapshot) []byte {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func textOf(t testing.TB, events []Event) []byte {
	var buf bytes.Buffer
	if err := WriteText(&buf, events); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// resnetPrefix returns the first n bytes of the decompressed ResNet-50
// trace in testdata, cut at a line end.
func resnetPrefix(t testing.TB, n int) []byte {
	b, err := os.ReadFile(resnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(io.LimitReader(zr, int64(n)))
	if err != nil {
		t.Fatal(err)
	}
	return plain[:bytes.LastIndexByte(plain, '\n')+1]
}

// pyDictW is an ordered dict for pickleW.
type pyDictW [][2]any

// pyListW is a list for pickleW; a *pyListW written twice is memoised once
// and referenced the second time, as Python shares a list.
type pyListW []any

// pickleW writes plain Python values as a pickle of protocol 2 (BINPUT
// memo, BINUNICODE strings) or 4 (FRAME, MEMOIZE, SHORT_BINUNICODE), the
// opcodes Python's pickler uses for them.
type pickleW struct {
	proto byte
	b     []byte
	memo  map[any]int
	n     int // memo entries
}

func picklePy(proto byte, v any) []byte {
	w := &pickleW{proto: proto, memo: map[any]int{}}
	w.b = append(w.b, opProto, proto)
	body := len(w.b)
	w.value(v)
	w.b = append(w.b, opStop)
	if proto >= 4 {
		frame := append([]byte{opFrame}, binary.LittleEndian.AppendUint64(nil, uint64(len(w.b)-body))...)
		w.b = append(w.b[:body], append(frame, w.b[body:]...)...)
	}
	return w.b
}

// put memoises the value just written.
func (w *pickleW) put(key any) {
	if key != nil {
		w.memo[key] = w.n
	}
	if w.proto >= 4 {
		w.b = append(w.b, opMemoize)
	} else if w.n < 256 {
		w.b = append(w.b, opBinPut, byte(w.n))
	} else {
		w.b = binary.LittleEndian.AppendUint32(append(w.b, opLongBinPut), uint32(w.n))
	}
	w.n++
}

// get references memo entry i.
func (w *pickleW) get(i int) {
	if i < 256 {
		w.b = append(w.b, opBinGet, byte(i))
	} else {
		w.b = binary.LittleEndian.AppendUint32(append(w.b, opLongBinGet), uint32(i))
	}
}

// pyUint is n as Python pickles an int: in the smallest opcode that
// holds it, as int64 up to MaxInt64.
func pyUint(n uint64) any {
	if n <= math.MaxInt64 {
		return int64(n)
	}
	return n
}

func (w *pickleW) value(v any) {
	switch x := v.(type) {
	case nil:
		w.b = append(w.b, opNone)
	case bool:
		w.b = append(w.b, map[bool]byte{true: opNewTrue, false: opNewFalse}[x])
	case int:
		w.int(int64(x))
	case int64:
		w.int(x)
	case uint64:
		w.b = append(w.b, opLong1, 9)
		w.b = append(binary.LittleEndian.AppendUint64(w.b, x), 0)
	case float64:
		w.b = binary.BigEndian.AppendUint64(append(w.b, opBinFloat), math.Float64bits(x))
	case string:
		if w.proto >= 4 && len(x) < 256 {
			w.b = append(w.b, opShortBinUni, byte(len(x)))
		} else {
			w.b = binary.LittleEndian.AppendUint32(append(w.b, opBinUnicode), uint32(len(x)))
		}
		w.b = append(w.b, x...)
		w.put(nil)
	case []any: // a tuple
		w.b = append(w.b, opMark)
		for _, e := range x {
			w.value(e)
		}
		w.b = append(w.b, opTuple)
	case *pyListW:
		if i, ok := w.memo[x]; ok {
			w.get(i)
			return
		}
		w.b = append(w.b, opEmptyList)
		w.put(x)
		if len(*x) > 0 {
			w.b = append(w.b, opMark)
			for _, e := range *x {
				w.value(e)
			}
			w.b = append(w.b, opAppends)
		}
	case *pyDictW:
		if i, ok := w.memo[x]; ok {
			w.get(i)
			return
		}
		w.b = append(w.b, opEmptyDict)
		w.put(x)
		if len(*x) > 0 {
			w.b = append(w.b, opMark)
			for _, kv := range *x {
				w.value(kv[0])
				w.value(kv[1])
			}
			w.b = append(w.b, opSetItems)
		}
	default:
		panic("pickleW: unsupported value")
	}
}

func (w *pickleW) int(v int64) {
	switch {
	case v >= 0 && v < 256:
		w.b = append(w.b, opBinInt1, byte(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		w.b = binary.LittleEndian.AppendUint32(append(w.b, opBinInt), uint32(v))
	default:
		w.b = binary.LittleEndian.AppendUint64(append(w.b, opLong1, 8), uint64(v))
	}
}

// torchSnapshot lays s out as torch.cuda.memory._snapshot() does (see
// testdata/make_pickles.py), with frame lists and frame dicts shared.
func torchSnapshot(s *Snapshot) *pyDictW {
	frames := map[string]*pyListW{}
	frameList := func(fr []Frame) *pyListW {
		key := ""
		for _, f := range fr {
			key += f.Function + "\x00" + f.File + "\x00" + string(rune(f.Line)) + "\x00"
		}
		if l, ok := frames[key]; ok {
			return l
		}
		l := &pyListW{}
		for _, f := range fr {
			*l = append(*l, &pyDictW{{"filename", f.File}, {"line", f.Line}, {"name", f.Function}})
		}
		frames[key] = l
		return l
	}
	segs := &pyListW{}
	for _, seg := range s.Segments {
		blocks := &pyListW{}
		var allocated, active, requested int64
		for _, b := range seg.Blocks {
			*blocks = append(*blocks, &pyDictW{{"address", b.Addr}, {"size", b.Size}, {"requested_size", b.Requested},
				{"state", b.State}, {"frames", frameList(b.Frames)}})
			if b.State != StateInactive {
				active += b.Size
			}
			if b.State == StateActiveAllocated {
				allocated += b.Size
				requested += b.Requested
			}
		}
		*segs = append(*segs, &pyDictW{{"device", s.Device}, {"address", seg.Addr}, {"total_size", seg.Size},
			{"allocated_size", allocated}, {"active_size", active}, {"requested_size", requested},
			{"stream", seg.Stream}, {"segment_type", seg.Pool}, {"segment_pool_id", []any{pyUint(seg.PrivatePool[0]), pyUint(seg.PrivatePool[1])}},
			{"is_expandable", seg.Expandable}, {"frames", frameList(nil)}, {"blocks", blocks}})
	}
	trace := &pyListW{}
	for _, e := range s.History {
		d := pyDictW{{"action", e.Action.String()}}
		if e.Action == ActionOOM {
			d = append(d, [2]any{"device_free", e.Addr})
		} else {
			d = append(d, [2]any{"addr", e.Addr})
		}
		d = append(d, [2]any{"size", e.Size}, [2]any{"stream", e.Stream}, [2]any{"time_us", e.TimeUS},
			[2]any{"compile_context", "N/A"}, [2]any{"user_metadata", e.Region}, [2]any{"frames", frameList(e.Frames)})
		*trace = append(*trace, &d)
	}
	traces := &pyListW{}
	for range s.Device {
		*traces = append(*traces, &pyListW{})
	}
	*traces = append(*traces, trace)
	return &pyDictW{
		{"segments", segs},
		{"device_traces", traces},
		{"allocator_settings", &pyDictW{{"PYTORCH_CUDA_ALLOC_CONF", s.Config}, {"max_split_size", -1},
			{"garbage_collection_threshold", 0.0}, {"expandable_segments", true}}},
	}
}

// fuzzSeeds returns the seeds of the reader targets.
func fuzzSeeds(t testing.TB) map[string][]fuzztest.Seed {
	snap := seedSnapshot()
	js := jsonOf(t, snap)
	small := &Snapshot{Device: 1, Meta: map[string]string{"card": "NVIDIA H200"}, Truncated: true,
		History: []Event{{Action: ActionFreeCompleted, Addr: 4096, Size: 64}}}
	huge := &Snapshot{Capacity: math.MaxInt64, Segments: []Segment{{Addr: 1 << 40, Size: math.MaxInt64 >> 1, Pool: PoolLarge,
		Blocks: []Block{{Addr: 1 << 40, Size: math.MaxInt64 >> 1, Requested: math.MaxInt64 >> 1, State: StateActiveAllocated}}}}}
	text := textOf(t, snap.History)
	resnet := resnetPrefix(t, 600)
	// Real deflate streams come from testdata files, so that the seeds
	// do not depend on the compressor of the Go release that builds them.
	resnetGz, err := os.ReadFile(resnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	p4gz, err := os.ReadFile("testdata/snapshot_p4.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	p2, p4 := picklePy(2, torchSnapshot(snap)), picklePy(4, torchSnapshot(snap))
	old := &pyListW{&pyDictW{{"address", 4096}, {"total_size", 2 << 20}, {"stream", 0}, {"segment_type", "small"},
		{"blocks", &pyListW{&pyDictW{{"size", 2 << 20}, {"requested_size", 0}, {"state", "inactive"},
			{"history", &pyListW{&pyDictW{{"addr", 4096}, {"real_size", 100}}}}}}}}}
	claims := append([]byte{opProto, 4, opBinUnicode8}, binary.LittleEndian.AppendUint64(nil, 1<<62)...)
	seeds := map[string][]fuzztest.Seed{
		"FuzzReadText": {
			{Name: "history", Args: []any{text}},
			{Name: "resnet50", Args: []any{resnet}},
			{Name: "resnet50-stored-gzip", Args: []any{storedGzip(resnet)}},
			{Name: "resnet50-gzip-cut", Args: []any{resnetGz[:1024]}},
			{Name: "comments-crlf", Args: []any{[]byte("# vram trace\r\n# device 0\r\n\r\nalloc 4096 512 0 1\r\nfree_requested 4096 512 0 2\r\nfree_completed 4096 512 0 3\r\n")}},
			{Name: "extremes", Args: []any{[]byte("alloc 18446744073709551615 9223372036854775807 18446744073709551615 -9223372036854775808\noom 0 0 0\n")}},
			{Name: "bad-field", Args: []any{[]byte("alloc 1 2 3\nsegment_map 1 -2 3\n")}},
		},
		"FuzzReadJSON": {
			{Name: "snapshot", Args: []any{js}},
			{Name: "truncated-history", Args: []any{jsonOf(t, small)}},
			{Name: "empty", Args: []any{jsonOf(t, &Snapshot{})}},
			{Name: "claims-huge-sizes", Args: []any{jsonOf(t, huge)}},
			{Name: "compact", Args: []any{[]byte(`{"format":"vram-memory-snapshot","version":1,"device":2,"meta":null,"segments":null,"history":[{"action":"oom","address":0,"size":1}],"extra":[1,{"a":null}]}`)}},
			{Name: "cut", Args: []any{js[:len(js)/2]}},
		},
		"FuzzReadPickle": {
			{Name: "p2", Args: []any{p2}},
			{Name: "p4", Args: []any{p4}},
			{Name: "p4-stored-gzip", Args: []any{storedGzip(p4)}},
			{Name: "testdata-p4-gzip", Args: []any{p4gz}},
			{Name: "segments-only", Args: []any{picklePy(2, old)}},
			{Name: "settings-only", Args: []any{picklePy(4, &pyDictW{{"segments", &pyListW{}}, {"allocator_settings", &pyDictW{{"x", []any{1.5, nil, "s", uint64(math.MaxUint64)}}}}})}},
			{Name: "claims-huge-string", Args: []any{append(claims, "short"...)}},
			{Name: "cut", Args: []any{p2[:len(p2)/2]}},
		},
		"FuzzOpen": {
			{Name: "text", Args: []any{text, false}},
			{Name: "text-gzip", Args: []any{text, true}},
			{Name: "json", Args: []any{js, false}},
			{Name: "json-gzip", Args: []any{jsonOf(t, small), true}},
			{Name: "pickle", Args: []any{p4, false}},
			{Name: "pickle-gzip", Args: []any{p2, true}},
			{Name: "binary", Args: []any{[]byte{0, 1, 2, 0xff, 0xfe}, false}},
			{Name: "gzip-of-garbage", Args: []any{[]byte("\x00\x01garbage"), true}},
		},
	}
	for _, name := range []string{"object.pickle", "segments_only_p2.pickle"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		seeds["FuzzReadPickle"] = append(seeds["FuzzReadPickle"], fuzztest.Seed{Name: "testdata-" + strings.TrimSuffix(name, ".pickle"), Args: []any{b}})
	}
	return seeds
}

// TestFuzzSeeds checks the committed seed corpora against fuzzSeeds (run
// with -update-fuzz-seeds to rewrite them) and that each seed is read as
// its name says.
func TestFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds(t)
	bounds := map[string]int{"FuzzReadText": maxFuzzText, "FuzzReadJSON": maxFuzzInput, "FuzzReadPickle": maxFuzzInput, "FuzzOpen": maxFuzzInput}
	for target, list := range seeds {
		fuzztest.Check(t, target, list, bounds[target])
	}
	// The valid seeds are read without error: they reach past the
	// readers' first checks.
	for _, s := range seeds["FuzzReadPickle"] {
		_, err := ReadPickle(bytes.NewReader(s.Args[0].([]byte)))
		if bad := strings.Contains(s.Name, "cut") || strings.Contains(s.Name, "huge") || s.Name == "testdata-object"; (err != nil) != bad {
			t.Errorf("pickle seed %s: %v", s.Name, err)
		}
	}
	for _, s := range seeds["FuzzReadJSON"] {
		_, err := ReadJSON(bytes.NewReader(s.Args[0].([]byte)))
		if bad := s.Name == "cut"; (err != nil) != bad {
			t.Errorf("JSON seed %s: %v", s.Name, err)
		}
	}
}

// TestUnpickleMemoGrowth checks memo entries on both sides of the first
// memo chunk's end, which grows by appending while the later ones do not.
func TestUnpickleMemoGrowth(t *testing.T) {
	const n = memoChunk + 100
	p := []byte{opProto, 4}
	for i := range n {
		s := strconv.Itoa(i)
		p = append(p, opShortBinUni, byte(len(s)))
		p = append(p, s...)
		p = append(p, opMemoize, opPop)
	}
	idx := []int{0, 63, 64, memoChunk - 1, memoChunk, n - 1}
	p = append(p, opMark)
	for _, i := range idx {
		p = binary.LittleEndian.AppendUint32(append(p, opLongBinGet), uint32(i))
	}
	p = append(p, opTuple, opStop)
	v, _, err := unpickle(bufio.NewReader(bytes.NewReader(p)))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := v.(pyTuple)
	if !ok || len(got) != len(idx) {
		t.Fatalf("got %#v", v)
	}
	for k, i := range idx {
		if got[k] != strconv.Itoa(i) {
			t.Errorf("memo entry %d = %v", i, got[k])
		}
	}
}

// TestUnpickleInvalidUTF8 checks that a pickled str with bytes that are not
// UTF-8 reads as the JSON writer would write it: U+FFFD for each bad byte.
func TestUnpickleInvalidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"train.py":       "train.py",
		"ü":              "ü",
		"a\xffb":         "a\ufffdb",
		"\xed\xa0\x80":   "\ufffd\ufffd\ufffd", // an encoded surrogate
		"\xc3":           "\ufffd",
		"ok\xf0\x9f\x98": "ok\ufffd\ufffd\ufffd",
	} {
		p := append([]byte{opProto, 4, opShortBinUni, byte(len(in))}, in...)
		v, _, err := unpickle(bufio.NewReader(bytes.NewReader(append(p, opStop))))
		if err != nil || v != want {
			t.Errorf("str %q read as %q, %v; want %q", in, v, err, want)
		}
		var back string
		if err := json.Unmarshal(appendJSONString(nil, in), &back); err != nil || back != want {
			t.Errorf("str %q written as JSON reads back as %q, %v; want %q", in, back, err, want)
		}
	}
}
