package vram

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vramgo/vram/internal/gid"
)

// Goroutine-scoped state: NoGrad, EnableGrad, SetGradEnabled,
// InferenceMode, Tidy and Region apply to the goroutine that calls them and
// to no other (see "Concurrency" in doc.go). Go has no goroutine-local
// storage, so the state lives in a map keyed by goroutine (internal/gid);
// the key is looked up only while some goroutine is inside one of those
// calls (active > 0), so code that uses none pays one atomic load per op.
// Every setting is scoped to a function call and restored when it returns,
// because a goroutine's key may be reused by a later goroutine: state that
// outlived its call would leak into an unrelated one.

type gstate struct {
	depth     int            // scoped calls in progress; the state goes at zero
	gradOff   bool           // recording off (NoGrad, SetGradEnabled(false))
	inference int            // depth of InferenceMode calls
	scopes    []*scope       // Tidy calls, innermost last
	regions   []string       // Region labels, innermost last
	streams   []*Stream      // WithStream streams, innermost last
	autocast  *autocastState // innermost Autocast region, or nil
	rng       []*rngScope    // Checkpoint forwards and recomputes, innermost last
	inGrad    bool           // walking the graph for Grad: a Checkpoint recompute stores in no leaf
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

// enter returns this goroutine's state, creating it, for one scoped call;
// leave must follow before the call returns.
func enter() (uintptr, *gstate) {
	id := gid.Current()
	if g, ok := gstates.Load(id); ok {
		g := g.(*gstate)
		g.depth++
		return id, g
	}
	g := &gstate{depth: 1}
	gstates.Store(id, g)
	active.Add(1)
	return id, g
}

// leave ends one scoped call and drops the goroutine's state after the
// outermost.
func leave(id uintptr, g *gstate) {
	g.depth--
	if g.depth == 0 {
		gstates.Delete(id)
		active.Add(-1)
	}
}

// gradMode runs fn with recording off (off) or on, restoring the previous
// setting when fn returns or panics; op names the caller in the error for
// a nil fn.
func gradMode(op string, off bool, fn func()) {
	if fn == nil {
		nilFunc(op)
	}
	id, g := enter()
	prev := g.gradOff
	g.gradOff = off
	defer func() {
		g.gradOff = prev
		leave(id, g)
	}()
	fn()
}

// walkMode runs fn with inGrad set as given (Grad's walk, or Backward's),
// restoring the previous setting when fn returns or panics.
func walkMode(inGrad bool, fn func()) {
	id, g := enter()
	prev := g.inGrad
	g.inGrad = inGrad
	defer func() {
		g.inGrad = prev
		leave(id, g)
	}()
	fn()
}

// insideGrad reports whether this goroutine walks a graph for Grad.
func insideGrad() bool {
	g := current()
	return g != nil && g.inGrad
}

// NoGrad runs fn with gradient recording off on the calling goroutine
// (torch.no_grad): tensors computed inside do not require grad and no graph
// is kept, which saves the memory of saved activations during inference.
// Other goroutines are not affected, and goroutines started inside fn do
// not inherit the setting. Calls nest with [EnableGrad] and
// [SetGradEnabled]: the innermost wins, and each restores the previous
// setting when it returns.
func NoGrad(fn func()) { gradMode("no_grad", true, fn) }

// EnableGrad runs fn with gradient recording on (torch.enable_grad), also
// inside [NoGrad]: a helper that must build a graph, such as a gradient
// penalty inside an evaluation loop, wraps its work in it. Like NoGrad it
// affects only the calling goroutine and restores the previous setting when
// fn returns. It does not turn recording back on inside [InferenceMode].
func EnableGrad(fn func()) { gradMode("enable_grad", false, fn) }

// SetGradEnabled runs fn with gradient recording on or off as on says, the
// form of torch.set_grad_enabled(mode) used as a context manager:
//
//	vram.SetGradEnabled(phase == "train", func() {
//		loss := lossFn(model.Forward(x), y)
//		...
//	})
//
// It is [EnableGrad] when on is true and [NoGrad] when false, scoped to fn
// and to the calling goroutine like them. (There is no form that changes
// the setting until further notice: goroutine-scoped state must end with a
// function call, see "Concurrency" in the package documentation.)
func SetGradEnabled(on bool, fn func()) { gradMode("set_grad_enabled", !on, fn) }

// InferenceMode runs fn in inference mode (torch.inference_mode): gradient
// recording is off as in [NoGrad], and [EnableGrad] or [SetGradEnabled]
// inside do not turn it back on. Tensors allocated inside are inference
// tensors ([Tensor.IsInference]), as are views of them, and outside
// inference mode they keep PyTorch's rules, so that code that runs here
// runs under PyTorch too: an operation that records gradients cannot save
// one for backward, SetRequiresGrad(true) and in-place operations on one
// panic with [ErrAutograd]. Clone one outside inference mode to get a normal
// tensor. Inference mode affects only the calling goroutine; calls nest.
func InferenceMode(fn func()) {
	if fn == nil {
		nilFunc("inference_mode")
	}
	id, g := enter()
	g.inference++
	defer func() {
		g.inference--
		leave(id, g)
	}()
	fn()
}

// InferenceModeEnabled reports whether the calling goroutine is inside
// [InferenceMode] (torch.is_inference_mode_enabled).
func InferenceModeEnabled() bool {
	g := current()
	return g != nil && g.inference > 0
}

// GradEnabled reports whether operations on the calling goroutine record
// gradients: false inside [NoGrad], [SetGradEnabled] with false and
// [InferenceMode], true elsewhere and inside [EnableGrad] (outside
// InferenceMode).
func GradEnabled() bool {
	g := current()
	return g == nil || !g.gradOff && g.inference == 0
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
	if fn == nil {
		nilFunc("tidy")
	}
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
// the caller then owns them and should Release them when done. To hand a
// result to the caller's own Tidy instead, use [TidyResult]. Keep returns
// its first argument, for out = vram.Keep(model.Forward(x)). Keeping a
// tensor created outside any Tidy does nothing. Call Keep on the goroutine
// that created the tensor.
func Keep(ts ...*Tensor) *Tensor {
	for _, t := range ts {
		if t != nil && t.scope != nil {
			t.scope = nil
			t.armBackstop() // no longer held by the scope
		}
	}
	if len(ts) == 0 {
		return nil
	}
	return ts[0]
}

// TidyResult runs fn as [Tidy] does, releasing every tensor fn creates but
// the one it returns. That result leaves fn's Tidy but, unlike a [Keep]'s,
// stays in the caller's own Tidy, if any, which releases it as it would
// any other tensor made there. A function that makes temporaries returns
// its result this way, so that callers inside a Tidy need not release it:
//
//	func attention(q, k, v *vram.Tensor) *vram.Tensor {
//		return vram.TidyResult(func() *vram.Tensor {
//			w := q.MatMul(k.Transpose(-2, -1)).Softmax(-1) // released on return
//			return w.MatMul(v)
//		})
//	}
//
// Outside any Tidy the caller owns the result and releases it. A nil
// result is returned as nil. A result that fn did not make (one of the
// tensors it works on, returned as it is) is returned as it is, and stays
// its owner's: the caller's Tidy does not release it.
func TidyResult(fn func() *Tensor) *Tensor {
	if fn == nil {
		nilFunc("tidy_result")
	}
	return tidyOut(fn)
}

// births counts the tensors made so far, in every goroutine: a tensor's
// born is its count.
var births atomic.Uint64

// tidyOut is [TidyResult], for the package's own ops. A result made
// before fn ran (one of fn's inputs, returned as it is) stays where it
// was, its owner's: only one that fn made moves to the caller's Tidy.
func tidyOut(fn func() *Tensor) (out *Tensor) {
	start := births.Load()
	older := false
	Tidy(func() {
		out = fn()
		if older = !absent(out) && out.born <= start; !older {
			Keep(out)
		}
	})
	if !older && !absent(out) && !out.ref.isReleased() {
		track(out)
	}
	return out
}

// track registers a new tensor with the innermost Tidy of this goroutine.
func track(t *Tensor) { trackIn(current(), t) }

// trackIn is track for a caller that already looked up the goroutine's
// state g (nil when it has none).
func trackIn(g *gstate, t *Tensor) {
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
