package vram

import (
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/vramgo/vram/backend"
)

// node is one recorded operation of the autograd graph (PyTorch's grad_fn).
// It is reference counted: each tensor it produced and each node that
// consumes its output holds a reference; at zero, the tensors it saved for
// backward are released.
type node struct {
	op       string
	inputs   []edge
	backward func(g *Tensor) []*Tensor // gradients for the inputs, nil where not needed
	// backwardInto, when set, is backward with a tensor that already holds
	// part of input 0's gradient (see recordInto), or nil.
	backwardInto func(g, into *Tensor) []*Tensor
	// backwardParts, when set, is backward with the gradient in two parts
	// that nothing has added yet, g + g2 (see recordParts), or nil.
	backwardParts func(g, g2 *Tensor) []*Tensor
	saved         []*Tensor
	versions      []uint64 // the saved tensors' storage versions when saved
	refs          atomic.Int64
	running       sync.RWMutex // held for reading while backward runs; free waits for it
	mu            sync.Mutex   // guards freed, backward, saved, hooks and retain
	freed         bool
	// hooks are the [Tensor.RegisterHook] hooks of the tensor n produced:
	// they live with the node, as PyTorch's live with the grad_fn, so
	// that they run even after that tensor was released.
	hooks []*tensorHook
	// retain is the tensor n produced, once [Tensor.RetainGrad] was called
	// on it. It is weak: the graph must not keep the tensor, whose own
	// reference keeps the graph, from the garbage collector's backstop.
	retain weak.Pointer[Tensor]
	ran    bool // backward ran without RetainGraph
	accum  int  // length of a chain of scalar accumulations ending here
	shape  []int
	dtype  DType
	device Device
	// stream is the stream, other than the default one, that the forward
	// operation ran on (in WithStream); nil for the default stream and on
	// the CPU. The backward pass waits for it (see waitForForward).
	stream *Stream
}

// edge leads from a node to one of its inputs: another node, or a leaf that
// accumulates its gradient.
type edge struct {
	node *node
	leaf *Tensor
}

// incref adds a reference for a new consumer of n's output. The caller
// holds a reference (through a pinned tensor), so the count is above zero;
// a count that reached zero is never raised again.
func (n *node) incref(op string) {
	for {
		c := n.refs.Load()
		if c <= 0 {
			fail(op, ErrReleased, "the graph of a tensor was already released")
		}
		if n.refs.CompareAndSwap(c, c+1) {
			return
		}
	}
}

func (n *node) decref() {
	switch c := n.refs.Add(-1); {
	case c < 0:
		panic("vram: internal: graph node released more often than referenced")
	case c > 0:
		return
	}
	n.free()
	for _, e := range n.inputs {
		if e.node != nil {
			e.node.decref()
		}
	}
}

// free releases the saved tensors, the backward closures and the hooks,
// once no Backward is running n's closure: the graph is gone.
func (n *node) free() { n.release(true) }

// release releases the saved tensors and the backward closures, once no
// Backward is running n's closure, and with all the hooks too, marking n
// freed. A walk without RetainGraph that went through n passes all false:
// n's RegisterHook hooks stay with the graph, for a later Grad that asks
// for the gradient with respect to n's tensor without running n (PyTorch
// runs a grad_fn's tensor pre-hooks there too).
func (n *node) release(all bool) {
	n.running.Lock()
	n.mu.Lock()
	saved := n.saved
	n.saved, n.backward, n.backwardInto, n.backwardParts = nil, nil, nil, nil
	if all {
		n.hooks, n.freed = nil, true
	}
	n.mu.Unlock()
	n.running.Unlock()
	for _, t := range saved {
		t.Release()
	}
}

// needsGrad reports whether an op on these inputs must be recorded.
func needsGrad(ts ...*Tensor) bool {
	any := false
	for _, t := range ts {
		if t != nil && t.requiresGrad.Load() {
			any = true
			break
		}
	}
	return any && GradEnabled()
}

// save returns references to ts that the graph keeps for backward.
func save(ts ...*Tensor) []*Tensor {
	for _, t := range ts {
		t.checkSavable() // before any reference is taken
	}
	out := make([]*Tensor, len(ts))
	for i, t := range ts {
		out[i] = t.share()
	}
	return out
}

// saveIf returns a reference to t made with save when need is true, and nil
// otherwise: an operand is kept for backward only when the gradient of an
// input that requires grad reads it (as PyTorch's mul saves self only when
// other requires grad). Pass the results through compact to record.
func saveIf(need bool, t *Tensor) *Tensor {
	if !need {
		return nil
	}
	return save(t)[0]
}

// record attaches a graph node to out. inputs are the op's tensor inputs in
// the order bw returns their gradients; saved are references made with save
// that bw uses and the node releases.
func record(op string, out *Tensor, inputs []*Tensor, saved []*Tensor, bw func(g *Tensor) []*Tensor) {
	n := &node{op: op, backward: bw, saved: saved, shape: out.shape, dtype: out.dtype, device: out.Device(), stream: forwardStream(out.ds())}
	if len(saved) > 0 {
		n.versions = make([]uint64, len(saved))
		for i, s := range saved {
			if s != nil {
				n.versions[i] = s.ref.st.version.Load()
			}
		}
	}
	n.inputs = make([]edge, len(inputs))
	for i, in := range inputs {
		if in == nil || !in.requiresGrad.Load() {
			continue
		}
		if in.ref.node != nil {
			in.ref.node.incref(op)
			n.inputs[i] = edge{node: in.ref.node}
		} else {
			n.inputs[i] = edge{leaf: in}
		}
	}
	n.refs.Store(1)
	out.ref.node = n
	out.requiresGrad.Store(true)
	checkGrowth(op, n, inputs)
}

// recordInto is record for an operation whose backward pass can add input
// 0's gradient into a tensor that already holds part of it: bw gets that
// tensor as into (nil when there is none) and returns it as input 0's
// gradient when it added to it; any other result is added as usual. The
// engine passes into only when nothing else can see it (ownsStorage), so
// writing to it changes no other tensor.
func recordInto(op string, out *Tensor, inputs []*Tensor, saved []*Tensor, bw func(g, into *Tensor) []*Tensor) {
	record(op, out, inputs, saved, func(g *Tensor) []*Tensor { return bw(g, nil) })
	out.ref.node.backwardInto = bw
}

// recordParts is record for an operation whose backward pass can take its
// output's gradient in two parts and add them itself, on the way: bw gets
// g and g2 (nil when the gradient came whole) and must treat them as
// g + g2. The engine keeps a gradient that arrives in two parts unsummed
// for such a node when nothing else would see the sum (no hook,
// RetainGrad or Grad asks for it), so that the node's kernels read both
// parts instead of an addition writing the sum first (a residual input's
// gradient in a ResNet: the identity's and the convolution's).
func recordParts(op string, out *Tensor, inputs []*Tensor, saved []*Tensor, bw func(g, g2 *Tensor) []*Tensor) {
	record(op, out, inputs, saved, func(g *Tensor) []*Tensor { return bw(g, nil) })
	out.ref.node.backwardParts = bw
}

// takesParts reports whether n's backward pass takes its gradient in two
// parts (recordParts).
func (n *node) takesParts() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.backwardParts != nil
}

// ownsStorage reports whether t is the only reference to its storage (no
// view, saved tensor or other handle shares it) and is not part of a
// graph, so that an in-place update of t is seen by nothing else.
func ownsStorage(t *Tensor) bool {
	return t.ref.st.refs.Load() == 1 && t.ref.node == nil && !t.requiresGrad.Load()
}

// The classic leak: a differentiable scalar loss summed across iterations
// (total += loss) without backward makes the graph grow every step. A chain
// of this many scalar additions is taken for that mistake.
const growthChain = 100

var growthWarned sync.Map // location -> true

func checkGrowth(op string, n *node, inputs []*Tensor) {
	if op != "add" && op != "sub" || len(n.shape) != 0 && backendNum(n.shape) != 1 {
		return
	}
	for _, in := range inputs {
		if in != nil && in.ref.node != nil && in.ref.node.accum+1 > n.accum {
			n.accum = in.ref.node.accum + 1
		}
	}
	if n.accum == growthChain {
		loc := callerOutside()
		if _, dup := growthWarned.LoadOrStore(loc, true); !dup {
			warnf(&loc, "a one-element tensor that requires grad has been accumulated %d times without backward, "+
				"so its autograd graph (and every tensor it saved) grows each iteration; "+
				"to keep a running total, add loss.Item() (a float64) instead of the tensor", growthChain)
		}
	}
}

func backendNum(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// RequiresGrad reports whether operations on t are recorded for autograd.
func (t *Tensor) RequiresGrad() bool {
	notNil("requires_grad", t)
	return t.requiresGrad.Load()
}

// SetRequiresGrad marks a leaf tensor as requiring grad (or not) and returns
// t. A leaf turned off after operations recorded it (a layer frozen between
// the forward and the backward pass) gets no gradient from their Backward,
// as in PyTorch; it is safe to call while other goroutines run forward and
// backward passes through t, each of which sees the flag as it was at the
// moment it read it. It panics with [ErrAutograd] on a tensor computed from others (use
// [Tensor.Detach] first), also for on == true, which PyTorch takes as a
// no-op but which most often marks the mistake of computing a parameter
// (w := Randn(shape, WithGrad()).MulScalar(0.1)) that then gets no
// gradient, and on an inference tensor outside [InferenceMode],
// and with [ErrDType] for non-float tensors.
func (t *Tensor) SetRequiresGrad(on bool) *Tensor {
	t.live("requires_grad")
	if t.ref.node != nil {
		if on {
			fail("requires_grad", ErrAutograd, "t was computed by %s, so it already requires grad but is not a leaf and gets no Grad(); "+
				"call RetainGrad() for its gradient, or Detach().SetRequiresGrad(true) for a new leaf", t.ref.node.op)
		}
		fail("requires_grad", ErrAutograd, "can only change requires_grad of leaf tensors; call Detach() first")
	}
	if on && !t.dtype.IsFloat() {
		fail("requires_grad", ErrDType, "only floating-point tensors can require grad, got %s", t.dtype)
	}
	if on && t.inference && !InferenceModeEnabled() {
		fail("requires_grad", ErrAutograd, "an inference tensor (made inside vram.InferenceMode) cannot require grad outside it; "+
			"use Clone() of it outside InferenceMode")
	}
	t.requiresGrad.Store(on)
	return t
}

// IsLeaf reports whether t was created by the user rather than computed by
// a recorded operation.
func (t *Tensor) IsLeaf() bool {
	notNil("is_leaf", t)
	return t.ref.node == nil
}

// Grad returns the gradient accumulated in t by Backward, or nil. Backward
// stores gradients in leaf tensors that require grad, and in a tensor
// computed by an operation only after [Tensor.RetainGrad]; for any other
// tensor Grad is nil (where PyTorch warns and gives None).
// The gradient belongs to t: it is released with t or by [Tensor.ZeroGrad].
// It has t's layout when t is dense (a channels-last weight has a
// channels-last gradient, as in PyTorch), else it is row-major.
// Releasing the gradient itself (t.Grad().Release()) is the same as
// [Tensor.ZeroGrad]: Grad is nil afterwards, until Backward stores a new one.
func (t *Tensor) Grad() *Tensor {
	notNil("grad", t)
	t.gradMu.Lock()
	defer t.gradMu.Unlock()
	if t.grad != nil && t.grad.ref.isReleased() {
		t.grad = nil
	}
	return t.grad
}

// SetGrad replaces t's gradient (taking ownership of g) and releases the
// old one. A nil g clears it. A g of another shape, device or dtype than t
// panics with [ErrShape], [ErrDevice] or [ErrDType], and t itself or a g
// whose elements share memory (made by Expand), which Backward could not
// add to in place, with [ErrArgument]; either changes nothing. A released
// t takes no gradient: SetGrad panics with [ErrReleased] and g stays the
// caller's (a nil g, as [Tensor.ZeroGrad] passes, does nothing). Backward
// adds to g in place, so a g that is a view of another tensor (as
// w.Detach() is of w) changes that tensor too, as in PyTorch.
func (t *Tensor) SetGrad(g *Tensor) {
	notNil("set_grad", t)
	if g != nil {
		g.live("set_grad")
		kind := ErrShape
		switch {
		case !slices.Equal(g.shape, t.shape):
		case g.Device() != t.Device():
			kind = ErrDevice
		case g.dtype != t.dtype:
			kind = ErrDType
		default:
			kind = nil
		}
		if kind != nil {
			fail("set_grad", kind, "gradient %v %s on %s does not match tensor %v %s on %s",
				Shape(g.shape), g.dtype, g.Device(), Shape(t.shape), t.dtype, t.Device())
		}
		if g == t {
			fail("set_grad", ErrArgument, "a tensor cannot be its own gradient; pass a Clone() of it")
		}
		if sharedElements(g.shape, g.strides) {
			fail("set_grad", ErrArgument, "more than one element of the gradient (shape %v, strides %v) is one memory location, "+
				"as after Expand, so Backward could not add to it; pass a Contiguous() copy", Shape(g.shape), g.strides)
		}
	}
	t.gradMu.Lock()
	if g != nil && t.ref.isReleased() {
		// A released tensor's gradient would never be released: Release
		// has run already. g stays the caller's, in its Tidy if any.
		t.gradMu.Unlock()
		failReleased("set_grad", t)
	}
	if g != nil {
		Keep(g)
	}
	old := t.grad
	t.grad = g
	t.gradMu.Unlock()
	if old != nil && old != g {
		old.Release()
	}
}

// RetainGrad makes Backward store the gradient with respect to t, a tensor
// computed by an operation, in t.Grad() (torch.Tensor.retain_grad), where
// otherwise only leaves get one. Like a leaf's, the gradient accumulates
// across Backward calls until [Tensor.ZeroGrad], and is released with t. It
// is the gradient after t's [Tensor.RegisterHook] hooks, whenever they were
// registered. On a leaf that requires grad it does nothing (a leaf keeps
// its gradient anyway). It panics with [ErrAutograd] on a tensor that does
// not require grad, which no gradient reaches.
func (t *Tensor) RetainGrad() {
	const op = "retain_grad"
	defer pin(op, t).unpin()
	if !t.requiresGrad.Load() {
		fail(op, ErrAutograd, "t does not require grad, so no gradient will reach it")
	}
	n := t.ref.node
	if n == nil {
		return
	}
	n.mu.Lock()
	n.retain = weak.Make(t)
	n.mu.Unlock()
}

// RetainsGrad reports whether t is a tensor computed by an operation on
// which [Tensor.RetainGrad] was called (torch.Tensor.retains_grad); it is
// false for leaves.
func (t *Tensor) RetainsGrad() bool {
	notNil("retains_grad", t)
	n := t.ref.node
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.retain.Value() == t
}

// tensorHook is one hook of RegisterHook.
type tensorHook struct{ fn func(*Tensor) *Tensor }

// RegisterHook registers fn to run each time Backward has computed the
// gradient with respect to t (torch.Tensor.register_hook). fn gets the
// complete gradient (the sum over every use of t) and returns nil to let
// it pass, or a tensor of t's shape and device that replaces it for
// everything upstream: the operations that computed t, the leaves they
// read and, for a leaf t, t.Grad() itself. A float result of another
// dtype is cast to t's. Hooks run in registration order, each getting the
// previous one's result, on the goroutine running Backward, before the
// gradient is stored by [Tensor.RetainGrad] (for a leaf, before it is
// added to t.Grad() and before the hooks of
// [Tensor.RegisterPostAccumulateGradHook]).
//
// The gradient fn gets belongs to Backward and is released after fn
// returns: Clone it to keep it. fn should not change it in place (PyTorch
// asks the same of its hooks): it may share memory with the gradients
// that other tensors get (the two operands of an Add get one gradient),
// which would change too, depending on which Backward reaches first;
// return a new tensor instead. A hook that releases it and returns nil
// makes Backward panic with [ErrReleased]. Tensors fn computes are released after it
// returns too (as inside [Tidy]), the one it returns included once Backward
// is done with it. The hooks of a tensor computed by an operation stay with
// the graph, as PyTorch's stay with the grad_fn: they run even after t was
// released, until the graph goes; such a hook should not capture t itself,
// which would keep an unreleased t (and its graph) from the garbage
// collector's backstop. The returned function removes the hook.
// It panics with [ErrAutograd] on a tensor that does not require grad, and
// with [ErrArgument] for a nil fn; a hook whose result has another shape or
// device makes Backward panic with [ErrShape] or [ErrDevice].
func (t *Tensor) RegisterHook(fn func(grad *Tensor) *Tensor) (remove func()) {
	const op = "register_hook"
	defer pin(op, t).unpin()
	if fn == nil {
		fail(op, ErrArgument, "nil hook")
	}
	if !t.requiresGrad.Load() {
		fail(op, ErrAutograd, "t does not require grad, so no gradient will ever reach the hook; call SetRequiresGrad(true) first")
	}
	h := &tensorHook{fn: fn}
	if n := t.ref.node; n != nil {
		n.mu.Lock()
		n.hooks = append(n.hooks, h)
		n.mu.Unlock()
		return func() {
			n.mu.Lock()
			n.hooks = slices.DeleteFunc(n.hooks, func(x *tensorHook) bool { return x == h })
			n.mu.Unlock()
		}
	}
	t.gradMu.Lock()
	t.preHooks = append(t.preHooks, h)
	t.gradMu.Unlock()
	return func() {
		t.gradMu.Lock()
		t.preHooks = slices.DeleteFunc(t.preHooks, func(x *tensorHook) bool { return x == h })
		t.gradMu.Unlock()
	}
}

// leafHooks returns a copy of leaf's RegisterHook hooks.
func leafHooks(leaf *Tensor) []*tensorHook {
	leaf.gradMu.Lock()
	defer leaf.gradMu.Unlock()
	return slices.Clone(leaf.preHooks)
}

// runTensorHooks passes g, a gradient of the given shape, dtype and device
// owned by the engine, through hooks in order, and returns the gradient to
// use instead, owned by the engine; g is released when a hook replaced it
// (and stays the caller's, to release, when a hook panics).
func runTensorHooks(hooks []*tensorHook, g *Tensor, shape []int, dt DType, dev Device) *Tensor {
	const op = "register_hook"
	orig, done := g, false
	defer func() {
		if !done && g != orig {
			g.Release() // a replacement, when a later hook panicked
		}
	}()
	for _, h := range hooks {
		var repl *Tensor
		Tidy(func() {
			r := h.fn(g)
			if r == nil || r == g {
				return
			}
			defer pin(op, r).unpin()
			switch {
			case !slices.Equal(r.shape, shape):
				fail(op, ErrShape, "a hook returned a gradient of shape %v for a tensor of shape %v", Shape(r.shape), Shape(shape))
			case r.Device() != dev:
				panic(&DeviceMismatchError{Op: op, Expected: dev, Got: r.Device()})
			case !r.dtype.IsFloat():
				fail(op, ErrDType, "a hook returned a %s gradient for a %s tensor", r.dtype, dt)
			case r.dtype != dt:
				repl = Keep(r.Cast(dt))
			default:
				repl = r.share() // r may be the hook's to keep, or a Tidy's to release
			}
		})
		if repl == nil && g.ref.isReleased() {
			fail(op, ErrReleased, "a hook released the %v %s gradient it was given, which belongs to Backward; "+
				"return a new tensor to replace it, or Clone it to keep a copy", Shape(shape), dt)
		}
		if repl != nil {
			if g != orig {
				g.Release()
			}
			g = repl
		}
	}
	done = true
	if g != orig {
		orig.Release()
	}
	return g
}

// gradHook is one hook of RegisterPostAccumulateGradHook.
type gradHook struct{ fn func(*Tensor) }

// RegisterPostAccumulateGradHook registers fn to run each time Backward has
// accumulated a gradient into the leaf t, with t as its argument, after
// t.Grad() holds the sum (torch's register_post_accumulate_grad_hook).
// Hooks run in registration order on the goroutine running Backward, as
// soon as t's gradient is complete for that Backward: distributed data
// parallel starts reducing a bucket of gradients there while the rest of
// the backward pass still runs. The returned function removes the hook. It
// panics with [ErrAutograd] on a tensor that is not a leaf or does not
// require grad, as PyTorch does.
func (t *Tensor) RegisterPostAccumulateGradHook(fn func(t *Tensor)) (remove func()) {
	const op = "register_post_accumulate_grad_hook"
	t.live(op)
	if fn == nil {
		fail(op, ErrArgument, "nil hook")
	}
	if t.ref.node != nil {
		fail(op, ErrAutograd, "hooks run on leaf tensors; t was computed by %s", t.ref.node.op)
	}
	if !t.requiresGrad.Load() {
		fail(op, ErrAutograd, "t does not require grad, so no gradient will ever reach the hook; call SetRequiresGrad(true) first")
	}
	h := &gradHook{fn: fn}
	t.gradMu.Lock()
	t.gradHooks = append(t.gradHooks, h)
	t.gradMu.Unlock()
	return func() {
		t.gradMu.Lock()
		t.gradHooks = slices.DeleteFunc(t.gradHooks, func(x *gradHook) bool { return x == h })
		t.gradMu.Unlock()
	}
}

// runGradHooks runs leaf's post-accumulate hooks.
func runGradHooks(leaf *Tensor) {
	leaf.gradMu.Lock()
	hooks := slices.Clone(leaf.gradHooks)
	leaf.gradMu.Unlock()
	for _, h := range hooks {
		h.fn(leaf)
	}
}

// ZeroGrad releases t's gradient (PyTorch's zero_grad with set_to_none).
func (t *Tensor) ZeroGrad() {
	notNil("zero_grad", t)
	t.SetGrad(nil)
}

// GradFn returns the name of the operation that produced t ("matmul"), or
// "" for a leaf.
func (t *Tensor) GradFn() string {
	notNil("grad_fn", t)
	if t.ref.node == nil {
		return ""
	}
	return t.ref.node.op
}

// Detach returns a view of t's data that is not part of any graph and does
// not require grad.
func (t *Tensor) Detach() *Tensor {
	defer pin("detach", t).unpin()
	v := t.view(t.shape, t.strides, t.offset)
	v.ref.setApart()
	return v
}

// BackwardOption changes how [Tensor.Backward] or [Grad] runs.
type BackwardOption interface{ applyBackward(*backwardOptions) }

type backwardOptions struct {
	grad        *Tensor
	retain      bool
	gradOutputs []*Tensor // GradOutputs, for Grad
	hasOutputs  bool
	allowUnused bool // AllowUnused, for Grad
}

type backwardFunc func(*backwardOptions)

func (f backwardFunc) applyBackward(o *backwardOptions) { f(o) }

// Gradient seeds Backward with g, the gradient of some scalar with respect
// to the tensor (needed when the tensor has more than one element). g must
// have the tensor's shape and device and a floating-point dtype (one other
// than the tensor's is converted to it, as in PyTorch); Backward panics
// with [ErrShape], [ErrDevice] or [ErrDType] otherwise, before anything
// runs. Backward does not take ownership of g.
func Gradient(g *Tensor) BackwardOption {
	return backwardFunc(func(o *backwardOptions) { o.grad = g })
}

// RetainGraph keeps the graph's saved tensors after Backward, so that it can
// run again over the same graph (retain_graph=True).
func RetainGraph() BackwardOption {
	return backwardFunc(func(o *backwardOptions) { o.retain = true })
}

// Backward computes the gradient of t with respect to every leaf that
// requires grad and adds it to the leaf's [Tensor.Grad]: gradients
// accumulate across calls until [Tensor.ZeroGrad]. t must have one element
// unless a [Gradient] is given. Unless [RetainGraph] is given, the tensors
// the graph saved are released when Backward returns, and a second Backward
// over the same graph panics with [ErrAutograd], as does one that would
// read a tensor the graph saved that was changed in place since; either
// is refused before any node runs, leaving every gradient and the graph as
// they were. Gradients flow across
// devices through To, CUDA and CPU. The backward pass runs on the calling
// goroutine's current streams, after the work of the streams the forward
// operations ran on (see [WithStream]). Backward records nothing itself. A
// nil option panics with [ErrArgument], as a nil option of [Tensor.To]
// does.
func (t *Tensor) Backward(opts ...BackwardOption) {
	defer pin("backward", t).unpin()
	var o backwardOptions
	for _, opt := range opts {
		if opt == nil {
			fail("backward", ErrArgument, "nil BackwardOption")
		}
		opt.applyBackward(&o)
	}
	if o.hasOutputs || o.allowUnused {
		fail("backward", ErrArgument, "GradOutputs and AllowUnused are options of vram.Grad; Backward takes vram.Gradient(g)")
	}
	if !t.requiresGrad.Load() {
		fail("backward", ErrAutograd, "tensor does not require grad and has no grad_fn; %s", whyNoGrad(t))
	}
	Region("backward", func() { withoutAutocast(func() { NoGrad(func() { walkMode(false, func() { backward(t, o) }) }) }) })
}

// whyNoGrad explains why t, which does not require grad, has none: the
// reasons it can tell (a dtype that never carries a gradient, a tensor
// made inside InferenceMode) before the usual suspects.
func whyNoGrad(t *Tensor) string {
	switch {
	case !t.dtype.IsFloat():
		return "a " + t.dtype.String() + " tensor never requires grad: integer and bool results " +
			"(a Cast to an integer dtype, ArgMax, a comparison) carry no gradient"
	case t.inference:
		return "it was computed inside vram.InferenceMode, which records no graph; compute it outside InferenceMode"
	}
	return "did you create the parameters with WithGrad() or SetRequiresGrad(true), or compute it inside NoGrad?"
}

func backward(t *Tensor, o backwardOptions) {
	{
		var seed *Tensor
		if o.grad != nil {
			o.grad.live("backward")
			if !slices.Equal(o.grad.shape, t.shape) {
				fail("backward", ErrShape, "gradient shape %v does not match tensor shape %v", Shape(o.grad.shape), Shape(t.shape))
			}
			if o.grad.Device() != t.Device() {
				panic(&DeviceMismatchError{Op: "backward", Expected: t.Device(), Got: o.grad.Device()})
			}
			if !o.grad.dtype.IsFloat() {
				fail("backward", ErrDType, "gradient of dtype %s for a %s tensor; a gradient must be floating-point "+
					"(one of another float dtype is converted to %s)", o.grad.dtype, t.dtype, t.dtype)
			}
			seed = o.grad.Cast(t.dtype)
		} else {
			if t.NumElements() != 1 {
				fail("backward", ErrShape, "grad can be implicitly created only for one-element outputs, got shape %v; pass vram.Gradient(g)", Shape(t.shape))
			}
			seed = t.NewOnes(t.shape)
		}
		Keep(seed)
		if t.ref.node == nil {
			if hooks := leafHooks(t); len(hooks) > 0 {
				func() {
					ok := false
					defer func() {
						if !ok {
							seed.Release() // a hook panicked
						}
					}()
					seed = runTensorHooks(hooks, seed, t.shape, t.dtype, t.Device())
					ok = true
				}()
			}
			accumulateLeaf(t, seed)
			runGradHooks(t)
			return
		}
		runBackward(t.ref.node, seed, o.retain)
	}
}

// runBackward walks the graph from root in reverse topological order,
// accumulating into the leaves.
func runBackward(root *node, seed *Tensor, retain bool) {
	runGraph([]*node{root}, []*Tensor{seed}, retain, nil)
}

// capture is what [Grad] asks of a walk of the graph: the gradients with
// respect to some leaves and some computed tensors (by their nodes), in
// place of accumulating into any leaf. Only the nodes on a path to one of
// them run.
type capture struct {
	leaves map[*Tensor][]int   // leaf input -> its positions in out
	nodes  map[*node][]int     // computed input's node -> its positions in out
	out    []*Tensor           // the gradients found, owned by the walk's caller
	seeds  map[*Tensor]*Tensor // seeds of outputs that are leaves, owned by the walk
	exec   map[*node]bool      // nodes whose backward must run
	// others makes the walk accumulate into the leaves it does not
	// capture, as Backward does (a Checkpoint recompute inside Backward).
	others bool
	// outer leaves the RegisterHook hooks of the captured leaves to the
	// walk that gets the gradients next (a Checkpoint's, whose node passes
	// them on), so that they run once, on the whole gradient.
	outer bool
}

// plan marks the nodes of order (inputs before consumers) whose backward
// must run: those with an input edge to a captured leaf or node, or to a
// node that must run.
func (c *capture) plan(order []*node) {
	c.exec = map[*node]bool{}
	for _, n := range order {
		for _, e := range n.inputs {
			if e.leaf != nil && c.wants(e.leaf) ||
				e.node != nil && (c.nodes[e.node] != nil || c.exec[e.node]) {
				c.exec[n] = true
				break
			}
		}
	}
}

// wants reports whether the walk passes a gradient to leaf.
func (c *capture) wants(leaf *Tensor) bool {
	return c == nil || c.others || c.leaves[leaf] != nil
}

// captures reports whether the walk returns leaf's gradient.
func (c *capture) captures(leaf *Tensor) bool { return c != nil && c.leaves[leaf] != nil }

// needs reports whether the walk needs the gradient with respect to n.
func (c *capture) needs(n *node) bool { return c == nil || c.exec[n] || c.nodes[n] != nil }

// keep stores g, a gradient for the inputs at positions idx of the given
// dtype and device, as the walk's result: each position gets a dense
// tensor of its own that shares memory with nothing else. g stays the
// caller's.
func (c *capture) keep(idx []int, g *Tensor, dt DType, dev Device) {
	for _, i := range idx {
		r := g
		if r.Device() != dev {
			r = copyAcross(r, mustDevice("grad", dev), false)
		}
		if r.dtype != dt {
			r = castRaw(r, dt)
		}
		if r == g {
			r = newTensor("grad", g.ds(), dt, g.shape)
			check("grad", g.ds().bd.Copy(g.ds().stream(), r.bv(), g.bv()))
		}
		c.out[i] = Keep(r)
	}
}

// topoOrder returns the nodes reachable from roots, each after every node
// that it consumes the output of (inputs first), so that walking it
// backwards runs each node after every node that feeds it a gradient.
func topoOrder(roots []*node) []*node {
	var order []*node
	visited := map[*node]bool{}
	var visit func(n *node)
	visit = func(n *node) {
		visited[n] = true
		for _, e := range n.inputs {
			if e.node != nil && !visited[e.node] {
				visit(e.node)
			}
		}
		order = append(order, n)
	}
	for _, r := range roots {
		if !visited[r] {
			visit(r)
		}
	}
	return order
}

// runGraph walks the graph from roots (seeded with seeds, which it takes)
// in reverse topological order. With c nil it accumulates into the leaves
// (Backward); else it runs only the nodes c needs and stores the gradients
// c asks for in c.out, accumulating into nothing.
func runGraph(roots []*node, seeds []*Tensor, retain bool, c *capture) {
	order := topoOrder(roots)
	if c != nil {
		c.plan(order)
	}
	// pending counts, per leaf, the gradients still to come in this walk,
	// so that its hooks run once its gradient is complete.
	pending := map[*Tensor]int{}
	// hooked holds the RegisterHook hooks of the leaves that have some,
	// as the walk starts: such a leaf's gradient is gathered in held and
	// goes through them once complete, as PyTorch's engine sums a leaf's
	// gradient before its AccumulateGrad runs the hooks.
	hooked := map[*Tensor][]*tensorHook{}
	for _, n := range order {
		if c != nil && !c.exec[n] {
			continue
		}
		for _, e := range n.inputs {
			if e.leaf != nil && c.wants(e.leaf) {
				if _, seen := pending[e.leaf]; !seen && !(c.captures(e.leaf) && c.outer) {
					if hs := leafHooks(e.leaf); len(hs) > 0 {
						hooked[e.leaf] = hs
					}
				}
				pending[e.leaf]++
			}
		}
	}
	grads := map[*node]*Tensor{}
	// parts holds, for a node that takes its gradient in two parts, the
	// second part, kept beside grads[n] rather than added to it.
	parts := map[*node]*Tensor{}
	held := map[*Tensor]*Tensor{}
	// converts holds the leaves' gradients of another dtype than their
	// leaf's (the gradients of autocast's low-precision copies of float32
	// weights), converted together once the walk is done.
	var converts []leafGrad
	for i, r := range roots {
		if prev := grads[r]; prev != nil {
			sum := Keep(prev.Add(seeds[i]))
			prev.Release()
			seeds[i].Release()
			seeds[i] = sum
		}
		grads[r] = seeds[i]
	}
	// The gradients not yet passed on are released however the walk ends.
	defer func() {
		for _, r := range grads {
			r.Release()
		}
		for _, r := range parts {
			r.Release()
		}
		for _, r := range held {
			r.Release()
		}
		for _, r := range converts {
			r.g.Release()
		}
		if c != nil {
			for _, r := range c.seeds {
				r.Release()
			}
		}
	}()
	// A node to run that a Backward without RetainGraph went through, or
	// whose saved tensors changed in place since, is refused before
	// anything runs, so that no leaf gets part of a gradient and no node
	// is freed. A node whose tensor's gradient Grad returns without
	// running the node needs neither.
	for _, n := range order {
		if c == nil || c.exec[n] {
			checkNotRun("backward", n)
			checkSavedVersions("backward", n)
		}
	}
	got := map[*Tensor]bool{} // leaves that received a gradient in this walk
	settle := func(leaf *Tensor) {
		if _, ok := pending[leaf]; !ok {
			return
		}
		if pending[leaf]--; pending[leaf] != 0 {
			return
		}
		if g := held[leaf]; g != nil {
			if g.dtype != leaf.dtype {
				c := Keep(castRaw(g, leaf.dtype))
				g.Release()
				g, held[leaf] = c, c
			}
			g = runTensorHooks(hooked[leaf], g, leaf.shape, leaf.dtype, leaf.Device())
			delete(held, leaf)
			if c.captures(leaf) {
				c.keep(c.leaves[leaf], g, leaf.dtype, leaf.Device())
				g.Release()
				return
			}
			accumulateLeaf(leaf, g)
			got[leaf] = true
		}
		if got[leaf] {
			runGradHooks(leaf)
		}
	}
	if c != nil {
		// Outputs of Grad that are leaves: their seeds join what the
		// walk gathers for them.
		for leaf, s := range c.seeds {
			delete(c.seeds, leaf)
			if c.leaves[leaf] == nil {
				s.Release()
				continue
			}
			if _, seen := pending[leaf]; !seen {
				if hs := leafHooks(leaf); len(hs) > 0 {
					hooked[leaf] = hs
				}
			}
			if prev := held[leaf]; prev != nil {
				sum := Keep(prev.Add(s))
				prev.Release()
				s.Release()
				s = sum
			}
			held[leaf] = s
			pending[leaf]++
			settle(leaf)
		}
	}
	waitForForward(order)
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		g, g2 := grads[n], parts[n]
		delete(parts, n)
		if !c.needs(n) {
			if g != nil {
				delete(grads, n)
				g.Release()
			}
			if g2 != nil {
				g2.Release()
			}
			continue
		}
		if g == nil {
			for _, e := range n.inputs {
				if e.leaf != nil {
					settle(e.leaf)
				}
			}
			continue
		}
		// The gradient with respect to n's tensor is complete: its hooks
		// may replace it, and RetainGrad keeps a copy.
		n.mu.Lock()
		var hooks []*tensorHook
		var keep *Tensor
		if !n.freed {
			hooks = slices.Clone(n.hooks)
			if !n.ran {
				keep = n.retain.Value()
			}
		}
		n.mu.Unlock()
		if g2 != nil && (len(hooks) > 0 || keep != nil || c != nil) {
			// Something sees the gradient: it is the sum.
			sum := Keep(g.Add(g2))
			g.Release()
			g2.Release()
			g, g2 = sum, nil
			grads[n] = g
		}
		if len(hooks) > 0 {
			g = runTensorHooks(hooks, g, n.shape, n.dtype, n.device)
			grads[n] = g
		}
		if c != nil {
			// Grad: the gradient is returned, and stored in no tensor.
			if idx := c.nodes[n]; idx != nil {
				c.keep(idx, g, n.dtype, n.device)
			}
			if !c.exec[n] {
				delete(grads, n)
				g.Release()
				continue
			}
		} else if keep != nil {
			accumulateLeaf(keep, g.share()) // a copy: g goes on to n
		}
		// A gradient already gathered for input 0 may take the rest in
		// place, when n can add to it (runNode decides, under n's lock).
		// Not when input 0's node takes its gradient in parts and has one
		// part so far: the sum is left to its kernels.
		var into *Tensor
		if e := n.inputs; len(e) > 0 && e[0].node != nil {
			if prev := grads[e[0].node]; prev != nil && ownsStorage(prev) && !(c == nil && parts[e[0].node] == nil && e[0].node.takesParts()) {
				into = prev
			}
		}
		ins := runNode(n, g, g2, into, retain)
		delete(grads, n)
		g.Release()
		if g2 != nil {
			g2.Release()
		}
		for j, e := range n.inputs {
			if j >= len(ins) || ins[j] == nil {
				if e.leaf != nil {
					settle(e.leaf)
				}
				continue
			}
			gi := ins[j]
			switch {
			case j == 0 && into != nil && gi == into:
				// Added in place: grads[e.node] is already the sum.
			case e.node != nil:
				if gi.dtype != e.node.dtype {
					// An operation on mixed dtypes (a float16 tensor times a
					// float32 one) computes its inputs' gradients in the
					// wider dtype; as in PyTorch, a gradient goes on in the
					// dtype of the tensor it is for, so that hooks and
					// RetainGrad see that dtype and it takes no more memory.
					c := Keep(castRaw(gi, e.node.dtype))
					gi.Release()
					gi = c
				}
				if prev := grads[e.node]; prev != nil && c == nil && parts[e.node] == nil && e.node.takesParts() &&
					gi.dtype == prev.dtype && gi.Device() == prev.Device() && slices.Equal(gi.shape, prev.shape) {
					// Kept apart for the node's kernels to add.
					parts[e.node] = gi
					continue
				}
				if prev := grads[e.node]; prev != nil {
					sum := prev.Add(gi)
					Keep(sum)
					prev.Release()
					gi.Release()
					gi = sum
				}
				grads[e.node] = gi
			case e.leaf != nil:
				// A leaf that no longer requires grad (frozen after the
				// forward pass) takes none, as in PyTorch.
				switch {
				case !c.wants(e.leaf),
					!c.captures(e.leaf) && !e.leaf.requiresGrad.Load():
					gi.Release()
				case c.captures(e.leaf) || hooked[e.leaf] != nil:
					if gi.dtype != e.leaf.dtype {
						// In the leaf's dtype before any sum, as each part
						// would reach PyTorch's AccumulateGrad.
						cv := Keep(castRaw(gi, e.leaf.dtype))
						gi.Release()
						gi = cv
					}
					if prev := held[e.leaf]; prev != nil {
						sum := Keep(prev.Add(gi))
						prev.Release()
						gi.Release()
						gi = sum
					}
					held[e.leaf] = gi
				case gi.dtype != e.leaf.dtype && !hasGradHooks(e.leaf):
					// Converted with the others at the end of the walk.
					converts = append(converts, leafGrad{e.leaf, gi})
					got[e.leaf] = true
				default:
					accumulateLeaf(e.leaf, gi)
					got[e.leaf] = true
				}
				settle(e.leaf)
			default:
				gi.Release()
			}
		}
		if !retain {
			n.release(false)
		}
	}
	list := converts
	converts = nil
	accumulateLeaves(list)
}

// waitForForward makes the calling goroutine's current stream of each
// device of the nodes wait for the work queued so far on the streams
// their forward operations ran on, when those are other streams: the
// backward pass runs on the current streams of the goroutine that calls
// Backward or Grad, and it reads what the forward operations wrote. In
// PyTorch each backward operation runs on its forward operation's stream,
// with the same outcome: a loss computed in WithStream(s) and passed to
// Backward outside it gets the gradients of the values s computed, not of
// what its tensors held before s ran.
func waitForForward(order []*node) {
	if g := current(); (g == nil || len(g.streams) == 0) && !slices.ContainsFunc(order, func(n *node) bool { return n.stream != nil }) {
		return // every stream is a default one
	}
	type pair struct{ dev, fwd *Stream }
	var done []pair
	for _, n := range order {
		if n.device.Kind == "cpu" {
			continue
		}
		fwd := n.stream
		cur := currentOrDefault(n.device)
		if fwd == nil {
			if cur.def {
				continue
			}
			fwd = cur.ds.defaultStream() // a forward on the default stream, a backward in WithStream
		}
		if fwd == cur || fwd.released.Load() || slices.Contains(done, pair{cur, fwd}) {
			continue
		}
		done = append(done, pair{cur, fwd})
		cur.WaitStream(fwd)
	}
}

// currentOrDefault returns the calling goroutine's current stream of d.
func currentOrDefault(d Device) *Stream {
	ds := mustDevice("backward", d)
	if s := ds.currentStream(); s != nil {
		return s
	}
	return ds.defaultStream()
}

// forwardStream returns the stream that the calling goroutine's
// operations on ds use when it is not ds's default stream, nil otherwise
// and on the CPU, whose streams do their work when it is queued.
func forwardStream(ds *devState) *Stream {
	if ds.dev.Kind == "cpu" {
		return nil
	}
	if g := current(); g == nil || len(g.streams) == 0 {
		return nil
	}
	if s := ds.currentStream(); s != nil && !s.def {
		return s
	}
	return nil
}

// checkNotRun panics with ErrAutograd when n's backward cannot run again:
// a walk without RetainGraph went through it, or its graph was released.
func checkNotRun(op string, n *node) {
	n.mu.Lock()
	gone := n.freed || n.ran || n.backward == nil
	n.mu.Unlock()
	if gone {
		fail(op, ErrAutograd, "trying to backward through the graph a second time (through %s), "+
			"but its saved tensors were already released; pass vram.RetainGraph() to the first Backward or Grad", n.op)
	}
}

// checkSavedVersions panics with ErrAutograd when a tensor n saved for backward
// was changed in place since (its storage's version moved).
func checkSavedVersions(op string, n *node) {
	n.mu.Lock()
	i := n.changedSaved()
	n.mu.Unlock()
	if i >= 0 {
		failChanged(op, n, i)
	}
}

// changedSaved returns the position of the first of n's saved tensors
// whose storage was written since it was saved, or -1. The caller holds
// n.mu.
func (n *node) changedSaved() int {
	for i, s := range n.saved {
		if s != nil && s.ref.st.version.Load() != n.versions[i] {
			return i
		}
	}
	return -1
}

// failChanged panics with the ErrAutograd error of n's saved tensor i,
// changed in place since it was saved.
func failChanged(op string, n *node, i int) {
	s := n.saved[i]
	fail(op, ErrAutograd, "a %v %s tensor that %s saved for the backward pass was modified by an in-place "+
		"operation after it was saved (version %d, saved at version %d); its gradient would be wrong. "+
		"Modify a Clone() instead, or do the in-place update after Backward",
		Shape(s.shape), s.dtype, n.op, s.ref.st.version.Load(), n.versions[i])
}

// runNode runs n's backward closure on g (with the second part g2, when
// it is not nil, or into, when it is not nil and n has backwardInto) and
// returns the gradients of its inputs, owned by the caller (g2 and into
// stay the engine's). The node's saved tensors stay while the
// closure runs: a concurrent free (the last reference to the graph going,
// or another Backward through it) waits for it.
func runNode(n *node, g, g2, into *Tensor, retain bool) []*Tensor {
	n.running.RLock()
	defer n.running.RUnlock()
	n.mu.Lock()
	bw, bwInto, bwParts, freed := n.backward, n.backwardInto, n.backwardParts, n.freed || n.ran
	if !retain {
		n.ran = true
	}
	changed := -1
	if !freed {
		changed = n.changedSaved()
	}
	n.mu.Unlock()
	if freed || bw == nil {
		fail("backward", ErrAutograd, "trying to backward through the graph a second time (through %s), "+
			"but its saved tensors were already released; pass vram.RetainGraph() to the first Backward", n.op)
	}
	if changed >= 0 {
		failChanged("backward", n, changed) // by a hook, during this walk
	}
	var ins []*Tensor
	Tidy(func() {
		switch {
		case g2 != nil && bwParts != nil:
			ins = bwParts(g, g2)
		case g2 != nil:
			ins = bw(g.Add(g2))
		case into != nil && bwInto != nil:
			ins = bwInto(g, into)
		default:
			ins = bw(g)
		}
		for _, in := range ins {
			if in != nil {
				Keep(in)
			}
		}
	})
	return ins
}

// accumulateLeaf adds g (owned by the caller, given away here) to leaf's
// gradient, on the leaf's device even when the leaf moved since the
// forward pass. A leaf released meanwhile (on another goroutine) takes none:
// g is released instead. A gradient that was released behind the leaf's
// back is replaced.
func accumulateLeaf(leaf *Tensor, g *Tensor) {
	leaf.gradMu.Lock()
	defer leaf.gradMu.Unlock()
	if leaf.ref.isReleased() {
		g.Release()
		return
	}
	if g.Device() != leaf.Device() {
		// The leaf was moved (MoveTo, as Module.To does) after the
		// forward pass recorded it: its gradient goes where it is now.
		c := Keep(copyAcross(g, leaf.ds(), false))
		g.Release()
		g = c
	}
	if leaf.grad != nil {
		if r := leaf.grad.ref; r.hold() {
			defer r.unhold()
		} else {
			leaf.grad = nil
		}
	}
	if leaf.grad == nil {
		// Own the gradient outright: a fresh tensor of the leaf's dtype
		// and layout (gradStrides: a channels-last weight gets a
		// channels-last gradient), not a view of storage that something
		// else may still write.
		want := gradStrides(leaf)
		if g.dtype != leaf.dtype || !denseStrides(g.shape, g.strides) || !sameStrides(g.shape, g.strides, want) || g.ref.st.refs.Load() != 1 {
			c := newTensor("backward", g.ds(), leaf.dtype, g.shape)
			c.strides = want
			check("backward", g.ds().bd.Copy(g.ds().stream(), c.bv(), g.bv()))
			Keep(c)
			g.Release()
			g = c
		}
		leaf.grad = g
		return
	}
	if g.dtype != leaf.dtype {
		c := castRaw(g, leaf.dtype)
		g.Release()
		g = c
	}
	leaf.grad.addInPlace("backward", g)
	leaf.grad.wrote() // as PyTorch's grad += new_grad: a graph that saved the gradient sees the change
	g.Release()
}

// batchedConverts counts the CopyMany calls of accumulateLeaves, for
// tests.
var batchedConverts atomic.Int64

// leafGrad is a gradient on its way to a leaf.
type leafGrad struct {
	leaf, g *Tensor
}

// hasGradHooks reports whether leaf has post-accumulate hooks, which must
// see its gradient as soon as it is complete.
func hasGradHooks(leaf *Tensor) bool {
	leaf.gradMu.Lock()
	defer leaf.gradMu.Unlock()
	return len(leaf.gradHooks) > 0
}

// accumulateLeaves gives each gradient of gs (owned by the caller, given
// away here) to its leaf as accumulateLeaf does, converting those whose
// dtype differs from their leaf's together: per device and pair of dtypes,
// the gradients of leaves that have none yet, of a dense layout the leaf's
// gradient may keep ([gradStrides]), go through one
// [backend.MultiCopier.CopyMany] (under autocast, a model's bfloat16 weight
// gradients into float32 in a few launches rather than one each); the rest
// through accumulateLeaf, in order.
func accumulateLeaves(gs []leafGrad) {
	type key struct {
		ds       *devState
		from, to DType
	}
	batches := map[key][]int{}
	var keys []key
	seen := map[*Tensor]bool{}
	for i, lg := range gs {
		leaf, g := lg.leaf, lg.g
		if seen[leaf] || g.dtype == leaf.dtype || g.Device() != leaf.Device() || leaf.ref.isReleased() || leaf.Grad() != nil ||
			!denseStrides(g.shape, g.strides) || !sameStrides(g.shape, g.strides, gradStrides(leaf)) {
			continue
		}
		if _, ok := g.ds().bd.(backend.MultiCopier); !ok {
			continue
		}
		seen[leaf] = true
		k := key{g.ds(), g.dtype, leaf.dtype}
		if batches[k] == nil {
			keys = append(keys, k)
		}
		batches[k] = append(batches[k], i)
	}
	done := make([]bool, len(gs))
	defer func() {
		// However this ends, every gradient not given away is.
		for i, lg := range gs {
			if !done[i] {
				done[i] = true
				accumulateLeaf(lg.leaf, lg.g)
			}
		}
	}()
	for _, k := range keys {
		idx := batches[k]
		if len(idx) < 2 {
			continue
		}
		dsts := make([]*Tensor, len(idx))
		srcs := make([]*Tensor, len(idx))
		for j, i := range idx {
			g := gs[i].g
			c := newTensor("backward", k.ds, k.to, g.shape)
			c.strides = slices.Clone(g.strides)
			dsts[j], srcs[j] = c, g
		}
		dv, sv := make([]backend.View, len(idx)), make([]backend.View, len(idx))
		for j := range idx {
			d, _ := flatViews(dsts[j])
			s, _ := flatViews(srcs[j])
			dv[j], sv[j] = d[0], s[0]
		}
		err := k.ds.bd.(backend.MultiCopier).CopyMany(k.ds.stream(), dv, sv)
		batchedConverts.Add(1)
		if err != nil {
			for _, c := range dsts {
				c.Release()
			}
			if notImplemented(err) {
				continue
			}
			check("backward", err)
		}
		for j, i := range idx {
			done[i] = true
			gs[i].g.Release()
			accumulateLeaf(gs[i].leaf, Keep(dsts[j]))
		}
	}
}
