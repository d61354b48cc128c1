package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// sampleSnapshot is a small valid snapshot exercising every field.
func sampleSnapshot() *Snapshot {
	fr := []Frame{{Function: "main.train", File: "train.go", Line: 42}, {Function: `odd "name" <&>`, File: "ü\u2028\x01.go", Line: 0}}
	const a, b = 139638008184832, 139640000000000
	return &Snapshot{
		Device:   1,
		Capacity: 150 << 30,
		Config:   "expandable_segments:True,max_split_size_mb:512",
		Meta:     map[string]string{"source": "vram", "card": "NVIDIA H200", "": "empty key"},
		Segments: []Segment{
			{Addr: a, Size: 2 << 20, Stream: 0, Pool: PoolSmall, Blocks: []Block{
				{Addr: a, Size: 512, Requested: 100, State: StateActiveAllocated, Region: "conv1", Frames: fr},
				{Addr: a + 512, Size: 1024, Requested: 1000, State: StateActivePendingFree},
				{Addr: a + 1536, Size: 2<<20 - 1536, State: StateInactive},
			}},
			{Addr: b, Size: 20 << 20, Stream: 94000000000000, Pool: PoolLarge, Expandable: true, Blocks: []Block{
				{Addr: b, Size: 20 << 20, Requested: 20 << 20, State: StateActiveAllocated, Frames: fr[:1]},
			}},
		},
		History: []Event{
			{Action: ActionSegmentAlloc, Addr: a, Size: 2 << 20, TimeUS: 1},
			{Action: ActionAlloc, Addr: a, Size: 100, Region: "conv1", Frames: fr, TimeUS: 2},
			{Action: ActionAlloc, Addr: a + 512, Size: 1000},
			{Action: ActionFreeRequested, Addr: a + 512, Size: 1000},
			{Action: ActionSegmentMap, Addr: b, Size: 20 << 20, Stream: 94000000000000},
			{Action: ActionAlloc, Addr: b, Size: 20 << 20, Stream: 94000000000000},
			{Action: ActionOOM, Addr: 1 << 30, Size: 1 << 40},
			{Action: ActionSnapshot},
		},
	}
}

func TestJSONRoundTrip(t *testing.T) {
	// A segment of a CUDA graph's private pool.
	const a = 139638008184832
	graph := &Snapshot{Segments: []Segment{{Addr: a, Size: 2 << 20, Pool: PoolSmall, PrivatePool: [2]uint64{1, 0},
		Blocks: []Block{{Addr: a, Size: 2 << 20, State: StateInactive}}}}}
	for _, s := range []*Snapshot{sampleSnapshot(), {}, {Device: 3, Truncated: true}, graph} {
		var buf bytes.Buffer
		if err := WriteJSON(&buf, s); err != nil {
			t.Fatal(err)
		}
		if !json.Valid(buf.Bytes()) {
			t.Fatalf("WriteJSON wrote invalid JSON:\n%s", buf.Bytes())
		}
		got, err := ReadJSON(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%v\n%s", err, buf.Bytes())
		}
		want := *s
		if len(want.Meta) == 0 {
			want.Meta = map[string]string{} // written as {}, read back empty
		}
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("round trip differs:\n got %+v\nwant %+v", got, &want)
		}
	}
}

func TestWriteJSONLayout(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleSnapshot()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if lines[1] != `  "format": "vram-memory-snapshot",` || lines[2] != `  "version": 1,` {
		t.Errorf("header lines %q", lines[:3])
	}
	// One line per segment, block and event.
	if n := strings.Count(buf.String(), `{"action"`); n != 8 {
		t.Errorf("%d history lines, want 8", n)
	}
	for _, l := range lines {
		if strings.Count(l, `"action"`) > 1 || strings.Count(l, `"requested_size"`) > 1 {
			t.Errorf("line holds more than one entry: %s", l)
		}
	}
	// encoding/json reads the same strings back.
	var generic map[string]any
	if err := json.Unmarshal(buf.Bytes(), &generic); err != nil {
		t.Fatal(err)
	}
	if generic["config"] != sampleSnapshot().Config {
		t.Errorf("config = %v", generic["config"])
	}
}

func TestWriteJSONRejectsInvalid(t *testing.T) {
	s := sampleSnapshot()
	s.Segments[0].Blocks[1].Size++
	var buf bytes.Buffer
	err := WriteJSON(&buf, s)
	var ie *InvalidSnapshotError
	if !errors.As(err, &ie) || buf.Len() != 0 {
		t.Errorf("err = %v, wrote %d bytes; want *InvalidSnapshotError and nothing written", err, buf.Len())
	}
}

func TestReadJSONErrors(t *testing.T) {
	valid := func(edit func(m map[string]any)) string {
		var buf bytes.Buffer
		if err := WriteJSON(&buf, sampleSnapshot()); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name, in string
		want     string // substring of the message
		invalid  bool   // wraps an *InvalidSnapshotError
	}{
		{"empty", "", "unexpected EOF", false},
		{"array", "[1]", "top level is not a JSON object", false},
		{"other format", `{"format": "chrome-trace", "version": 1}`, `format "chrome-trace", want "vram-memory-snapshot"`, false},
		{"no format", `{"version": 1}`, `no "format" key`, false},
		{"no version", `{"format": "vram-memory-snapshot"}`, `no "version" key`, false},
		{"version 2", `{"format": "vram-memory-snapshot", "version": 2}`, "unsupported version 2", false},
		{"version float", `{"format": "vram-memory-snapshot", "version": 1.5}`, "unsupported version 1.5", false},
		{"version string", `{"format": "vram-memory-snapshot", "version": "1"}`, `key "version": "1" is not a number: the version is the JSON number 1`, false},
		{"version null", `{"format": "vram-memory-snapshot", "version": null}`, `key "version": null is not a number`, false},
		{"version list", `{"format": "vram-memory-snapshot", "version": [1]}`, `key "version": [1] is not a number`, false},
		// The value is quoted as one line: without its blanks and line
		// breaks, and with invalid UTF-8 replaced.
		{"version list over lines", "{\"format\": \"vram-memory-snapshot\", \"version\": [\n\t1,\r\n 2\n]}", `key "version": [1,2] is not a number`, false},
		{"version string of invalid UTF-8", "{\"format\": \"vram-memory-snapshot\", \"version\": \"\xff\"}", "key \"version\": \"\uFFFD\" is not a number", false},
		{"block size 0", `{"format": "vram-memory-snapshot", "version": 1, "segments": [{"address": 4096, "size": 512, "pool": "small", "blocks": [{}, {}]}]}`,
			"segment 0, block 0: size 0 at 0x0 is not positive", true},
		{"block state", `{"format": "vram-memory-snapshot", "version": 1, "segments": [{"address": 4096, "size": 512, "pool": "small", "blocks": [{"address": 4096, "size": 512, "state": "zombie"}]}]}`,
			`segment 0, block 0: unknown state "zombie"`, true},
		{"negative event size", `{"format": "vram-memory-snapshot", "version": 1, "history": [{"action": "alloc", "size": -5}]}`, "history event 0: negative size -5", true},
		{"deep nesting", `{"format": "vram-memory-snapshot", "version": 1, "x": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`, "exceeded max depth", false},
		{"trailing", `{"format": "vram-memory-snapshot", "version": 1} {}`, "unexpected data after the snapshot", false},
		{"truncated", `{"format": "vram-memory-snapshot", "version": 1, "segments": [`, "unexpected EOF", false},
		{"wrong type", `{"format": "vram-memory-snapshot", "version": 1, "device": "0"}`, `key "device"`, false},
		{"negative address", `{"format": "vram-memory-snapshot", "version": 1, "history": [{"action": "alloc", "address": -1}]}`, `key "history"`, false},
		{"bad action", `{"format": "vram-memory-snapshot", "version": 1, "history": [{"action": "allocx"}]}`, `unknown action "allocx"`, false},
		{"missing action", `{"format": "vram-memory-snapshot", "version": 1, "history": [{"size": 1}]}`, "history event 0: invalid action 0", true},
		{"gap", valid(func(m map[string]any) {
			segs := m["segments"].([]any)
			blocks := segs[0].(map[string]any)["blocks"].([]any)
			blocks[1].(map[string]any)["address"] = 139638008184832 + 1024
		}), "segment 0, block 1: starts at 0x7f0001e00400, want 0x7f0001e00200", true},
		{"bad pool", valid(func(m map[string]any) {
			m["segments"].([]any)[1].(map[string]any)["pool"] = "huge"
		}), `segment 1: pool "huge"`, true},
		{"negative device", valid(func(m map[string]any) { m["device"] = -1 }), "negative device -1", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadJSON(strings.NewReader(tc.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParseError", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r\t") || !utf8.ValidString(err.Error()) {
				t.Errorf("err = %q, want one line of text", err)
			}
			if pe.Kind != KindJSON || !strings.HasPrefix(err.Error(), "trace: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q (kind %v), want it to contain %q", err, pe.Kind, tc.want)
			}
			var ie *InvalidSnapshotError
			if errors.As(err, &ie) != tc.invalid {
				t.Errorf("wraps *InvalidSnapshotError = %v, want %v", !tc.invalid, tc.invalid)
			}
			if strings.Count(err.Error(), "trace:") != 1 {
				t.Errorf("prefix repeated: %q", err)
			}
		})
	}
}

func TestReadJSONTolerates(t *testing.T) {
	// Any key order, unknown keys, missing optional keys.
	in := `{"future": {"x": [1, 2]}, "history": [{"action": "snapshot"}], "version": 1,
	        "segments": [{"blocks": [{"state": "inactive", "size": 512, "address": 4096, "extra": 1}],
	                      "address": 4096, "size": 512, "pool": "small"}],
	        "format": "vram-memory-snapshot"}`
	s, err := ReadJSON(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := &Snapshot{
		Segments: []Segment{{Addr: 4096, Size: 512, Pool: PoolSmall, Blocks: []Block{{Addr: 4096, Size: 512, State: StateInactive}}}},
		History:  []Event{{Action: ActionSnapshot}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
}

func TestReadJSONUnderlyingError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := ReadJSON(io.MultiReader(strings.NewReader(`{"format": "vram-memory-snapshot", "version": 1, "history": [`), errReader{boom}))
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want it to wrap %v", err, boom)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\ nl\n cr\r tab\t", "\x00\x1f\x7f", "<a&b>", "é€𝄞", "\u2028\u2029", "bad\xffutf8\xc3"} {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%q: invalid JSON %s: %v", s, b, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if got != want {
			t.Errorf("%q: decoded %q, want %q", s, got, want)
		}
	}
}

func TestReadJSONSharesStacks(t *testing.T) {
	s := sampleSnapshot()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Block 0 and event 1 carry equal stacks: one slice.
	b, e := got.Segments[0].Blocks[0].Frames, got.History[1].Frames
	if len(b) != 2 || &b[0] != &e[0] {
		t.Error("equal stacks are not shared")
	}
	in := &stackInterner{m: map[string][]Frame{}}
	x := in.intern([]Frame{{Function: "a\x00", File: "b"}})
	y := in.intern([]Frame{{Function: "a", File: "\x00b"}})
	if &x[0] == &y[0] {
		t.Error("different stacks share a key")
	}
}
