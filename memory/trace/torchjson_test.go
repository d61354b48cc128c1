package trace

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// recordedJSON are snapshots that PyTorch recorded, saved with json.dump by
// analyze/testdata/pickles_to_json.py beside the pickles of the same dicts.
var recordedJSON = []string{
	"pytorch_oom_fragmented",          // an OOM, Python and C++ stacks
	"pytorch_v_oom_fragmented_python", // stacks="python"
	"pytorch_v_oom_train_expandable",  // expandable segments
	"pytorch_v_train_ring_wrapped",    // stacks="all", a wrapped history
}

// TestPyTorchJSONMatchesPickle checks that a snapshot saved with json.dump
// reads as the pickle of the same dict does.
func TestPyTorchJSONMatchesPickle(t *testing.T) {
	for _, name := range recordedJSON {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "analyze", "testdata")
			pf, err := Open(filepath.Join(dir, name+".pickle.gz"))
			if err != nil {
				t.Fatal(err)
			}
			jf, err := Open(filepath.Join(dir, name+".json.gz"))
			if err != nil {
				t.Fatal(err)
			}
			if jf.Kind != KindPyTorchJSON || !jf.Gzipped || jf.Events != nil || jf.Header != nil {
				t.Errorf("kind %v, gzipped %v, %d events, header %q", jf.Kind, jf.Gzipped, len(jf.Events), jf.Header)
			}
			if len(jf.Snapshots) == 0 || len(jf.Snapshots) != len(pf.Snapshots) {
				t.Fatalf("%d snapshots from JSON, %d from the pickle", len(jf.Snapshots), len(pf.Snapshots))
			}
			for i, want := range pf.Snapshots {
				got := jf.Snapshots[i]
				if len(got.History) == 0 || len(got.Segments) == 0 {
					t.Errorf("device %d: %d events, %d segments", got.Device, len(got.History), len(got.Segments))
				}
				if !reflect.DeepEqual(got, want) {
					var g, w bytes.Buffer
					WriteJSON(&g, got)
					WriteJSON(&w, want)
					gl, wl := strings.Split(g.String(), "\n"), strings.Split(w.String(), "\n")
					for j := range min(len(gl), len(wl)) {
						if gl[j] != wl[j] {
							t.Fatalf("device %d differs at line %d of their vram JSON:\n got %.300s\nwant %.300s", want.Device, j+1, gl[j], wl[j])
						}
					}
					t.Fatalf("device %d differs (%d and %d lines of vram JSON)", want.Device, len(gl), len(wl))
				}
			}
		})
	}
}

// TestReadPyTorchJSON reads hand-written PyTorch snapshots saved as JSON.
func TestReadPyTorchJSON(t *testing.T) {
	const seg = `{"device": 0, "address": 4096, "total_size": 2097152, "stream": 0, "segment_type": "small", "segment_pool_id": [0, 0], "is_expandable": false,
		"blocks": [{"address": 4096, "size": 512, "requested_size": 500, "state": "active_allocated", "frames": [{"name": "f", "filename": "a.py", "line": 3}]},
		           {"address": 4608, "size": 2096640, "state": "inactive"}]}`
	const seg1 = `{"device": 1, "address": 8192, "total_size": 1024, "segment_type": "large", "blocks": [{"size": 1024, "state": "active_pending_free"}]}`
	frames := []Frame{{Function: "f", File: "a.py", Line: 3}}
	dev0 := &Snapshot{Device: 0, Meta: map[string]string{MetaSource: "pytorch"}, Truncated: true, Segments: []Segment{{Addr: 4096, Size: 2097152, Pool: "small",
		Blocks: []Block{{Addr: 4096, Size: 512, Requested: 500, State: StateActiveAllocated, Frames: frames}, {Addr: 4608, Size: 2096640, State: StateInactive}}}}}
	dev1 := &Snapshot{Device: 1, Meta: map[string]string{MetaSource: "pytorch"}, Truncated: true, Segments: []Segment{{Addr: 8192, Size: 1024, Pool: "large",
		Blocks: []Block{{Addr: 8192, Size: 1024, Requested: 1024, State: StateActivePendingFree}}}}}
	withHistory := func(s Snapshot, config string, meta map[string]string, h ...Event) *Snapshot {
		s.Config, s.History = config, h
		s.Meta = map[string]string{MetaSource: "pytorch"}
		for k, v := range meta {
			s.Meta[k] = v
		}
		return &s
	}
	tests := []struct {
		name string
		in   string
		want []*Snapshot
	}{
		{"dict", `{"segments": [` + seg + `, ` + seg1 + `], "device_traces": [], "allocator_settings": {}, "external_annotations": []}`, []*Snapshot{dev0, dev1}},
		{"bare list of segments", ` [` + seg1 + `, ` + seg + `]`, []*Snapshot{dev0, dev1}},
		{"empty list", `[]`, []*Snapshot{}},
		{"no segments, empty traces", `{"device_traces": [[], []]}`, []*Snapshot{}},
		{"keys in any order", `{"external_annotations": [{"x": [[[]]]}], "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "max_split_size": -1, "garbage_collection_threshold": 0.0, "expandable_segments": true,
			"roundup_power2_divisions": {"1": 0, "2": 0}, "last": [1, 2.5, null, "s"]},
			"device_traces": [[{"action": "alloc", "addr": 4096, "size": 500, "stream": 0, "time_us": 7, "frames": [{"name": "f", "filename": "a.py", "line": 3}], "user_metadata": "fwd", "compile_context": "N/A"},
			{"action": "user_defined", "addr": 0, "size": 0, "stream": 0, "time_us": 8, "frames": [{"name": "step", "filename": "START", "line": 0}]},
			{"action": "oom", "device_free": 1024, "size": 1048576, "stream": 0, "time_us": 9, "frames": []}]],
			"segments": [` + seg + `], "history": "ignored", "version": "ignored"}`,
			[]*Snapshot{withHistory(Snapshot{Truncated: true, Segments: []Segment{{Addr: 4096, Size: 2097152, Pool: "small",
				Blocks: []Block{{Addr: 4096, Size: 512, Requested: 500, State: StateActiveAllocated, Frames: frames, Region: "fwd"}, {Addr: 4608, Size: 2096640, State: StateInactive}}}}},
				"expandable_segments:True", map[string]string{
					"allocator_settings.max_split_size": "-1", "allocator_settings.garbage_collection_threshold": "0.0", "allocator_settings.expandable_segments": "True",
					"allocator_settings.roundup_power2_divisions": "{1: 0, 2: 0}", "allocator_settings.last": "[1, 2.5, None, s]"},
				Event{Action: ActionAlloc, Addr: 4096, Size: 500, TimeUS: 7, Frames: frames, Region: "fwd"},
				Event{Action: ActionOOM, Addr: 1024, Size: 1048576, TimeUS: 9})}},
		{"later duplicate key wins", `{"segments": [` + seg + `], "segments": [` + seg1 + `]}`, []*Snapshot{dev1}},
		{"addresses up to 2^64-1", `{"device_traces": [[{"action": "free_completed", "addr": 18446744073709551615, "size": 1, "stream": 18}]]}`,
			[]*Snapshot{withHistory(Snapshot{Truncated: true}, "", nil, Event{Action: ActionFreeCompleted, Addr: 1<<64 - 1, Size: 1, Stream: 18})}},
		{"escapes and a BOM", "\ufeff" + `{"device_traces": [[{"action": "alloc", "addr": 4096, "size": 1, "frames": [{"name": "caf\u00e9 \ud83d\ude00", "filename": "a\\b\"c", "line": 1}]}]]}`,
			[]*Snapshot{withHistory(Snapshot{}, "", nil, Event{Action: ActionAlloc, Addr: 4096, Size: 1, Frames: []Frame{{Function: "café 😀", File: `a\b"c`, Line: 1}}})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, in := range [][]byte{[]byte(tc.in), gz([]byte(tc.in))} {
				f, err := Read(bytes.NewReader(in), "s.json")
				if err != nil {
					t.Fatal(err)
				}
				if f.Kind != KindPyTorchJSON || f.Name != "s.json" {
					t.Errorf("kind %v, name %q", f.Kind, f.Name)
				}
				if !reflect.DeepEqual(f.Snapshots, tc.want) {
					t.Errorf("got\n%s\nwant\n%s", dumpSnapshots(f.Snapshots), dumpSnapshots(tc.want))
				}
			}
		})
	}
}

// dumpSnapshots writes snapshots as vram JSON, for a test's message.
func dumpSnapshots(snaps []*Snapshot) string {
	var b bytes.Buffer
	for _, s := range snaps {
		b.WriteString(s.Config + " " + strings.TrimSpace(strings.ReplaceAll(strings.Join(mapLines(s.Meta), ","), "\n", " ")) + "\n")
		WriteJSON(&b, s)
	}
	return b.String()
}

func mapLines(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// TestReadPyTorchJSONErrors checks that JSON which is neither a vram
// snapshot nor a PyTorch one, or is a hostile one, fails with a one-line
// *ParseError and no panic.
func TestReadPyTorchJSONErrors(t *testing.T) {
	ev := func(s string) string { return `{"device_traces": [[` + s + `]]}` }
	sg := func(s string) string { return `{"segments": [` + s + `]}` }
	tests := []struct {
		name string
		in   string
		want string
		kind Kind
	}{
		{"empty object", `{}`, `not a vram memory snapshot: no "format" key (want "vram-memory-snapshot"), nor a PyTorch snapshot (no "segments" or "device_traces" key)`, KindJSON},
		{"unrelated object", `{"a": [1, 2], "b": {"c": null}}`, `no "format" key`, KindJSON},
		{"other format", `{"segments": [], "format": "other"}`, `not a vram memory snapshot: format "other", want "vram-memory-snapshot"`, KindJSON},
		{"other format first", `{"format": "other", "segments": []}`, `not a vram memory snapshot: format "other"`, KindJSON},
		{"vram format, PyTorch layout", `{"segments": [{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": [{"size": 512, "state": "inactive"}]}], "format": "vram-memory-snapshot", "version": 1}`,
			"invalid snapshot: segment 0: size 0 at 0x1000 is not positive", KindJSON},
		{"array of numbers", `[1, 2]`, "not a PyTorch memory snapshot: segments[0]: is an int, want a dict", KindPyTorchJSON},
		{"array of arrays", `[[]]`, "segments[0]: is a list, want a dict", KindPyTorchJSON},
		{"segments not a list", `{"segments": {"a": 1}}`, "segments: is a dict, want a list", KindPyTorchJSON},
		{"segments a string", `{"segments": "x"}`, "segments: is a str, want a list", KindPyTorchJSON},
		{"device_traces not a list", `{"device_traces": 1.5}`, "device_traces: is a float, want a list", KindPyTorchJSON},
		{"trace not a list", `{"device_traces": [{}]}`, "device_traces[0]: is a dict, want a list", KindPyTorchJSON},
		{"event not a dict", ev(`true`), "device_traces[0][0]: is a bool, want a dict", KindPyTorchJSON},
		{"action not a str", ev(`{"action": 1}`), `device_traces[0][0]: "action" is an int, want a str`, KindPyTorchJSON},
		{"unknown action", ev(`{"action": "alloc2", "addr": 1, "size": 1}`), `unknown action "alloc2"`, KindPyTorchJSON},
		{"size a string", ev(`{"action": "alloc", "addr": 4096, "size": "512"}`), `"size" is a str, want an int`, KindPyTorchJSON},
		{"size a float", ev(`{"action": "alloc", "addr": 4096, "size": 512.0}`), `"size" is a float, want an int`, KindPyTorchJSON},
		{"size null", ev(`{"action": "alloc", "addr": 4096, "size": null}`), `alloc entry's "size" is None`, KindPyTorchJSON},
		{"negative size", ev(`{"action": "alloc", "addr": 4096, "size": -1}`), "negative size -1", KindPyTorchJSON},
		{"huge size", ev(`{"action": "alloc", "addr": 4096, "size": 9223372036854775808}`), `"size" is too large`, KindPyTorchJSON},
		{"huger size", ev(`{"action": "alloc", "addr": 4096, "size": 123456789012345678901234567890}`), `"size" is too large`, KindPyTorchJSON},
		{"size beyond float64", ev(`{"action": "alloc", "addr": 4096, "size": 1e999}`), `"size" is a float, want an int`, KindPyTorchJSON},
		{"address beyond 64 bits", ev(`{"action": "alloc", "addr": 18446744073709551616, "size": 1}`), `"addr" is too large: above 2^64-1`, KindPyTorchJSON},
		{"negative address", ev(`{"action": "alloc", "addr": -4096, "size": 1}`), `"addr" is negative (-4096)`, KindPyTorchJSON},
		{"very negative address", ev(`{"action": "alloc", "addr": -99999999999999999999, "size": 1}`), `"addr" is too large`, KindPyTorchJSON},
		{"frames not a list", ev(`{"action": "alloc", "addr": 4096, "size": 1, "frames": "f"}`), "device_traces[0][0].frames: is a str, want a list", KindPyTorchJSON},
		{"frame not a dict", ev(`{"action": "alloc", "addr": 4096, "size": 1, "frames": [7]}`), "device_traces[0][0].frames[0]: is an int, want a dict", KindPyTorchJSON},
		{"segment not a dict", sg(`null`), "segments[0]: is None, want a dict", KindPyTorchJSON},
		{"no blocks", sg(`{"address": 4096, "total_size": 512, "segment_type": "small"}`), `segments[0]: no "blocks" key`, KindPyTorchJSON},
		{"blocks not a list", sg(`{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": {}}`), "segments[0].blocks: is a dict, want a list", KindPyTorchJSON},
		{"block not a dict", sg(`{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": [[]]}`), "segments[0].blocks[0]: is a list, want a dict", KindPyTorchJSON},
		{"negative segment size", sg(`{"address": 4096, "total_size": -512, "segment_type": "small", "blocks": []}`), `"total_size" is negative (-512)`, KindPyTorchJSON},
		{"negative block size", sg(`{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": [{"size": -512, "state": "inactive"}]}`), `"size" is negative (-512)`, KindPyTorchJSON},
		{"blocks beyond the segment", sg(`{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": [{"size": 1024, "state": "inactive"}]}`), "device 0: ", KindPyTorchJSON},
		{"device out of range", sg(`{"device": 4294967296, "address": 4096, "total_size": 512, "segment_type": "small", "blocks": []}`), "device 4294967296 out of range", KindPyTorchJSON},
		{"allocator_settings not a dict", `{"segments": [], "allocator_settings": []}`, "allocator_settings: is a list, want a dict", KindPyTorchJSON},
		{"deep nesting", `{"segments": [], "allocator_settings": {"x": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`, "exceeded max depth", KindPyTorchJSON},
		{"deep nesting, unread key", `{"segments": [], "external_annotations": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "exceeded max depth", KindJSON},
		{"deep nesting, bare list", strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "exceeded max depth", KindPyTorchJSON},
		{"NaN", `{"segments": [], "allocator_settings": {"x": NaN}}`, "invalid character 'N'", KindPyTorchJSON},
		{"cut short", `{"segments": [{"address": 4096`, "unexpected EOF", KindJSON},
		{"cut short trace", `{"device_traces": [[{"action": "alloc", "addr": 4096`, "unexpected EOF", KindPyTorchJSON},
		{"cut short list", `[{"address": 4096`, "unexpected EOF", KindPyTorchJSON},
		{"data after the object", `{"segments": []} {}`, "unexpected data after the snapshot", KindJSON},
		{"data after the list", `[] x`, "unexpected data after the snapshot", KindPyTorchJSON},
		{"key not a string", `{"segments": [], 1: 2}`, "invalid character '1'", KindJSON},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in), "s.json")
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "s.json" {
				t.Fatalf("err = %v, want a *ParseError naming s.json", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err\n got %s\nwant %s", err, tc.want)
			}
			if pe.Kind != tc.kind {
				t.Errorf("kind %v, want %v", pe.Kind, tc.kind)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line message %q", err)
			}
		})
	}
}

// TestReadJSONRefusesPyTorch checks that ReadJSON, which reads one vram
// snapshot, says where a PyTorch snapshot saved as JSON is read.
func TestReadJSONRefusesPyTorch(t *testing.T) {
	_, err := ReadJSON(strings.NewReader(`{"segments": [], "device_traces": []}`))
	if err == nil || !strings.Contains(err.Error(), "a PyTorch memory snapshot saved as JSON, read by trace.Read") {
		t.Errorf("err = %v", err)
	}
}

// TestPyTorchJSONMemory checks that JSON whose values take far more memory
// than a real snapshot of its size is refused as a pickle would be, and
// within what the pickle path may hold for input of the same size, plus
// the buffers that reading takes for a while.
func TestPyTorchJSONMemory(t *testing.T) {
	tests := []struct {
		name             string
		head, body, tail string
		n                int
	}{
		{"empty arrays", "[", "[],", "[]]", 5_000_000},
		{"arrays of empty objects", `{"segments": [], "allocator_settings": {"x": [`, "[{}],", "{}]}}", 3_000_000},
		{"nested empty arrays", `{"device_traces": [`, "[[]],", "[]]}", 3_000_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := repeatGzip(t, tc.head, tc.body, tc.tail, tc.n)
			var err error
			n := allocated(func() { _, err = Read(bytes.NewReader(in), "bomb.json.gz") })
			var le *LimitError
			if !errors.As(err, &le) || !le.Pickle {
				t.Fatalf("err = %v, want a *LimitError of the decoder's memory", err)
			}
			if !strings.Contains(err.Error(), "JSON: its values take") {
				t.Errorf("err = %v", err)
			}
			if n > 3*pickleFloorBytes+uint64(pickleExpansion*tc.n*len(tc.body)) {
				t.Errorf("allocated %d MB for %d bytes of JSON", n>>20, tc.n*len(tc.body))
			}
		})
	}
}

func TestKindPyTorch(t *testing.T) {
	for k, want := range map[Kind]bool{KindUnknown: false, KindText: false, KindJSON: false, KindPickle: true, KindPyTorchJSON: true} {
		if k.PyTorch() != want {
			t.Errorf("%v.PyTorch() = %v", k, !want)
		}
	}
	if KindPyTorchJSON.String() != "pytorch-json" {
		t.Errorf("String() = %q", KindPyTorchJSON.String())
	}
}

// TestReadJSONFormatLast checks that a vram snapshot whose "format" key
// comes after the others reads as with the key first: the values before it
// are held until the format is known.
func TestReadJSONFormatLast(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleSnapshot()); err != nil {
		t.Fatal(err)
	}
	first := "\n  \"format\": \"" + JSONFormat + "\","
	if !strings.Contains(b.String(), first) {
		t.Fatalf("no format line in\n%s", b.String())
	}
	last := strings.Replace(b.String(), first, "", 1)
	last = strings.TrimSuffix(strings.TrimSpace(last), "}") + `, "format": "` + JSONFormat + "\"}\n"
	want, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(strings.NewReader(last), "last.json")
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind != KindJSON || len(f.Snapshots) != 1 || !reflect.DeepEqual(f.Snapshots[0], want) {
		t.Errorf("kind %v, snapshots\n%s\nwant\n%s", f.Kind, dumpSnapshots(f.Snapshots), dumpSnapshots([]*Snapshot{want}))
	}
	if _, err := ReadJSON(strings.NewReader(last)); err != nil {
		t.Errorf("ReadJSON: %v", err)
	}
	// An error in a held value names its offset in the input.
	bad := `{"segments": [{"address": 4096, "size": 512, "pool": "small", "blocks": [{"address": 4096, "size": 0, "state": "inactive"}]}], "format": "` + JSONFormat + `", "version": 1}`
	_, err = Read(strings.NewReader(bad), "bad.json")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Kind != KindJSON || pe.Offset < int64(strings.Index(bad, `"size": 0`)) || pe.Offset > int64(strings.Index(bad, "]}]")+3) ||
		!strings.Contains(err.Error(), `key "segments": invalid snapshot: segment 0, block 0: size 0 at 0x1000 is not positive`) {
		t.Errorf("err = %v (offset %d)", err, pe.Offset)
	}
}

// TestPyTorchJSONMaxBytes checks that Limits.MaxBytes bounds a PyTorch
// snapshot saved as JSON wherever the limit falls: in a value held until
// the format is known, in one decoded as it comes, in a list of segments.
func TestPyTorchJSONMaxBytes(t *testing.T) {
	ev := `{"action": "alloc", "addr": 4096, "size": 512, "frames": [{"name": "f", "filename": "a.py", "line": 1}]}, `
	for _, in := range []string{
		`{"segments": [` + strings.Repeat(`{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": []}, `, 100) + `{}]}`,
		`{"device_traces": [[` + strings.Repeat(ev, 100) + `{}]]}`,
		`[` + strings.Repeat(`{"address": 4096, "total_size": 512, "segment_type": "small", "blocks": []}, `, 100) + `{}]`,
	} {
		_, err := Limits{MaxBytes: 1000}.Read(strings.NewReader(in), "big.json")
		var le *LimitError
		if !errors.As(err, &le) || le.Pickle || le.Limit != 1000 || !strings.HasPrefix(err.Error(), "trace: big.json: ") {
			t.Errorf("%.30s...: err = %v, want a *LimitError of 1000 bytes", in, err)
		}
	}
}
