package vram

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vramgo/vram/internal/gid"
)

// Goroutine-scoped state: NoGrad and Tidy apply to the goroutine that
// calls them and to no other (see "Concurrency" in doc.go). Go has no
// goroutine-local storage, so the state lives in a map keyed by goroutine
// (internal/gid); the key is looked up only while some goroutine is inside
// NoGrad or Tidy (active > 0), so code that uses neither pays one atomic
// load per op.

type gstate struct {
	noGrad  int      // depth of NoGrad calls
	scopes  []*scope // Tidy calls, innermost last
	regions []string // Region labels, innermost last
}

type scope struct {
	tensors []*Tensor
}

var (
	active  atomic.Int64 // goroutines with a gstate
	gstates sync.Map     // gid.Current() -> *gstate
)

// current returns this goroutine's state, or nil when it has none.
func current() *gstate {
	if active.Load() == 0 {
		return nil
	}
	if g, ok := gstates.Load(gid.Current()); ok {
		return g.(*gstate)
	}
	return nil
}

// enter returns this goroutine's state, creating it; leave must follow
// before the goroutine returns.
func enter() (uintptr, *gstate) {
	id := gid.Current()
	if g, ok := gstates.Load(id); ok {
		return id, g.(*gstate)
	}
	g := &gstate{}
	gstates.Store(id, g)
	active.Add(1)
	return id, g
}

// leave drops the goroutine's state once it is empty.
func leave(id uintptr, g *gstate) {
	if g.noGrad == 0 && len(g.scopes) == 0 && len(g.regions) == 0 {
		gstates.Delete(id)
		active.Add(-1)
	}
}

// NoGrad runs fn with gradient recording off on the calling goroutine
// (torch.no_grad): tensors computed inside do not require grad and no graph
// is kept, which saves the memory of saved activations during inference.
// Other goroutines are not affected, and goroutines started inside fn do
// not inherit the setting. Calls nest.
func NoGrad(fn func()) {
	id, g := enter()
	g.noGrad++
	defer func() {
		g.noGrad--
		leave(id, g)
	}()
	fn()
}

// GradEnabled reports whether operations on the calling goroutine record
// gradients (false inside [NoGrad]).
func GradEnabled() bool {
	g := current()
	return g == nil || g.noGrad == 0
}

// Tidy runs fn and then releases every tensor created by the calling
// goroutine during fn, except those passed to [Keep] and gradients that
// Backward stored on leaf tensors. It is the deterministic way to free all
// temporaries of a training step without waiting for the garbage collector:
//
//	for step := range steps {
//		vram.Tidy(func() {
//			loss := lossFn(model.Forward(x), y)
//			loss.Backward()
//			opt.Step()
//			total += loss.Item()
//		})
//	}
//
// Releasing only drops references: a tensor that is still a view's base or
// saved by a graph stays alive until those references go too. Tidy calls
// nest; an inner Tidy releases only what was created inside it. If fn
// panics, the tensors are released all the same and the panic continues.
func Tidy(fn func()) {
	id, g := enter()
	s := &scope{}
	g.scopes = append(g.scopes, s)
	defer func() {
		g.scopes = g.scopes[:len(g.scopes)-1]
		leave(id, g)
		for _, t := range s.tensors {
			if t.scope == s {
				t.Release()
			}
		}
	}()
	fn()
}

// Keep exempts tensors from every enclosing [Tidy], so they outlive it;
// the caller then owns them and should Release them when done. Keep returns
// its first argument, for out = vram.Keep(model.Forward(x)). Keeping a
// tensor created outside any Tidy does nothing. Call Keep on the goroutine
// that created the tensor.
func Keep(ts ...*Tensor) *Tensor {
	for _, t := range ts {
		if t != nil {
			t.scope = nil
		}
	}
	if len(ts) == 0 {
		return nil
	}
	return ts[0]
}

// track registers a new tensor with the innermost Tidy of this goroutine.
func track(t *Tensor) {
	g := current()
	if g == nil || len(g.scopes) == 0 {
		return
	}
	s := g.scopes[len(g.scopes)-1]
	t.scope = s
	if len(s.tensors) == cap(s.tensors) && len(s.tensors) >= 256 {
		// A long-running Tidy: drop the tensors already released or kept
		// before growing, so that its list stays as long as what is live.
		s.tensors = slices.DeleteFunc(s.tensors, func(u *Tensor) bool {
			return u.scope != s || u.ref.isReleased()
		})
		if len(s.tensors) > cap(s.tensors)/2 {
			// Mostly live: grow, so that compaction stays amortised O(1).
			s.tensors = slices.Grow(s.tensors, cap(s.tensors))
		}
	}
	s.tensors = append(s.tensors, t)
}
