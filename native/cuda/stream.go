package cuda

import (
	"math"
	"time"

	"github.com/ebitengine/purego"
)

// StreamCreate creates a stream in the current context with the given
// flags ([StreamDefault] or [StreamNonBlocking]). It calls cuStreamCreate.
// The stream must be destroyed with [StreamDestroy].
func StreamCreate(flags uint32) (Stream, error) {
	var s Stream
	err := call("cuStreamCreate", func() Result { return cuStreamCreate(&s, flags) })
	return s, err
}

// StreamCreateWithPriority creates a stream in the current context with
// the given flags ([StreamDefault] or [StreamNonBlocking]) and scheduling
// priority. It calls cuStreamCreateWithPriority. Lower numbers are higher
// priorities and 0 is the default; the driver clamps a priority outside
// [CtxGetStreamPriorityRange] to the nearer end of the range (and so does
// this function with one outside the range of a C int). Priorities are a
// hint to the scheduler for the kernels waiting to run; they do not apply
// to copies. The stream must be destroyed with [StreamDestroy].
func StreamCreateWithPriority(flags uint32, priority int) (Stream, error) {
	p := int32(max(math.MinInt32, min(math.MaxInt32, priority)))
	var s Stream
	err := call("cuStreamCreateWithPriority", func() Result { return cuStreamCreateWithPriority(&s, flags, p) })
	return s, err
}

// CtxGetStreamPriorityRange returns the stream priorities that mean
// something in the current context: least is the lowest priority (0, the
// default) and greatest the highest, a negative number on GPUs that have
// priorities (equal to least on those that do not). It calls
// cuCtxGetStreamPriorityRange.
func CtxGetStreamPriorityRange() (least, greatest int, err error) {
	var l, g int32
	err = call("cuCtxGetStreamPriorityRange", func() Result { return cuCtxGetStreamPriorityRange(&l, &g) })
	return int(l), int(g), err
}

// StreamGetPriority returns the priority of stream s, as clamped by the
// driver when it was created. It calls cuStreamGetPriority.
func StreamGetPriority(s Stream) (int, error) {
	var p int32
	err := call("cuStreamGetPriority", func() Result { return cuStreamGetPriority(s, &p) })
	return int(p), err
}

// StreamDestroy destroys a stream; work already queued on it still runs.
// It calls cuStreamDestroy_v2.
func StreamDestroy(s Stream) error {
	return call("cuStreamDestroy_v2", func() Result { return cuStreamDestroy(s) })
}

// StreamSynchronize blocks until the stream's work is done and returns the
// first asynchronous error, if any. It calls cuStreamSynchronize.
func StreamSynchronize(s Stream) error {
	return call("cuStreamSynchronize", func() Result { return cuStreamSynchronize(s) })
}

// StreamQuery returns nil when all work queued on the stream is done, an
// error matching [ErrNotReady] while some is pending, and other errors as
// the driver reports them. It calls cuStreamQuery through purego.SyscallN.
func StreamQuery(s Stream) error {
	return call("cuStreamQuery", func() Result {
		return result(purego.SyscallN(addrStreamQuery, uintptr(s)))
	})
}

// StreamWaitEvent makes later work on s wait until the work before the
// event's last record is done; flags must be 0. It calls cuStreamWaitEvent
// through purego.SyscallN. The host does not block. The event may belong
// to another context, also on another device.
func StreamWaitEvent(s Stream, e Event, flags uint32) error {
	return call("cuStreamWaitEvent", func() Result {
		return result(purego.SyscallN(addrStreamWaitEvent, uintptr(s), uintptr(e), uintptr(flags)))
	})
}

// EventCreate creates an event in the current context with the given
// flags ([EventDefault], [EventBlockingSync], [EventDisableTiming], ...,
// or'ed together). It calls cuEventCreate. The event must be destroyed
// with [EventDestroy].
func EventCreate(flags uint32) (Event, error) {
	var e Event
	err := call("cuEventCreate", func() Result { return cuEventCreate(&e, flags) })
	return e, err
}

// EventDestroy destroys an event. It calls cuEventDestroy_v2.
func EventDestroy(e Event) error {
	return call("cuEventDestroy_v2", func() Result { return cuEventDestroy(e) })
}

// EventRecord records the event on stream s: it completes when the work
// queued on s before it is done. It calls cuEventRecord through
// purego.SyscallN.
func EventRecord(e Event, s Stream) error {
	return call("cuEventRecord", func() Result {
		return result(purego.SyscallN(addrEventRecord, uintptr(e), uintptr(s)))
	})
}

// EventQuery returns nil when the event has completed, an error matching
// [ErrNotReady] while it has not. It calls cuEventQuery through
// purego.SyscallN.
func EventQuery(e Event) error {
	return call("cuEventQuery", func() Result {
		return result(purego.SyscallN(addrEventQuery, uintptr(e)))
	})
}

// EventSynchronize blocks until the event has completed. It calls
// cuEventSynchronize.
func EventSynchronize(e Event) error {
	return call("cuEventSynchronize", func() Result { return cuEventSynchronize(e) })
}

// EventElapsedTime returns the time between two completed events created
// without EventDisableTiming (resolution about half a microsecond). It
// calls cuEventElapsedTime_v2 (cuEventElapsedTime on drivers older than
// CUDA 12.8, which lack it; CUDA 13 has only the _v2 name in its header).
func EventElapsedTime(start, end Event) (time.Duration, error) {
	var ms float32
	if err := call("cuEventElapsedTime_v2", func() Result { return cuEventElapsedTime(&ms, start, end) }); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}
