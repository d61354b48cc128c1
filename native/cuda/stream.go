package cuda

import (
	"time"

	"github.com/ebitengine/purego"
)

// StreamCreate creates a stream in the current context with the given
// flags ([StreamDefault] or [StreamNonBlocking]). It calls cuStreamCreate.
// The stream must be destroyed with [StreamDestroy].
func StreamCreate(flags uint32) (Stream, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var s Stream
	return s, check("cuStreamCreate", cuStreamCreate(&s, flags))
}

// StreamDestroy destroys a stream; work already queued on it still runs.
// It calls cuStreamDestroy_v2.
func StreamDestroy(s Stream) error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	return check("cuStreamDestroy_v2", cuStreamDestroy(s))
}

// StreamSynchronize blocks until the stream's work is done and returns the
// first asynchronous error, if any. It calls cuStreamSynchronize.
func StreamSynchronize(s Stream) error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	return check("cuStreamSynchronize", cuStreamSynchronize(s))
}

// StreamQuery returns nil when all work queued on the stream is done, an
// error matching [ErrNotReady] while some is pending, and other errors as
// the driver reports them. It calls cuStreamQuery through purego.SyscallN.
func StreamQuery(s Stream) error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	r, _, _ := purego.SyscallN(addrStreamQuery, uintptr(s))
	return check("cuStreamQuery", Result(int32(r)))
}

// StreamWaitEvent makes later work on s wait until the work before the
// event's last record is done; flags must be 0. It calls cuStreamWaitEvent
// through purego.SyscallN. The host does not block.
func StreamWaitEvent(s Stream, e Event, flags uint32) error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	r, _, _ := purego.SyscallN(addrStreamWaitEvent, uintptr(s), uintptr(e), uintptr(flags))
	return check("cuStreamWaitEvent", Result(int32(r)))
}

// EventCreate creates an event in the current context with the given
// flags (EventDefault, EventDisableTiming, ...). It calls cuEventCreate.
// The event must be destroyed with [EventDestroy].
func EventCreate(flags uint32) (Event, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var e Event
	return e, check("cuEventCreate", cuEventCreate(&e, flags))
}

// EventDestroy destroys an event. It calls cuEventDestroy_v2.
func EventDestroy(e Event) error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	return check("cuEventDestroy_v2", cuEventDestroy(e))
}

// EventRecord records the event on stream s: it completes when the work
// queued on s before it is done. It calls cuEventRecord through
// purego.SyscallN.
func EventRecord(e Event, s Stream) error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	r, _, _ := purego.SyscallN(addrEventRecord, uintptr(e), uintptr(s))
	return check("cuEventRecord", Result(int32(r)))
}

// EventQuery returns nil when the event has completed, an error matching
// [ErrNotReady] while it has not. It calls cuEventQuery through
// purego.SyscallN.
func EventQuery(e Event) error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	r, _, _ := purego.SyscallN(addrEventQuery, uintptr(e))
	return check("cuEventQuery", Result(int32(r)))
}

// EventSynchronize blocks until the event has completed. It calls
// cuEventSynchronize.
func EventSynchronize(e Event) error {
	if !ready.Load() {
		return ErrNotLoaded
	}
	return check("cuEventSynchronize", cuEventSynchronize(e))
}

// EventElapsedTime returns the time between two completed events created
// without EventDisableTiming (resolution about half a microsecond). It
// calls cuEventElapsedTime_v2 (cuEventElapsedTime on drivers older than
// CUDA 12.8, which lack it; CUDA 13 has only the _v2 name in its header).
func EventElapsedTime(start, end Event) (time.Duration, error) {
	if !ready.Load() {
		return 0, ErrNotLoaded
	}
	var ms float32
	if err := check("cuEventElapsedTime_v2", cuEventElapsedTime(&ms, start, end)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}
