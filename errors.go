package vram

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vramgo/vram/backend"
)

// Sentinel kinds of [Error], for use with errors.Is.
var (
	ErrShape       = errors.New("shape mismatch")
	ErrDType       = errors.New("unsupported dtype")
	ErrDevice      = errors.New("device mismatch")
	ErrIndex       = errors.New("index out of range")
	ErrArgument    = errors.New("invalid argument")
	ErrReleased    = errors.New("use of a released tensor")
	ErrAutograd    = errors.New("autograd error")
	ErrUnavailable = errors.New("device unavailable")
	ErrBackend     = errors.New("backend error")
	ErrOutOfMemory = errors.New("out of memory")
	// ErrConfigFixed is the kind of the error of [Configure] once the
	// first use of a device has fixed the configuration.
	ErrConfigFixed = errors.New("configuration fixed after first use")
)

// Error is the typed value that tensor operations panic with. Kind is one of
// the Err sentinels above; errors.Is(err, vram.ErrShape) and friends match
// it, and errors.As reaches a wrapped backend or allocator error.
type Error struct {
	Op     string // the operation, as in "matmul"
	Kind   error  // one of ErrShape, ErrDType, ...
	Detail string // what went wrong and how to fix it
	Err    error  // an underlying error, if any
}

// Error formats the error as "vram: OP: DETAIL: ERR", leaving out the
// parts that are empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("vram: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(e.Detail)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the kind and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// DeviceMismatchError is the panic value of an operation whose tensors live
// on different devices. It matches [ErrDevice] under errors.Is.
type DeviceMismatchError struct {
	Op       string // the operation the caller called, such as "add"
	Expected Device // the device of the first tensor
	Got      Device // the device of the tensor that differs
}

// Error names the operation, both devices and the fix.
func (e *DeviceMismatchError) Error() string {
	return fmt.Sprintf("vram: %s: expected all tensors on the same device, found %s and %s; "+
		"move one first, for example x.To(%s)", e.Op, e.Expected, e.Got, e.Expected.goExpr())
}

// Is reports whether target is [ErrDevice].
func (e *DeviceMismatchError) Is(target error) bool { return target == ErrDevice }

// Catch runs fn and returns the vram error it panicked with, or nil.
// Panics that are not vram's typed errors ([*Error], [*DeviceMismatchError])
// are passed on unchanged.
func Catch(fn func()) (err error) {
	if fn == nil {
		return &Error{Op: "catch", Kind: ErrArgument, Detail: "nil function"}
	}
	defer func() {
		if r := recover(); r != nil {
			switch e := r.(type) {
			case *Error:
				err = e
			case *DeviceMismatchError:
				err = e
			default:
				panic(r)
			}
		}
	}()
	fn()
	return nil
}

// fail panics with an *Error.
func fail(op string, kind error, format string, args ...any) {
	panic(&Error{Op: op, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// notNil panics with an [*Error] of kind [ErrArgument] when one of ts is
// nil or a zero Tensor, so that a nil *Tensor reaches the caller as a vram error that
// [Catch] returns rather than as a nil-pointer dereference. Exported
// methods and functions call it (directly or through sameDevice or live)
// before touching a tensor's fields.
func notNil(op string, ts ...*Tensor) {
	for i, t := range ts {
		if absent(t) {
			nilTensor(op, t, i, len(ts))
		}
	}
}

// absent reports whether t is nil or a zero Tensor (&Tensor{}, which no
// factory or operation returns): a tensor with no storage to use.
func absent(t *Tensor) bool { return t == nil || t.ref == nil }

// nilFunc panics with an [*Error] of kind [ErrArgument], naming op, for a
// nil function given to an exported function that runs one (Tidy, NoGrad,
// WithStream, ...), rather than let the call be a nil-pointer dereference
// inside it.
func nilFunc(op string) {
	fail(op, ErrArgument, "nil function")
}

// nilTensor panics with the error for t, a nil tensor or a zero Tensor
// (see absent), the i-th of n operands of op.
func nilTensor(op string, t *Tensor, i, n int) {
	const how = "tensors come from factories such as vram.Zeros and from operations"
	what := "nil *Tensor"
	if t != nil {
		what = "zero Tensor, made without a factory"
	}
	if n == 1 {
		fail(op, ErrArgument, "%s (%s)", what, how)
	}
	fail(op, ErrArgument, "tensor %d of %d is a %s (%s)", i+1, n, what, how)
}

// asOp is deferred by an exported operation built from others (Select from
// Narrow, Ones from Full, Mean from a sum and a division): a vram error
// raised inside it then names op, the operation the caller called, rather
// than the one it delegated to. Other panics pass through unchanged.
func asOp(op string) {
	r := recover()
	switch e := r.(type) {
	case nil:
		return
	case *Error:
		if e.Op != op {
			c := *e
			c.Op = op
			r = &c
		}
	case *DeviceMismatchError:
		if e.Op != op {
			c := *e
			c.Op = op
			r = &c
		}
	}
	panic(r)
}

// check panics with an *Error of kind ErrBackend wrapping err, if err is not
// nil. Errors that already are vram errors pass through unchanged.
func check(op string, err error) {
	if err == nil {
		return
	}
	var ve *Error
	if errors.As(err, &ve) {
		panic(ve)
	}
	if errors.Is(err, backend.ErrCapturing) {
		panic(&Error{Op: op, Kind: ErrBackend, Detail: capturingDetail, Err: err})
	}
	panic(&Error{Op: op, Kind: ErrBackend, Detail: "device error", Err: err})
}
