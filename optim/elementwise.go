package optim

import (
	"github.com/vramgo/vram"
)

// elementwise is what Adamax, NAdam, RAdam, Adadelta and ASGD share: an
// optimizer whose step updates each parameter from its gradient and a
// fixed set of state tensors of its shape (all made at the parameter's
// first Step) and of 0-dimensional numbers, composed from elementwise
// tensor ops. C is the optimizer's config type.
type elementwise[C config[C]] struct {
	groups[C]
	rule  *rule[C]
	state []ewState // by parameter
}

// rule is one optimizer's part of an elementwise optimizer.
type rule[C config[C]] struct {
	op      string // PyTorch's class name
	resolve func(c C, opts []Option) (C, error)
	hypers  func(c C) map[string]any
	tensors []string // the state tensors by PyTorch's names, in the order update takes them
	// hostSteps is set when update reads numbers of the host that change
	// every step (the step count, scalars): such a step cannot be
	// recorded into a graph.
	hostSteps bool
	scalars   []string // the 0-dimensional state other than "step", by PyTorch's names
	// init fills the state of a parameter at its first step: tensors
	// (made zero) and scalars, by the group's hyper-parameters c.
	init func(c C, ts []*vram.Tensor, scalars []float64)
	// update steps p (in place) from its gradient g, maximize already
	// applied; st.step has been counted for this step.
	update func(c C, p, g *vram.Tensor, st *ewState)
}

// ewState is the state of one parameter of an elementwise optimizer.
type ewState struct {
	step    int
	tensors []*vram.Tensor // by rule.tensors; nil before the first Step
	scalars []float64      // by rule.scalars
}

// newElementwise validates pgs and defaults and returns the optimizer.
func newElementwise[C config[C]](r *rule[C], pgs []ParamGroup, defaults C, check func(C) error) (*elementwise[C], error) {
	gs, err := newGroups(r.op, pgs, defaults, check, r.resolve)
	if err != nil {
		return nil, err
	}
	return &elementwise[C]{groups: *gs, rule: r, state: make([]ewState, len(gs.params))}, nil
}

// AddParamGroup adds the parameter group g, its hyper-parameters
// defaulting to the optimizer's defaults (PyTorch's add_param_group). It
// returns an error, adding nothing, for an invalid group: those of the
// optimizer's constructor, and a parameter the optimizer already has.
func (e *elementwise[C]) AddParamGroup(g ParamGroup) error {
	if err := e.add(e.rule.op, g, e.rule.resolve); err != nil {
		return err
	}
	e.state = append(e.state, make([]ewState, len(e.params)-len(e.state))...)
	return nil
}

// Step updates every parameter that has a gradient.
func (e *elementwise[C]) Step() {
	e.checkGrads(e.rule.op)
	e.refuseCapture(e.rule.op, func(i int, _ C) string {
		switch {
		case e.state[i].tensors == nil:
			return firstStep
		case e.rule.hostSteps:
			return hostCount
		}
		return ""
	})
	vram.NoGrad(func() {
		for k, c := range e.cfgs {
			for i := e.start[k]; i < e.end(k); i++ {
				e.stepParam(i, c)
			}
		}
	})
}

// maximizer is a config with PyTorch's maximize flag.
type maximizer interface{ maximize() bool }

// stepParam steps parameter i with the hyper-parameters c of its group,
// unless it has no gradient.
func (e *elementwise[C]) stepParam(i int, c C) {
	p := e.params[i]
	g := p.Grad()
	if g == nil {
		return
	}
	st := &e.state[i]
	vram.Tidy(func() {
		if st.tensors == nil {
			st.tensors = make([]*vram.Tensor, len(e.rule.tensors))
			for j := range st.tensors {
				st.tensors[j] = vram.Keep(newState(p, true))
			}
			st.scalars = make([]float64, len(e.rule.scalars))
			e.rule.init(c, st.tensors, st.scalars)
		} else {
			follow(p, st.tensors...)
		}
		st.step++
		if m, ok := any(c).(maximizer); ok && m.maximize() {
			g = g.Neg()
		}
		e.rule.update(c, p, g, st)
	})
}

// ZeroGrad releases the gradients of the parameters of every group.
func (e *elementwise[C]) ZeroGrad() { zeroGrad(e.params) }

// firstConfig, groupConfig and defaultConfig are the optimizers' Config,
// GroupConfig and Defaults, which each optimizer declares with its own
// config type so that its documentation names that type rather than C.
func (e *elementwise[C]) firstConfig() C { return e.cfgs[0] }

func (e *elementwise[C]) groupConfig(i int) C {
	e.checkGroup("group_config", i)
	return e.cfgs[i]
}

func (e *elementwise[C]) defaultConfig() C { return e.defaults }

// Release frees the optimizer's state and resets the step counts. The
// optimizer stays usable: its state starts over at the next Step.
func (e *elementwise[C]) Release() {
	for i := range e.state {
		e.state[i].release()
	}
}

// release frees the tensors of st and resets it.
func (st *ewState) release() {
	for _, t := range st.tensors {
		t.Release()
	}
	*st = ewState{}
}

func (e *elementwise[C]) kind() string                { return e.rule.op }
func (e *elementwise[C]) hypers(i int) map[string]any { return e.rule.hypers(e.cfgs[i]) }
func (e *elementwise[C]) parameters() []*vram.Tensor  { return e.params }

func (e *elementwise[C]) restoreGroups(opts [][]Option) (func(), error) {
	return e.restore(opts, e.rule.resolve)
}

func (e *elementwise[C]) stateNames() []string {
	names := append(append([]string(nil), e.rule.tensors...), e.rule.scalars...)
	return append(names, "step")
}

// stateNeeded returns the state names a parameter with state must have in
// a checkpoint: all of them.
func (e *elementwise[C]) stateNeeded(int, []Option) []string { return e.stateNames() }

// scalarState reports whether name is a 0-dimensional state of a
// parameter other than its step count.
func (e *elementwise[C]) scalarState(name string) bool {
	for _, s := range e.rule.scalars {
		if s == name {
			return true
		}
	}
	return false
}

// stateOf returns parameter i's state, its step count and scalars as new
// 0-dimensional float32 tensors (PyTorch's form) that the caller
// releases.
func (e *elementwise[C]) stateOf(i int) map[string]*vram.Tensor {
	st := e.state[i]
	if st.tensors == nil {
		return nil
	}
	m := map[string]*vram.Tensor{"step": vram.Scalar(float64(st.step), vram.Float32)}
	for j, name := range e.rule.tensors {
		m[name] = st.tensors[j]
	}
	for j, name := range e.rule.scalars {
		m[name] = vram.Scalar(st.scalars[j], vram.Float32)
	}
	return m
}

// setState takes over st's tensors and reads, then releases, its step
// and scalars.
func (e *elementwise[C]) setState(i int, st map[string]*vram.Tensor) {
	e.state[i].release()
	if st == nil {
		return
	}
	s := ewState{step: int(st["step"].Item())}
	st["step"].Release()
	for _, name := range e.rule.tensors {
		s.tensors = append(s.tensors, vram.Keep(st[name]))
	}
	for _, name := range e.rule.scalars {
		s.scalars = append(s.scalars, st[name].Item())
		st[name].Release()
	}
	e.state[i] = s
}

// checkBetas returns an error unless both betas are in [0, 1).
func checkBetas(b1, b2 float64) error {
	switch {
	case !(b1 >= 0 && b1 < 1):
		return errorf(vram.ErrArgument, "invalid beta1 %v, want a value in [0, 1)", b1)
	case !(b2 >= 0 && b2 < 1):
		return errorf(vram.ErrArgument, "invalid beta2 %v, want a value in [0, 1)", b2)
	}
	return nil
}

// named is a hyper-parameter's value with its name, for the checks.
type named struct {
	name string
	v    float64
}

// checkAll returns the error of checkRate(lr), or else the first of
// checkNonNeg for vs.
func checkAll(lr float64, vs ...named) error {
	if err := checkRate(lr); err != nil {
		return err
	}
	for _, f := range vs {
		if err := checkNonNeg(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// defaulted is a hyper-parameter of a config and its PyTorch default.
type defaulted struct {
	v   *float64
	def float64
}

// fillDefaults sets each zero field of fs to its default.
func fillDefaults(fs ...defaulted) {
	for _, f := range fs {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
}
