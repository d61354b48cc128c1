package trace

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expectedPickleSnapshots reads the vram JSON that make_pickles.py wrote for
// its snapshot: what ReadPickle must return.
func expectedPickleSnapshots(t testing.TB) []*Snapshot {
	t.Helper()
	var out []*Snapshot
	for _, name := range []string{"snapshot_expected_device0.json", "snapshot_expected_device1.json"} {
		s, err := ReadJSON(bytes.NewReader(readFile(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestReadPickleFixtures(t *testing.T) {
	want := expectedPickleSnapshots(t)
	for _, name := range []string{"snapshot_p2.pickle", "snapshot_p4.pickle", "snapshot_p5.pickle", "snapshot_p4.pickle.gz"} {
		t.Run(name, func(t *testing.T) {
			got, err := ReadPickle(bytes.NewReader(readFile(t, name)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				for i := range max(len(got), len(want)) {
					if i >= len(got) || i >= len(want) || !reflect.DeepEqual(got[i], want[i]) {
						var g, w bytes.Buffer
						if i < len(got) {
							WriteJSON(&g, got[i])
						}
						if i < len(want) {
							WriteJSON(&w, want[i])
						}
						t.Errorf("snapshot %d differs:\n got %s\nwant %s", i, g.String(), w.String())
					}
				}
			}
		})
	}
}

func TestReadPickleMapping(t *testing.T) {
	snaps, err := ReadPickle(bytes.NewReader(readFile(t, "snapshot_p4.pickle")))
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 || snaps[0].Device != 0 || snaps[1].Device != 1 {
		t.Fatalf("got %d snapshots", len(snaps))
	}
	s0, s1 := snaps[0], snaps[1]
	if s0.Truncated || !s1.Truncated {
		t.Errorf("Truncated = %v, %v; want false (complete history), true (frees unknown blocks)", s0.Truncated, s1.Truncated)
	}
	if s0.Config != "expandable_segments:True" || s0.Meta["allocator_settings.roundup_power2_divisions"] != "{1: 0, 2: 0, 4: 1}" || s0.Meta[MetaSource] != "pytorch" {
		t.Errorf("Config %q, Meta %v", s0.Config, s0.Meta)
	}
	if got, want := s0.Allocated(), int64(37888+512+10<<20); got != want {
		t.Errorf("Allocated() = %d, want %d", got, want)
	}
	if got, want := s0.Requested(), int64(37632+256+10<<20); got != want {
		t.Errorf("Requested() = %d, want %d", got, want)
	}
	if got, want := s0.Reserved(), int64(22<<20); got != want {
		t.Errorf("Reserved() = %d, want %d", got, want)
	}
	oom := s0.History[15]
	if oom.Action != ActionOOM || oom.Addr != 1234 || oom.Size != 1e12 {
		t.Errorf("oom event = %+v, want Addr = device_free 1234", oom)
	}
	if r := s0.History[1].Region; r != "conv1" {
		t.Errorf("region of alloc = %q, want the user_metadata conv1", r)
	}
	// PyTorch shares frame lists; so does the reader.
	b0 := s0.Segments[0].Blocks[0].Frames
	e1 := s0.History[1].Frames
	if len(b0) != 2 || &b0[0] != &e1[0] {
		t.Errorf("frames of block and alloc are not shared")
	}
	if b0[0] != (Frame{Function: "forward", File: "train.py", Line: 42}) {
		t.Errorf("frame = %+v", b0[0])
	}
}

func TestReadPickleSegmentsOnly(t *testing.T) {
	got, err := ReadPickle(bytes.NewReader(readFile(t, "segments_only_p2.pickle")))
	if err != nil {
		t.Fatal(err)
	}
	want := expectedPickleSnapshots(t)[0]
	want.History, want.Config, want.Truncated = nil, "", true
	want.Meta = map[string]string{MetaSource: "pytorch"}
	for i := range want.Segments {
		want.Segments[i].Expandable = false
		for j := range want.Segments[i].Blocks {
			want.Segments[i].Blocks[j].Frames = nil
			want.Segments[i].Blocks[j].Region = "" // no history to take it from
		}
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// TestReadPickleAnnotations checks that the "user_defined" entries that
// torch.profiler.record_function ranges add to a trace are left out of the
// history, and that a trace of nothing else makes no snapshot.
func TestReadPickleAnnotations(t *testing.T) {
	annotation := func(p pickleBuilder) pickleBuilder {
		return p.op(opEmptyDict).op(opMark).str("action").str("user_defined").str("addr").int(0).
			str("size").int(0).op(opSetItems).op(opAppend)
	}
	onlyAnnotations := annotation(annotation(pk().proto(4).op(opEmptyDict).str("device_traces").
		op(opEmptyList).op(opEmptyList))).op(opAppend).op(opSetItem).stop()
	tests := []struct {
		name string
		in   []byte
		want []*Snapshot
	}{
		{"around events", readFile(t, "annotated_p4.pickle"), expectedPickleSnapshots(t)[:1]},
		{"nothing else", onlyAnnotations, []*Snapshot{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadPickle(bytes.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %d snapshots %+v\nwant %d %+v", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}

func TestReadPickleErrors(t *testing.T) {
	p4 := readFile(t, "snapshot_p4.pickle")
	tests := []struct {
		name   string
		in     []byte
		want   string
		offset int64 // -2: don't check
		is     error
	}{
		{"truncated file", readFile(t, "truncated.pickle"), "input ends early", -2, io.ErrUnexpectedEOF},
		{"cut after proto", p4[:2], "input ends early", 2, io.ErrUnexpectedEOF},
		{"no stop", p4[:len(p4)-1], "input ends early", int64(len(p4) - 1), io.ErrUnexpectedEOF},
		{"corrupt", readFile(t, "corrupt.pickle"), "unknown opcode 0xff", 11, nil},
		{"object", readFile(t, "object.pickle"), "unsupported opcode STACK_GLOBAL", -2, nil},
		{"not a pickle", []byte("alloc 1 2 3\n"), "not a pickle of protocol 2 to 5", 0, nil},
		{"protocol 1", []byte("}q\x00."), "not a pickle of protocol 2 to 5", 0, nil},
		{"empty", nil, "not a pickle", 0, nil},
		{"int root", pk().proto(4).int(5).stop(), "holds an int", -1, nil},
		{"None root", pk().proto(4).op(opNone).stop(), "holds None, want a dict", -1, nil},
		{"dict without keys", pk().proto(2).op(opEmptyDict).stop(), `no "segments" or "device_traces" key`, -1, nil},
		{"address beyond 64 bits", pk().proto(2).op(opEmptyDict).str("segments").op(opEmptyList).
			op(opEmptyDict).str("address").op(opLong1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1).op(opSetItem).op(opAppend).op(opSetItem).stop(),
			`segments[0]: "address" is too large: above 2^64-1`, -1, nil},
		{"event address beyond 64 bits", pk().proto(2).op(opEmptyDict).str("device_traces").op(opEmptyList).op(opEmptyList).
			op(opEmptyDict).str("action").str("alloc").op(opSetItem).str("size").int(512).op(opSetItem).
			str("addr").op(opLong1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1).op(opSetItem).op(opAppend).op(opAppend).op(opSetItem).stop(),
			`device_traces[0][0]: "addr" is too large: above 2^64-1`, -1, nil},
		{"segments not list", pk().proto(2).op(opEmptyDict).str("segments").int(1).op(opSetItem).stop(), "segments: is an int, want a list", -1, nil},
		{"segment missing size", pk().proto(2).op(opEmptyDict).str("segments").op(opEmptyList).
			op(opEmptyDict).str("address").int(4096).op(opSetItem).op(opAppend).op(opSetItem).stop(),
			`segments[0]: no "total_size" key`, -1, nil},
		{"alloc of size None", pk().proto(2).op(opEmptyDict).str("device_traces").op(opEmptyList).op(opEmptyList).
			op(opEmptyDict).str("action").str("alloc").op(opSetItem).str("addr").int(4096).op(opSetItem).
			str("size").op(opNone).op(opSetItem).op(opAppend).op(opAppend).op(opSetItem).stop(),
			`device_traces[0][0]: alloc entry's "size" is None`, -1, nil},
		{"free at None", pk().proto(2).op(opEmptyDict).str("device_traces").op(opEmptyList).op(opEmptyList).
			op(opEmptyDict).str("action").str("free_completed").op(opSetItem).str("addr").op(opNone).op(opSetItem).
			str("size").int(512).op(opSetItem).op(opAppend).op(opAppend).op(opSetItem).stop(),
			`device_traces[0][0]: free_completed entry's "addr" is None`, -1, nil},
		{"segment of size None", pk().proto(2).op(opEmptyDict).str("segments").op(opEmptyList).
			op(opEmptyDict).str("address").int(4096).op(opSetItem).str("total_size").op(opNone).op(opSetItem).op(opAppend).op(opSetItem).stop(),
			`segments[0]: "total_size" is None`, -1, nil},
		{"unknown action", pk().proto(2).op(opEmptyDict).str("device_traces").op(opEmptyList).op(opEmptyList).
			op(opEmptyDict).str("action").str("alloc2").op(opSetItem).op(opAppend).op(opAppend).op(opSetItem).stop(),
			`device_traces[0][0]: unknown action "alloc2"`, -1, nil},
		{"pop mark without mark", pk().proto(2).op(opPopMark).stop(), "no MARK", 2, nil},
		{"stop on empty", pk().proto(2).stop(), "STOP with an empty stack", 2, nil},
		{"append to int", pk().proto(2).int(1).int(2).op(opAppend).stop(), "APPEND to an int", -2, nil},
		{"setitems odd", pk().proto(2).op(opEmptyDict).op(opMark).int(1).op(opSetItems).stop(), "odd number", -2, nil},
		{"memo unset", pk().proto(2).op(opBinGet, 7).stop(), "memo entry 7 used before it was set", 2, nil},
		{"huge string", append(pk().proto(4).op(opBinUnicode8).u64(1<<62), "short"...), "input ends early", 2, io.ErrUnexpectedEOF},
		{"huge frame", pk().proto(4).op(opFrame).u64(1 << 62).op(opNone), "input ends early", -2, io.ErrUnexpectedEOF},
		{"mark hides stack", pk().proto(2).op(opEmptyList).op(opMark).int(1).op(opAppend).stop(), "APPEND without a list", -2, nil},
		{"protocol 6", []byte{0x80, 2, 0x80, 6}, "unsupported protocol 6", 2, nil},
		{"text opcode", pk().proto(2).op('I').stop(), "INT (protocol 0 text)", 2, nil},
		{"amplified", amplifiedPickle(1000), "more entries than a pickle of this size can hold", -1, nil},
		{"invalid snapshot", pk().proto(2).op(opEmptyDict).str("segments").op(opEmptyList).
			op(opEmptyDict).op(opMark).str("address").int(4096).str("total_size").int(512).
			str("segment_type").str("tiny").str("blocks").op(opEmptyList).op(opSetItems).
			op(opAppend).op(opSetItem).stop(), `invalid snapshot: segment 0: pool "tiny"`, -1, nil},
	}
	badSum := gz(p4)
	badSum[len(badSum)-8] ^= 0xff // the CRC-32 of the gzip trailer
	tests = append(tests, []struct {
		name   string
		in     []byte
		want   string
		offset int64
		is     error
	}{
		{"data after the pickle", append(append([]byte{}, p4...), "more"...), "unexpected data after the pickle", int64(len(p4)), nil},
		{"gzip with a bad checksum", badSum, "gzip: invalid checksum", int64(len(p4)), gzip.ErrChecksum},
		{"gzip without its trailer", gz(p4)[:len(gz(p4))-8], "the input ends early after the pickle", int64(len(p4)), io.ErrUnexpectedEOF},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadPickle(bytes.NewReader(tc.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || pe.Kind != KindPickle {
				t.Errorf("err = %q (kind %v), want it to contain %q", err, pe.Kind, tc.want)
			}
			if tc.offset != -2 && pe.Offset != tc.offset {
				t.Errorf("Offset = %d, want %d", pe.Offset, tc.offset)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.is)
			}
		})
	}
}

// amplifiedPickle builds {"device_traces": [L, L, ...n]} where L is one list
// holding n references to one event dict: n*n events from O(n) bytes.
func amplifiedPickle(n int) []byte {
	p := pk().proto(2).op(opEmptyDict).str("device_traces").op(opEmptyList).op(opMark)
	p = p.op(opEmptyList).op(opMark)
	p = p.op(opEmptyDict).op(opMark).str("action").str("alloc").str("addr").int(4096).str("size").int(1).op(opSetItems)
	p = p.op(opBinPut, 0)
	for range n - 1 {
		p = p.op(opBinGet, 0)
	}
	p = p.op(opAppends).op(opBinPut, 1)
	for range n - 1 {
		p = p.op(opBinGet, 1)
	}
	return p.op(opAppends).op(opSetItem).stop()
}

// pickleBuilder writes pickle opcodes by hand for tests.
type pickleBuilder []byte

func pk() pickleBuilder { return nil }

func (p pickleBuilder) op(ops ...byte) pickleBuilder { return append(p, ops...) }
func (p pickleBuilder) proto(n byte) pickleBuilder   { return append(p, opProto, n) }
func (p pickleBuilder) stop() []byte                 { return append(p, opStop) }
func (p pickleBuilder) u64(v uint64) pickleBuilder   { return binary.LittleEndian.AppendUint64(p, v) }
func (p pickleBuilder) str(s string) pickleBuilder {
	p = append(p, opBinUnicode)
	p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
	return append(p, s...)
}
func (p pickleBuilder) int(v int32) pickleBuilder {
	return binary.LittleEndian.AppendUint32(append(p, opBinInt), uint32(v))
}

func unpickleBytes(t *testing.T, b []byte) any {
	t.Helper()
	v, _, err := unpickle(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestUnpickleValues(t *testing.T) {
	long1 := func(b ...byte) []byte { return append(append(pk().proto(2), opLong1, byte(len(b))), b...) }
	tests := []struct {
		name string
		in   []byte
		want any
	}{
		{"none", pk().proto(2).op(opNone).stop(), nil},
		{"true", pk().proto(2).op(opNewTrue).stop(), true},
		{"binint1", pk().proto(2).op(opBinInt1, 200).stop(), int64(200)},
		{"binint2", pk().proto(2).op(opBinInt2, 0x34, 0x12).stop(), int64(0x1234)},
		{"binint negative", pk().proto(2).int(-7).stop(), int64(-7)},
		{"long1 empty", pickleBuilder(long1()).stop(), int64(0)},
		{"long1 -1", pickleBuilder(long1(0xff)).stop(), int64(-1)},
		{"long1 128", pickleBuilder(long1(0x80, 0x00)).stop(), int64(128)},
		{"long1 -129", pickleBuilder(long1(0x7f, 0xff)).stop(), int64(-129)},
		{"long1 address", pickleBuilder(long1(0x00, 0x00, 0xe0, 0x01, 0x00, 0x7f)).stop(), int64(0x7f0001e00000)},
		{"long1 max int64", pickleBuilder(long1(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)).stop(), int64(math.MaxInt64)},
		{"long1 min int64", pickleBuilder(long1(0, 0, 0, 0, 0, 0, 0, 0x80)).stop(), int64(math.MinInt64)},
		{"long1 max uint64", pickleBuilder(long1(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00)).stop(), uint64(math.MaxUint64)},
		{"long1 padded", pickleBuilder(long1(5, 0, 0, 0, 0, 0, 0, 0, 0, 0)).stop(), int64(5)},
		{"long1 2^64", pickleBuilder(long1(0, 0, 0, 0, 0, 0, 0, 0, 1)).stop(), pyBigInt{}},
		{"long1 -2^64", pickleBuilder(long1(0, 0, 0, 0, 0, 0, 0, 0, 0xff)).stop(), pyBigInt{}},
		{"long4", pk().proto(2).op(opLong4, 2, 0, 0, 0, 0x00, 0x01).stop(), int64(256)},
		{"binfloat", pk().proto(2).op(opBinFloat, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0).stop(), 1.5},
		{"short str", pk().proto(4).op(opShortBinUni, 2, 'h', 'i').stop(), "hi"},
		{"bytes", pk().proto(3).op(opShortBinBytes, 2, 0, 1).stop(), []byte{0, 1}},
		{"tuple2", pk().proto(2).int(1).int(2).op(opTuple2).stop(), pyTuple{int64(1), int64(2)}},
		{"tuple", pk().proto(2).op(opMark).int(1).op(opTuple).stop(), pyTuple{int64(1)}},
		{"empty tuple", pk().proto(2).op(opEmptyTuple).stop(), pyTuple(nil)},
		{"list", pk().proto(2).op(opMark).int(1).int(2).op(opList).stop(), &pyList{items: []any{int64(1), int64(2)}}},
		{"set", pk().proto(4).op(opEmptySet).op(opMark).int(3).op(opAddItems).stop(), &pyList{items: []any{int64(3)}}},
		{"frozenset", pk().proto(4).op(opMark).int(3).op(opFrozenSet).stop(), &pyList{items: []any{int64(3)}}},
		{"dict", pk().proto(2).op(opMark).str("a").int(1).op(opDict).stop(), &pyDict{kv: []any{"a", int64(1)}}},
		{"setitem", pk().proto(2).op(opEmptyDict).str("a").int(1).op(opSetItem).op(opMark).str("b").int(2).op(opSetItems).stop(), &pyDict{kv: []any{"a", int64(1), "b", int64(2)}}},
		{"memo", pk().proto(2).str("k").op(opBinPut, 0).op(opPop).op(opBinGet, 0).stop(), "k"},
		{"sparse memo", pk().proto(2).str("k").op(opLongBinPut, 0xff, 0xff, 0xff, 0xff).op(opPop).op(opLongBinGet, 0xff, 0xff, 0xff, 0xff).stop(), "k"},
		{"memoize", pk().proto(4).str("a").op(opMemoize).str("b").op(opMemoize).op(opPop, opPop).op(opBinGet, 1).stop(), "b"},
		{"dup", pk().proto(2).int(4).op(opDup).op(opTuple2).stop(), pyTuple{int64(4), int64(4)}},
		{"pop mark", pk().proto(2).int(9).op(opMark).int(1).int(2).op(opPopMark).stop(), int64(9)},
		{"pop empties mark", pk().proto(2).int(9).op(opMark).op(opPop).stop(), int64(9)},
		{"frame", pk().proto(4).op(opFrame).u64(3).op(opNewFalse).op(opReadOnlyBuffer).stop(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := unpickleBytes(t, tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestUnpickleLargeString(t *testing.T) {
	s := strings.Repeat("x", 3<<20) // larger than the read buffer and one chunk
	p := pk().proto(4).op(opBinUnicode8).u64(uint64(len(s)))
	p = append(p, s...)
	if got := unpickleBytes(t, p.stop()); got != s {
		t.Errorf("large string differs")
	}
}

func TestPyRepr(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{nil, "None"}, {true, "True"}, {int64(-1), "-1"}, {uint64(math.MaxUint64), "18446744073709551615"},
		{0.0, "0.0"}, {-0.0 * 1, "0.0"}, {1234567.0, "1234567.0"}, {1e16, "1e+16"}, {1.5e-5, "1.5e-05"},
		{0.1, "0.1"}, {math.NaN(), "nan"}, {math.Inf(-1), "-inf"}, {"s", "s"}, {pyBigInt{}, "<int>"},
		{pyTuple{int64(0), int64(0)}, "(0, 0)"}, {&pyList{items: []any{"a", nil}}, "[a, None]"},
		{&pyDict{kv: []any{"1", int64(0)}}, "{1: 0}"}, {[]byte{1}, "<bytes>"},
	}
	for _, tc := range tests {
		if got := pyRepr(tc.v, 4, maxReprBytes); got != tc.want {
			t.Errorf("pyRepr(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	// Cycles stop at the depth limit.
	l := &pyList{}
	l.items = append(l.items, l)
	if got := pyRepr(l, 3, maxReprBytes); got != "[[[...]]]" {
		t.Errorf("cyclic list = %q", got)
	}
	// One long string referenced many times gives a Meta value of bounded
	// length, not the length of the repeated string.
	long := strings.Repeat("é", 2000)
	many := &pyList{}
	for range 100000 {
		many.items = append(many.items, long)
	}
	got := clipRepr(pyRepr(&pyDict{kv: []any{"k", many}}, 4, maxReprBytes))
	if len(got) > maxReprBytes+3 || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Errorf("repr of 100000 references to a 4000-byte string: %d bytes, ends %q", len(got), got[max(0, len(got)-10):])
	}
}

func TestPyDictLarge(t *testing.T) {
	d := &pyDict{}
	for i := range 100 {
		d.setItems([]any{"k" + string(rune('A'+i%26)) + string(rune('a'+i/26)), int64(i)})
	}
	d.setItems([]any{"kAa", int64(-1), int64(5), "not a str key"}) // a duplicate wins
	if v, ok := d.get("kBa"); !ok || v != int64(1) {
		t.Errorf("get(kBa) = %v, %v", v, ok)
	}
	if v, ok := d.get("kAa"); !ok || v != int64(-1) {
		t.Errorf("get(kAa) = %v, %v; want the later duplicate", v, ok)
	}
	if _, ok := d.get("missing"); ok {
		t.Error("get(missing) found something")
	}
}

// TestReadPickleBlockRegions checks that a held block takes the
// user_metadata of the alloc that produced it, which PyTorch records on the
// trace entry only.
func TestReadPickleBlockRegions(t *testing.T) {
	const a = 139638008184832
	alloc := func(addr uint64, region string) Event {
		return Event{Action: ActionAlloc, Addr: addr, Size: 512, Region: region}
	}
	freeReq := func(addr uint64) Event { return Event{Action: ActionFreeRequested, Addr: addr, Size: 512} }
	freeDone := func(addr uint64) Event { return Event{Action: ActionFreeCompleted, Addr: addr, Size: 512} }
	tests := []struct {
		name    string
		history []Event
		states  [2]string // of the blocks at a and a+512
		want    [2]string // their regions
	}{
		{"held", []Event{alloc(a, "conv1"), alloc(a+512, "fc")},
			[2]string{StateActiveAllocated, StateActiveAllocated}, [2]string{"conv1", "fc"}},
		{"pending free keeps it", []Event{alloc(a, "conv1"), freeReq(a)},
			[2]string{StateActivePendingFree, StateInactive}, [2]string{"conv1", ""}},
		{"freed, then allocated with another", []Event{alloc(a, "conv1"), freeReq(a), freeDone(a), alloc(a, "fc")},
			[2]string{StateActiveAllocated, StateInactive}, [2]string{"fc", ""}},
		{"freed, then allocated without", []Event{alloc(a, "conv1"), freeReq(a), freeDone(a), alloc(a, "")},
			[2]string{StateActiveAllocated, StateInactive}, [2]string{"", ""}},
		{"freed: the free block has none", []Event{alloc(a, "conv1"), alloc(a+512, "fc"), freeReq(a + 512), freeDone(a + 512)},
			[2]string{StateActiveAllocated, StateInactive}, [2]string{"conv1", ""}},
		{"allocated before the history", []Event{alloc(a+512, "fc")},
			[2]string{StateActiveAllocated, StateActiveAllocated}, [2]string{"", "fc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{Segments: []Segment{{Addr: a, Size: 2 << 20, Pool: PoolSmall, Blocks: []Block{
				{Addr: a, Size: 512, State: tc.states[0]},
				{Addr: a + 512, Size: 512, State: tc.states[1]},
				{Addr: a + 1024, Size: 2<<20 - 1024, State: StateInactive},
			}}}, History: tc.history}
			for i := range s.Segments[0].Blocks[:2] {
				if b := &s.Segments[0].Blocks[i]; b.State != StateInactive {
					b.Requested = 512
				}
			}
			got, err := ReadPickle(bytes.NewReader(picklePy(4, torchSnapshot(s))))
			if err != nil {
				t.Fatal(err)
			}
			blocks := got[0].Segments[0].Blocks
			for i, want := range tc.want {
				if blocks[i].Region != want {
					t.Errorf("block %d (%s): region %q, want %q", i, blocks[i].State, blocks[i].Region, want)
				}
			}
			if r := blocks[2].Region; r != "" {
				t.Errorf("free block: region %q", r)
			}
		})
	}
}

// TestReadPickleBlockHistory checks the blocks of PyTorch before 2.1,
// which carry their stacks and requested sizes only in a "history" list,
// newest first: the stack and size of a held block come from its newest
// entry at its own address, and a missing requested size is never 0.
func TestReadPickleBlockHistory(t *testing.T) {
	const a = 139638008184832
	frames1 := []Frame{{Function: "forward", File: "train.py", Line: 42}, {Function: "<module>", File: "train.py", Line: 7}}
	frames2 := append([]Frame{{Function: "c10::cuda::CUDACachingAllocator::malloc", File: "??"}}, frames1...)
	fixture, err := ReadPickle(bytes.NewReader(readFile(t, "snapshot_v20_p4.pickle")))
	if err != nil {
		t.Fatal(err)
	}
	if len(fixture) != 1 || len(fixture[0].Segments) != 1 || fixture[0].Truncated {
		t.Fatalf("got %d snapshots, want one with one segment and a complete history", len(fixture))
	}
	if got, want := fixture[0].Requested(), int64(37632+1000+300); got != want {
		t.Errorf("Requested() = %d, want %d", got, want)
	}
	blocks := fixture[0].Segments[0].Blocks

	// In-memory variants of one held block.
	frame := &pyDictW{{"filename", "x.py"}, {"line", 5}, {"name", "f"}}
	one := func(b *pyDictW) []Block {
		t.Helper()
		seg := &pyDictW{{"address", int64(a)}, {"total_size", 4096}, {"segment_type", "small"}, {"blocks", &pyListW{b}}}
		snaps, err := ReadPickle(bytes.NewReader(picklePy(4, &pyListW{seg})))
		if err != nil {
			t.Fatal(err)
		}
		return snaps[0].Segments[0].Blocks
	}
	hist := func(addr int64, real int) [2]any {
		return [2]any{"history", &pyListW{&pyDictW{{"addr", addr}, {"real_size", real}, {"frames", &pyListW{frame}}}}}
	}
	xframes := []Frame{{Function: "f", File: "x.py", Line: 5}}
	tests := []struct {
		name          string
		got           Block
		wantRequested int64
		wantFrames    []Frame
	}{
		{"2.0 allocated", blocks[0], 37632, frames1},
		{"2.0 merged: newest entry", blocks[1], 1000, frames2},
		{"1.13 no requested_size", blocks[2], 300, frames1},
		{"2.0 inactive keeps no stack", blocks[3], 0, nil},
		{"no requested_size, no history", one(&pyDictW{{"size", 4096}, {"state", "active_allocated"}})[0], 4096, nil},
		{"history of another address", one(&pyDictW{{"size", 4096}, {"state", "active_allocated"}, hist(a+512, 10)})[0], 4096, nil},
		{"real_size beyond the block", one(&pyDictW{{"size", 4096}, {"state", "active_allocated"}, hist(a, 5000)})[0], 4096, xframes},
		{"frames win over history", one(&pyDictW{{"size", 4096}, {"requested_size", 7}, {"state", "active_allocated"},
			{"frames", &pyListW{}}, hist(a, 10)})[0], 7, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got.Requested != tc.wantRequested {
				t.Errorf("Requested = %d, want %d", tc.got.Requested, tc.wantRequested)
			}
			if !reflect.DeepEqual(tc.got.Frames, tc.wantFrames) {
				t.Errorf("Frames = %+v, want %+v", tc.got.Frames, tc.wantFrames)
			}
		})
	}

	bad := &pyDictW{{"address", int64(a)}, {"total_size", 4096}, {"segment_type", "small"}, {"blocks", &pyListW{
		&pyDictW{{"size", 4096}, {"state", "active_allocated"}, {"history", 3}}}}}
	if _, err := ReadPickle(bytes.NewReader(picklePy(4, &pyListW{bad}))); err == nil || !strings.Contains(err.Error(), `segments[0].blocks[0].history: is an int, want a list`) {
		t.Errorf("history of an int: err = %v", err)
	}
}

// TestReadPickleSavedOtherwise checks snapshots saved with torch.save
// rather than _dump_snapshot, and the errors for what users pickle by
// mistake: each names what the file holds and what to save instead.
func TestReadPickleSavedOtherwise(t *testing.T) {
	torchSave := readFile(t, "snapshot_torchsave.pt")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(torchSave)
	zw.Close()
	zipOf := func(name string, data []byte) []byte {
		var b bytes.Buffer
		w := zip.NewWriter(&b)
		f, _ := w.Create(name)
		f.Write(data)
		w.Close()
		return b.Bytes()
	}
	legacy := append(pk().proto(2).op(opLong1, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19).stop(), picklePy(2, &pyDictW{{"segments", &pyListW{}}})...)
	statsDict := picklePy(4, &pyDictW{{"active.all.current", 3}, {"allocated_bytes.all.current", 1024}, {"num_ooms", 0}})
	tests := []struct {
		name    string
		in      []byte
		want    []*Snapshot // when wantErr is ""
		wantErr string
	}{
		{"torch.save", torchSave, expectedPickleSnapshots(t), ""},
		{"torch.save, gzip", gz.Bytes(), expectedPickleSnapshots(t), ""},
		{"torch.save, deflated", zipOf("archive/data.pkl", readFile(t, "snapshot_p2.pickle")), expectedPickleSnapshots(t), ""},
		{"zip without data.pkl", zipOf("archive/x.txt", []byte("x")), nil, "a zip archive without a data.pkl record"},
		{"data.pkl too deep", zipOf("a/b/data.pkl", readFile(t, "snapshot_p2.pickle")), nil, "a zip archive without a data.pkl record"},
		{"corrupt data.pkl", zipOf("archive/data.pkl", readFile(t, "corrupt.pickle")), nil, "offset 11: in archive/data.pkl of the zip archive (torch.save): pickle: unknown opcode 0xff"},
		{"zip cut short", torchSave[:len(torchSave)/2], nil, "a zip archive that cannot be read"},
		{"legacy torch.save", legacy, nil, "the pickle holds a large int, as torch.save files of the format before PyTorch 1.6"},
		{"memory_stats()", readFile(t, "memory_stats.pickle"), nil, "unsupported opcode STACK_GLOBAL (the Python class or function collections.OrderedDict): only plain data (dicts, lists, tuples, numbers, strings) can be read (torch.cuda.memory_stats() returns"},
		{"memory_stats() protocol 2", pk().proto(2).op('c').op([]byte("collections\nOrderedDict\n")...).op(opEmptyTuple).stop(), nil, "unsupported opcode GLOBAL (the Python class or function collections.OrderedDict)"},
		{"dict(memory_stats())", statsDict, nil, `no "segments" or "device_traces" key: it holds the counters of torch.cuda.memory_stats()`},
		{"other object", readFile(t, "object.pickle"), nil, "(the Python class or function collections.OrderedDict)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadPickle(bytes.NewReader(tc.in))
			if tc.wantErr != "" {
				var pe *ParseError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &pe) {
					t.Fatalf("err = %v, want a *ParseError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %d snapshots, want %d equal to the fixture's", len(got), len(tc.want))
			}
			f, err := Read(bytes.NewReader(tc.in), "snap.pt")
			if err != nil || f.Kind != KindPickle || !reflect.DeepEqual(f.Snapshots, tc.want) {
				t.Errorf("Read: kind %v, err %v", f.Kind, err)
			}
		})
	}
}

// TestReadPickleInvalidSegmentIndex checks that a segment that breaks the
// snapshot's rules is named by its index in the pickle's "segments" list,
// whatever the order of the addresses and devices there.
func TestReadPickleInvalidSegmentIndex(t *testing.T) {
	const a = 0x7f0000000000
	const m = 2 << 20
	block := func(addr uint64, size int64) *pyDictW {
		return &pyDictW{{"address", addr}, {"size", size}, {"requested_size", size}, {"state", StateActiveAllocated}}
	}
	seg := func(dev int, addr uint64, blocks ...*pyDictW) *pyDictW {
		l := pyListW{}
		for _, b := range blocks {
			l = append(l, b)
		}
		return &pyDictW{{"device", dev}, {"address", addr}, {"total_size", int64(m)}, {"stream", 0}, {"segment_type", PoolLarge}, {"blocks", &l}}
	}
	tests := []struct {
		name     string
		segs     pyListW
		dev, idx int
		block    int
		want     string
	}{
		{"no blocks, after a segment at a higher address", pyListW{seg(0, a+4*m, block(a+4*m, m)), seg(0, a)},
			0, 1, -1, "device 0: invalid snapshot: segment 1: blocks cover"},
		{"a block outside its segment", pyListW{seg(0, a+4*m, block(a+4*m, m)), seg(0, a+2*m, block(a+2*m, m)), seg(0, a, block(a+8*m, m))},
			0, 2, 0, "invalid snapshot: segment 2, block 0: starts at 0x7f0001000000, want 0x7f0000000000"},
		{"the second device's segment", pyListW{seg(1, a+4*m, block(a+4*m, m)), seg(0, a, block(a, m)), seg(1, a, block(a, m/2))},
			1, 2, -1, "device 1: invalid snapshot: segment 2: blocks cover"},
		{"overlap", pyListW{seg(0, a+m/2, block(a+m/2, m)), seg(0, a, block(a, m))},
			0, 0, -1, "segment 0: at 0x7f0000100000 starts before the previous segment ends"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			segs := tc.segs
			_, err := ReadPickle(bytes.NewReader(picklePy(4, &pyDictW{{"segments", &segs}})))
			var ie *InvalidSnapshotError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an *InvalidSnapshotError", err)
			}
			if ie.Segment != tc.idx || ie.Block != tc.block || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q (segment %d, block %d), want segment %d, block %d and %q", err, ie.Segment, ie.Block, tc.idx, tc.block, tc.want)
			}
		})
	}
}

// TestReadPickleEventKeys checks that a trace entry without the address or
// size PyTorch always writes is refused with its place in the file, rather
// than read as an event at address 0 or an out-of-memory error asking for
// 0 bytes; a snapshot marker needs neither.
func TestReadPickleEventKeys(t *testing.T) {
	tests := []struct {
		name  string
		entry pyDictW
		want  string // "" for no error
	}{
		{"oom without anything", pyDictW{{"action", "oom"}}, `device_traces[0][1]: oom entry has no "device_free" key`},
		{"oom without size", pyDictW{{"action", "oom"}, {"device_free", 1 << 20}}, `device_traces[0][1]: oom entry has no "size" key`},
		{"oom with addr, not device_free", pyDictW{{"action", "oom"}, {"addr", 0}, {"size", 1 << 20}}, `oom entry has no "device_free" key`},
		{"alloc without addr", pyDictW{{"action", "alloc"}, {"size", 512}}, `alloc entry has no "addr" key`},
		{"free_requested without size", pyDictW{{"action", "free_requested"}, {"addr", 4096}}, `free_requested entry has no "size" key`},
		{"segment_map without addr", pyDictW{{"action", "segment_map"}, {"size", 2 << 20}}, `segment_map entry has no "addr" key`},
		{"oom", pyDictW{{"action", "oom"}, {"device_free", 1 << 20}, {"size", 4 << 20}}, ""},
		{"snapshot marker", pyDictW{{"action", "snapshot"}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entry := tc.entry
			first := pyDictW{{"action", "segment_alloc"}, {"addr", 4096}, {"size", 2 << 20}}
			trace := pyListW{&first, &entry}
			snaps, err := ReadPickle(bytes.NewReader(picklePy(4, &pyDictW{{"device_traces", &pyListW{&trace}}})))
			if tc.want == "" {
				if err != nil || len(snaps) != 1 || len(snaps[0].History) != 2 {
					t.Fatalf("err = %v, snapshots %v", err, snaps)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a *ParseError containing %q", err, tc.want)
			}
		})
	}
}

// TestReadPicklePrivatePool checks that a segment keeps the private pool
// PyTorch records as its segment_pool_id: a CUDA graph's (n, 0), a
// torch.cuda.MemPool's (0, n), none (0, 0); and that a pool id of
// another shape is an error.
func TestReadPicklePrivatePool(t *testing.T) {
	const a = 139638008184832
	pools := [][2]uint64{{0, 0}, {1, 0}, {0, 3}, {1 << 63, 7}}
	s := &Snapshot{}
	for i, p := range pools {
		addr := uint64(a + i*(2<<20))
		s.Segments = append(s.Segments, Segment{Addr: addr, Size: 2 << 20, Pool: PoolSmall, PrivatePool: p,
			Blocks: []Block{{Addr: addr, Size: 2 << 20, State: StateInactive}}})
	}
	got, err := ReadPickle(bytes.NewReader(picklePy(4, torchSnapshot(s))))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range pools {
		if p := got[0].Segments[i].PrivatePool; p != want {
			t.Errorf("segment %d: private pool %v, want %v", i, p, want)
		}
	}
	segment := func(pool func(b pickleBuilder) pickleBuilder) []byte {
		b := pk().proto(2).op(opEmptyDict).str("segments").op(opEmptyList).op(opEmptyDict).
			str("address").int(4096).op(opSetItem).str("total_size").int(512).op(opSetItem).
			str("segment_type").str("small").op(opSetItem).str("blocks").op(opEmptyList).op(opSetItem).
			str("segment_pool_id")
		return pool(b).op(opSetItem).op(opAppend).op(opSetItem).stop()
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"an int", segment(func(b pickleBuilder) pickleBuilder { return b.int(1) }), `segments[0]: "segment_pool_id" is an int, want a tuple of two ints`},
		{"one int", segment(func(b pickleBuilder) pickleBuilder { return b.int(1).op(opTuple1) }), `segments[0]: "segment_pool_id" has 1 items, want 2`},
		{"a negative id", segment(func(b pickleBuilder) pickleBuilder { return b.int(1).int(-1).op(opTuple2) }), `segments[0]: "segment_pool_id"[1] is negative (-1)`},
		{"a str", segment(func(b pickleBuilder) pickleBuilder { return b.int(1).str("x").op(opTuple2) }), `segments[0]: "segment_pool_id"[1] is a str, want an int`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadPickle(bytes.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
