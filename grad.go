package vram

import "slices"

// GradOutputs gives [Grad] the gradients to seed its outputs with
// (torch.autograd.grad's grad_outputs): one per output, in order, each of
// its output's shape and device and a floating-point dtype (converted to
// the output's). A nil entry stands for ones, which only a one-element
// output may take. Grad does not take ownership of them. [Tensor.Backward]
// panics with [ErrArgument] when given this option.
func GradOutputs(gs ...*Tensor) BackwardOption {
	gs = slices.Clone(gs)
	return backwardFunc(func(o *backwardOptions) { o.gradOutputs, o.hasOutputs = gs, true })
}

// AllowUnused lets [Grad] return nil for an input that the outputs do not
// depend on (allow_unused=True), where it otherwise panics.
// [Tensor.Backward] panics with [ErrArgument] when given this option.
func AllowUnused() BackwardOption {
	return backwardFunc(func(o *backwardOptions) { o.allowUnused = true })
}

// Grad returns the gradients of the sum of outputs (each weighted by its
// [GradOutputs] entry) with respect to each of inputs
// (torch.autograd.grad), in the order of inputs. Unlike [Tensor.Backward]
// it stores nothing: no leaf's [Tensor.Grad] and no [Tensor.RetainGrad]
// gradient changes, and no [Tensor.RegisterPostAccumulateGradHook] hook
// runs. inputs may be leaves or tensors computed by operations; only the
// part of the graph between outputs and inputs runs, and the
// [Tensor.RegisterHook] hooks on it (those of inputs included) run as in
// Backward. The node that computed an input is not part of it: it may
// have gone through a Backward without RetainGraph already. The results are new tensors of the inputs' shapes, dtypes and
// devices that the caller owns; an input given twice gets two.
//
// Options: [GradOutputs] (or [Gradient] for a single output) seeds the
// outputs, which must otherwise have one element each; [RetainGraph] keeps
// the graph for another Backward or Grad through it, which otherwise
// panics with [ErrAutograd] for every node that ran, as in PyTorch (the
// nodes that did not run are kept); [AllowUnused] gives nil for an input
// the outputs do not depend on.
//
// Grad computes first-order gradients only: the results never require
// grad (there is no create_graph), so a gradient of a gradient is not
// available.
//
// It panics, before anything runs, with [ErrArgument] for empty outputs
// or inputs, a nil tensor or option, or a number of GradOutputs that is
// not that of outputs; with [ErrAutograd] for an output or input that
// does not require grad, for an input the outputs do not depend on (unless
// AllowUnused), for a graph that a Backward or Grad without RetainGraph
// already went through and for one that would read a tensor it saved that
// was changed in place since; and with [ErrShape], [ErrDevice] or [ErrDType] for
// a missing or mismatched seed. A [Checkpoint] is one operation of its x
// and params to Grad: their gradients are available, those of the tensors
// computed inside the checkpointed function are not, and a leaf that
// function uses without listing it in params gets no gradient.
func Grad(outputs, inputs []*Tensor, opts ...BackwardOption) []*Tensor {
	const op = "grad"
	var o backwardOptions
	for _, opt := range opts {
		if opt == nil {
			fail(op, ErrArgument, "nil BackwardOption")
		}
		opt.applyBackward(&o)
	}
	if len(outputs) == 0 || len(inputs) == 0 {
		fail(op, ErrArgument, "got %d outputs and %d inputs; both must be at least one", len(outputs), len(inputs))
	}
	seeds := o.gradOutputs
	switch {
	case o.hasOutputs && o.grad != nil:
		fail(op, ErrArgument, "both Gradient and GradOutputs given; pass one GradOutputs entry per output")
	case o.grad != nil && len(outputs) != 1:
		fail(op, ErrArgument, "Gradient seeds a single output, got %d outputs; pass vram.GradOutputs with one entry per output", len(outputs))
	case o.grad != nil:
		seeds = []*Tensor{o.grad}
	case o.hasOutputs && len(seeds) != len(outputs):
		fail(op, ErrArgument, "got %d GradOutputs for %d outputs; pass one per output (nil for ones)", len(seeds), len(outputs))
	case !o.hasOutputs:
		seeds = make([]*Tensor, len(outputs))
	}
	all := slices.Concat(outputs, inputs)
	for _, s := range seeds {
		if s != nil {
			all = append(all, s)
		}
	}
	defer pin(op, all...).unpin()
	for i, t := range outputs {
		if !t.requiresGrad.Load() {
			fail(op, ErrAutograd, "output %d does not require grad and has no grad_fn; %s", i, whyNoGrad(t))
		}
		s := seeds[i]
		if s == nil {
			if t.NumElements() != 1 {
				fail(op, ErrShape, "output %d has shape %v: grad can be implicitly created only for one-element outputs; "+
					"pass vram.GradOutputs with a gradient for it", i, Shape(t.shape))
			}
			continue
		}
		if !slices.Equal(s.shape, t.shape) {
			fail(op, ErrShape, "gradient %d has shape %v, its output %v", i, Shape(s.shape), Shape(t.shape))
		}
		if s.Device() != t.Device() {
			panic(&DeviceMismatchError{Op: op, Expected: t.Device(), Got: s.Device()})
		}
		if !s.dtype.IsFloat() {
			fail(op, ErrDType, "gradient %d has dtype %s; a gradient must be floating-point", i, s.dtype)
		}
	}
	c := &capture{leaves: map[*Tensor][]int{}, nodes: map[*node][]int{}, out: make([]*Tensor, len(inputs))}
	for i, t := range inputs {
		if !t.requiresGrad.Load() {
			fail(op, ErrAutograd, "input %d does not require grad, so it has no gradient", i)
		}
		if n := t.ref.node; n != nil {
			c.nodes[n] = append(c.nodes[n], i)
		} else {
			c.leaves[t] = append(c.leaves[t], i)
		}
	}
	// Plan the walk and refuse what it cannot do before anything runs.
	var roots []*node
	rootLeaf := map[*Tensor]bool{}
	for _, t := range outputs {
		if t.ref.node != nil {
			roots = append(roots, t.ref.node)
		} else {
			rootLeaf[t] = true
		}
	}
	order := topoOrder(roots)
	c.plan(order)
	inGraph := map[*node]bool{}
	reached := map[*Tensor]bool{}
	for _, n := range order {
		inGraph[n] = true
		if !c.exec[n] {
			continue
		}
		checkNotRun(op, n)
		checkSavedVersions(op, n)
		for _, e := range n.inputs {
			if e.leaf != nil {
				reached[e.leaf] = true
			}
		}
	}
	for i, t := range inputs {
		used := rootLeaf[t] || reached[t] || t.ref.node != nil && inGraph[t.ref.node]
		if !used && !o.allowUnused {
			fail(op, ErrAutograd, "input %d is not used in the graph of the outputs; pass vram.AllowUnused() to get nil for it", i)
		}
	}
	Region("backward", func() {
		withoutAutocast(func() {
			NoGrad(func() { walkMode(true, func() { runGrad(outputs, seeds, o.retain, c) }) })
		})
	})
	for i, t := range inputs {
		if c.out[i] == nil && (rootLeaf[t] || reached[t] || t.ref.node != nil && inGraph[t.ref.node]) {
			// Reached through operations that pass no gradient on.
			c.out[i] = Keep(t.NewZeros(t.shape))
		}
		if c.out[i] != nil {
			track(c.out[i])
		}
	}
	return c.out
}

// runGrad makes the seeds of outputs (ones where seeds has nil) and walks
// the graph from them.
func runGrad(outputs, seeds []*Tensor, retain bool, c *capture) {
	var roots []*node
	var rs []*Tensor
	c.seeds = map[*Tensor]*Tensor{}
	done := false
	defer func() {
		if !done {
			for _, s := range rs {
				s.Release()
			}
			for _, s := range c.seeds {
				s.Release()
			}
		}
	}()
	for i, t := range outputs {
		var s *Tensor
		if seeds[i] != nil {
			s = Keep(seeds[i].Cast(t.dtype))
		} else {
			s = Keep(t.NewOnes(t.shape))
		}
		if t.ref.node != nil {
			roots = append(roots, t.ref.node)
			rs = append(rs, s)
			continue
		}
		if prev := c.seeds[t]; prev != nil {
			sum := Keep(prev.Add(s))
			prev.Release()
			s.Release()
			s = sum
		}
		c.seeds[t] = s
	}
	done = true
	runGraph(roots, rs, retain, c)
}
