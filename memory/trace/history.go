package trace

import (
	"io"
	"os"
)

// History is an allocation history that can be read from its start, one
// event at a time, as many times as a caller needs: [Events] for one held
// in memory, or the text trace of a file opened with [OpenStream], read
// from the file again on each pass so that a trace of any length takes
// memory independent of its length. It is what `vram replay` and `vram
// analyze` read text traces through.
type History interface {
	// Each calls fn with each event, oldest first, and stops at the first
	// error, from fn or from reading, which it returns. The event is only
	// valid during the call: fn must neither keep nor modify it (copy
	// the Event to keep it).
	Each(fn func(e *Event) error) error
}

// Events is a [History] held in memory.
type Events []Event

// Each calls fn with each event in order, stopping at fn's first error.
func (h Events) Each(fn func(e *Event) error) error {
	for i := range h {
		if err := fn(&h[i]); err != nil {
			return err
		}
	}
	return nil
}

// History returns f's text trace as a [History]: its Events, or for a
// trace opened with [OpenStream], its file read anew on each pass. It is
// nil for snapshots, whose histories are in Snapshots.
func (f *File) History() History {
	if f.stream != nil {
		return f.stream
	}
	if f.Kind != KindText {
		return nil
	}
	return Events(f.Events)
}

// OpenStream is [Limits.OpenStream] with the default limits.
func OpenStream(path string) (*File, error) { return Limits{}.OpenStream(path) }

// OpenStream opens the file at path as [Limits.Open] does, except that it
// does not read a text trace's events: File.Events is nil, and
// [File.History] reads them from the file on each pass, one at a time,
// without holding them. It reads the header and the first event of a text
// trace, so that a file that is not one fails here; a later malformed line
// fails the pass that reaches it, with a [*ParseError] naming the file and
// the line. JSON snapshots and pickles are read whole, as Open reads them,
// and so is a text trace in anything but a regular file (a pipe, a FIFO,
// /dev/stdin), which cannot be read a second time: its events are then in
// File.Events, within the limits.
func (l Limits) OpenStream(path string) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, &ParseError{File: path, Offset: -1, Err: err}
	}
	defer osf.Close()
	// A pipe or a terminal (vram analyze <(zcat run.trace.gz),
	// /dev/stdin) gives its bytes once: a second pass would find it
	// drained and see no events at all.
	fi, err := osf.Stat()
	once := err != nil || !fi.Mode().IsRegular()
	f := &File{Name: path}
	br, kind, err := detect(osf, f)
	if err != nil {
		return nil, withFile(err, path, kind)
	}
	f.Kind = kind
	if kind != KindText || once {
		if err := readBody(br, f, l); err != nil {
			return nil, withFile(err, path, kind)
		}
		return f, nil
	}
	t, err := NewTextReader(br)
	if err != nil {
		return nil, withFile(err, path, kind)
	}
	f.Header = t.Header()
	f.stream = &textFile{path: path}
	return f, nil
}

// textFile is the History of the text trace in a file.
type textFile struct{ path string }

// Each reads the file from its start, calling fn with each event.
func (t *textFile) Each(fn func(e *Event) error) error {
	osf, err := os.Open(t.path)
	if err != nil {
		return &ParseError{File: t.path, Kind: KindText, Offset: -1, Err: err}
	}
	defer osf.Close()
	r, err := NewTextReader(osf)
	if err != nil {
		return withFile(err, t.path, KindText)
	}
	var e Event // one for the whole pass: fn gets its address
	for {
		if e, err = r.Next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return withFile(err, t.path, KindText)
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
}

// StartChecker is [StartsEmpty] one event at a time, for a history read as
// a stream: [StartChecker.Add] each event in order, then ask
// [StartChecker.StartsEmpty]. Its memory grows with the blocks and segments
// live at once, not with the length of the history. Create one with
// [NewStartChecker].
type StartChecker struct {
	segments      []Segment
	checkSegments bool // allocs must lie in mapped memory
	sawAlloc      bool // an alloc came before any segment event
	held          map[uint64]bool
	mapped        intervals
	truncated     bool
}

// NewStartChecker returns a checker of a history that ends holding
// segments (nil if unknown), as for StartsEmpty.
func NewStartChecker(segments []Segment) *StartChecker {
	return &StartChecker{segments: segments, checkSegments: segments != nil, held: make(map[uint64]bool)}
}

// Add takes the next event of the history.
func (c *StartChecker) Add(e *Event) {
	if !c.truncated && !c.add(e) {
		c.truncated, c.held, c.mapped = true, nil, nil
	}
}

// add applies e; it is false when e shows the history truncated.
func (c *StartChecker) add(e *Event) bool {
	switch e.Action {
	case ActionAlloc:
		if _, ok := c.held[e.Addr]; ok {
			return false
		}
		if c.checkSegments && !c.mapped.covers(e.Addr, max(e.Size, 1)) {
			return false
		}
		c.sawAlloc = true
		c.held[e.Addr] = false
	case ActionFreeRequested:
		pending, ok := c.held[e.Addr]
		if !ok || pending {
			return false
		}
		c.held[e.Addr] = true
	case ActionFreeCompleted:
		if _, ok := c.held[e.Addr]; !ok {
			return false
		}
		delete(c.held, e.Addr)
	case ActionSegmentAlloc, ActionSegmentMap:
		if !c.checkSegments {
			// A history with segment events has its allocs checked against
			// them; those before the first lie outside every segment.
			if c.sawAlloc {
				return false
			}
			c.checkSegments = true
		}
		if e.Size > 0 && !c.mapped.add(e.Addr, e.Size) {
			return false
		}
	case ActionSegmentFree, ActionSegmentUnmap:
		if e.Size > 0 && !c.mapped.remove(e.Addr, e.Size) {
			return false
		}
	}
	return true
}

// StartsEmpty reports what [StartsEmpty] reports for the events added so
// far and the checker's segments.
func (c *StartChecker) StartsEmpty() bool {
	if c.truncated {
		return false
	}
	for i := range c.segments {
		if !c.mapped.covers(c.segments[i].Addr, c.segments[i].Size) {
			return false
		}
	}
	return true
}
