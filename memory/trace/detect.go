package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// Kind is the format of an allocation history or snapshot file.
type Kind uint8

// The formats this package reads; see the package documentation.
const (
	KindUnknown     Kind = iota // not recognised
	KindText                    // text trace: a list of events
	KindJSON                    // vram JSON snapshot
	KindPickle                  // PyTorch snapshot pickle
	KindPyTorchJSON             // PyTorch snapshot saved as JSON (json.dump)
)

// String returns "text", "json", "pickle", "pytorch-json" or "unknown".
func (k Kind) String() string {
	switch k {
	case KindText:
		return "text"
	case KindJSON:
		return "json"
	case KindPickle:
		return "pickle"
	case KindPyTorchJSON:
		return "pytorch-json"
	}
	return "unknown"
}

// PyTorch reports whether k is a snapshot that PyTorch recorded
// (KindPickle or KindPyTorchJSON), whose Config holds PyTorch's allocator
// settings.
func (k Kind) PyTorch() bool { return k == KindPickle || k == KindPyTorchJSON }

// File is what [Open] or [Read] found in a file: the events of a text
// trace, or the snapshots of a JSON file or PyTorch snapshot.
type File struct {
	// Name is the name the file was opened or read under.
	Name string
	// Kind is the detected format.
	Kind Kind
	// Gzipped reports that the file was gzip-compressed.
	Gzipped bool
	// Header holds a text trace's leading comment lines (see
	// [TextReader.Header]); nil for other kinds.
	Header []string
	// Events holds a text trace's events (KindText only); nil when the
	// trace was opened from a regular file with [OpenStream], which reads
	// them from the file on each pass of [File.History] instead.
	Events []Event
	// Snapshots holds the snapshots of a vram JSON file (exactly one) or
	// of a PyTorch snapshot, pickle or JSON (one per device, possibly
	// none); nil for KindText.
	Snapshots []*Snapshot

	stream *textFile // a text trace opened by OpenStream, read on each pass
}

// Open reads the file at path with [Read], naming it by path.
func Open(path string) (*File, error) { return Limits{}.Open(path) }

// openWith opens path and reads it with read.
func openWith(path string, read func(io.Reader) (*File, error)) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &ParseError{File: path, Offset: -1, Err: err}
	}
	defer f.Close()
	return read(f)
}

// Read reads a whole history or snapshot from r and detects its format
// from its first bytes, never from name:
//   - gzip magic (1f 8b): decompress, then detect the format inside;
//   - 0x80 followed by 2 to 5: a PyTorch pickle, read with [ReadPickle]
//     (followed by another protocol number: an error naming it; a
//     pickle of protocol 0 or 1, which has no PROTO opcode, is an error
//     naming its protocol too);
//   - zip magic (50 4b 03 04): a snapshot saved with torch.save, read
//     with [ReadPickle];
//   - '{' after optional whitespace: a vram JSON snapshot ([ReadJSON])
//     when the object has a "format" key; without one, a PyTorch snapshot
//     saved as JSON (json.dump of torch.cuda.memory._snapshot()) when it
//     has a "segments" or "device_traces" key, read as the pickle of the
//     same dict would be (Kind is then KindPyTorchJSON);
//   - '[' after optional whitespace: a PyTorch list of segments saved as
//     JSON (json.dump of torch.cuda.memory_snapshot()), KindPyTorchJSON;
//   - otherwise, UTF-8 text without NUL bytes: a text trace ([ReadTextAll]).
//
// name only labels errors, which are [*ParseError]s reading
// "trace: NAME: ...". Empty input, binary data of no known format, corrupt
// or truncated input are errors; Read does not panic on any input. It
// holds the whole input, within the default [Limits]; use [Limits.Read] for
// others, and [OpenStream] to stream a long text trace.
func Read(r io.Reader, name string) (*File, error) { return Limits{}.Read(r, name) }

func read(r io.Reader, lim Limits) (*File, error) {
	f := &File{}
	if r == nil {
		return f, errNilReader(KindUnknown)
	}
	br, kind, err := detect(r, f)
	if err != nil {
		return f, err
	}
	f.Kind = kind
	return f, readBody(br, f, lim)
}

// readBody reads the whole input of the format f.Kind that detect found,
// within lim, into f.
func readBody(br *bufio.Reader, f *File, lim Limits) error {
	br = bufio.NewReaderSize(limited(br, lim), 64<<10)
	var err error
	switch f.Kind {
	case KindPickle:
		f.Snapshots, err = readPickle(br, lim)
	case KindJSON:
		var kind Kind
		f.Snapshots, kind, err = readJSON(br, true)
		if err == nil {
			f.Kind = kind
		}
	case KindText:
		var t *TextReader
		if t, err = NewTextReader(br); err == nil {
			f.Header = t.Header()
			for {
				e, nerr := t.Next()
				if nerr == io.EOF {
					break
				}
				if nerr != nil {
					err = nerr
					break
				}
				f.Events = append(f.Events, e)
			}
		}
	}
	return err
}

// detect decompresses r if it is gzip (setting f.Gzipped) and decides the
// format from the first bytes. It returns a reader of the decompressed
// input, positioned at its start, or an error for input of no format this
// package reads.
func detect(r io.Reader, f *File) (*bufio.Reader, Kind, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(2)
	if err != nil && err != io.EOF {
		return nil, KindUnknown, &ParseError{Offset: -1, Err: err}
	}
	if bytes.Equal(head, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, KindUnknown, &ParseError{Offset: -1, Msg: "bad gzip header", Err: err}
		}
		f.Gzipped = true
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	skipBOM(br)
	head, err = br.Peek(sniffBytes)
	if err != nil && err != io.EOF {
		msg := "reading the start of the input"
		if f.Gzipped {
			msg = "decompressing the start of the gzip stream"
		}
		return nil, KindUnknown, &ParseError{Offset: -1, Msg: msg, Err: err}
	}
	kind := sniff(head)
	if proto, ok := headerlessPickle(head); ok {
		return nil, KindPickle, &ParseError{Kind: KindPickle, Offset: 0,
			Msg: fmt.Sprintf("a Python pickle of protocol %d (pickle.dump with protocol=%d); vram reads protocols 2 to 5: save the snapshot with torch.cuda.memory._dump_snapshot(path), or pickle.dump(snapshot, f) with the default protocol", proto, proto)}
	}
	if kind != KindUnknown {
		return br, kind, nil
	}
	if len(head) >= 2 && head[0] == opProto && head[1] < maxPickleProto {
		return nil, KindPickle, &ParseError{Kind: KindPickle, Offset: 1,
			Msg: fmt.Sprintf("a Python pickle of protocol %d; vram reads protocols 2 to 5 (torch.cuda.memory._dump_snapshot writes 4, or 5 from Python 3.14)", head[1])}
	}
	switch {
	case len(head) == 0 && f.Gzipped:
		return nil, kind, &ParseError{Offset: -1, Msg: "empty input inside the gzip stream"}
	case len(head) == 0:
		return nil, kind, &ParseError{Offset: -1, Msg: "empty input"}
	case f.Gzipped:
		return nil, kind, &ParseError{Offset: 0, Msg: fmt.Sprintf("valid gzip, but what it holds is not a PyTorch pickle, a vram JSON snapshot or a text trace (decompressed, it starts with % x)", head[:min(len(head), 8)])}
	}
	return nil, kind, &ParseError{Offset: 0, Msg: fmt.Sprintf("unrecognised format (not gzip, a PyTorch pickle, a vram JSON snapshot or a text trace; starts with % x)", head[:min(len(head), 8)])}
}

// sniffBytes is how much of the start of the input decides its format:
// enough to skip JSON's leading blanks and to see that a file is binary.
const sniffBytes = 512

// maxPickleProto bounds the byte after a PROTO opcode that reads as a
// protocol number, for the error naming a protocol this reader lacks.
const maxPickleProto = 16

// utf8BOM is the byte-order mark that some editors write at the start of a
// UTF-8 text file.
var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// skipBOM drops a UTF-8 byte-order mark at the start of br: a text trace
// or JSON snapshot saved by such an editor reads as without it.
func skipBOM(br *bufio.Reader) {
	if head, _ := br.Peek(len(utf8BOM)); bytes.Equal(head, utf8BOM) {
		br.Discard(len(utf8BOM))
	}
}

// headerlessPickle reports whether head starts a pickle of protocol 0 or
// 1, which have no PROTO opcode, holding a dict or a list (what a snapshot
// is), and which protocol: protocol 0 opens one with MARK and DICT or LIST,
// then PUT ("(dp0\n", "(lp0\n") or STOP; protocol 1 with EMPTY_DICT or
// EMPTY_LIST, then BINPUT, LONG_BINPUT, MARK or STOP ("}q\x00"). No text
// trace, JSON snapshot or pickle of protocol 2 to 5 starts so.
func headerlessPickle(head []byte) (proto int, ok bool) {
	if len(head) < 3 {
		return 0, false
	}
	switch {
	case head[0] == '(' && (head[1] == 'd' || head[1] == 'l') && (head[2] == 'p' || head[2] == '.'):
		return 0, true
	case (head[0] == '}' || head[0] == ']') && bytes.IndexByte([]byte{'q', 'r', '(', '.'}, head[1]) >= 0:
		return 1, true
	}
	return 0, false
}

// sniff decides the format from the first bytes of the (decompressed)
// input, sniffBytes of them unless the input is shorter.
func sniff(head []byte) Kind {
	if len(head) >= 2 && head[0] == opProto && head[1] >= 2 && head[1] <= 5 || bytes.HasPrefix(head, zipMagic) {
		return KindPickle
	}
	t := bytes.TrimLeft(head, " \t\r\n")
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return KindJSON
	}
	if len(head) == 0 || bytes.IndexByte(head, 0) >= 0 {
		return KindUnknown
	}
	// A multi-byte character may be cut at the end of a full head: leave
	// out its first bytes, and nothing else.
	valid := head
	if len(head) == sniffBytes {
		for i := 1; i < utf8.UTFMax && i <= len(head); i++ {
			if utf8.RuneStart(head[len(head)-i]) {
				if !utf8.FullRune(head[len(head)-i:]) {
					valid = head[:len(head)-i]
				}
				break
			}
		}
	}
	if !utf8.Valid(valid) {
		return KindUnknown
	}
	return KindText
}
