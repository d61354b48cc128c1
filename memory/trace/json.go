package trace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSON snapshot identification; see the package documentation, "# JSON
// snapshots".
const (
	// JSONFormat is the value of the "format" key of a vram JSON snapshot.
	JSONFormat = "vram-memory-snapshot"
	// JSONVersion is the version of the JSON snapshot format that
	// WriteJSON writes and ReadJSON reads.
	JSONVersion = 1
)

// WriteJSON writes s as a vram JSON snapshot: one key per line at the top,
// one segment, block and history event per line below it, so that files
// diff and grep well. It validates s first and writes nothing if
// [Snapshot.Validate] fails (as it does for a nil s); a nil w is an error.
func WriteJSON(w io.Writer, s *Snapshot) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if w == nil {
		return errNilWriter
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	b := make([]byte, 0, 1024)
	b = append(b, "{\n  \"format\": "...)
	b = appendJSONString(b, JSONFormat)
	b = append(b, ",\n  \"version\": "...)
	b = strconv.AppendInt(b, JSONVersion, 10)
	b = append(b, ",\n  \"device\": "...)
	b = strconv.AppendInt(b, int64(s.Device), 10)
	b = append(b, ",\n  \"capacity_bytes\": "...)
	b = strconv.AppendInt(b, s.Capacity, 10)
	b = append(b, ",\n  \"config\": "...)
	b = appendJSONString(b, s.Config)
	b = append(b, ",\n  \"meta\": {"...)
	keys := make([]string, 0, len(s.Meta))
	for k := range s.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendJSONString(b, k)
		b = append(b, ": "...)
		b = appendJSONString(b, s.Meta[k])
	}
	b = append(b, "},\n  \"history_truncated\": "...)
	b = strconv.AppendBool(b, s.Truncated)
	b = append(b, ",\n  \"segments\": ["...)
	for i := range s.Segments {
		seg := &s.Segments[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    {\"address\": "...)
		b = strconv.AppendUint(b, seg.Addr, 10)
		b = append(b, ", \"size\": "...)
		b = strconv.AppendInt(b, seg.Size, 10)
		b = append(b, ", \"stream\": "...)
		b = strconv.AppendUint(b, seg.Stream, 10)
		b = append(b, ", \"pool\": "...)
		b = appendJSONString(b, seg.Pool)
		b = append(b, ", \"expandable\": "...)
		b = strconv.AppendBool(b, seg.Expandable)
		if seg.PrivatePool != ([2]uint64{}) {
			b = append(b, ", \"private_pool\": ["...)
			b = strconv.AppendUint(b, seg.PrivatePool[0], 10)
			b = append(b, ", "...)
			b = strconv.AppendUint(b, seg.PrivatePool[1], 10)
			b = append(b, ']')
		}
		b = append(b, ", \"blocks\": ["...)
		for j := range seg.Blocks {
			blk := &seg.Blocks[j]
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n      {\"address\": "...)
			b = strconv.AppendUint(b, blk.Addr, 10)
			b = append(b, ", \"size\": "...)
			b = strconv.AppendInt(b, blk.Size, 10)
			b = append(b, ", \"requested_size\": "...)
			b = strconv.AppendInt(b, blk.Requested, 10)
			b = append(b, ", \"state\": "...)
			b = appendJSONString(b, blk.State)
			b = appendRegionFrames(b, blk.Region, blk.Frames)
			b = append(b, '}')
			if len(b) > 32<<10 {
				if _, err := bw.Write(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
		b = append(b, "]}"...)
	}
	if len(s.Segments) > 0 {
		b = append(b, "\n  "...)
	}
	b = append(b, "],\n  \"history\": ["...)
	for i := range s.History {
		e := &s.History[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    {\"action\": \""...)
		b = append(b, actionNames[e.Action]...)
		b = append(b, "\", \"address\": "...)
		b = strconv.AppendUint(b, e.Addr, 10)
		b = append(b, ", \"size\": "...)
		b = strconv.AppendInt(b, e.Size, 10)
		b = append(b, ", \"stream\": "...)
		b = strconv.AppendUint(b, e.Stream, 10)
		if e.TimeUS != 0 {
			b = append(b, ", \"time_us\": "...)
			b = strconv.AppendInt(b, e.TimeUS, 10)
		}
		b = appendRegionFrames(b, e.Region, e.Frames)
		b = append(b, '}')
		if len(b) > 32<<10 {
			if _, err := bw.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if len(s.History) > 0 {
		b = append(b, "\n  "...)
	}
	b = append(b, "]\n}\n"...)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Flush()
}

// appendRegionFrames appends the optional "region" and "frames" keys.
func appendRegionFrames(b []byte, region string, frames []Frame) []byte {
	if region != "" {
		b = append(b, ", \"region\": "...)
		b = appendJSONString(b, region)
	}
	if len(frames) > 0 {
		b = append(b, ", \"frames\": ["...)
		for k := range frames {
			f := &frames[k]
			if k > 0 {
				b = append(b, ", "...)
			}
			b = append(b, "{\"function\": "...)
			b = appendJSONString(b, f.Function)
			b = append(b, ", \"file\": "...)
			b = appendJSONString(b, f.File)
			b = append(b, ", \"line\": "...)
			b = strconv.AppendInt(b, int64(f.Line), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return b
}

// appendJSONString appends s as a JSON string. Control characters, '"',
// '\\', '<', '>', '&', U+2028 and U+2029 are escaped; invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonSegment, jsonBlock and jsonEvent mirror the JSON layout for decoding.
type jsonSegment struct {
	Address     uint64      `json:"address"`
	Size        int64       `json:"size"`
	Stream      uint64      `json:"stream"`
	Pool        string      `json:"pool"`
	Expandable  bool        `json:"expandable"`
	PrivatePool [2]uint64   `json:"private_pool"`
	Blocks      []jsonBlock `json:"blocks"`
}

type jsonBlock struct {
	Address   uint64  `json:"address"`
	Size      int64   `json:"size"`
	Requested int64   `json:"requested_size"`
	State     string  `json:"state"`
	Region    string  `json:"region"`
	Frames    []Frame `json:"frames"`
}

type jsonEvent struct {
	Action  Action  `json:"action"`
	Address uint64  `json:"address"`
	Size    int64   `json:"size"`
	Stream  uint64  `json:"stream"`
	TimeUS  int64   `json:"time_us"`
	Region  string  `json:"region"`
	Frames  []Frame `json:"frames"`
}

// ReadJSON reads one vram JSON snapshot from r and validates it. It fails
// with a [*ParseError] when the input is not JSON, is JSON of another format
// or version (the version must be the JSON number 1, not a string), has a
// value of the wrong type, is followed by more data, is larger than
// [DefaultMaxBytes], or describes a snapshot that fails [Snapshot.Validate]
// (then Err is the [*InvalidSnapshotError]). Keys it does not know are
// ignored. Segments, blocks and history events are checked as they are
// decoded, so that memory grows only with valid entries. A PyTorch
// snapshot saved as JSON, which may hold several devices, is an error:
// [Read] and [Open] read it.
func ReadJSON(r io.Reader) (*Snapshot, error) {
	if r == nil {
		return nil, errNilReader(KindJSON)
	}
	snaps, _, err := readJSON(limited(r, Limits{}), false)
	if err != nil {
		return nil, err
	}
	return snaps[0], nil
}

// readJSON reads a JSON input: a vram snapshot, or, when torch is set, a
// PyTorch snapshot saved as JSON (see readTorchJSON), and reports which
// (KindJSON or KindPyTorchJSON). An object is a vram snapshot when it
// has a "format" key, wherever the key is: until it comes, the values of
// the keys a vram snapshot reads are held as they are, then read as the
// format the object turns out to be, and those of the keys only a PyTorch
// snapshot reads are decoded as they come. A vram snapshot is one
// Snapshot.
func readJSON(r io.Reader, torch bool) ([]*Snapshot, Kind, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 64<<10))
	fail := func(msg string, err error) error {
		return &ParseError{Kind: KindJSON, Offset: dec.InputOffset(), Msg: msg, Err: jsonErr(err)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, KindJSON, fail("", err)
	}
	if d, ok := tok.(json.Delim); torch && ok && d == '[' {
		dec.UseNumber()
		snaps, err := readTorchJSON(dec, nil, newJSONValues())
		return snaps, KindPyTorchJSON, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, KindJSON, fail("not a vram memory snapshot: the top level is not a JSON object", nil)
	}
	jr := &jsonReader{s: &Snapshot{}, stacks: &stackInterner{m: make(map[string][]Frame)}}
	var (
		held []heldValue // before "format": the values either format reads
		jv   *jsonValues // decodes the values only a PyTorch snapshot reads
	)
	if torch {
		dec.UseNumber()
		jv = newJSONValues()
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, KindJSON, fail("", err)
		}
		key, _ := tok.(string)
		if torch && !jr.haveFormat && key != "format" {
			switch {
			case key == "device_traces" || key == "allocator_settings":
				// A vram snapshot ignores these keys: read them as a
				// PyTorch snapshot's as they come.
				tok, err := dec.Token()
				if err != nil {
					return nil, KindJSON, fail(fmt.Sprintf("key %q", key), err)
				}
				v, err := jv.decode(dec, 0, tok)
				if err != nil {
					return nil, KindPyTorchJSON, err
				}
				held = append(held, heldValue{key: key, v: v, decoded: true})
			case heldKeys[key]:
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return nil, KindJSON, fail(fmt.Sprintf("key %q", key), err)
				}
				held = append(held, heldValue{key: key, off: dec.InputOffset() - int64(len(raw)), raw: raw})
				jv.used += int64(len(raw))
			default:
				if err := dec.Decode(new(json.RawMessage)); err != nil {
					return nil, KindJSON, fail(fmt.Sprintf("key %q", key), err)
				}
			}
			continue
		}
		if msg, err := jr.key(dec, key); msg != "" || err != nil {
			return nil, KindJSON, fail(msg, err)
		}
		if key == "format" {
			for i := range held {
				h := &held[i]
				if h.decoded {
					continue
				}
				sub := json.NewDecoder(bytes.NewReader(h.raw))
				if msg, err := jr.key(sub, h.key); msg != "" || err != nil {
					return nil, KindJSON, &ParseError{Kind: KindJSON, Offset: h.off + sub.InputOffset(), Msg: msg, Err: jsonErr(err)}
				}
				h.raw = nil
			}
			held = nil
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, KindJSON, fail("", err)
	}
	if !jr.haveFormat && torch && isTorchSnapshot(held) {
		snaps, err := readTorchJSON(dec, held, jv)
		return snaps, KindPyTorchJSON, err
	}
	if !jr.haveFormat {
		if !torch && isTorchSnapshot(jr.torchKeys) {
			return nil, KindJSON, fail("not a vram memory snapshot but a PyTorch memory snapshot saved as JSON, read by trace.Read or trace.Open", nil)
		}
		msg := fmt.Sprintf("not a vram memory snapshot: no \"format\" key (want %q)", JSONFormat)
		if torch {
			msg += `, nor a PyTorch snapshot (no "segments" or "device_traces" key)`
		}
		return nil, KindJSON, fail(msg, nil)
	}
	if !jr.haveVersion {
		return nil, KindJSON, fail("no \"version\" key", nil)
	}
	if err := jsonEnd(dec); err != nil {
		return nil, KindJSON, fail("", err)
	}
	if err := jr.s.Validate(); err != nil {
		return nil, KindJSON, &ParseError{Kind: KindJSON, Offset: -1, Err: err}
	}
	return []*Snapshot{jr.s}, KindJSON, nil
}

// jsonEnd checks that dec's input ends after the value read: a
// *LimitError, or an error saying that more data follows.
func jsonEnd(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		var le *LimitError
		if errors.As(err, &le) {
			return err
		}
		return errors.New("unexpected data after the snapshot")
	}
	return nil
}

// heldValue is the value of a key of a JSON object read before the
// object's format was known: as it is, at offset off of the input, or, for
// a key that only a PyTorch snapshot reads, decoded into v.
type heldValue struct {
	key     string
	off     int64
	raw     json.RawMessage
	v       any
	decoded bool
}

// heldKeys are the keys whose values a vram snapshot reads, which a
// PyTorch snapshot may hold too ("segments") or ignores; the values of the
// keys that neither reads are skipped.
var heldKeys = map[string]bool{
	"version": true, "device": true, "capacity_bytes": true, "config": true, "meta": true,
	"history_truncated": true, "segments": true, "history": true,
}

// isTorchSnapshot reports whether the keys of held make a PyTorch
// snapshot: "segments" or "device_traces".
func isTorchSnapshot(held []heldValue) bool {
	for _, h := range held {
		if h.key == "segments" || h.key == "device_traces" {
			return true
		}
	}
	return false
}

// jsonReader reads the keys of a vram JSON snapshot into s.
type jsonReader struct {
	s           *Snapshot
	stacks      *stackInterner
	format      string
	haveFormat  bool
	haveVersion bool
	torchKeys   []heldValue // the PyTorch keys seen, without their values
}

// key reads the value of key from dec. On failure it returns what to say
// and the error, for a *ParseError at dec's offset.
func (jr *jsonReader) key(dec *json.Decoder, key string) (string, error) {
	s := jr.s
	var v any
	switch key {
	case "format":
		v = &jr.format
	case "version":
		var version json.RawMessage
		if err := dec.Decode(&version); err != nil {
			return `key "version"`, err
		}
		if len(version) == 0 || version[0] != '-' && (version[0] < '0' || version[0] > '9') {
			return fmt.Sprintf(`key "version": %s is not a number: the version is the JSON number %d`, rawText(version), JSONVersion), nil
		}
		if string(version) != strconv.Itoa(JSONVersion) {
			return fmt.Sprintf("unsupported version %s of the vram memory snapshot format (this reader knows version %d)", rawText(version), JSONVersion), nil
		}
		jr.haveVersion = true
		return "", nil
	case "device":
		v = &s.Device
	case "capacity_bytes":
		v = &s.Capacity
	case "config":
		v = &s.Config
	case "meta":
		v = &s.Meta
	case "history_truncated":
		v = &s.Truncated
	case "segments":
		segs, err := decodeSegments(dec, jr.stacks)
		if err != nil {
			return `key "segments"`, err
		}
		s.Segments = segs
		return "", nil
	case "history":
		h, err := decodeHistory(dec, jr.stacks)
		if err != nil {
			return `key "history"`, err
		}
		s.History = h
		return "", nil
	case "device_traces":
		jr.torchKeys = append(jr.torchKeys, heldValue{key: key})
		v = new(json.RawMessage)
	default:
		v = new(json.RawMessage)
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Sprintf("key %q", key), err
	}
	if key == "format" {
		jr.haveFormat = true
		if jr.format != JSONFormat {
			return fmt.Sprintf("not a vram memory snapshot: format %q, want %q", jr.format, JSONFormat), nil
		}
	}
	return "", nil
}

// openArray reads the token that opens a JSON array: false with a nil
// error for null, false with an error for anything else but '['.
func openArray(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return false, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return false, fmt.Errorf("not an array")
	}
	return true, nil
}

// decodeSegments decodes the "segments" array one segment at a time,
// checking each block as it converts it, so that memory grows only with
// valid blocks and no segment is held twice for long.
func decodeSegments(dec *json.Decoder, stacks *stackInterner) ([]Segment, error) {
	if ok, err := openArray(dec); !ok {
		return nil, err // null, or not an array
	}
	var segs []Segment
	for dec.More() {
		i := len(segs)
		var js jsonSegment
		if err := dec.Decode(&js); err != nil {
			return nil, &contextError{fmt.Sprintf("segment %d", i), err}
		}
		seg := Segment{Addr: js.Address, Size: js.Size, Stream: js.Stream, Pool: js.Pool, Expandable: js.Expandable, PrivatePool: js.PrivatePool}
		if len(js.Blocks) > 0 {
			seg.Blocks = make([]Block, len(js.Blocks))
		}
		for j, jb := range js.Blocks {
			if jb.Size <= 0 {
				return nil, &InvalidSnapshotError{Segment: i, Block: j, Event: -1, Reason: fmt.Sprintf("size %d at 0x%x is not positive", jb.Size, jb.Address)}
			}
			switch jb.State {
			case StateActiveAllocated, StateActivePendingFree, StateInactive:
			default:
				return nil, &InvalidSnapshotError{Segment: i, Block: j, Event: -1, Reason: fmt.Sprintf("unknown state %q", clip([]byte(jb.State)))}
			}
			seg.Blocks[j] = Block{Addr: jb.Address, Size: jb.Size, Requested: jb.Requested, State: jb.State, Region: jb.Region, Frames: stacks.intern(jb.Frames)}
		}
		segs = append(segs, seg)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, err
	}
	return segs, nil
}

// decodeHistory decodes the "history" array one event at a time, so that a
// long history is not held twice.
func decodeHistory(dec *json.Decoder, stacks *stackInterner) ([]Event, error) {
	if ok, err := openArray(dec); !ok {
		return nil, err // null, or not an array
	}
	var history []Event
	for dec.More() {
		var je jsonEvent
		if err := dec.Decode(&je); err != nil {
			return nil, &contextError{fmt.Sprintf("event %d", len(history)), err}
		}
		if !je.Action.Valid() {
			return nil, &InvalidSnapshotError{Segment: -1, Block: -1, Event: len(history), Reason: fmt.Sprintf("invalid action %d", uint8(je.Action))}
		}
		if je.Size < 0 {
			return nil, &InvalidSnapshotError{Segment: -1, Block: -1, Event: len(history), Reason: fmt.Sprintf("negative size %d", je.Size)}
		}
		history = append(history, Event{Action: je.Action, Addr: je.Address, Size: je.Size, Stream: je.Stream,
			TimeUS: je.TimeUS, Region: je.Region, Frames: stacks.intern(je.Frames)})
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, err
	}
	return history, nil
}

// stackInterner makes equal call stacks share one slice, as they do in the
// allocator that wrote them: a history repeats the same few hundred stacks.
type stackInterner struct {
	m   map[string][]Frame
	key []byte
}

// intern returns the stack equal to f seen first, or f; nil for no frames.
func (in *stackInterner) intern(f []Frame) []Frame {
	if len(f) == 0 {
		return nil
	}
	k := in.key[:0]
	for i := range f { // length-prefixed, so that no two stacks share a key
		k = binary.AppendUvarint(k, uint64(len(f[i].Function)))
		k = append(k, f[i].Function...)
		k = binary.AppendUvarint(k, uint64(len(f[i].File)))
		k = append(k, f[i].File...)
		k = binary.AppendVarint(k, int64(f[i].Line))
	}
	in.key = k
	if g, ok := in.m[string(k)]; ok {
		return g
	}
	in.m[string(k)] = f
	return f
}

// jsonErr turns the end of input inside a JSON value into
// io.ErrUnexpectedEOF, which is what it means here.
func jsonErr(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// rawText returns a JSON value as read, for an error message: compacted,
// so that the blanks and line breaks between its elements go, clipped, and
// with any invalid UTF-8 replaced, so that the message stays one line of
// text.
func rawText(raw json.RawMessage) string {
	var c bytes.Buffer
	if json.Compact(&c, raw) == nil {
		raw = c.Bytes()
	}
	return strings.ToValidUTF8(clip(raw), "\uFFFD")
}
