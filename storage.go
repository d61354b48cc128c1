package vram

import (
	"errors"
	"os"
	"runtime"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
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
}

func newStorage(op string, ds *devState, nbytes int64) *storage {
	buf, err := ds.bd.Alloc(nbytes, ds.bd.DefaultStream(), currentRegion())
	if err != nil {
		kind := ErrBackend
		var oom *memory.OutOfMemoryError
		if errors.As(err, &oom) || errors.Is(err, memory.ErrTooLarge) {
			kind = ErrOutOfMemory
		}
		panic(&Error{Op: op, Kind: kind, Detail: "allocating " + units.Bytes(nbytes) + " on " + ds.dev.String(), Err: err})
	}
	s := &storage{ds: ds, buf: buf, bytes: nbytes}
	s.refs.Store(1)
	live := ds.live.Add(nbytes)
	ds.allocs.Add(1)
	for {
		p := ds.peak.Load()
		if live <= p || ds.peak.CompareAndSwap(p, live) {
			break
		}
	}
	return s
}

func (s *storage) retain() { s.refs.Add(1) }

func (s *storage) release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		s.ds.bd.Free(s.buf, s.ds.bd.DefaultStream())
		s.buf = nil
		s.ds.live.Add(-s.bytes)
		s.ds.frees.Add(1)
	case n < 0:
		panic("vram: internal: storage released more often than retained")
	}
}

// tensorRef holds what one tensor owns: a reference to its storage and to
// the graph node that produced it. It is separate from the Tensor so that
// the garbage collector's cleanup can release it after the Tensor is gone.
type tensorRef struct {
	st       *storage
	node     *node
	released atomic.Bool
	stack    []byte // creation stack, with VRAM_DEBUG_LEAKS=1
}

var debugLeaks = os.Getenv("VRAM_DEBUG_LEAKS") == "1"

// dropRef releases what r owns, once.
func (r *tensorRef) drop() bool {
	if r.released.Swap(true) {
		return false
	}
	r.st.release()
	if n := r.node; n != nil {
		n.decref()
	}
	return true
}

// collected is the garbage collector's backstop for a tensor that was never
// released: the memory is freed all the same and counted as leaked.
func collected(r *tensorRef) {
	ds := r.st.ds
	if r.drop() {
		ds.leaked.Add(1)
		if r.stack != nil {
			warnf(nil, "tensor on %s was never released; it was created at:\n%s", ds.dev, r.stack)
		}
	}
}

func attachRef(t *Tensor, st *storage, n *node) {
	r := &tensorRef{st: st, node: n}
	if debugLeaks {
		buf := make([]byte, 4096)
		r.stack = buf[:runtime.Stack(buf, false)]
	}
	t.ref = r
	runtime.AddCleanup(t, collected, r)
}
