package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// textHeader is the first line WriteText and NewTextWriter write.
const textHeader = "# action addr size stream [time_us]"

// maxTextLine is the longest line a TextReader accepts, in bytes. Real lines
// are under 100 bytes; the limit only stops a binary file from being read as
// one enormous line.
const maxTextLine = 64 << 10

// maxHeaderBytes bounds the comment text a TextReader keeps as the header:
// writers put a line or two there, and a file of nothing but comments must
// not be held whole. Comments past it are skipped like later ones.
const maxHeaderBytes = 64 << 10

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// TextReader reads events from a text trace one at a time (see the package
// documentation, "# Text traces"), without allocating per event. It is not
// safe for concurrent use.
type TextReader struct {
	br     *bufio.Reader
	line   int      // lines consumed so far
	header []string // leading comments
	next   Event    // an event read ahead while collecting the header
	ahead  bool     // next holds an event
	err    error    // sticky error (io.EOF at the end)
}

// NewTextReader returns a reader of the text trace in r, decompressing it
// first if it starts with the gzip magic bytes. It reads the leading comment
// lines at once (see [TextReader.Header]), so it fails if r fails, if the
// gzip header is corrupt, or if the first event line is malformed; errors
// are [*ParseError]s.
func NewTextReader(r io.Reader) (*TextReader, error) {
	if r == nil {
		return nil, errNilReader(KindText)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); bytes.Equal(magic, gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &ParseError{Kind: KindText, Offset: -1, Msg: "bad gzip header", Err: err}
		}
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	skipBOM(br)
	t := &TextReader{br: br}
	headerBytes := 0
	for {
		line, err := t.readLine()
		if err != nil {
			if err == io.EOF {
				t.err = io.EOF
				return t, nil
			}
			return nil, err
		}
		body := trimSpace(line)
		if len(body) == 0 {
			continue
		}
		if body[0] == '#' {
			if c := trimSpace(body[1:]); headerBytes+len(c) <= maxHeaderBytes {
				t.header = append(t.header, string(c))
				headerBytes += len(c)
			}
			continue
		}
		e, err := t.parse(body)
		if err != nil {
			return nil, err
		}
		t.next, t.ahead = e, true
		return t, nil
	}
}

// Header returns the comment lines that precede the first event, without
// the '#' and surrounding blanks, as far as the first 64 KiB of their text.
// Comments after those and after the first event are skipped and not
// returned.
func (t *TextReader) Header() []string { return t.header }

// Line returns the number of lines read so far; after Next returns an event
// or an error, it is that event's or that error's line.
func (t *TextReader) Line() int { return t.line }

// Next returns the next event. At the end of the input it returns io.EOF;
// for a malformed line it returns a [*ParseError] naming the line. Errors are
// sticky: once Next fails it keeps returning the same error.
func (t *TextReader) Next() (Event, error) {
	if t.ahead {
		t.ahead = false
		return t.next, nil
	}
	if t.err != nil {
		return Event{}, t.err
	}
	for {
		line, err := t.readLine()
		if err != nil {
			t.err = err
			return Event{}, err
		}
		body := trimSpace(line)
		if len(body) == 0 || body[0] == '#' {
			continue
		}
		e, err := t.parse(body)
		if err != nil {
			t.err = err
			return Event{}, err
		}
		return e, nil
	}
}

// readLine returns the next line without its terminator, counting it. The
// slice is valid until the next read. It returns io.EOF only when no bytes
// are left.
func (t *TextReader) readLine() ([]byte, error) {
	line, err := t.br.ReadSlice('\n')
	switch {
	case err == nil:
		t.line++
		return line[:len(line)-1], nil
	case errors.Is(err, bufio.ErrBufferFull):
		t.line++
		return nil, t.errorf("line longer than %d bytes (not a text trace?)", maxTextLine)
	case err == io.EOF:
		if len(line) == 0 {
			return nil, io.EOF
		}
		t.line++
		return line, nil
	default:
		// A read or decompression failure; the line is incomplete.
		e := &ParseError{Kind: KindText, Line: t.line + 1, Offset: -1, Err: err}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			e.Msg = "input ends early (truncated gzip stream?)"
		}
		return nil, e
	}
}

func (t *TextReader) errorf(format string, args ...any) error {
	return &ParseError{Kind: KindText, Line: t.line, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

// parse turns one non-blank, non-comment line into an event.
func (t *TextReader) parse(body []byte) (Event, error) {
	var f [6][]byte
	n := 0
	for len(body) > 0 && n < len(f) {
		i := 0
		for i < len(body) && body[i] != ' ' && body[i] != '\t' {
			i++
		}
		f[n] = body[:i]
		n++
		body = trimLeft(body[i:])
	}
	if n > 5 {
		return Event{}, t.errorf("too many fields: want action addr size stream [time_us]")
	}
	a, ok := lookupAction(string(f[0]))
	if !ok {
		return Event{}, t.errorf("unknown action %q", clip(f[0]))
	}
	if n < 4 {
		return Event{}, t.errorf("%s: %d fields, want 4 or 5: action addr size stream [time_us]", a, n)
	}
	e := Event{Action: a}
	var err error
	if e.Addr, err = parseUint(f[1]); err != nil {
		return Event{}, t.errorf("%s: addr %q: %v", a, clip(f[1]), err)
	}
	size, err := parseUint(f[2])
	if err == nil && size > math.MaxInt64 {
		err = errRange
	}
	if err != nil {
		return Event{}, t.errorf("%s: size %q: %v", a, clip(f[2]), err)
	}
	e.Size = int64(size)
	if e.Stream, err = parseUint(f[3]); err != nil {
		return Event{}, t.errorf("%s: stream %q: %v", a, clip(f[3]), err)
	}
	if n == 5 {
		if e.TimeUS, err = parseInt(f[4]); err != nil {
			return Event{}, t.errorf("%s: time_us %q: %v", a, clip(f[4]), err)
		}
	}
	return e, nil
}

var (
	errSyntax = errors.New("not a decimal number")
	errRange  = errors.New("out of range")
)

// parseUint parses an unsigned decimal number; it is strconv.ParseUint
// without the allocation of a string.
func parseUint(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, errSyntax
	}
	var v uint64
	for _, c := range b {
		d := uint64(c) - '0'
		if d > 9 {
			return 0, errSyntax
		}
		if v > (math.MaxUint64-d)/10 {
			return 0, errRange
		}
		v = v*10 + d
	}
	return v, nil
}

// parseInt parses a decimal number with an optional '-' sign.
func parseInt(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, err := parseUint(b)
	if err != nil {
		return 0, err
	}
	if neg {
		if u > 1<<63 {
			return 0, errRange
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return 0, errRange
	}
	return int64(u), nil
}

func trimLeft(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func trimSpace(b []byte) []byte {
	b = trimLeft(b)
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// clip shortens a field quoted in an error message.
func clip(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// ReadTextAll reads every event of the text trace in r (gzip-compressed or
// not). Errors are as for [NewTextReader] and [TextReader.Next].
func ReadTextAll(r io.Reader) ([]Event, error) {
	t, err := NewTextReader(r)
	if err != nil {
		return nil, err
	}
	var events []Event
	for {
		e, err := t.Next()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
}

// TextWriter writes events as a text trace, one line each. Frames and
// Region are not part of the format and are dropped. It buffers: call Flush
// at the end. It is not safe for concurrent use. To write a compressed
// trace, pass a [gzip.Writer] and close it after Flush.
type TextWriter struct {
	w   *bufio.Writer // nil when made for a nil io.Writer
	buf []byte
}

// NewTextWriter returns a writer that has written the format's header line
// ("# action addr size stream [time_us]") and then each of the header lines
// as a comment (a line with newlines becomes several comments) to its
// buffer. Given a nil w, its Write and Flush fail.
func NewTextWriter(w io.Writer, header ...string) *TextWriter {
	if w == nil {
		return &TextWriter{}
	}
	t := &TextWriter{w: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, 128)}
	t.w.WriteString(textHeader + "\n")
	for _, h := range header {
		for _, l := range strings.Split(h, "\n") {
			t.w.WriteString(strings.TrimRight("# "+strings.TrimRight(l, "\r"), " ") + "\n")
		}
	}
	return t
}

// Write writes one event. It fails for an invalid Action or a negative Size
// (the reader would reject the line), or when the underlying writer fails.
// TimeUS is written as a fifth field only when it is not 0.
func (t *TextWriter) Write(e Event) error {
	if t.w == nil {
		return errNilWriter
	}
	if !e.Action.Valid() {
		return fmt.Errorf("trace: cannot write event with invalid action %d", uint8(e.Action))
	}
	if e.Size < 0 {
		return fmt.Errorf("trace: cannot write %s event with negative size %d", e.Action, e.Size)
	}
	b := append(t.buf[:0], actionNames[e.Action]...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, e.Addr, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.Size, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, e.Stream, 10)
	if e.TimeUS != 0 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.TimeUS, 10)
	}
	b = append(b, '\n')
	t.buf = b
	_, err := t.w.Write(b)
	return err
}

// Flush writes any buffered data to the underlying writer.
func (t *TextWriter) Flush() error {
	if t.w == nil {
		return errNilWriter
	}
	return t.w.Flush()
}

// WriteText writes events as an uncompressed text trace with the format's
// header line; see [TextWriter] for what is kept.
func WriteText(w io.Writer, events []Event) error {
	t := NewTextWriter(w)
	for i := range events {
		if err := t.Write(events[i]); err != nil {
			return err
		}
	}
	return t.Flush()
}
