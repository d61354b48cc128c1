package trace

import (
	"errors"
	"strconv"
)

// ParseError reports input that could not be read: a malformed line of a
// text trace, JSON that is not a vram snapshot, a corrupt or truncated
// pickle, or a snapshot that fails [Snapshot.Validate]. Every reader in this
// package returns its failures as a *ParseError (use [errors.As]); a failure
// of the underlying io.Reader or os.Open is one too, with Err set to it.
//
// Its message reads "trace: FILE: line N: problem" (text), "trace: FILE:
// offset N: problem" (JSON and pickle), dropping the parts that are unknown.
type ParseError struct {
	// File names the input; "" when it was read from an unnamed reader.
	File string
	// Kind is the format being read.
	Kind Kind
	// Line is the 1-based line of a text trace, 0 if not applicable.
	Line int
	// Offset is the byte offset in the (decompressed) input of the
	// problem, -1 if not applicable.
	Offset int64
	// Msg says what is wrong; "" when Err says it all.
	Msg string
	// Err is the underlying error, if any: an [*InvalidSnapshotError], an
	// I/O error, or io.ErrUnexpectedEOF for input that ends too early.
	Err error
}

// Error returns the message described at [ParseError].
func (e *ParseError) Error() string {
	s := "trace: "
	if e.File != "" {
		s += e.File + ": "
	}
	switch {
	case e.Line > 0:
		s += "line " + strconv.Itoa(e.Line) + ": "
	case e.Offset >= 0:
		s += "offset " + strconv.FormatInt(e.Offset, 10) + ": "
	}
	switch {
	case e.Msg != "" && e.Err != nil:
		s += e.Msg + ": " + errDetail(e.Err)
	case e.Msg != "":
		s += e.Msg
	case e.Err != nil:
		s += errDetail(e.Err)
	}
	return s
}

// Unwrap returns Err.
func (e *ParseError) Unwrap() error { return e.Err }

// errNilReader is the error of a reader of this package given a nil
// io.Reader to read a kind of input from.
func errNilReader(kind Kind) error {
	return &ParseError{Kind: kind, Offset: -1, Msg: "nil reader"}
}

// errNilWriter is the error of a writer of this package given a nil
// io.Writer.
var errNilWriter = errors.New("trace: nil writer")

// detailer is an error of this package that can print itself without the
// "trace: " prefix, so that wrapping it does not repeat the prefix.
type detailer interface{ detail() string }

func errDetail(err error) string {
	if d, ok := err.(detailer); ok {
		return d.detail()
	}
	return err.Error()
}

// withFile returns err with its file name set to name when err is a
// *ParseError without one; any other error is wrapped in a *ParseError.
func withFile(err error, name string, kind Kind) error {
	if err == nil {
		return nil
	}
	var pe *ParseError
	if errors.As(err, &pe) {
		if pe.File == "" {
			c := *pe
			c.File = name
			return &c
		}
		return err
	}
	return &ParseError{File: name, Kind: kind, Offset: -1, Err: err}
}

// contextError prefixes an error with where it happened, without repeating
// the package prefix of errors from this package.
type contextError struct {
	ctx string
	err error
}

func (e *contextError) Error() string { return e.ctx + ": " + errDetail(e.err) }
func (e *contextError) Unwrap() error { return e.err }

// InFile returns err prefixed with the file name, as "NAME: ERR", unless
// err already names that file (a [*ParseError] of it, however wrapped), so
// that a caller that reports what went wrong with a file names it once.
// It returns nil for a nil err.
func InFile(name string, err error) error {
	if err == nil {
		return nil
	}
	var pe *ParseError
	if errors.As(err, &pe) && pe.File == name {
		return err
	}
	return &fileError{name: name, err: err}
}

// fileError is an error prefixed with the file it concerns.
type fileError struct {
	name string
	err  error
}

func (e *fileError) Error() string { return e.name + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }
