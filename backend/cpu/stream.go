package cpu

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram/backend"
)

// The CPU runs every kernel on the calling goroutine before returning, so
// its streams are plain names: all work queued on any of them has finished
// when the call that queued it returns, every query is true, and waits
// return at once. Events still keep their time, for Elapsed.

// Stream is a CPU stream. The CPU has no priorities: every stream reports
// priority 0.
type Stream struct {
	id uint64 // 0 for the default stream
}

var (
	_ backend.Stream = (*Stream)(nil)
	_ backend.Event  = (*Event)(nil)

	defaultStream = &Stream{}
	nextStream    atomic.Uint64
)

// ID returns the stream's number: 0 for the default stream, then 1, 2, ...
// in order of creation.
func (s *Stream) ID() uint64 { return s.id }

// Synchronize returns nil: the stream's work is done.
func (*Stream) Synchronize() error { return nil }

// Query returns true: the stream's work is done.
func (*Stream) Query() (bool, error) { return true, nil }

// WaitEvent checks that e is a CPU event; there is nothing to wait for.
func (*Stream) WaitEvent(e backend.Event) error {
	if _, ok := e.(*Event); !ok {
		return fmt.Errorf("cpu: wait on an event of type %T: %w", e, backend.ErrStreamDevice)
	}
	return nil
}

// Priority returns 0.
func (*Stream) Priority() int { return 0 }

// Destroy does nothing; a CPU stream holds no resources.
func (*Stream) Destroy() error { return nil }

// DefaultStream returns the CPU's default stream.
func (*Device) DefaultStream() backend.Stream { return defaultStream }

// NewStream returns a new CPU stream; the priority is ignored (the CPU has
// only priority 0).
func (*Device) NewStream(int) (backend.Stream, error) {
	return &Stream{id: nextStream.Add(1)}, nil
}

// StreamPriorities returns 0, 0: the CPU has no stream priorities.
func (*Device) StreamPriorities() (lowest, highest int) { return 0, 0 }

// Synchronize returns nil: the CPU's work is done when queued.
func (*Device) Synchronize() error { return nil }

// Event is a CPU event. It completes when recorded, since the work before
// it is done; a timing event keeps that moment.
type Event struct {
	timing bool
	at     atomic.Int64 // nanoseconds since the process's clock base; 0 until recorded
}

// clockBase is the origin of Event times (monotonic).
var clockBase = time.Now()

// NewEvent returns a CPU event.
func (*Device) NewEvent(timing bool) (backend.Event, error) { return &Event{timing: timing}, nil }

// Record marks the event at the current moment; s must be a CPU stream.
func (e *Event) Record(s backend.Stream) error {
	if _, ok := s.(*Stream); !ok {
		return fmt.Errorf("cpu: record on a stream of type %T: %w", s, backend.ErrStreamDevice)
	}
	e.at.Store(int64(time.Since(clockBase)) + 1)
	return nil
}

// Query returns true: the work before the event is done.
func (*Event) Query() (bool, error) { return true, nil }

// Synchronize returns nil at once.
func (*Event) Synchronize() error { return nil }

// errTiming is returned by Elapsed for events that keep no time.
var errTiming = errors.New("elapsed time needs two timing events, both recorded")

// Elapsed returns the time from start's recording to e's.
func (e *Event) Elapsed(start backend.Event) (time.Duration, error) {
	s, ok := start.(*Event)
	if !ok {
		return 0, fmt.Errorf("cpu: elapsed time from an event of type %T: %w", start, backend.ErrStreamDevice)
	}
	if !e.timing || !s.timing || e.at.Load() == 0 || s.at.Load() == 0 {
		return 0, fmt.Errorf("cpu: %w", errTiming)
	}
	return time.Duration(e.at.Load() - s.at.Load()), nil
}

// Destroy does nothing; a CPU event holds no resources.
func (*Event) Destroy() error { return nil }

// checkStream returns an error wrapping backend.ErrStreamDevice unless s
// is a CPU stream (or nil, the default stream).
func checkStream(s backend.Stream) error {
	if s == nil {
		return nil
	}
	if _, ok := s.(*Stream); !ok {
		return fmt.Errorf("cpu: kernel on a stream of type %T: %w", s, backend.ErrStreamDevice)
	}
	return nil
}
