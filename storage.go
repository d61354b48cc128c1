package vram

import (
	"errors"
	"runtime"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/memory"

	"github.com/vramgo/vram/internal/units"
)

// storage is a reference-counted device buffer shared by a tensor, its
// views and the autograd graph. It is freed when the last reference goes.
type storage struct {
	ds    *devState
	buf   backend.Buffer
	bytes int64
	refs  atomic.Int64
	// version counts the in-place writes to the buffer (PyTorch's version
	// counter, shared by every view), so that a backward pass can tell
	// that a tensor it saved was changed after it was saved.
	version atomic.Uint64
	// apart counts the references of tensors that are no alias of the
	// storage for autograd: tensors a graph saved for backward and
	// [Tensor.Detach] views. refs - apart is the number of tensors through
	// which a graph could see the storage, which a recorded in-place
	// operation needs to be one (see inPlaceRecords).
	apart atomic.Int64
	// detached counts the references of views made from an apart
	// reference (a view of a Detach view): a write recorded through the
	// Detach view would change them without their graphs seeing it.
	detached atomic.Int64
	// stream is the stream the buffer was allocated for, where Free
	// returns it.
	stream backend.Stream
	// pinnedBy is the device whose page-locked host memory holds a
	// pinned CPU tensor's buffer; nil otherwise.
	pinnedBy backend.AsyncCopier
	// pending is an event after the last non-blocking copy that reads or
	// writes this (pinned host) buffer: host access waits for it first.
	pending atomic.Pointer[pendingCopy]

	origin *leakSite // where it was allocated, with Config.DebugLeaks

	// born is the graph capture that recorded the allocation of the
	// storage, if any (graph.go).
	born *captureState
}

func newStorage(op string, ds *devState, nbytes int64) *storage {
	stream := ds.stream()
	buf, err := ds.bd.Alloc(nbytes, stream, currentRegion())
	var hostOOM *cpu.OutOfMemoryError
	if errors.As(err, &hostOOM) {
		// Host memory past its limit: tensors dropped without Release
		// may still hold some, as on a device with a caching allocator
		// (whose OnOOM hook reclaims).
		reclaim(ds)
		buf, err = ds.bd.Alloc(nbytes, stream, currentRegion())
	}
	if err != nil {
		kind := ErrBackend
		var oom *memory.OutOfMemoryError
		if errors.As(err, &oom) || errors.As(err, &hostOOM) || errors.Is(err, memory.ErrTooLarge) {
			kind = ErrOutOfMemory
		}
		panic(&Error{Op: op, Kind: kind, Detail: "allocating " + units.Bytes(nbytes) + " on " + ds.dev.String(), Err: err})
	}
	s := &storage{ds: ds, buf: buf, bytes: nbytes, stream: stream, born: ds.capturing()}
	s.refs.Store(1)
	ds.counted(nbytes)
	return s
}

// counted counts a new storage of nbytes on ds: one more allocation, and
// nbytes more of live storage, with the peak raised to match.
func (ds *devState) counted(nbytes int64) {
	ds.allocs.Add(1)
	ds.raisePeak(ds.live.Add(nbytes))
}

// raisePeak makes ds's peak at least live.
func (ds *devState) raisePeak(live int64) {
	for {
		p := ds.peak.Load()
		if live <= p || ds.peak.CompareAndSwap(p, live) {
			return
		}
	}
}

// retain adds a reference to s for a new view or graph reference of a
// tensor, and panics with [ErrReleased] when s is already freed: a storage
// whose count reached zero is never revived, so that nothing is freed twice.
// The count is only raised from a live value, atomically.
func (s *storage) retain(op string) {
	for {
		n := s.refs.Load()
		if n <= 0 {
			fail(op, ErrReleased, "the storage of this tensor on %s was already freed", s.ds.dev)
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return
		}
	}
}

// release drops a reference; the last one frees the buffer.
func (s *storage) release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		if p := s.pending.Load(); p != nil {
			p.ev.Destroy()
		}
		if s.pinnedBy != nil {
			s.pinnedBy.FreePinned(s.buf.(backend.HostBuffer))
		} else {
			s.ds.bd.Free(s.buf, s.stream)
		}
		s.buf = nil
		s.ds.live.Add(-s.bytes)
		s.ds.frees.Add(1)
	case n < 0:
		panic("vram: internal: storage released more often than retained")
	}
}

// pendingCopy is the event after a non-blocking copy into or out of a
// pinned host buffer.
type pendingCopy struct {
	ev   backend.Event
	done atomic.Bool
}

// settle waits for the last non-blocking copy of s, so that the host may
// read or write s's buffer.
func (s *storage) settle() {
	p := s.pending.Load()
	if p == nil || p.done.Load() {
		return
	}
	if err := p.ev.Synchronize(); err != nil {
		panic(&Error{Op: "copy", Kind: ErrBackend, Detail: "waiting for a non-blocking copy of pinned memory", Err: err})
	}
	p.done.Store(true)
}

// setPending records, on the current stream of the device ds that just
// queued a non-blocking copy of s, the event that host access to s waits
// for.
func (s *storage) setPending(op string, ds *devState) {
	ev, err := ds.bd.NewEvent(false)
	if err == nil {
		if err = ev.Record(ds.stream()); err != nil {
			ev.Destroy()
		}
	}
	if err != nil {
		panic(&Error{Op: op, Kind: ErrBackend, Detail: "recording the end of a non-blocking copy on " + ds.dev.String(), Err: err})
	}
	if old := s.pending.Swap(&pendingCopy{ev: ev}); old != nil {
		old.ev.Synchronize()
		old.ev.Destroy()
	}
}

// tensorRef holds what one tensor owns: a reference to its storage and to
// the graph node that produced it. It is separate from the Tensor so that
// the garbage collector's cleanup can release it after the Tensor is gone.
//
// An operation holds the refs of the tensors it reads for as long as it
// runs (see pin): state counts those holds, times two, plus one once the
// tensor is released. Releasing a tensor that an operation holds only
// marks it; the last hold to go then drops what the ref owns, so that no
// buffer is freed while a kernel reads it.
type tensorRef struct {
	st    *storage
	node  *node
	state atomic.Int64 // 2*holds + 1 if released
	site  *leakSite    // where the tensor was made, with Config.DebugLeaks
	// apart marks a reference counted in st.apart: a saved tensor or a
	// Detach view.
	apart bool
	// detached marks a reference counted in st.detached: a view made
	// from an apart reference or from another detached one.
	detached bool
}

const refReleased = 1 // the released bit of tensorRef.state

// isReleased reports whether the tensor was released.
func (r *tensorRef) isReleased() bool { return r.state.Load()&refReleased != 0 }

// hold adds a hold unless the tensor was released; it reports whether it
// did. A released tensor is never held again.
func (r *tensorRef) hold() bool {
	for {
		s := r.state.Load()
		if s&refReleased != 0 {
			return false
		}
		if r.state.CompareAndSwap(s, s+2) {
			return true
		}
	}
}

// unhold drops a hold; the last hold of a released tensor drops what it
// owns.
func (r *tensorRef) unhold() {
	switch s := r.state.Add(-2); {
	case s == refReleased:
		r.free()
	case s < 0:
		panic("vram: internal: tensor unheld more often than held")
	}
}

// debugLeaks is Config.DebugLeaks, set when the configuration is applied.
var debugLeaks atomic.Bool

// drop marks r released, once, and reports whether this call did. What r
// owns is dropped now, or by the last hold when operations still hold it.
func (r *tensorRef) drop() bool {
	for {
		s := r.state.Load()
		if s&refReleased != 0 {
			return false
		}
		if r.state.CompareAndSwap(s, s|refReleased) {
			if s == 0 {
				r.free()
			}
			return true
		}
	}
}

// free drops r's storage reference and graph node; it runs exactly once,
// when r is released and no operation holds it.
func (r *tensorRef) free() {
	if r.apart {
		r.st.apart.Add(-1)
	}
	if r.detached {
		r.st.detached.Add(-1)
	}
	r.st.release()
	if n := r.node; n != nil {
		n.decref()
	}
}

// collected is the garbage collector's backstop for a tensor that was never
// released: the memory is freed all the same and counted as leaked.
// With Config.DebugLeaks (VRAM_DEBUG_LEAKS=1) it warns, naming where the tensor was made and,
// for a view, where its storage was allocated and whether the view was the
// last thing holding it (see leaks.go).
func collected(r *tensorRef) {
	ds := r.st.ds
	// Read before dropping: whether this reference alone kept the storage.
	last := r.site != nil && r.st.refs.Load() == 1
	if r.drop() {
		ds.leaked.Add(1)
		if r.site != nil {
			reportLeak(r.site, r.st, last)
		}
	}
}

// setApart marks r as a reference apart from the storage's aliases (see
// storage.apart).
func (r *tensorRef) setApart() {
	if r.detached {
		// A Detach view of a view of a Detach view is apart itself.
		r.detached = false
		r.st.detached.Add(-1)
	}
	r.apart = true
	r.st.apart.Add(1)
}

// setDetached marks r, a view of an apart or detached reference, in the
// storage's count of such views (see storage.detached).
func (r *tensorRef) setDetached() {
	r.detached = true
	r.st.detached.Add(1)
}

// swapStorage exchanges the storages of a and b (MoveTo and the in-place
// conversions give a tensor new storage this way), keeping each storage's
// counts of apart and detached references right.
func swapStorage(a, b *tensorRef) {
	if a.apart != b.apart {
		a.st.apart.Add(boolInt(b.apart) - boolInt(a.apart))
		b.st.apart.Add(boolInt(a.apart) - boolInt(b.apart))
	}
	if a.detached != b.detached {
		a.st.detached.Add(boolInt(b.detached) - boolInt(a.detached))
		b.st.detached.Add(boolInt(a.detached) - boolInt(b.detached))
	}
	a.st, b.st = b.st, a.st
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// attachRef gives t a new reference to st. The garbage collector's
// backstop ([collected]) is armed by [Tensor.armBackstop], which the
// callers run once they know whether a Tidy tracks t.
func attachRef(t *Tensor, st *storage, n *node) {
	r := &tensorRef{st: st, node: n}
	if debugLeaks.Load() {
		r.site = newLeakSite(t, st)
	}
	t.ref = r
}

// armBackstop registers [collected] for t unless a Tidy tracks it or it
// is armed already. A tracked tensor needs none: the scope holds it, so
// the garbage collector cannot take it, and the Tidy releases it at its
// end; [Keep], which takes it out of the scope, arms it then. Arming only
// the tensors that outlive their scope saves most tensors of a training
// step the cost of a cleanup (about half of making a view).
func (t *Tensor) armBackstop() {
	if t.scope != nil || t.armed {
		return
	}
	t.armed = true
	runtime.AddCleanup(t, collected, t.ref)
}
