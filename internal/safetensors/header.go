package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// This file parses the JSON header. The header may be 100 MiB long and
// hold millions of records, and encoding/json's Decoder makes garbage for
// every value it reads as a token (and Unmarshal into generic values
// more), so the header is scanned here by hand. Its grammar is small: an
// object whose members are "__metadata__", an object of strings, and
// tensor records, objects of "dtype" (a string), "shape" and
// "data_offsets" (arrays of integers). Any other value where one of these
// is expected is an error, so nothing is ever skipped. Strings holding
// escapes are decoded by encoding/json.

// parseHeader decodes and validates the JSON header.
func parseHeader(hdr []byte) ([]located, map[string]string, error) {
	if !utf8.Valid(hdr) {
		return nil, nil, errorf("header is not valid UTF-8")
	}
	s := &scanner{b: hdr}
	var entries []located
	var metadata map[string]string
	seen := map[string]bool{}
	err := s.object(func(name string) error {
		if seen[name] {
			return errorf("duplicate key %q in header", name)
		}
		seen[name] = true
		if name == metadataKey {
			var err error
			metadata, err = s.metadata()
			return err
		}
		e, err := s.entry(name)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		return nil
	})
	if errors.Is(err, errNotObject) {
		return nil, nil, errorf("header is not a JSON object")
	}
	if err != nil {
		return nil, nil, err
	}
	// Only whitespace (the padding) may follow the object.
	if s.skipSpace(); s.i != len(hdr) {
		return nil, nil, errorf("unexpected bytes after the JSON header object")
	}
	return entries, metadata, nil
}

// scanner reads JSON values from b, from byte i on.
type scanner struct {
	b []byte
	i int
}

// syntaxError is the error of a header that is not valid JSON.
type syntaxError struct {
	msg string
	off int // in the header
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("safetensors: header is not valid JSON: %s at byte %d", e.msg, e.off)
}

// isSyntax reports whether err is a syntaxError, which no caller wraps.
func isSyntax(err error) bool {
	var se *syntaxError
	return errors.As(err, &se)
}

// errNotObject is the error of [scanner.object] for a value that is no
// object.
var errNotObject = errors.New("not a JSON object")

// fail returns a syntaxError at the current byte.
func (s *scanner) fail(format string, args ...any) error {
	return &syntaxError{msg: fmt.Sprintf(format, args...), off: s.i}
}

// skipSpace skips JSON whitespace.
func (s *scanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *scanner) peek() byte {
	if s.skipSpace(); s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// unexpected returns the syntaxError of finding the next byte where want
// should be.
func (s *scanner) unexpected(want string) error {
	if s.peek() == 0 {
		return s.fail("unexpected end, want %s", want)
	}
	return s.fail("unexpected %q, want %s", s.b[s.i], want)
}

// kind names the kind of value that starts at the next byte, for an
// error about a value of the wrong type (not the value itself, which may
// be megabytes long); it returns a syntaxError when no value starts
// there.
func (s *scanner) kind() (string, error) {
	switch c := s.peek(); {
	case c == '{':
		return "an object", nil
	case c == '[':
		return "an array", nil
	case c == '"':
		return "a string", nil
	case c == '-' || isDigit(c):
		return "a number", nil
	}
	for _, lit := range []string{"null", "true", "false"} {
		if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
			if lit == "null" {
				return "null", nil
			}
			return "a boolean", nil
		}
	}
	return "", s.unexpected("a JSON value")
}

// typeError returns the error of a value of the wrong type where want
// was expected, or the syntaxError of no value at all.
func (s *scanner) typeError(want string) error {
	got, err := s.kind()
	if err != nil {
		return err
	}
	return fmt.Errorf("want %s, got %s", want, got)
}

// null consumes null if it comes next, and reports whether it did.
func (s *scanner) null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += len("null")
		return true
	}
	return false
}

// object scans the object that comes next, calling member with each
// member's name in order; member must scan the member's value. When no
// object comes next, object returns errNotObject, or a syntaxError if no
// value does; member's errors are returned as they are.
func (s *scanner) object(member func(key string) error) error {
	if s.peek() != '{' {
		if _, err := s.kind(); err != nil {
			return err
		}
		return errNotObject
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.unexpected("a member name")
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return s.unexpected("':'")
		}
		s.i++
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.unexpected("',' or '}'")
		}
	}
}

// str scans the string that starts at the current byte, a '"'.
func (s *scanner) str() (string, error) {
	start := s.i
	escaped := false
	for s.i++; s.i < len(s.b); {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			if !escaped {
				return string(s.b[start+1 : s.i-1]), nil
			}
			var v string
			if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
				return "", &syntaxError{msg: "bad string: " + err.Error(), off: start}
			}
			return v, nil
		case c == '\\':
			escaped = true
			s.i += 2 // the escaped byte never ends the string
		case c < 0x20:
			return "", s.fail("control character %#x in a string", c)
		default:
			s.i++
		}
	}
	return "", &syntaxError{msg: "unterminated string", off: start}
}

// stringOrNull scans a string, or null (nil). Another value is an error
// saying so, and no value a syntaxError.
func (s *scanner) stringOrNull() (*string, error) {
	if s.null() {
		return nil, nil
	}
	if s.peek() != '"' {
		return nil, s.typeError("a string")
	}
	v, err := s.str()
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// intsOrNull scans an array of integers of 64 bits, or null (nil).
// Another value is an error saying so, and no value a syntaxError.
func (s *scanner) intsOrNull() ([]int64, error) {
	if s.null() {
		return nil, nil
	}
	if s.peek() != '[' {
		return nil, s.typeError("an array of integers")
	}
	s.i++
	v := []int64{}
	if s.peek() == ']' {
		s.i++
		return v, nil
	}
	for {
		if c := s.peek(); c != '-' && !isDigit(c) {
			return nil, s.typeError("an integer")
		}
		n, err := s.integer()
		if err != nil {
			return nil, err
		}
		v = append(v, n)
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return v, nil
		default:
			return nil, s.unexpected("',' or ']'")
		}
	}
}

// integer scans the number that starts at the current byte, a '-' or a
// digit: a JSON number that is not an integer of 64 bits (1.5, 1e3,
// 2^63) is an error saying so, and one that is not a JSON number a
// syntaxError.
func (s *scanner) integer() (int64, error) {
	start := s.i
	digits := func() error {
		if s.i >= len(s.b) || !isDigit(s.b[s.i]) {
			return s.unexpected("a digit")
		}
		for s.i < len(s.b) && isDigit(s.b[s.i]) {
			s.i++
		}
		return nil
	}
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if err := digits(); err != nil {
		return 0, err
	}
	whole := s.i
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if err := digits(); err != nil {
			return 0, err
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if err := digits(); err != nil {
			return 0, err
		}
	}
	text := string(s.b[start:s.i])
	if len(text) > 40 {
		text = text[:40] + "..."
	}
	if s.i != whole {
		return 0, fmt.Errorf("%s is not an integer", text)
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s does not fit in 64 bits", text)
	}
	return n, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// metadata scans the metadata object: string values under distinct keys.
func (s *scanner) metadata() (map[string]string, error) {
	m := map[string]string{}
	err := s.object(func(k string) error {
		if _, dup := m[k]; dup {
			return errorf("%s must be an object of strings: duplicate key %q", metadataKey, k)
		}
		v, err := s.stringOrNull()
		if isSyntax(err) {
			return err
		}
		if err != nil || v == nil {
			return errorf("%s must be an object of strings: %q is not a string", metadataKey, k)
		}
		m[k] = *v
		return nil
	})
	if errors.Is(err, errNotObject) {
		return nil, errorf("%s must be an object of strings: %v", metadataKey, err)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// entryFields are the members of a tensor's record.
var entryFields = [...]string{"dtype", "shape", "data_offsets"}

// entry scans the header record of tensor name and checks it: an object
// with exactly the members "dtype", "shape" and "data_offsets", spelled
// so (encoding/json would match them in any case) and each once.
func (s *scanner) entry(name string) (located, error) {
	if err := checkName(name); err != nil {
		return located{}, err
	}
	var dtype *string
	var shape, offs []int64
	var seen [len(entryFields)]bool
	err := s.object(func(k string) error {
		i := 0
		for i < len(entryFields) && entryFields[i] != k {
			i++
		}
		if i == len(entryFields) {
			return errorf("tensor %q: bad header entry: unknown field %q", name, k)
		}
		if seen[i] {
			return errorf("tensor %q: bad header entry: duplicate key %q", name, k)
		}
		seen[i] = true
		var err error
		switch i {
		case 0:
			dtype, err = s.stringOrNull()
		case 1:
			shape, err = s.intsOrNull()
		case 2:
			offs, err = s.intsOrNull()
		}
		if err != nil && !isSyntax(err) {
			err = errorf("tensor %q: bad header entry: %s: %v", name, k, err)
		}
		return err
	})
	if errors.Is(err, errNotObject) {
		return located{}, errorf("tensor %q: bad header entry: %v", name, err)
	}
	if err != nil {
		return located{}, err
	}
	switch {
	case dtype == nil:
		return located{}, errorf("tensor %q: missing dtype", name)
	case shape == nil:
		return located{}, errorf("tensor %q: missing shape", name)
	case offs == nil:
		return located{}, errorf("tensor %q: missing data_offsets", name)
	}
	if len(offs) != 2 {
		return located{}, errorf("tensor %q: data_offsets must hold 2 numbers, got %d", name, len(offs))
	}
	begin, end := offs[0], offs[1]
	if begin < 0 || end < begin {
		return located{}, errorf("tensor %q: invalid data_offsets [%d, %d]", name, begin, end)
	}
	dims := make([]int, len(shape))
	for i, d := range shape {
		if dims[i] = int(d); int64(dims[i]) != d {
			return located{}, errorf("tensor %q: shape %v is too large", name, shape)
		}
	}
	size, err := byteSize(name, *dtype, dims)
	if err != nil {
		return located{}, err
	}
	if end-begin != size {
		return located{}, errorf("tensor %q: data_offsets [%d, %d] span %d bytes, but %s %v needs %d",
			name, begin, end, end-begin, *dtype, dims, size)
	}
	return located{name: name, dtype: *dtype, shape: dims, begin: begin, end: end}, nil
}
