package vram

import (
	"fmt"
	"slices"
)

// rngScope is one Checkpoint forward (recording) or recompute (replaying)
// on a goroutine. A recording scope keeps the state each generator had
// before its first draw inside the forward; a replaying scope draws from
// private copies made from those states, so that the recompute sees the
// same random numbers without rewinding a generator others may be using.
type rngScope struct {
	replay bool
	states map[*Generator][]byte     // recording: state before the first draw
	copies map[*Generator]*Generator // replaying: generator -> private copy
}

// state returns the generator's current source state.
func (g *Generator) state() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sourceState()
}

// sourceState returns the state of g's PCG source; g.mu is held.
func (g *Generator) sourceState() []byte {
	g.ready()
	b, err := g.src.MarshalBinary()
	if err != nil {
		panic("vram: internal: cannot save generator state: " + err.Error())
	}
	return b
}

// generatorAt returns a new generator in state b.
func generatorAt(b []byte) *Generator {
	g := NewGenerator(0)
	if err := g.src.UnmarshalBinary(b); err != nil {
		panic("vram: internal: cannot restore generator state: " + err.Error())
	}
	return g
}

// forDraw returns the generator a draw from g on this goroutine uses: a
// private copy inside a Checkpoint recompute, g itself otherwise. Inside a
// Checkpoint forward it first saves the state of g for the recompute.
func (g *Generator) forDraw() *Generator {
	st := current()
	if st == nil || len(st.rng) == 0 {
		return g
	}
	eff := g
	for i := len(st.rng) - 1; i >= 0; i-- {
		if c := st.rng[i].copies[g]; c != nil {
			eff = c
			break
		}
	}
	for _, r := range st.rng {
		if r.replay {
			continue
		}
		if _, ok := r.states[g]; !ok {
			r.states[g] = eff.state()
		}
	}
	return eff
}

// Recomputing reports whether the calling goroutine is running the
// recompute of a [Checkpoint] (or [CheckpointMulti]) in a backward pass:
// the checkpointed function's second run on the same input. Layers with
// state that their forward updates, such as the running statistics of
// batch normalization, leave it alone then, so that a checkpointed model
// ends a training step with the state the same model has without
// checkpointing (PyTorch's checkpoint updates such statistics twice).
func Recomputing() bool {
	st := current()
	if st == nil {
		return false
	}
	for _, r := range st.rng {
		if r.replay {
			return true
		}
	}
	return false
}

// withRNG runs fn with r as the innermost random-state scope.
func withRNG(r *rngScope, fn func()) {
	id, g := enter()
	g.rng = append(g.rng, r)
	defer func() {
		g.rng = g.rng[:len(g.rng)-1]
		leave(id, g)
	}()
	fn()
}

// Checkpoint computes fn(x) without keeping the activations inside fn for
// backward (activation checkpointing, torch.utils.checkpoint): the forward
// runs under [NoGrad] and only x is saved; Backward runs fn again on x with
// recording on and backpropagates through that recompute. Gradients are the
// ones fn(x) would give without Checkpoint, for x and for every leaf fn
// uses (the parameters of a layer), at the cost of a second forward.
//
// The recompute runs inside an [Autocast] region of the forward's dtype
// when the forward ran inside one, so that it computes what the forward
// computed. Random draws inside fn (the masks of dropout) are replayed: the
// recompute sees the numbers the forward drew, from the default generator
// and from those of [WithGenerator], and the generators themselves are not
// rewound. fn must draw on the calling goroutine for that, and must compute
// the same function both times (no other state that changes in between).
// fn must not change x in place (an in-place activation on it): the
// recompute would start from the changed x, so Backward then fails with
// [ErrAutograd], as it does for any saved tensor changed in place since.
//
// params lists the leaves requiring grad that fn uses besides x: the result
// requires grad when x or one of them does (even when fn ignores x and
// uses none of them: as its forward records nothing, Checkpoint cannot
// tell, where PyTorch's non-reentrant checkpoint gives a result that does
// not require grad; no gradient flows through such a result, and the
// backward pass warns of it once ([WarnOnce]) when its recompute finds
// it), and to [Grad] the checkpoint is
// an operation of x and params (a leaf fn uses that is not listed gets its
// gradient from Backward, but none from Grad). Without them, an x that
// does not require grad (the first layer's input) makes Checkpoint run
// fn(x) as it is, recording its graph and keeping its activations, which
// it warns of ([WarnOnce]) when the result requires grad. An integer or
// bool result (indices, a mask) is returned as fn computed it, outside the
// graph, as in PyTorch: such tensors cannot require grad. Outside
// recording (inside NoGrad, or when nothing requires grad) Checkpoint
// simply returns fn(x).
//
// The tensors fn computes during the forward, other than its result, are
// released when it returns, as inside a [Tidy] (fn may [Keep] one to use it
// later): without that, the activations a checkpoint exists to drop would
// stay until the caller's Tidy ends.
//
// The result is a new tensor the caller owns. fn returns a tensor it
// computed, or one made before it ran, as it is: x, one of params or a
// tensor it captured (a constant), of which the result is then a new view,
// so that the tensor itself stays as its owner made it (gradients reach
// it through that view only when it is x or one of params, or a leaf
// requiring grad that Backward reaches). The recompute must give a result
// of the forward's shape, dtype and device: Backward panics with [ErrShape]
// or [ErrDType] otherwise.
//
// It panics with an *Error of kind [ErrArgument] when fn is nil, x or one
// of params is a zero Tensor (made without a factory; nil params are
// skipped) or fn returns nil or one, and of kind [ErrReleased] when x or
// one of params was released, before fn runs, or fn returns a tensor it
// released.
func Checkpoint(fn func(x *Tensor) *Tensor, x *Tensor, params ...*Tensor) *Tensor {
	if fn == nil {
		fail("checkpoint", ErrArgument, "the function to checkpoint is nil")
	}
	x.live("checkpoint")
	liveParams("checkpoint", params)
	want := x.requiresGrad.Load()
	for _, p := range params {
		if p != nil && p.requiresGrad.Load() {
			want = true
		}
	}
	if !want || !GradEnabled() {
		out := callCheckpointed(fn, x)
		if slices.Contains(params, out) {
			return out.identity("checkpoint")
		}
		warnUnlisted(out)
		return out
	}
	rec := &rngScope{states: map[*Generator][]byte{}}
	entry := versionsOf(x)
	var out *Tensor
	start := births.Load()
	NoGrad(func() { withRNG(rec, func() { out = callReleasing(fn, x) }) })
	if !out.dtype.IsFloat() {
		// Integer and bool results (indices, masks) carry no gradient
		// and cannot require grad: they leave the graph, as in PyTorch.
		return out
	}
	// Under NoGrad a tensor that fn computes neither requires grad nor has
	// a graph node: one that does was made before (a parameter fn returns
	// as it is), and gets the same treatment as x, here and in the
	// recompute; so does one made before fn ran (a constant fn captured),
	// which the node must not be attached to.
	passThrough := out != x && (out.born <= start || slices.Contains(params, out) || out.requiresGrad.Load() || out.ref.node != nil)
	if passThrough {
		out = out.identity("checkpoint")
	}
	saved := save(x)
	inputGrad := x.requiresGrad.Load()
	// The node's inputs are x and the params that require grad, each
	// once: the recompute captures their gradients, and the engine
	// accumulates them (Backward) or returns them (Grad) as any node's.
	inputs := []*Tensor{x}
	for _, p := range params {
		if p != nil && p.requiresGrad.Load() && !slices.Contains(inputs[1:], p) {
			inputs = append(inputs, p)
		}
	}
	leaves := inputs[1:]
	// The recompute runs in the forward's Autocast region, if any: the
	// backward pass runs outside every region.
	acDT, ac := AutocastDType()
	record("checkpoint", out, inputs, saved, func(g *Tensor) []*Tensor {
		rep := &rngScope{replay: true, copies: map[*Generator]*Generator{}}
		for gen, b := range rec.states {
			rep.copies[gen] = generatorAt(b)
		}
		in := saved[0].Detach()
		defer in.Release()
		in.SetRequiresGrad(inputGrad)
		var y *Tensor
		recompute := func() {
			rstart := births.Load()
			y = callCheckpointed(fn, in)
			if passThrough || y.born <= rstart {
				// Not fn's own result: released below through a view.
				y = y.identity("checkpoint")
			}
		}
		EnableGrad(func() {
			withRNG(rep, func() {
				if ac {
					Autocast(acDT, recompute)
				} else {
					recompute()
				}
			})
		})
		c := &capture{leaves: map[*Tensor][]int{}, nodes: map[*node][]int{}, out: make([]*Tensor, len(inputs))}
		if inputGrad {
			c.leaves[in] = []int{0}
		}
		for i, p := range leaves {
			c.leaves[p] = append(c.leaves[p], i+1)
		}
		// Inside Backward, the leaves fn uses that are not in params get
		// their gradients too; inside Grad, nothing is stored.
		c.others, c.outer = !insideGrad(), true
		backwardReleasing(y, g, out.dtype, c)
		return c.out
	})
	savedAtEntry(out, entry)
	return out
}

// callReleasing is callCheckpointed inside a [Tidy]: the tensors fn
// computes and does not return (the activations inside a block, which a
// checkpoint exists not to keep) are released as soon as fn returns,
// rather than at the end of the caller's Tidy, or by the garbage collector.
// The result, when fn computed it, goes to the caller's Tidy, if any.
func callReleasing(fn func(*Tensor) *Tensor, x *Tensor) *Tensor {
	var out *Tensor
	mine := false
	Tidy(func() {
		out = callCheckpointed(fn, x)
		g := current()
		if mine = out.scope != nil && out.scope == g.scopes[len(g.scopes)-1]; mine {
			Keep(out)
		}
	})
	if mine {
		track(out) // by the caller's Tidy, which Keep took it from
	}
	return out
}

// callCheckpointed runs fn(x) and returns a result distinct from x, so that
// a graph node attached to it never lands on the input: for x itself, a
// view of x through which the gradient passes.
func callCheckpointed(fn func(*Tensor) *Tensor, x *Tensor) *Tensor {
	out := fn(x)
	if out == nil {
		fail("checkpoint", ErrArgument, "the checkpointed function returned nil; it must return its output tensor")
	}
	liveResult("checkpoint", out, -1)
	if out == x {
		return x.identity("checkpoint")
	}
	return out
}

// independentWarning is the warning of a checkpoint whose recompute finds
// that the result depends on no tensor that requires grad.
const independentWarning = "checkpoint: the checkpointed function's result depends on no tensor that requires grad " +
	"(it ignores its input and uses none of params), so no gradient flows through it; in PyTorch that result would not require grad. " +
	"Detach the result, or call the function without Checkpoint"

// backwardReleasing backpropagates g from y, the output of a checkpoint's
// recompute, releasing y first: the backward pass needs y's graph, not its
// values, so y's memory (as large as the block's output) is free for the
// gradients the pass allocates; what the graph saved of y stays saved. y is
// released whether or not it requires grad. dt is the dtype of the
// forward's result, which the recompute must give again: a result of
// another shape, device or dtype panics with [ErrShape] or [ErrDType]
// before anything runs, as PyTorch's checkpoint refuses recomputed values
// whose metadata changed.
func backwardReleasing(y, g *Tensor, dt DType, c *capture) {
	n := y.ref.node
	if !y.requiresGrad.Load() || n == nil {
		if y.requiresGrad.Load() && c.others {
			y.Backward(Gradient(g)) // a leaf: accumulates g
		}
		y.Release()
		if !y.requiresGrad.Load() {
			WarnOnce(independentWarning)
		}
		return
	}
	if !slices.Equal(g.shape, y.shape) || g.Device() != y.Device() {
		y.Release()
		fail("checkpoint", ErrShape, "the recompute gave %v on %s where the forward gave %v on %s; the checkpointed function must compute the same function both times",
			Shape(y.shape), y.Device(), Shape(g.shape), g.Device())
	}
	if y.dtype != dt {
		ydt := y.dtype
		y.Release()
		fail("checkpoint", ErrDType, "the recompute gave a %s result where the forward gave %s; the checkpointed function must compute the same function both times",
			ydt, dt)
	}
	n.incref("checkpoint")
	defer n.decref()
	seed := Keep(g.Cast(y.dtype))
	y.Release()
	Region("backward", func() { withoutAutocast(func() { NoGrad(func() { runGraph([]*node{n}, []*Tensor{seed}, false, c) }) }) })
}

// CheckpointMulti is [Checkpoint] for a function of several tensors with
// several results (torch.utils.checkpoint.checkpoint of a function taking
// and returning tuples): the forward runs fn(xs) under [NoGrad] and saves
// only xs, and Backward runs fn again on xs with recording on, replaying
// its random draws, to get the gradients with respect to every x that
// requires grad, the params and, from Backward, every other leaf fn uses.
// The results are gathered into one block of memory, of which the tensors
// returned are views (one copy of the results, so that the recompute runs
// once for all of them): they must share one dtype and device, and fn must
// return as many tensors, of the same shapes and dtype, both times
// (Backward panics with [ErrShape] or [ErrDType] otherwise); integer or
// bool results are returned outside the graph, as Checkpoint returns them,
// and results that depend on no tensor requiring grad require grad all
// the same, as Checkpoint's do, with the same warning from Backward. xs
// may hold tensors that do not require grad (masks, indices); they are
// saved too, and fn must not change them in place (Backward then fails
// with [ErrAutograd], as for Checkpoint).
//
// The results are new tensors the caller owns, in fn's order. Outside
// recording (inside NoGrad, or when nothing requires grad)
// CheckpointMulti simply returns fn(xs). It panics with [ErrArgument] when
// fn is nil, xs is empty or holds nil, xs or params hold a zero Tensor, or
// fn returns no tensor or a nil or zero one, with [ErrReleased] for a released tensor in xs or params, before fn
// runs, or among fn's results, and with [ErrDType] or [ErrDevice] for
// results of different dtypes or devices.
func CheckpointMulti(fn func(xs []*Tensor) []*Tensor, xs []*Tensor, params ...*Tensor) []*Tensor {
	const op = "checkpoint"
	if fn == nil {
		fail(op, ErrArgument, "the function to checkpoint is nil")
	}
	if len(xs) == 0 {
		fail(op, ErrArgument, "no input tensors; pass the tensors fn reads as xs")
	}
	liveParams(op, params)
	defer pin(op, xs...).unpin()
	want := false
	for _, t := range slices.Concat(xs, params) {
		if t != nil && t.requiresGrad.Load() {
			want = true
		}
	}
	call := func(in []*Tensor) []*Tensor {
		outs := fn(slices.Clone(in))
		if len(outs) == 0 {
			fail(op, ErrArgument, "the checkpointed function returned no tensor")
		}
		for i, o := range outs {
			if o == nil {
				fail(op, ErrArgument, "the checkpointed function returned nil as result %d", i)
			}
			liveResult(op, o, i)
		}
		return outs
	}
	if !want || !GradEnabled() {
		outs := call(xs)
		for i, o := range outs {
			if slices.Contains(xs, o) || slices.Contains(params, o) || slices.Index(outs, o) < i {
				outs[i] = o.identity(op)
			} else {
				warnUnlisted(o)
			}
		}
		return outs
	}
	rec := &rngScope{states: map[*Generator][]byte{}}
	entry := versionsOf(xs...)
	var packed *Tensor
	var shapes [][]int
	NoGrad(func() {
		withRNG(rec, func() {
			Tidy(func() {
				outs := call(xs)
				shapes = make([][]int, len(outs))
				for i, o := range outs {
					shapes[i] = slices.Clone(o.Shape())
				}
				packed = Keep(packOutputs(outs))
			})
		})
	})
	track(packed)
	if !packed.dtype.IsFloat() {
		// Integer and bool results carry no gradient (see Checkpoint).
		return unpackOutputs(packed, shapes)
	}
	dt := packed.dtype
	saved := save(xs...)
	inputGrad := make([]bool, len(xs))
	inputs := []*Tensor{}
	for i, x := range xs {
		if inputGrad[i] = x.requiresGrad.Load(); inputGrad[i] {
			inputs = append(inputs, x)
		}
	}
	nx := len(inputs)
	for _, p := range params {
		if p != nil && p.requiresGrad.Load() && !slices.Contains(inputs[nx:], p) {
			inputs = append(inputs, p)
		}
	}
	acDT, ac := AutocastDType()
	record(op, packed, inputs, saved, func(g *Tensor) []*Tensor {
		rep := &rngScope{replay: true, copies: map[*Generator]*Generator{}}
		for gen, b := range rec.states {
			rep.copies[gen] = generatorAt(b)
		}
		c := &capture{leaves: map[*Tensor][]int{}, nodes: map[*node][]int{}, out: make([]*Tensor, len(inputs))}
		ins := make([]*Tensor, len(saved))
		k := 0
		for i, s := range saved {
			ins[i] = s.Detach()
			defer ins[i].Release()
			if inputGrad[i] {
				ins[i].SetRequiresGrad(true)
				c.leaves[ins[i]] = []int{k}
				k++
			}
		}
		for i, p := range inputs[nx:] {
			c.leaves[p] = append(c.leaves[p], nx+i)
		}
		var y *Tensor
		recompute := func() {
			outs := call(ins)
			if len(outs) != len(shapes) {
				fail(op, ErrShape, "the recompute returned %d tensors where the forward returned %d; "+
					"the checkpointed function must compute the same function both times", len(outs), len(shapes))
			}
			for i, o := range outs {
				if !slices.Equal(o.Shape(), shapes[i]) {
					fail(op, ErrShape, "the recompute gave result %d of shape %v where the forward gave %v; "+
						"the checkpointed function must compute the same function both times", i, o.Shape(), Shape(shapes[i]))
				}
			}
			y = packOutputs(outs)
		}
		EnableGrad(func() {
			withRNG(rep, func() {
				if ac {
					Autocast(acDT, recompute)
				} else {
					recompute()
				}
			})
		})
		c.others, c.outer = !insideGrad(), true
		backwardReleasing(y, g, dt, c)
		return c.out
	})
	savedAtEntry(packed, entry)
	return unpackOutputs(packed, shapes)
}

// warnUnlisted warns, once per call site, when out, a result of a
// checkpointed function that ran as it is because neither its inputs nor
// its params require grad, requires grad all the same: the function uses
// a leaf that is not listed in params, so it recorded its graph and kept
// the activations the checkpoint exists to drop.
func warnUnlisted(out *Tensor) {
	if GradEnabled() && out.requiresGrad.Load() {
		WarnOnce("checkpoint: the function uses tensors that require grad that are not in params, and neither its input nor params requires grad, " +
			"so it ran without checkpointing and kept its activations; pass the leaves it uses (a layer's parameters) as params, as nn.Checkpoint does")
	}
}

// liveParams panics for a checkpoint's params that are released or zero
// Tensors, before anything runs: the checkpoint would record them as
// inputs of its node, over freed memory. nil entries (a layer's absent
// bias) are skipped.
func liveParams(op string, params []*Tensor) {
	for _, p := range params {
		if p != nil {
			p.live(op)
		}
	}
}

// liveResult panics when out, result i of a checkpointed function (-1 for
// Checkpoint's only one), is a zero Tensor (with [ErrArgument]) or was
// released before the function returned it (with [ErrReleased]), naming
// the function as the culprit.
func liveResult(op string, out *Tensor, i int) {
	which := "its result"
	if i >= 0 {
		which = fmt.Sprintf("result %d", i)
	}
	if absent(out) {
		fail(op, ErrArgument, "the checkpointed function returned a zero Tensor, made without a factory, as %s", which)
	}
	if out.ref.isReleased() {
		fail(op, ErrReleased, "the checkpointed function released %s (%v %s) before returning it; return a live tensor, and Keep it if fn runs its own Tidy",
			which, Shape(out.shape), out.dtype)
	}
}

// versionsOf returns the storage versions of ts, taken as a checkpoint's
// forward begins.
func versionsOf(ts ...*Tensor) []uint64 {
	v := make([]uint64, len(ts))
	for i, t := range ts {
		v[i] = t.ref.st.version.Load()
	}
	return v
}

// savedAtEntry dates the inputs that out's checkpoint node saved (its
// first len(entry) saved tensors) to the versions they had when the
// forward began, rather than when it ended: the recompute must see the
// input the forward saw, so a function that changes its input in place
// (an in-place activation on it, say) makes the backward pass fail as any
// node's whose saved tensor changed since, as PyTorch's checkpoint does
// (it saves its inputs before running the function), instead of
// recomputing from the changed input and changing it a second time.
func savedAtEntry(out *Tensor, entry []uint64) {
	n := out.ref.node
	n.mu.Lock()
	defer n.mu.Unlock()
	copy(n.versions, entry)
}

// unpackOutputs returns the results that packed gathers, views of it of
// the given shapes, and releases packed: the views keep its storage and
// its graph.
func unpackOutputs(packed *Tensor, shapes [][]int) []*Tensor {
	outs := make([]*Tensor, len(shapes))
	off := 0
	for i, s := range shapes {
		n := backendNum(s)
		part := packed.Narrow(0, off, n)
		outs[i] = part.Reshape(s...)
		part.Release()
		off += n
	}
	packed.Release()
	return outs
}

// packOutputs returns the tensors of outs flattened and concatenated into
// one 1-D tensor, recorded when recording is on.
func packOutputs(outs []*Tensor) *Tensor {
	const op = "checkpoint"
	flat := make([]*Tensor, len(outs))
	for i, o := range outs {
		if o.DType() != outs[0].DType() {
			fail(op, ErrDType, "the checkpointed function returned %s and %s tensors; results must share one dtype", outs[0].DType(), o.DType())
		}
		if o.Device() != outs[0].Device() {
			panic(&DeviceMismatchError{Op: op, Expected: outs[0].Device(), Got: o.Device()})
		}
		flat[i] = o.Reshape(-1)
	}
	return Cat(flat, 0)
}
