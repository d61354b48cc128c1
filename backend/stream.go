package backend

import (
	"errors"
	"time"
)

// Streams is the part of a [Device] that orders work: its streams and the
// events between them, after CUDA's model. Every kernel and copy is queued
// on a stream the caller names; work on one stream runs in the order it was
// queued, and work on two streams runs in any order, possibly at once,
// unless an event orders it. A device that runs everything at once (the
// CPU) implements streams trivially: all its work is done when queued.
type Streams interface {
	// DefaultStream returns the stream that ops use unless told otherwise.
	// It is created with the device and lives as long as it.
	DefaultStream() Stream
	// NewStream creates a stream of the given priority. Lower numbers are
	// higher priorities, as in CUDA; 0 is the default priority, and a
	// priority outside StreamPriorities is clamped to it. Work of a
	// higher-priority stream is scheduled first when both have work ready.
	NewStream(priority int) (Stream, error)
	// StreamPriorities returns the device's range of stream priorities:
	// the lowest priority (a number, 0 on CUDA) and the highest (a smaller
	// number, -5 on an H200). A device without priorities returns 0, 0.
	StreamPriorities() (lowest, highest int)
	// NewEvent creates an event of this device. With timing set, the
	// event records when it completes, for [Event.Elapsed]; without, it is
	// cheaper to record and wait on.
	NewEvent(timing bool) (Event, error)
	// Synchronize blocks until the work queued on every stream of the
	// device has finished, and returns the first asynchronous error.
	Synchronize() error
}

// Stream is a queue of work on one device.
type Stream interface {
	// Synchronize blocks until all work queued on the stream has finished.
	// It returns an asynchronous error raised by that work, if any; such an
	// error may come from an op submitted long before the call.
	Synchronize() error
	// Query reports whether all work queued on the stream has finished,
	// without waiting.
	Query() (bool, error)
	// WaitEvent makes the work queued on the stream after the call wait
	// until e has completed; the host does not wait. e may be an event of
	// another device of the same backend. Waiting on an event never
	// recorded does nothing.
	WaitEvent(e Event) error
	// Priority returns the priority the stream was created with, clamped
	// to the device's range.
	Priority() int
	// Destroy releases the stream once its queued work has finished. The
	// default stream is never destroyed: Destroy does nothing on it.
	Destroy() error
}

// Event marks a point in the work of a stream: it completes when the work
// queued on that stream before it has finished.
type Event interface {
	// Record captures the work queued on s so far (s is a stream of the
	// event's device); recording again moves the event to a later point.
	Record(s Stream) error
	// Query reports whether the captured work has finished, without
	// waiting. An event never recorded has completed.
	Query() (bool, error)
	// Synchronize blocks until the captured work has finished.
	Synchronize() error
	// Elapsed returns the time from the completion of start to the
	// completion of this event. Both must be timing events, recorded and
	// completed.
	Elapsed(start Event) (time.Duration, error)
	// Destroy releases the event; waits already queued on it still hold.
	Destroy() error
}

// AsyncCopier is implemented by devices that allocate page-locked (pinned)
// host memory and copy between it and the device without the host
// waiting, as torch's pin_memory and non_blocking copies do. Callers find it
// with a type assertion; a copy that cannot be done without waiting returns
// an error wrapping [ErrNotImplemented], and the caller then copies through
// [Copier].
type AsyncCopier interface {
	// AllocPinned returns nbytes of page-locked host memory. It is freed
	// with FreePinned, which keeps it from reuse until the copies queued on
	// it have finished.
	AllocPinned(nbytes int64) (HostBuffer, error)
	// FreePinned returns a buffer from AllocPinned.
	FreePinned(b HostBuffer)
	// CopyFromPinned queues a copy of the contiguous host view src (in a
	// buffer from AllocPinned) into the contiguous device view dst on s and
	// returns at once. src must not be written until s has passed the copy.
	CopyFromPinned(s Stream, dst, src View) error
	// CopyToPinned queues a copy of the contiguous device view src into the
	// contiguous host view dst (in a buffer from AllocPinned) on s and
	// returns at once. dst holds the data once s has passed the copy.
	CopyToPinned(s Stream, dst, src View) error
}

// Pinned is implemented by host buffers in page-locked memory (from
// [AsyncCopier.AllocPinned]), so that callers can tell them apart.
type Pinned interface {
	HostBuffer
	// PinnedBy returns the device whose AsyncCopier allocated the buffer.
	PinnedBy() Device
}

// ErrStreamDevice is returned (wrapped) when a stream or event of one
// device is used with another device's work.
var ErrStreamDevice = errors.New("stream or event of another device")
