package vram

import (
	"slices"
	"sync"
	"weak"

	"github.com/vramgo/vram/backend"
)

// autocastState is one Autocast region of a goroutine.
type autocastState struct {
	dt DType
	// cache holds the low-precision copy of each float32 leaf that
	// requires grad (a weight), made once per region without a graph.
	// Each use gets a view of it recorded as a cast of its own, so that
	// gradients reach the float32 master and graphs that share the copy
	// (micro-batches accumulating gradients, each with its own Backward)
	// share no node. It is released when the region ends.
	cache map[*Tensor]cachedCast
	// order lists the weights cached, in the order of their first use
	// (used marks them); looked is set once the region has looked for a
	// plan (castPlans).
	order  []*Tensor
	used   map[*Tensor]bool
	looked bool
}

// Plans of the weights a region casts. A training loop runs the same
// forward pass in a new region every step, casting the same weights in
// the same order, one launch each. At its end a region remembers the
// weights it cast, keyed by the first; when a later region's first cast
// is of that weight, it casts every weight of the plan that it may cache
// at once, with one [backend.MultiCopier.CopyMany] per device (a model's
// hundreds of weights in a few launches). A weight the region then does
// not use costs its copy until the region ends. Weights are held weakly:
// a plan keeps nothing alive.
const maxCastPlans = 64 // plans kept; beyond, the oldest go

var castPlans struct {
	sync.Mutex
	byFirst map[weak.Pointer[Tensor]][]weak.Pointer[Tensor]
	order   []weak.Pointer[Tensor] // keys, oldest first
}

// rememberCasts keeps order as the plan of regions whose first cast is
// order[0].
func rememberCasts(order []*Tensor) {
	if len(order) < 2 {
		return
	}
	plan := make([]weak.Pointer[Tensor], len(order))
	for i, t := range order {
		plan[i] = weak.Make(t)
	}
	castPlans.Lock()
	defer castPlans.Unlock()
	if castPlans.byFirst == nil {
		castPlans.byFirst = map[weak.Pointer[Tensor]][]weak.Pointer[Tensor]{}
	}
	k := plan[0]
	if _, ok := castPlans.byFirst[k]; !ok {
		castPlans.order = append(castPlans.order, k)
	}
	castPlans.byFirst[k] = plan
	for len(castPlans.order) > maxCastPlans {
		delete(castPlans.byFirst, castPlans.order[0])
		castPlans.order = castPlans.order[1:]
	}
}

// planFor returns the weights of the plan that starts with t, nil when
// there is none.
func planFor(t *Tensor) []*Tensor {
	castPlans.Lock()
	plan := castPlans.byFirst[weak.Make(t)]
	castPlans.Unlock()
	var ts []*Tensor
	for _, p := range plan {
		if v := p.Value(); v != nil {
			ts = append(ts, v)
		}
	}
	return ts
}

// castAhead fills st's cache with the low-precision copies of the weights
// of t's plan, t among them, that the region may cache (as autocastLow's
// rules say) and has not yet: per device, with one CopyMany where the
// device has it and there are at least two. Nothing happens otherwise.
func castAhead(st *autocastState, t *Tensor) {
	byDevice := map[*devState][]*Tensor{}
	var devs []*devState
	seen := map[*Tensor]bool{}
	for _, w := range planFor(t) {
		if seen[w] || w.ref.isReleased() || w.dtype != Float32 || w.ref.node != nil || !w.requiresGrad.Load() ||
			!denseStrides(w.shape, w.strides) {
			continue
		}
		seen[w] = true
		if c, ok := st.cache[w]; ok && c.st == w.ref.st && c.version == w.ref.st.version.Load() {
			continue
		}
		ds := w.ds()
		if _, ok := ds.bd.(backend.MultiCopier); !ok {
			continue
		}
		if byDevice[ds] == nil {
			devs = append(devs, ds)
		}
		byDevice[ds] = append(byDevice[ds], w)
	}
	for _, ds := range devs {
		ws := byDevice[ds]
		if len(ws) < 2 {
			continue
		}
		var held []*Tensor
		for _, w := range ws {
			if w.ref.hold() {
				held = append(held, w)
			}
		}
		func() {
			defer func() {
				for _, w := range held {
					w.ref.unhold()
				}
			}()
			lows := make([]*Tensor, len(held))
			dv, sv := make([]backend.View, len(held)), make([]backend.View, len(held))
			for i, w := range held {
				lows[i] = newTensorLike("autocast", ds, st.dt, w.shape, w)
				d, ok1 := flatViews(lows[i])
				s, ok2 := flatViews(w)
				if !ok1 || !ok2 || !sameStrides(w.shape, w.strides, lows[i].strides) {
					for _, l := range lows[:i+1] {
						l.Release()
					}
					return
				}
				dv[i], sv[i] = d[0], s[0]
			}
			err := ds.bd.(backend.MultiCopier).CopyMany(ds.stream(), dv, sv)
			if err != nil {
				for _, l := range lows {
					l.Release()
				}
				if notImplemented(err) {
					return
				}
				check("autocast", err)
			}
			for i, w := range held {
				if old, ok := st.cache[w]; ok {
					old.t.Release()
				}
				st.cache[w] = cachedCast{t: Keep(lows[i]), st: w.ref.st, version: w.ref.st.version.Load()}
			}
		}()
	}
}

// cachedCast is a weight's low-precision copy with the weight's storage
// and its version when it was made: a copy older than the weight, or of a
// storage the weight no longer has (moved by MoveTo, converted by
// CastInPlace), is made again.
type cachedCast struct {
	t       *Tensor
	st      *storage
	version uint64
}

// Autocast runs fn with automatic mixed precision on the calling goroutine
// (torch.autocast): matrix products ([Tensor.MatMul], [Tensor.BMM],
// [Linear], [LinearAct], and the contractions of [Einsum]) and convolutions ([Conv1d], [Conv2d],
// [ConvTranspose2d]) take their float32, float16 and bfloat16 operands in
// dt (Float16 or BFloat16) and produce dt: a float16 activation meeting a
// product in a bfloat16 region is cast to bfloat16, as PyTorch casts it.
// Float64 operands are left alone, as PyTorch's autocast leaves them: a
// product of float64 tensors runs in float64, and one that mixes float64
// with a float32 operand (cast to dt) panics with [ErrDType] as it would
// outside the region. A leaf operand that requires grad (a
// float32 master weight) is cast once per region and the copy reused by
// every product inside it; gradients flow back to the master in its own
// dtype. Package amp wraps it; see amp.Autocast for the ops that run in
// float32. Other goroutines are not affected. Regions nest, the innermost
// dtype winning; a region inside one of the same dtype shares its weight
// copies, and [NoAutocast] suspends the region for a block (PyTorch's
// torch.autocast with enabled=False). It panics with [ErrDType] unless dt
// is Float16 or BFloat16.
//
// A weight changed in place inside the region (an optimizer step, which
// PyTorch asks to make outside, or a [Tensor.MoveTo] or
// [Tensor.CastInPlace]) is cast again at its next use: a cached copy is
// never older than its weight.
func Autocast(dt DType, fn func()) {
	if fn == nil {
		nilFunc("autocast")
	}
	if dt != Float16 && dt != BFloat16 {
		fail("autocast", ErrDType, "autocast runs products in float16 or bfloat16, got %v", dt)
	}
	id, g := enter()
	prev := g.autocast
	if prev != nil && prev.dt == dt {
		// Nothing changes: the outer region's weight copies serve this one
		// (PyTorch keeps one cache until the outermost region ends).
		defer leave(id, g)
		fn()
		return
	}
	st := &autocastState{dt: dt, cache: map[*Tensor]cachedCast{}, used: map[*Tensor]bool{}}
	g.autocast = st
	defer func() {
		g.autocast = prev
		for _, c := range st.cache {
			c.t.Release()
		}
		rememberCasts(st.order)
		leave(id, g)
	}()
	fn()
}

// NoAutocast runs fn with the calling goroutine's [Autocast] region
// suspended, as torch.autocast(device_type, enabled=False) nested in an
// enabled region: inside, every op runs in its inputs' own dtypes, so a
// block that needs float32 (or float64) precision casts its inputs
// explicitly; when fn returns or panics the region's policy resumes.
// [AutocastDType] reports false inside, and an Autocast call inside fn
// starts a region of its own. Outside any region it just runs fn. Like
// Autocast it affects only the calling goroutine.
func NoAutocast(fn func()) {
	if fn == nil {
		nilFunc("no_autocast")
	}
	id, g := enter()
	prev := g.autocast
	g.autocast = nil
	defer func() {
		g.autocast = prev
		leave(id, g)
	}()
	fn()
}

// AutocastDType returns the dtype of the calling goroutine's innermost
// [Autocast] region, and false outside any.
func AutocastDType() (DType, bool) {
	if g := current(); g != nil && g.autocast != nil {
		return g.autocast.dt, true
	}
	return 0, false
}

// autocastLow returns the operands of a product converted to the region's
// low dtype, and a function that releases the conversions it made and the
// views of cached ones (not the cached copies). As in PyTorch, every float32, float16 and bfloat16 operand
// not already in the low dtype is converted (a float16 activation in a
// bfloat16 region becomes bfloat16); float64 and non-float ones are not
// eligible. Only float32 weights are cached. Outside a region it returns
// ts unchanged. nil stays nil. A float64 operand beside one it would
// convert panics with [ErrDType] for op, naming the dtypes as given: the
// op would refuse the mix anyway, and its own message would name the
// converted copy's dtype, which the caller never made.
func autocastLow(op string, ts ...*Tensor) ([]*Tensor, func()) {
	g := current()
	if g == nil || g.autocast == nil {
		return ts, func() {}
	}
	st := g.autocast
	if i := slices.IndexFunc(ts, func(t *Tensor) bool { return t != nil && t.dtype == Float64 }); i >= 0 {
		for _, t := range ts {
			if t != nil && t.dtype != st.dt && (t.dtype == Float32 || t.dtype == Float16 || t.dtype == BFloat16) {
				fail(op, ErrDType, "operands of %s and %s in a %s autocast region: autocast leaves float64 as it is and casts %s to %s, so the dtypes differ; Cast one of them, or run the op under NoAutocast",
					ts[i].dtype, t.dtype, st.dt, t.dtype, st.dt)
			}
		}
	}
	out := make([]*Tensor, len(ts))
	var temps []*Tensor
	for i, t := range ts {
		out[i] = t
		if t == nil || t.dtype == st.dt || (t.dtype != Float32 && t.dtype != Float16 && t.dtype != BFloat16) {
			continue
		}
		t.live("autocast")
		if t.dtype == Float32 && t.ref.node == nil && t.requiresGrad.Load() && !g.gradOff && g.inference == 0 {
			s, v := t.ref.st, t.ref.st.version.Load()
			c, ok := st.cache[t]
			if !ok && !st.looked {
				st.looked = true
				castAhead(st, t)
				c, ok = st.cache[t]
			}
			if !ok || c.st != s || c.version != v {
				if ok {
					c.t.Release() // graphs that use the old copy keep their own reference
				}
				var low *Tensor
				NoGrad(func() { low = t.Cast(st.dt) })
				c = cachedCast{t: Keep(low), st: s, version: v}
				st.cache[t] = c
			}
			if !st.used[t] {
				st.used[t] = true
				st.order = append(st.order, t)
			}
			u := c.t.view(c.t.shape, c.t.strides, c.t.offset)
			// The gradient goes back in the low dtype: Backward converts
			// those of every weight together at its end, in float32
			// before any sum (accumulateLeaves).
			record("cast", u, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.view(g.shape, g.strides, g.offset)} })
			temps = append(temps, u)
			out[i] = u
			continue
		}
		c := t.Cast(st.dt)
		temps = append(temps, c)
		out[i] = c
	}
	return out, func() {
		for _, c := range temps {
			c.Release()
		}
	}
}

// autocastUp returns t cast to float32 when an Autocast region is active
// and t is 16-bit, for the ops that autocast runs in float32, with a
// function that releases the conversion. Otherwise it returns t itself.
func autocastUp(t *Tensor) (*Tensor, func()) {
	if t == nil || (t.dtype != Float16 && t.dtype != BFloat16) {
		return t, func() {}
	}
	if g := current(); g == nil || g.autocast == nil {
		return t, func() {}
	}
	c := t.Cast(Float32)
	return c, c.Release
}

// autocastPromote returns a and b in float32, with a function that
// releases the conversions, when an Autocast region is active and they are
// floating-point operands of different dtypes among float32, float16 and
// bfloat16: the rule of PyTorch's promote list for ops that otherwise need
// equal dtypes. Otherwise it returns a nil function.
func autocastPromote(a, b *Tensor) (*Tensor, *Tensor, func()) {
	eligible := func(t *Tensor) bool {
		return t != nil && (t.dtype == Float32 || t.dtype == Float16 || t.dtype == BFloat16)
	}
	if !eligible(a) || !eligible(b) || a.dtype == b.dtype {
		return a, b, nil
	}
	if g := current(); g == nil || g.autocast == nil {
		return a, b, nil
	}
	var temps []*Tensor
	up := func(t *Tensor) *Tensor {
		if t.dtype == Float32 {
			return t
		}
		c := t.Cast(Float32)
		temps = append(temps, c)
		return c
	}
	a, b = up(a), up(b)
	return a, b, func() {
		for _, c := range temps {
			c.Release()
		}
	}
}

// withoutAutocast runs fn with the goroutine's Autocast region suspended:
// the backward pass computes gradients in the dtypes of the forward pass,
// as PyTorch's autograd engine does outside autocast.
func withoutAutocast(fn func()) {
	g := current()
	if g == nil || g.autocast == nil {
		fn()
		return
	}
	prev := g.autocast
	g.autocast = nil
	defer func() { g.autocast = prev }()
	fn()
}
