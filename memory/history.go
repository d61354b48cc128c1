package memory

import (
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vramgo/vram/memory/trace"
)

// DefaultHistoryEvents is the ring buffer's size when [Allocator.SetHistory]
// is given no positive maxEvents: 100,000 events, about 10 MB with stacks.
const DefaultHistoryEvents = 100_000

// maxStackDepth is the number of frames captured per event.
const maxStackDepth = 32

// vramPrefix starts the function names of vram's own packages, whose frames
// are left out of recorded stacks.
const vramPrefix = "github.com/vramgo/vram"

// histEvent is one recorded event; its stack is kept as program counters
// and turned into frames only when a snapshot is taken.
type histEvent struct {
	ev  trace.Event
	pcs []uintptr
}

// history is the ring buffer of recorded events. The ring grows with the
// events up to max, so that a bound far beyond what a run records (as
// PyTorch's default of sys.maxsize) costs only the events recorded.
type history struct {
	ring    []histEvent
	max     int  // the most events kept
	next    int  // where the next event goes once the ring is full
	n       int  // events stored
	stacks  bool // capture Go stacks
	dropped bool // events were overwritten or the history started late
}

// SetHistory turns the recording of allocator events on or off. Enabled, the
// allocator keeps the last maxEvents events (allocations, frees, segment
// allocations, frees, maps and unmaps, OOMs; [DefaultHistoryEvents] when
// maxEvents <= 0; the buffer grows with the events, so a bound as large as
// math.MaxInt costs only what is recorded) for [Allocator.Snapshot], each
// with the caller's Go stack when stacks is true (frames inside vram's own
// packages left out, so the stack starts in the caller's code). Turning it on again starts a new,
// empty history; off, it discards the history. An event costs about 50 ns
// to record, a stack about a microsecond more; off, recording costs
// nothing. A free whose block waited for another stream's events records
// its completion without a stack.
func (a *Allocator) SetHistory(enabled bool, maxEvents int, stacks bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !enabled {
		a.hist = nil
		return
	}
	if maxEvents <= 0 {
		maxEvents = DefaultHistoryEvents
	}
	a.hist = &history{
		ring:    make([]histEvent, 0, min(maxEvents, historyChunk)),
		max:     maxEvents,
		stacks:  stacks,
		dropped: a.tick != 0 || len(a.segs) != 0,
	}
}

// callers returns the current stack as program counters, or nil when
// stacks are off.
func (h *history) callers() []uintptr {
	if !h.stacks {
		return nil
	}
	var buf [maxStackDepth]uintptr
	n := runtime.Callers(3, buf[:])
	return append([]uintptr(nil), buf[:n]...)
}

// historyChunk is how many events the ring holds at first; it grows from
// there as events come, by doubling, up to the history's maximum.
const historyChunk = 1024

// add stores one event, overwriting the oldest when full.
func (h *history) add(e histEvent) {
	if n := len(h.ring); n < h.max {
		if n == cap(h.ring) {
			h.ring = slices.Grow(h.ring, min(n, h.max-n))
		}
		h.ring = append(h.ring, e)
		h.n++
		return
	}
	h.ring[h.next] = e
	h.next++
	if h.next == len(h.ring) {
		h.next = 0
	}
	if h.n < len(h.ring) {
		h.n++
	} else {
		h.dropped = true
	}
}

// record stores a segment or OOM event when history is on.
func (a *Allocator) record(action trace.Action, addr uint64, size int64, stream Stream, region string) {
	if a.hist == nil {
		return
	}
	a.hist.add(histEvent{
		ev: trace.Event{Action: action, Addr: addr, Size: size, Stream: uint64(stream),
			TimeUS: time.Since(a.start).Microseconds(), Region: region},
		pcs: a.hist.callers(),
	})
}

// recordBlock stores an event about block b, with the stack pcs (history
// must be on).
func (a *Allocator) recordBlock(action trace.Action, b *Block, pcs []uintptr) {
	a.hist.add(histEvent{
		ev: trace.Event{Action: action, Addr: b.addr, Size: b.requested, Stream: uint64(b.stream),
			TimeUS: time.Since(a.start).Microseconds(), Region: b.region},
		pcs: pcs,
	})
}

// events returns the stored events, oldest first, with frames.
func (h *history) events(sym *symbolizer) []trace.Event {
	out := make([]trace.Event, 0, h.n)
	start := h.next - h.n
	if start < 0 {
		start += len(h.ring)
	}
	for i := 0; i < h.n; i++ {
		e := h.ring[(start+i)%len(h.ring)]
		e.ev.Frames = sym.frames(e.pcs)
		out = append(out, e.ev)
	}
	return out
}

// symbolizer turns program counters into frames, caching per counter.
type symbolizer struct {
	cache map[uintptr][]trace.Frame
}

// frames returns the frames of a stack, innermost first, without vram's own
// frames (other than its tests') and the runtime's goroutine entry.
func (s *symbolizer) frames(pcs []uintptr) []trace.Frame {
	if len(pcs) == 0 {
		return nil
	}
	if s.cache == nil {
		s.cache = make(map[uintptr][]trace.Frame)
	}
	var out []trace.Frame
	for _, pc := range pcs {
		fs, ok := s.cache[pc]
		if !ok {
			it := runtime.CallersFrames([]uintptr{pc})
			for {
				f, more := it.Next()
				if f.Function != "" && keepFrame(f.Function, f.File) {
					fs = append(fs, trace.Frame{Function: f.Function, File: f.File, Line: f.Line})
				}
				if !more {
					break
				}
			}
			s.cache[pc] = fs
		}
		out = append(out, fs...)
	}
	return out
}

// keepFrame reports whether a frame belongs in a recorded stack: not in
// vram's own packages (their tests excepted), not the goroutine entry.
func keepFrame(function, file string) bool {
	if function == "runtime.goexit" {
		return false
	}
	if strings.HasPrefix(function, vramPrefix) && len(function) > len(vramPrefix) &&
		(function[len(vramPrefix)] == '.' || function[len(vramPrefix)] == '/') {
		return strings.HasSuffix(file, "_test.go")
	}
	return true
}
