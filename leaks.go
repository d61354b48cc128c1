package vram

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/vramgo/vram/internal/units"
)

// Leak reports (Config.DebugLeaks, VRAM_DEBUG_LEAKS=1). Every tensor records where it was
// made, and every storage where it was allocated. A view that is never
// released keeps its whole storage alive after the tensor it views was
// released, until the garbage collector finds the view: the classic case
// is a temporary, as in b.Narrow(0, 0, 1).Sum().Item(), that pins all of b.
// The report of such a view names the view's creation site, the storage's
// and the bytes the view kept.

// leakSite is where a tensor was made: the call stack, and what the tensor
// was.
type leakSite struct {
	pcs   []uintptr
	shape []int
	dtype DType
	view  bool // the storage existed before: a view or another reference
}

// maxLeakFrames bounds the stack recorded per tensor.
const maxLeakFrames = 32

// newLeakSite records the stack of attachRef's caller's caller for t, and
// makes it st's origin when st is new.
func newLeakSite(t *Tensor, st *storage) *leakSite {
	pcs := make([]uintptr, maxLeakFrames)
	n := runtime.Callers(3, pcs) // skip Callers, newLeakSite, attachRef
	s := &leakSite{pcs: pcs[:n], shape: t.shape, dtype: t.dtype, view: st.origin != nil}
	if st.origin == nil {
		// The first reference of a storage is attached before the tensor
		// is shared with anyone, so no other goroutine reads it yet.
		st.origin = s
	}
	return s
}

// where returns the file:line of the first frame outside package vram (its
// tests excepted), the vram function that code called ("Narrow"), and the
// whole stack, one "function\n\tfile:line" per frame.
func (s *leakSite) where() (site, op, stack string) {
	var b strings.Builder
	frames := runtime.CallersFrames(s.pcs)
	for {
		f, more := frames.Next()
		if f.Function != "" {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
			inVram := strings.HasPrefix(f.Function, "github.com/vramgo/vram.") && !strings.HasSuffix(f.File, "_test.go")
			switch {
			case inVram && site == "":
				op = f.Function[strings.LastIndex(f.Function, ".")+1:]
			case site == "" && !strings.HasPrefix(f.Function, "runtime."):
				site = fmt.Sprintf("%s:%d", f.File, f.Line)
			}
		}
		if !more {
			break
		}
	}
	if site == "" {
		site = "an unknown place"
	}
	return site, op, b.String()
}

// made returns "made by Narrow at main.go:12", or "made at main.go:12".
func made(verb, op, site string) string {
	if op == "" {
		return verb + " at " + site
	}
	return verb + " by " + op + " at " + site
}

// reportLeak warns about a tensor made at s that the garbage collector
// freed; last says whether it was the storage's last reference.
func reportLeak(s *leakSite, st *storage, last bool) {
	site, op, stack := s.where()
	// A view made by the same call that allocated its storage (Sum
	// reshaping its result) is, for its user, just a tensor.
	var osite, oop string
	view := false
	if o := st.origin; s.view && o != nil {
		osite, oop, _ = o.where()
		view = osite != site || oop != op
	}
	kind := "a tensor"
	if view {
		kind = "a view"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v %s on %s (%s) was never released", kind, Shape(s.shape), s.dtype, st.ds.dev, made("made", op, site))
	covers := int64(Shape(s.shape).NumElements()) * int64(s.dtype.Size())
	switch {
	case view && last && covers < st.bytes:
		fmt.Fprintf(&b, " and was the last reference to its storage: it kept all %s of it allocated "+
			"after every other tensor using it had been released, until the garbage collector freed it; "+
			"release views as well (or make them inside vram.Tidy)", units.Bytes(st.bytes))
	case view && !last:
		fmt.Fprintf(&b, "; the garbage collector freed it, while its storage of %s is still used by other tensors", units.Bytes(st.bytes))
	default:
		b.WriteString("; the garbage collector freed it")
	}
	if view {
		fmt.Fprintf(&b, ". The storage was %s", made("allocated", oop, osite))
	}
	fmt.Fprintf(&b, ". Stack where it was made:\n%s", stack)
	warnf(&site, "%s", b.String())
}
