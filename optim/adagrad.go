package optim

import (
	"github.com/vramgo/vram"
)

// AdagradConfig holds the hyper-parameters of [Adagrad]. Zero values of
// LR and Eps mean PyTorch's defaults, LR 1e-2 and Eps 1e-10 (a group
// that needs a zero epsilon sets it with [WithEps]); LRDecay,
// WeightDecay and InitialAccumulatorValue default to 0, as in PyTorch.
type AdagradConfig struct {
	LR                      float64 // learning rate
	LRDecay                 float64 // step t uses the rate lr/(1 + (t-1)·lr_decay)
	WeightDecay             float64 // L2 penalty added to the gradient
	InitialAccumulatorValue float64 // the starting value of the sum of squared gradients
	Eps                     float64 // added to the denominator for stability
	Maximize                bool    // maximize the objective: step along the gradient, not against it
}

// Adagrad is the Adagrad optimizer (torch.optim.Adagrad). For each
// parameter p with gradient g, step t (counted per parameter, from 1)
// computes, exactly as PyTorch does,
//
//	g = -g                                  (maximize only)
//	g = g + weight_decay·p
//	s = s + g²
//	p = p - lr/(1 + (t-1)·lr_decay) · g / (sqrt(s) + eps)
//
// with s starting at initial_accumulator_value. The step is composed from
// elementwise tensor ops, so it runs on every device; float16 and
// bfloat16 parameters are updated in float32 arithmetic, their sums kept
// in their own dtype. Unlike PyTorch, which makes every sum when the
// optimizer is made, a parameter's sum is made at its first Step; the
// updates are the same.
//
// Its parameters may be split into groups with hyper-parameters of their
// own ([NewAdagradGroups], [Adagrad.AddParamGroup]); [NewAdagrad] makes
// one group.
type Adagrad struct {
	groups[AdagradConfig]
	state []adagradState // by parameter
}

type adagradState struct {
	step int
	sum  *vram.Tensor
}

var _ GroupedOptimizer = (*Adagrad)(nil)

// NewAdagrad returns an Adagrad optimizer of params, one parameter group
// with the hyper-parameters cfg. It returns an error for an empty or
// invalid parameter list (nil, released, non-float, non-leaf or repeated
// tensors) and for a negative, NaN or infinite learning rate, rate decay,
// weight decay, initial accumulator value or epsilon. The errors match
// vram.ErrArgument under errors.Is (vram.ErrReleased for a released
// tensor, vram.ErrDType for a non-float one).
func NewAdagrad(params []*vram.Tensor, cfg AdagradConfig) (*Adagrad, error) {
	return NewAdagradGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewAdagradGroups returns an Adagrad optimizer of the parameter groups
// pgs, whose hyper-parameters default to those of defaults, its zero
// fields meaning PyTorch's defaults as in [NewAdagrad]. Its errors are
// those of NewAdagrad, for defaults and for each group's
// hyper-parameters, and for an empty group, a parameter in two groups,
// and an Option Adagrad has no use for.
func NewAdagradGroups(pgs []ParamGroup, defaults AdagradConfig) (*Adagrad, error) {
	if defaults.LR == 0 {
		defaults.LR = 1e-2
	}
	if defaults.Eps == 0 {
		defaults.Eps = 1e-10
	}
	gs, err := newGroups("Adagrad", pgs, defaults, checkAdagrad, resolveAdagrad)
	if err != nil {
		return nil, err
	}
	return &Adagrad{groups: *gs, state: make([]adagradState, len(gs.params))}, nil
}

// checkAdagrad returns an error for invalid hyper-parameters.
func checkAdagrad(c AdagradConfig) error {
	if err := checkRate(c.LR); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"learning rate decay", c.LRDecay}, {"weight decay", c.WeightDecay},
		{"initial accumulator value", c.InitialAccumulatorValue}, {"epsilon", c.Eps}} {
		if err := checkNonNeg(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// resolveAdagrad returns defaults with opts applied, checked.
func resolveAdagrad(c AdagradConfig, opts []Option) (AdagradConfig, error) {
	for _, o := range opts {
		switch o.key {
		case "lr":
			c.LR = o.x
		case "lr_decay":
			c.LRDecay = o.x
		case "weight_decay":
			c.WeightDecay = o.x
		case "initial_accumulator_value":
			c.InitialAccumulatorValue = o.x
		case "eps":
			c.Eps = o.x
		case "maximize":
			c.Maximize = o.b
		default:
			return c, errNoOption("Adagrad", o.key)
		}
	}
	return c, checkAdagrad(c)
}

func (c AdagradConfig) lr() float64                     { return c.LR }
func (c AdagradConfig) withLR(lr float64) AdagradConfig { c.LR = lr; return c }

// AddParamGroup adds the parameter group g, its hyper-parameters
// defaulting to the optimizer's defaults (PyTorch's add_param_group). It
// returns an error, adding nothing, for an invalid group: those of
// [NewAdagradGroups], and a parameter the optimizer already has.
func (a *Adagrad) AddParamGroup(g ParamGroup) error {
	if err := a.add("Adagrad", g, resolveAdagrad); err != nil {
		return err
	}
	a.state = append(a.state, make([]adagradState, len(a.params)-len(a.state))...)
	return nil
}

// Step updates every parameter that has a gradient.
func (a *Adagrad) Step() {
	a.checkGrads("Adagrad")
	a.refuseCapture("Adagrad", func(i int, c AdagradConfig) string {
		switch {
		case a.state[i].sum == nil:
			return firstStep
		case c.LRDecay != 0:
			return hostCount
		}
		return ""
	})
	vram.NoGrad(func() {
		for k, c := range a.cfgs {
			for i := a.start[k]; i < a.end(k); i++ {
				a.stepParam(i, c)
			}
		}
	})
}

// stepParam steps parameter i with the hyper-parameters c of its group,
// unless it has no gradient.
func (a *Adagrad) stepParam(i int, c AdagradConfig) {
	p := a.params[i]
	g := p.Grad()
	if g == nil {
		return
	}
	st := &a.state[i]
	vram.Tidy(func() {
		if st.sum == nil {
			st.sum = vram.Keep(newState(p, false))
			st.sum.FillInPlace(c.InitialAccumulatorValue)
		} else {
			follow(p, st.sum)
		}
		st.step++
		pw, gw := opMath(p), opMath(g)
		if c.Maximize {
			gw = gw.Neg()
		}
		if c.WeightDecay != 0 {
			gw = gw.Add(pw.MulScalar(c.WeightDecay))
		}
		clr := c.LR / (1 + float64(st.step-1)*c.LRDecay)
		sum := storeBack(st.sum, opMath(st.sum).AddScaledInPlace(gw.Square(), 1))
		storeBack(p, pw.AddScaledInPlace(gw.Div(sum.Sqrt().AddScalar(c.Eps)), -clr))
	})
}

// ZeroGrad releases the gradients of the parameters of every group.
func (a *Adagrad) ZeroGrad() { zeroGrad(a.params) }

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (a *Adagrad) Config() AdagradConfig { return a.cfgs[0] }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them. It panics with an *vram.Error of kind vram.ErrIndex
// when there is no group i.
func (a *Adagrad) GroupConfig(i int) AdagradConfig {
	a.checkGroup("group_config", i)
	return a.cfgs[i]
}

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (a *Adagrad) Defaults() AdagradConfig { return a.defaults }

// Release frees the sums and resets the step counts. The optimizer stays
// usable: its state starts over at the next Step.
func (a *Adagrad) Release() {
	for i := range a.state {
		a.state[i].sum.Release()
		a.state[i] = adagradState{}
	}
}

func (a *Adagrad) kind() string { return "Adagrad" }

// hypers returns the hyper-parameters of group i by PyTorch's names.
func (a *Adagrad) hypers(i int) map[string]any {
	c := a.cfgs[i]
	return map[string]any{"lr": c.LR, "lr_decay": c.LRDecay, "weight_decay": c.WeightDecay,
		"initial_accumulator_value": c.InitialAccumulatorValue, "eps": c.Eps, "maximize": c.Maximize}
}

func (a *Adagrad) restoreGroups(opts [][]Option) (func(), error) {
	return a.restore(opts, resolveAdagrad)
}

func (a *Adagrad) parameters() []*vram.Tensor { return a.params }
func (a *Adagrad) stateNames() []string       { return []string{"sum", "step"} }

// stateNeeded returns the state names a parameter with state must have in
// a checkpoint.
func (a *Adagrad) stateNeeded(int, []Option) []string { return a.stateNames() }

// stateOf returns parameter i's sum and its step count, the latter as a
// new 0-dimensional float32 tensor (PyTorch's form) that the caller
// releases.
func (a *Adagrad) stateOf(i int) map[string]*vram.Tensor {
	st := a.state[i]
	if st.sum == nil {
		return nil
	}
	return map[string]*vram.Tensor{"sum": st.sum, "step": vram.Scalar(float64(st.step), vram.Float32)}
}

// setState takes over st's sum and reads, then releases, its step.
func (a *Adagrad) setState(i int, st map[string]*vram.Tensor) {
	a.state[i].sum.Release()
	a.state[i] = adagradState{}
	if st == nil {
		return
	}
	step := st["step"]
	a.state[i] = adagradState{step: int(step.Item()), sum: vram.Keep(st["sum"])}
	step.Release()
}
