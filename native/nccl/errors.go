package nccl

import (
	"github.com/vramgo/vram/native/internal/status"
	"github.com/vramgo/vram/native/load"
)

// Result is an ncclResult_t, the status every NCCL call returns.
type Result int32

// Success is ncclSuccess.
const Success Result = 0

// resultNames maps ncclResult_t values to their names in nccl.h (NCCL
// 2.30; ncclTimeout is new in 2.29, the others date from 2.14 or before).
var resultNames = map[Result]string{
	0: "ncclSuccess",
	1: "ncclUnhandledCudaError",
	2: "ncclSystemError",
	3: "ncclInternalError",
	4: "ncclInvalidArgument",
	5: "ncclInvalidUsage",
	6: "ncclRemoteError",
	7: "ncclInProgress",
	8: "ncclTimeout",
}

// Name returns the result's name in nccl.h, e.g. "ncclInvalidUsage", from
// the checked-in table; codes it lacks are named "ncclResult_<code>".
func (r Result) Name() string { return status.Name(resultNames, "ncclResult_", r) }

// String returns the result's name.
func (r Result) String() string { return r.Name() }

// Err returns nil for [Success] and otherwise an *[Error] for r that names
// no C function: for a state such as the one [CommGetAsyncError] reports.
func (r Result) Err() error { return check("", r) }

// Error is a failed NCCL call. It keeps the numeric code, its name in
// nccl.h and the C function that returned it. Match it against the
// sentinels with errors.Is (the codes are compared) or take it apart with
// errors.As.
type Error struct {
	Code Result // the ncclResult_t
	Name string // e.g. "ncclInvalidUsage"
	Func string // the C symbol that failed, e.g. "ncclAllReduce"; empty in sentinels and states
	Desc string // NCCL's text for the code (ncclGetErrorString)
	// Last is NCCL's message for the last error it met (ncclGetLastError),
	// which names the cause ("Trying to send to self without a matching
	// recv"). NCCL keeps it until the next error, so it may belong to an
	// earlier failure.
	Last string
}

// Error returns "nccl: ncclAllReduce: ncclInvalidArgument (4): invalid
// argument (run with NCCL_DEBUG=WARN for details); last NCCL error: ...".
func (e *Error) Error() string {
	msg := status.Message("nccl", e.Func, e.Name, int32(e.Code), e.Desc)
	if e.Last != "" {
		msg += "; last NCCL error: " + e.Last
	}
	return msg
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, nccl.ErrRemoteError) matches any failure of a peer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func sentinel(code Result) *Error { return &Error{Code: code, Name: code.Name()} }

// Sentinels for every ncclResult_t but success; compare with errors.Is.
var (
	ErrUnhandledCudaError = sentinel(1) // ncclUnhandledCudaError: a CUDA call failed
	ErrSystemError        = sentinel(2) // ncclSystemError: a system call (socket, malloc, ...) failed
	ErrInternalError      = sentinel(3) // ncclInternalError: an NCCL bug, or memory corruption
	ErrInvalidArgument    = sentinel(4) // ncclInvalidArgument: a bad pointer, count, type, rank or device
	ErrInvalidUsage       = sentinel(5) // ncclInvalidUsage: calls in a wrong order, e.g. an unmatched send to self
	ErrRemoteError        = sentinel(6) // ncclRemoteError: a peer failed, or the network to it did
	ErrInProgress         = sentinel(7) // ncclInProgress: a nonblocking call has not finished; poll CommGetAsyncError
	ErrTimeout            = sentinel(8) // ncclTimeout: an operation timed out (NCCL 2.29 and later)
)

// ErrNotLoaded is returned by every call made before [Load] succeeded.
var ErrNotLoaded = load.NotLoaded("nccl", Spec.Sonames[0], "nccl.Load")

// check turns an ncclResult_t from the C function fn into an error, with
// NCCL's text for the code and, unless the call is merely in progress, its
// message for the last error.
func check(fn string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Code: r, Name: r.Name(), Func: fn}
	if ncclGetErrorString != nil {
		e.Desc = goString(ncclGetErrorString(r))
	}
	if ncclGetLastError != nil && r != 7 {
		e.Last = goString(ncclGetLastError(0))
	}
	return e
}
