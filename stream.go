package vram

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram/backend"
)

// Stream is a queue of work on one device, like torch.cuda.Stream. Every
// operation runs on the current stream of its device (see [WithStream]),
// which is the device's default stream unless a goroutine chose another.
// Work on one stream runs in the order it was queued; work on two streams
// may run in any order, or at once, unless an [Event] orders it
// ([Stream.WaitEvent], [Stream.WaitStream]). On the CPU every stream's work
// is done when queued; on sim devices, streams other than the default
// queue their work and run it when something needs it done, which shows
// ordering mistakes deterministically (see package backend/sim).
//
// A Stream is safe for concurrent use. Release it when done; the default
// stream is never released.
type Stream struct {
	ds       *devState
	bs       backend.Stream
	def      bool
	released atomic.Bool
}

// NewStream creates a stream on device d, of the given priority when one
// is given (lower numbers run first, as in CUDA; 0 is the default, and
// [StreamPriorityRange] gives the device's range, to which the priority is
// clamped). It returns an [*Error] of kind [ErrUnavailable] when d cannot
// be used and of kind [ErrBackend] when the driver refuses.
func NewStream(d Device, priority ...int) (*Stream, error) {
	const op = "new stream"
	if len(priority) > 1 {
		return nil, &Error{Op: op, Kind: ErrArgument, Detail: fmt.Sprintf("one priority at most, got %d", len(priority))}
	}
	ds, err := deviceFor(d)
	if err != nil {
		return nil, opError(op, err)
	}
	p := 0
	if len(priority) == 1 {
		p = priority[0]
	}
	bs, err := ds.bd.NewStream(p)
	if err != nil {
		return nil, &Error{Op: op, Kind: ErrBackend, Detail: d.String(), Err: err}
	}
	return &Stream{ds: ds, bs: bs}, nil
}

// StreamPriorityRange returns the lowest and the highest stream priority
// of device d (torch.cuda's priority range): 0 and a negative number on a
// GPU (-5 on an H200, also on sim devices), 0 and 0 on the CPU.
func StreamPriorityRange(d Device) (lowest, highest int, err error) {
	ds, err := deviceFor(d)
	if err != nil {
		return 0, 0, opError("stream priority range", err)
	}
	lowest, highest = ds.bd.StreamPriorities()
	return lowest, highest, nil
}

// DefaultStream returns the default stream of device d
// (torch.cuda.default_stream). It panics with an [*Error] of kind
// [ErrUnavailable] when d cannot be used.
func DefaultStream(d Device) *Stream {
	return mustDevice("default stream", d).defaultStream()
}

// CurrentStream returns the stream that operations on device d use in the
// calling goroutine (torch.cuda.current_stream): the innermost
// [WithStream] stream of d, else d's default stream.
func CurrentStream(d Device) *Stream {
	ds := mustDevice("current stream", d)
	if s := ds.currentStream(); s != nil {
		return s
	}
	return ds.defaultStream()
}

// WithStream runs fn with s as the current stream of s's device in the
// calling goroutine, as Python's "with torch.cuda.stream(s):" does: every
// operation fn runs on that device, and every tensor it allocates there,
// uses s. Other devices and other goroutines are not affected; the
// previous stream is current again when fn returns or panics. Tensors
// allocated inside belong to s: when another stream uses one later, call
// [Tensor.RecordStream] for it, or order the streams with events. A
// backward pass through what fn computed, run outside fn, waits for the
// work queued on s first.
func WithStream(s *Stream, fn func()) {
	s.check("with stream")
	if fn == nil {
		nilFunc("with stream")
	}
	id, g := enter()
	g.streams = append(g.streams, s)
	defer func() {
		g.streams = g.streams[:len(g.streams)-1]
		leave(id, g)
	}()
	fn()
}

// Synchronize waits until all the work queued on every stream of device d
// has finished (torch.cuda.synchronize), and returns the first
// asynchronous error raised by that work, as an [*Error] of kind
// [ErrBackend].
func Synchronize(d Device) error {
	ds, err := deviceFor(d)
	if err != nil {
		return opError("synchronize", err)
	}
	if err := ds.bd.Synchronize(); err != nil {
		return &Error{Op: "synchronize", Kind: ErrBackend, Detail: d.String(), Err: err}
	}
	return nil
}

// Device returns the device the stream belongs to, also after Release.
// It panics with [ErrArgument] on a nil or zero stream.
func (s *Stream) Device() Device {
	s.checkNil("stream device")
	return s.ds.dev
}

// Priority returns the stream's priority.
func (s *Stream) Priority() int {
	s.check("stream priority")
	return s.bs.Priority()
}

// IsDefault reports whether s is its device's default stream. It panics
// with [ErrArgument] on a nil or zero stream.
func (s *Stream) IsDefault() bool {
	s.checkNil("stream is default")
	return s.def
}

// String describes the stream: "cuda:0 default stream", "sim:1 stream
// (priority -1)", "nil stream" for a nil one and "zero stream" for a zero
// Stream (&Stream{}, which no function returns).
func (s *Stream) String() string {
	if s == nil {
		return "nil stream"
	}
	if s.ds == nil {
		return "zero stream"
	}
	if s.def {
		return s.ds.dev.String() + " default stream"
	}
	return fmt.Sprintf("%s stream (priority %d)", s.ds.dev, s.bs.Priority())
}

// checkNil panics with [ErrArgument] on a nil stream and on a zero
// Stream, which belongs to no device.
func (s *Stream) checkNil(op string) {
	if s == nil {
		fail(op, ErrArgument, "nil stream")
	}
	if s.ds == nil {
		fail(op, ErrArgument, "zero Stream, of no device; get one from NewStream, DefaultStream or CurrentStream")
	}
}

// check panics with [ErrArgument] on a nil stream and [ErrReleased] on a
// released one.
func (s *Stream) check(op string) {
	s.checkNil(op)
	if s.released.Load() {
		fail(op, ErrReleased, "the %s was released", s)
	}
}

// Synchronize waits until the work queued on s has finished and returns
// the first asynchronous error raised by it (an [*Error] of kind
// [ErrBackend]).
func (s *Stream) Synchronize() error {
	s.check("stream synchronize")
	if err := s.bs.Synchronize(); err != nil {
		return &Error{Op: "stream synchronize", Kind: ErrBackend, Detail: s.String(), Err: err}
	}
	return nil
}

// Query reports whether all the work queued on s has finished, without
// waiting (torch.cuda.Stream.query). A driver error panics with an
// [*Error] of kind [ErrBackend].
func (s *Stream) Query() bool {
	s.check("stream query")
	done, err := s.bs.Query()
	check("stream query", err)
	return done
}

// WaitEvent makes the work queued on s from now on wait until e has
// completed; the calling goroutine does not wait. e may be an event of
// another device of the same kind. Waiting on an event never recorded does
// nothing.
func (s *Stream) WaitEvent(e *Event) {
	const op = "stream wait event"
	s.check(op)
	r := e.recorded(op)
	if r == nil {
		return
	}
	if r.ds.dev.Kind != s.ds.dev.Kind {
		fail(op, ErrDevice, "%s cannot wait on an event of %s", s, r.ds.dev)
	}
	check(op, s.bs.WaitEvent(r.be))
}

// WaitStream makes the work queued on s from now on wait until the work
// queued on other so far has finished (torch.cuda.Stream.wait_stream).
func (s *Stream) WaitStream(other *Stream) {
	const op = "stream wait stream"
	s.check(op)
	other.check(op)
	if other == s {
		return
	}
	e := NewEvent()
	defer e.Release()
	e.Record(other)
	s.WaitEvent(e)
}

// RecordEvent records a new event on s and returns it
// (torch.cuda.Stream.record_event).
func (s *Stream) RecordEvent() *Event {
	e := NewEvent()
	e.Record(s)
	return e
}

// Release destroys the stream once its queued work has finished. Using it
// afterwards panics with [ErrReleased]. Releasing the default stream, or a
// stream twice, does nothing.
func (s *Stream) Release() {
	if s == nil || s.ds == nil || s.def || s.released.Swap(true) {
		return
	}
	s.bs.Destroy()
}

// Event marks a point in the work of a stream (torch.cuda.Event): it
// completes when the work queued on that stream before it has finished.
// An event belongs to the device of the first stream it is recorded on.
// It is safe for concurrent use.
type Event struct {
	timing   bool
	rec      atomic.Pointer[recorded] // set by the first Record
	released atomic.Bool
}

// recorded is the backend event of an [Event] and its device, set together
// by the first Record so that a goroutine that sees one sees the other.
type recorded struct {
	be backend.Event
	ds *devState
}

// NewEvent returns an event, to be recorded on a stream.
func NewEvent() *Event { return &Event{} }

// NewTimingEvent returns an event that keeps the moment it completes, for
// [Event.ElapsedTime] (torch.cuda.Event(enable_timing=True)). Timing
// events cost a little more to record and wait on.
func NewTimingEvent() *Event { return &Event{timing: true} }

func (e *Event) check(op string) {
	if e == nil {
		fail(op, ErrArgument, "nil event")
	}
	if e.released.Load() {
		fail(op, ErrReleased, "the event was released")
	}
}

// recorded returns e's backend event and device, or nil before its first
// Record.
func (e *Event) recorded(op string) *recorded {
	e.check(op)
	return e.rec.Load()
}

// Record captures the work queued on s so far; recording again moves the
// event to a later point. An event recorded on one device cannot be
// recorded on another (it panics with [ErrDevice]).
func (e *Event) Record(s *Stream) {
	const op = "event record"
	e.check(op)
	s.check(op)
	r := e.recorded(op)
	if r == nil {
		nb, err := s.ds.bd.NewEvent(e.timing)
		if err != nil {
			panic(&Error{Op: op, Kind: ErrBackend, Detail: s.ds.dev.String(), Err: err})
		}
		if !e.rec.CompareAndSwap(nil, &recorded{be: nb, ds: s.ds}) {
			nb.Destroy() // another goroutine recorded it first
		}
		r = e.rec.Load()
	}
	if r.ds != s.ds {
		fail(op, ErrDevice, "the event belongs to %s; it cannot be recorded on %s", r.ds.dev, s)
	}
	check(op, r.be.Record(s.bs))
}

// Query reports whether the work before the event has finished, without
// waiting. An event never recorded has.
func (e *Event) Query() bool {
	r := e.recorded("event query")
	if r == nil {
		return true
	}
	done, err := r.be.Query()
	check("event query", err)
	return done
}

// Synchronize waits until the work before the event has finished.
func (e *Event) Synchronize() error {
	r := e.recorded("event synchronize")
	if r == nil {
		return nil
	}
	if err := r.be.Synchronize(); err != nil {
		return &Error{Op: "event synchronize", Kind: ErrBackend, Detail: r.ds.dev.String(), Err: err}
	}
	return nil
}

// Wait makes the work queued on s from now on wait for the event (the same
// as s.WaitEvent(e)).
func (e *Event) Wait(s *Stream) { s.WaitEvent(e) }

// ElapsedTime returns the time from the completion of e to the completion
// of end (torch.cuda.Event.elapsed_time, in a time.Duration rather than
// milliseconds). Both must be timing events ([NewTimingEvent]), recorded
// on streams of one device, and completed; otherwise it returns an
// [*Error] of kind [ErrArgument].
func (e *Event) ElapsedTime(end *Event) (time.Duration, error) {
	const op = "event elapsed time"
	start, stop := e.recorded(op), end.recorded(op)
	switch {
	case !e.timing || !end.timing:
		return 0, &Error{Op: op, Kind: ErrArgument, Detail: "both events must be timing events (vram.NewTimingEvent)"}
	case start == nil || stop == nil:
		return 0, &Error{Op: op, Kind: ErrArgument, Detail: "both events must be recorded first"}
	case start.ds != stop.ds:
		return 0, &Error{Op: op, Kind: ErrDevice, Detail: fmt.Sprintf("events of %s and %s", start.ds.dev, stop.ds.dev)}
	}
	d, err := stop.be.Elapsed(start.be)
	if err != nil {
		return 0, &Error{Op: op, Kind: ErrArgument, Detail: start.ds.dev.String(), Err: err}
	}
	return d, nil
}

// Release frees the event's driver resources; waits already queued on it
// still hold. Using it afterwards panics with [ErrReleased].
func (e *Event) Release() {
	if e == nil || e.released.Swap(true) {
		return
	}
	if r := e.rec.Load(); r != nil {
		r.be.Destroy()
	}
}

// defaultStream returns the device's default stream as a *Stream.
func (ds *devState) defaultStream() *Stream {
	if s := ds.defStream.Load(); s != nil {
		return s
	}
	ds.defStream.CompareAndSwap(nil, &Stream{ds: ds, bs: ds.bd.DefaultStream(), def: true})
	return ds.defStream.Load()
}

// currentStream returns the innermost WithStream stream of ds in the
// calling goroutine, or nil.
func (ds *devState) currentStream() *Stream {
	g := current()
	if g == nil {
		return nil
	}
	for i := len(g.streams) - 1; i >= 0; i-- {
		if g.streams[i].ds == ds {
			return g.streams[i]
		}
	}
	return nil
}

// stream returns the backend stream that operations on ds use in the
// calling goroutine.
func (ds *devState) stream() backend.Stream {
	if s := ds.currentStream(); s != nil {
		if s.released.Load() {
			fail("stream", ErrReleased, "the current %s was released", s)
		}
		return s.bs
	}
	return ds.defStreamB
}

// RecordStream tells the allocator that t's memory is also used by the
// work queued on s, so that when t is released its memory is not handed
// out again before that work has finished (torch.Tensor.record_stream).
// Call it when a tensor allocated on one stream is used on another. s
// must be a stream of t's device ([ErrDevice] otherwise).
func (t *Tensor) RecordStream(s *Stream) {
	const op = "record_stream"
	defer pin(op, t).unpin()
	s.check(op)
	if s.ds != t.ds() {
		fail(op, ErrDevice, "the tensor is on %s, the stream is a %s", t.Device(), s)
	}
	t.ds().bd.RecordStream(t.ref.st.buf, s.bs)
}

// opError renames an *Error from deviceFor to op.
func opError(op string, err error) error {
	if e, ok := err.(*Error); ok {
		c := *e
		c.Op = op
		return &c
	}
	return err
}
