package sim

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
)

// Streams on a simulated GPU model CUDA's ordering without concurrency.
//
// The default stream runs each kernel when it is queued. Every other
// stream (from NewStream) only queues its work, and runs it later, in
// order, when something needs it done: Synchronize of the stream or the
// device, a copy to the host on it, Synchronize of an event recorded on
// it, a stream that waits on such an event reaching the wait, or a queue
// grown past maxQueued. Query of a stream or event with work left runs
// that work and reports false once, as a GPU that was still busy.
//
// So a program that reads on one stream what another wrote, without an
// event between them, reads the old values here as it could on a GPU, but
// every time; and one that frees a tensor while another stream's queued
// work still uses it, without RecordStream, gets a [HazardError] from the
// next Synchronize (on a GPU the allocator could hand that memory to new
// work while the old work still runs). The caching allocator sees the
// streams too: each has its own pool, and a block recorded on a stream
// returns to the pool only once the stream has run past the free.

// maxQueued is the most kernels a stream keeps queued; the next one runs
// them all, as a GPU's queue drains. It bounds the memory queued work
// holds.
const maxQueued = 4096

// qmu guards the queues, positions and events of every simulated device
// (one lock, so that a wait on another device's event cannot deadlock).
// Queued work runs with it held.
var qmu sync.Mutex

// Stream is a stream of a simulated device.
type Stream struct {
	d        *Device
	id       memory.Stream // 0 for the default stream
	priority int
	eager    bool // the default stream: work runs when queued

	// Guarded by qmu.
	queue     []queued
	queuedN   int64    // kernels ever queued
	doneN     int64    // kernels run
	err       error    // first error of work run since the last Synchronize
	marks     []*Event // timing events waiting for doneN to reach them
	destroyed bool
	capture   *capture // set while captured into a graph (graph.go)
}

// queued is one kernel waiting on a stream.
type queued struct {
	run  func() error
	bufs []*buffer
}

var (
	_ backend.Stream = (*Stream)(nil)
	_ backend.Event  = (*Event)(nil)
)

// HazardError reports a buffer freed while work queued on another stream
// still used it and that stream was not recorded with RecordStream. It is
// returned by the next Synchronize of the device or of one of its streams.
type HazardError struct {
	Device      int   // sim device index
	Bytes       int64 // size of the buffer
	AllocStream int   // stream the buffer was allocated for
	UseStream   int   // stream whose queued work still used it
}

// Error describes the buffer, the stream it was allocated for and the stream
// whose queued work still used it.
func (e *HazardError) Error() string {
	return fmt.Sprintf("sim:%d: a buffer of %d bytes allocated for stream %d was freed while work queued on stream %d still used it; "+
		"call RecordStream for that stream before releasing the tensor, or synchronize first (on a GPU its memory could be reused under the running work)",
		e.Device, e.Bytes, e.AllocStream, e.UseStream)
}

// streams holds a device's streams, for the allocator's events.
type streams struct {
	def  *Stream
	byID map[memory.Stream]*Stream // guarded by qmu
	next memory.Stream             // guarded by qmu
	// hazard is the first HazardError not yet reported; guarded by qmu.
	hazard error
	// allocEvents are the allocator's events: stream and position.
	allocEvents map[memory.Event]allocEvent
	nextEvent   memory.Event
}

type allocEvent struct {
	s   *Stream
	pos int64
}

func (d *Device) initStreams() {
	d.st.def = &Stream{d: d, eager: true}
	d.st.byID = map[memory.Stream]*Stream{0: d.st.def}
	d.st.allocEvents = map[memory.Event]allocEvent{}
}

// Priorities: CUDA's range on an H200, so that code choosing priorities
// sees the same numbers on sim.
const (
	lowestPriority  = 0
	highestPriority = -5
)

// DefaultStream returns the device's default stream, on which work runs
// when it is queued.
func (d *Device) DefaultStream() backend.Stream { return d.st.def }

// NewStream returns a new stream whose work is queued and run when needed
// (see the package documentation). priority is clamped to
// StreamPriorities.
func (d *Device) NewStream(priority int) (backend.Stream, error) {
	priority = max(highestPriority, min(lowestPriority, priority))
	qmu.Lock()
	defer qmu.Unlock()
	d.st.next++
	s := &Stream{d: d, id: d.st.next, priority: priority}
	d.st.byID[s.id] = s
	return s, nil
}

// StreamPriorities returns 0 and -5, an H200's range.
func (d *Device) StreamPriorities() (lowest, highest int) { return lowestPriority, highestPriority }

// stream returns s as a stream of d; nil is the default stream.
func (d *Device) stream(what string, s backend.Stream) (*Stream, error) {
	if s == nil {
		return d.st.def, nil
	}
	ss, ok := s.(*Stream)
	if !ok || ss.d != d {
		return nil, fmt.Errorf("sim:%d: %s on %s: %w", d.index, what, describeStream(s), backend.ErrStreamDevice)
	}
	return ss, nil
}

func describeStream(s backend.Stream) string {
	if ss, ok := s.(*Stream); ok {
		return fmt.Sprintf("stream %d of sim:%d", ss.id, ss.d.index)
	}
	return fmt.Sprintf("a stream of type %T", s)
}

// ID returns the stream's number on its device: 0 for the default stream,
// then 1, 2, ... in order of creation.
func (s *Stream) ID() int { return int(s.id) }

// Priority returns the stream's priority.
func (s *Stream) Priority() int { return s.priority }

// submit queues run on s, or runs it at once on the default stream. bufs
// are the buffers the work touches.
func (s *Stream) submit(bufs []*buffer, run func() error) error {
	if s.eager && s.d.capturing.Load() == 0 {
		return run()
	}
	qmu.Lock()
	defer qmu.Unlock()
	if s.destroyed {
		return fmt.Errorf("sim:%d: stream %d was destroyed", s.d.index, s.id)
	}
	if c := s.capture; c != nil {
		c.ops = append(c.ops, run)
		return nil
	}
	if s.eager {
		return run()
	}
	s.queue = append(s.queue, queued{run: run, bufs: bufs})
	s.queuedN++
	for _, b := range bufs {
		if b.uses == nil {
			b.uses = map[*Stream]int64{}
		}
		b.uses[s] = s.queuedN
	}
	if len(s.queue) > maxQueued {
		s.runTo(s.queuedN)
	}
	return nil
}

// runTo runs s's queued work up to position pos. qmu is held.
func (s *Stream) runTo(pos int64) {
	for s.doneN < pos && len(s.queue) > 0 {
		q := s.queue[0]
		s.queue[0] = queued{}
		s.queue = s.queue[1:]
		if err := q.run(); err != nil && s.err == nil {
			s.err = err
		}
		s.doneN++
		for _, b := range q.bufs {
			if b.uses[s] <= s.doneN {
				delete(b.uses, s)
			}
		}
		if len(s.marks) > 0 {
			now := time.Now()
			kept := s.marks[:0]
			for _, e := range s.marks {
				if e.pos <= s.doneN {
					e.at = now
				} else {
					kept = append(kept, e)
				}
			}
			s.marks = kept
		}
	}
	if len(s.queue) == 0 {
		s.queue = nil // drop the backing array of a long queue
	}
}

// takeErr returns and clears s's error and the device's hazard. qmu is
// held.
func (s *Stream) takeErr() error {
	err := errors.Join(s.err, s.d.st.hazard)
	s.err, s.d.st.hazard = nil, nil
	return err
}

// Synchronize runs the stream's queued work and returns the first error it
// raised, and a [*HazardError] of the device not yet reported.
func (s *Stream) Synchronize() error {
	qmu.Lock()
	defer qmu.Unlock()
	if err := s.refuse("synchronize"); err != nil {
		return err
	}
	s.runTo(s.queuedN)
	return s.takeErr()
}

// Query reports whether the stream's queued work has run. When it has
// not, it runs it, so that the next Query reports true.
func (s *Stream) Query() (bool, error) {
	qmu.Lock()
	defer qmu.Unlock()
	if err := s.refuse("query"); err != nil {
		return false, err
	}
	if s.doneN == s.queuedN {
		return true, nil
	}
	s.runTo(s.queuedN)
	return false, nil
}

// WaitEvent makes the work queued on s after the call wait for e, an event
// of any simulated device: on the default stream the work before e runs
// now; on another stream, when s reaches the wait.
func (s *Stream) WaitEvent(e backend.Event) error {
	ev, ok := e.(*Event)
	if !ok {
		return fmt.Errorf("sim:%d: wait on an event of type %T: %w", s.d.index, e, backend.ErrStreamDevice)
	}
	qmu.Lock()
	on, pos := ev.s, ev.pos
	qmu.Unlock()
	if on == nil {
		return nil
	}
	wait := func() error { on.runTo(pos); return nil }
	if s.eager {
		qmu.Lock()
		defer qmu.Unlock()
		return wait()
	}
	return s.submit(nil, wait)
}

// Destroy runs the stream's queued work and retires it. The default
// stream is never destroyed.
func (s *Stream) Destroy() error {
	if s.eager {
		return nil
	}
	qmu.Lock()
	defer qmu.Unlock()
	s.runTo(s.queuedN)
	s.destroyed = true
	delete(s.d.st.byID, s.id)
	return s.takeErr()
}

// Synchronize runs the queued work of every stream of the device, highest
// priority first, and returns the first errors and a [*HazardError] not
// yet reported.
func (d *Device) Synchronize() error {
	qmu.Lock()
	defer qmu.Unlock()
	if err := d.refuseCapturing("synchronize"); err != nil {
		return err
	}
	all := make([]*Stream, 0, len(d.st.byID))
	for _, s := range d.st.byID {
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *Stream) int {
		if a.priority != b.priority {
			return a.priority - b.priority
		}
		return int(a.id) - int(b.id)
	})
	var errs []error
	for _, s := range all {
		s.runTo(s.queuedN)
		if s.err != nil {
			errs = append(errs, s.err)
			s.err = nil
		}
	}
	errs = append(errs, d.st.hazard)
	d.st.hazard = nil
	return errors.Join(errs...)
}

// Event is an event of a simulated device.
type Event struct {
	d      *Device
	timing bool

	// Guarded by qmu.
	s   *Stream // where it was last recorded; nil before
	pos int64   // position on s
	at  time.Time
}

// NewEvent returns an event of the device.
func (d *Device) NewEvent(timing bool) (backend.Event, error) {
	return &Event{d: d, timing: timing}, nil
}

// Record marks the work queued on s so far, a stream of the event's
// device.
func (e *Event) Record(s backend.Stream) error {
	ss, err := e.d.stream("record event", s)
	if err != nil {
		return err
	}
	qmu.Lock()
	defer qmu.Unlock()
	if ss.destroyed {
		return fmt.Errorf("sim:%d: record event on destroyed stream %d", e.d.index, ss.id)
	}
	if e.s != nil {
		e.s.marks = slices.DeleteFunc(e.s.marks, func(m *Event) bool { return m == e })
	}
	e.s, e.pos, e.at = ss, ss.queuedN, time.Time{}
	if ss.doneN >= e.pos {
		e.at = time.Now()
	} else if e.timing {
		ss.marks = append(ss.marks, e)
	}
	return nil
}

// Query reports whether the work before the event has run; when it has
// not, it runs it, so that the next Query reports true.
func (e *Event) Query() (bool, error) {
	qmu.Lock()
	defer qmu.Unlock()
	if e.s != nil {
		if err := e.s.refuse("event query"); err != nil {
			return false, err
		}
	}
	if e.s == nil || e.s.doneN >= e.pos {
		return true, nil
	}
	e.s.runTo(e.pos)
	return false, nil
}

// Synchronize runs the work before the event.
func (e *Event) Synchronize() error {
	qmu.Lock()
	defer qmu.Unlock()
	if e.s == nil {
		return nil
	}
	if err := e.s.refuse("event synchronize"); err != nil {
		return err
	}
	e.s.runTo(e.pos)
	return nil
}

// Elapsed returns the time from start's completion to e's: the wall time
// between the moments the simulated work before each had run.
func (e *Event) Elapsed(start backend.Event) (time.Duration, error) {
	st, ok := start.(*Event)
	if !ok {
		return 0, fmt.Errorf("sim: elapsed time from an event of type %T: %w", start, backend.ErrStreamDevice)
	}
	if !e.timing || !st.timing {
		return 0, errors.New("sim: elapsed time needs two events created with timing")
	}
	qmu.Lock()
	defer qmu.Unlock()
	if e.s == nil || st.s == nil {
		return 0, errors.New("sim: elapsed time of an event never recorded")
	}
	if e.at.IsZero() || st.at.IsZero() {
		return 0, errors.New("sim: elapsed time of an event not yet completed; synchronize it first")
	}
	return e.at.Sub(st.at), nil
}

// Destroy does nothing: a simulated event holds no resources.
func (e *Event) Destroy() error { return nil }

// eventSource gives the allocator events on the device's streams, for the
// blocks freed while recorded on other streams.
type eventSource struct{ d *Device }

var (
	_ memory.EventSource = eventSource{}
	_ memory.EventWaiter = eventSource{}
)

// Record marks the current end of stream id's queue.
func (es eventSource) Record(id memory.Stream) memory.Event {
	qmu.Lock()
	defer qmu.Unlock()
	s, ok := es.d.st.byID[id]
	if !ok || s.doneN >= s.queuedN {
		return 0 // complete
	}
	es.d.st.nextEvent++
	es.d.st.allocEvents[es.d.st.nextEvent] = allocEvent{s, s.queuedN}
	return es.d.st.nextEvent
}

// Query reports whether the stream ran past the event, forgetting it then.
func (es eventSource) Query(ev memory.Event) bool {
	qmu.Lock()
	defer qmu.Unlock()
	ae, ok := es.d.st.allocEvents[ev]
	if !ok {
		return true
	}
	if ae.s.doneN >= ae.pos || ae.s.destroyed {
		delete(es.d.st.allocEvents, ev)
		return true
	}
	return false
}

// Wait runs the stream up to the event.
func (es eventSource) Wait(ev memory.Event) {
	qmu.Lock()
	defer qmu.Unlock()
	if ae, ok := es.d.st.allocEvents[ev]; ok {
		ae.s.runTo(ae.pos)
	}
}
