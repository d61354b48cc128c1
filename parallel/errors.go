package parallel

import (
	"fmt"
	"slices"
	"strings"
)

// errPrefix begins the message of every error of the package.
const errPrefix = "parallel: "

// unprefixed returns err's message without the package's errPrefix, for an
// error of the package quoted inside another.
func unprefixed(err error) string { return strings.TrimPrefix(err.Error(), errPrefix) }

// errorf is fmt.Errorf for the package's errors: it wraps what
// fmt.Errorf(format, args...) wraps, so that errors.Is and errors.As see
// the same errors, but its message quotes the package's errors among args
// without their own "parallel: ", and starts with it once when
// fmt.Errorf's would ("parallel: DDP: ...: abort: rank 1: communicator
// aborted", not "parallel: DDP: ...: parallel: abort: rank 1: parallel:
// communicator aborted").
func errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	var shown []any
	for i, a := range args {
		e, ok := a.(error)
		if !ok {
			continue
		}
		m, ok := strings.CutPrefix(message(e), errPrefix)
		if !ok {
			continue
		}
		if shown == nil {
			shown = slices.Clone(args)
		}
		shown[i] = quoted(m)
	}
	if shown == nil {
		return err
	}
	msg := fmt.Errorf(format, shown...).Error()
	if strings.HasPrefix(err.Error(), errPrefix) && !strings.HasPrefix(msg, errPrefix) {
		msg = errPrefix + msg
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		return &wrappedAll{msg: msg, errs: u.Unwrap()}
	case interface{ Unwrap() error }:
		return &wrapped{msg: msg, err: u.Unwrap()}
	}
	return &wrapped{msg: msg}
}

// message returns err.Error(), or "" when that panics (a nil pointer held
// as an error), which fmt prints its own way.
func message(err error) (m string) {
	defer func() {
		if recover() != nil {
			m = ""
		}
	}()
	return err.Error()
}

// quoted is the message of an error quoted by [errorf].
type quoted string

func (q quoted) Error() string { return string(q) }

// wrapped is an error of [errorf] that wraps one error (or none).
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// wrappedAll is an error of [errorf] that wraps several.
type wrappedAll struct {
	msg  string
	errs []error
}

func (e *wrappedAll) Error() string   { return e.msg }
func (e *wrappedAll) Unwrap() []error { return e.errs }
