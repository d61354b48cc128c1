package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// AdamConfig holds the hyper-parameters of [Adam] and [AdamW]. Zero values
// mean PyTorch's defaults: LR 1e-3, Beta1 0.9, Beta2 0.999, Eps 1e-8, and
// WeightDecay 0 for Adam and 0.01 for AdamW. (So a zero beta or a zero
// AdamW weight decay cannot be asked for in the config; a group's Options
// can.) DecoupledWeightDecay is always set in the defaults of AdamW, as
// PyTorch's AdamW is Adam with decoupled_weight_decay=True.
type AdamConfig struct {
	LR          float64 // learning rate
	Beta1       float64 // decay rate of the first moment estimate, in [0, 1)
	Beta2       float64 // decay rate of the second moment estimate, in [0, 1)
	Eps         float64 // added to the denominator for stability
	WeightDecay float64 // L2 penalty, or decoupled decay with DecoupledWeightDecay
	Maximize    bool    // maximize the objective: step along the gradient, not against it
	AMSGrad     bool    // divide by the largest second moment estimate so far (composed, not fused)
	// DecoupledWeightDecay shrinks p by the factor 1 - lr·weight_decay
	// before the update, as AdamW does, rather than adding the decay to
	// the gradient (decoupled_weight_decay).
	DecoupledWeightDecay bool
}

// Adam is the Adam optimizer (torch.optim.Adam). For each
// parameter p with gradient g, step t (counted per parameter, from 1)
// computes, exactly as PyTorch does,
//
//	g = -g                                       (maximize only)
//	g = g + weight_decay·p                       (decoupled_weight_decay instead, as AdamW: p = p·(1 - lr·weight_decay))
//	m = beta1·m + (1 - beta1)·g
//	v = beta2·v + (1 - beta2)·g²
//	v = vmax = max(vmax, v)                      (amsgrad only)
//	p = p - lr/(1 - beta1ᵗ) · m / (sqrt(v)/sqrt(1 - beta2ᵗ) + eps)
//
// with m, v and vmax starting at zero. AdamW is the same type with decoupled
// weight decay, which an Adam group asks for too with DecoupledWeightDecay
// or [WithDecoupledWeightDecay], as PyTorch's Adam does. Each parameter's step is one fused pass
// ([vram.FusedAdamStep]: one kernel launch on CUDA, the same arithmetic on
// the CPU and sim devices); for non-contiguous tensors, or on a device
// without the fused step, or with amsgrad, it is composed from elementwise
// ops. Either way
// float16 and bfloat16 parameters are updated in float32 arithmetic, their
// moments kept in their own dtype, as on the GPU.
//
// Its parameters may be split into groups with hyper-parameters of their
// own ([NewAdamGroups], [NewAdamWGroups], [Adam.AddParamGroup]); [NewAdam]
// and [NewAdamW] make one group.
type Adam struct {
	groups[AdamConfig]
	op    string      // "Adam" or "AdamW"
	state []adamState // by parameter
}

type adamState struct {
	step       int
	m, v, vmax *vram.Tensor // vmax: amsgrad's largest v, nil without amsgrad
}

// AdamW is Adam with decoupled weight decay (torch.optim.AdamW), as made by
// [NewAdamW].
type AdamW = Adam

var _ GroupedOptimizer = (*Adam)(nil)

// NewAdam returns an Adam optimizer of params, one parameter group with
// the hyper-parameters cfg, its weight decay added to the gradient (L2
// regularisation) unless cfg.DecoupledWeightDecay is set. It returns an error for an empty or invalid parameter
// list (nil, released, non-float, non-leaf or repeated tensors), a
// negative learning rate, epsilon or weight decay, or a beta outside
// [0, 1). The errors match vram.ErrArgument under errors.Is
// (vram.ErrReleased for a released tensor, vram.ErrDType for a non-float
// one).
func NewAdam(params []*vram.Tensor, cfg AdamConfig) (*Adam, error) {
	return newAdam("Adam", []ParamGroup{{Params: params}}, cfg, false)
}

// NewAdamW returns an AdamW optimizer of params: Adam with decoupled weight
// decay, which shrinks the parameters by the factor 1 - lr·weight_decay at
// each step instead of adding to the gradient (default weight decay 0.01).
// Its errors are those of [NewAdam].
func NewAdamW(params []*vram.Tensor, cfg AdamConfig) (*AdamW, error) {
	return newAdam("AdamW", []ParamGroup{{Params: params}}, cfg, true)
}

// NewAdamGroups returns an Adam optimizer of the parameter groups pgs,
// whose hyper-parameters default to those of defaults, its zero fields
// meaning PyTorch's defaults as in [NewAdam]
// (torch.optim.Adam([{'params': ...}, ...], lr=...)). Its errors are
// those of NewAdam, for defaults and for each group's hyper-parameters,
// and for an empty group, a parameter in two groups, and an Option Adam
// has no use for.
func NewAdamGroups(pgs []ParamGroup, defaults AdamConfig) (*Adam, error) {
	return newAdam("Adam", pgs, defaults, false)
}

// NewAdamWGroups is [NewAdamGroups] for AdamW, whose default weight decay
// is 0.01; a group turns it off with WithWeightDecay(0), and adds it to
// the gradient as Adam does with WithDecoupledWeightDecay(false), as a
// PyTorch AdamW group whose decoupled_weight_decay is False.
func NewAdamWGroups(pgs []ParamGroup, defaults AdamConfig) (*AdamW, error) {
	return newAdam("AdamW", pgs, defaults, true)
}

func newAdam(op string, pgs []ParamGroup, cfg AdamConfig, decoupled bool) (*Adam, error) {
	defWD := 0.0
	if decoupled {
		defWD = 0.01
	}
	for _, f := range []struct {
		v   *float64
		def float64
	}{{&cfg.LR, 1e-3}, {&cfg.Beta1, 0.9}, {&cfg.Beta2, 0.999}, {&cfg.Eps, 1e-8}, {&cfg.WeightDecay, defWD}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if decoupled {
		cfg.DecoupledWeightDecay = true
	}
	a := &Adam{op: op}
	gs, err := newGroups(op, pgs, cfg, checkAdam, a.resolve)
	if err != nil {
		return nil, err
	}
	a.groups = *gs
	a.state = make([]adamState, len(gs.params))
	return a, nil
}

// checkAdam returns an error for invalid hyper-parameters.
func checkAdam(c AdamConfig) error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 1):
		return errorf(vram.ErrArgument, "invalid learning rate %v", c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return errorf(vram.ErrArgument, "invalid beta1 %v, want a value in [0, 1)", c.Beta1)
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return errorf(vram.ErrArgument, "invalid beta2 %v, want a value in [0, 1)", c.Beta2)
	case !(c.Eps >= 0) || math.IsInf(c.Eps, 1):
		return errorf(vram.ErrArgument, "invalid epsilon %v", c.Eps)
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 1):
		return errorf(vram.ErrArgument, "invalid weight decay %v", c.WeightDecay)
	}
	return nil
}

// resolve returns defaults with opts applied, checked.
func (a *Adam) resolve(c AdamConfig, opts []Option) (AdamConfig, error) {
	for _, o := range opts {
		switch o.key {
		case "lr":
			c.LR = o.x
		case "betas":
			c.Beta1, c.Beta2 = o.x, o.y
		case "eps":
			c.Eps = o.x
		case "weight_decay":
			c.WeightDecay = o.x
		case "maximize":
			c.Maximize = o.b
		case "amsgrad":
			c.AMSGrad = o.b
		case "decoupled_weight_decay":
			c.DecoupledWeightDecay = o.b
		default:
			return c, errNoOption(a.op, o.key)
		}
	}
	return c, checkAdam(c)
}

// AddParamGroup adds the parameter group g, its hyper-parameters
// defaulting to the optimizer's defaults (PyTorch's add_param_group). It
// returns an error, adding nothing, for an invalid group: those of
// [NewAdamGroups], and a parameter the optimizer already has.
func (a *Adam) AddParamGroup(g ParamGroup) error {
	if err := a.add(a.op, g, a.resolve); err != nil {
		return err
	}
	a.state = append(a.state, make([]adamState, len(a.params)-len(a.state))...)
	return nil
}

// Step updates every parameter that has a gradient.
func (a *Adam) Step() {
	a.checkGrads(a.op)
	a.refuseCapture(a.op, func(i int, _ AdamConfig) string {
		if a.state[i].m == nil {
			return firstStep
		}
		return hostCount
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
func (a *Adam) stepParam(i int, c AdamConfig) {
	p := a.params[i]
	g := p.Grad()
	if g == nil {
		return
	}
	st := &a.state[i]
	vram.Tidy(func() {
		if st.m == nil {
			st.m = vram.Keep(newState(p, true))
			st.v = vram.Keep(newState(p, true))
		} else {
			follow(p, st.m, st.v, st.vmax)
		}
		if c.AMSGrad && st.vmax == nil {
			st.vmax = vram.Keep(newState(p, true))
		}
		st.step++
		if c.Maximize {
			g = g.Neg()
		}
		if !c.AMSGrad && vram.FusedAdamStep(p, g, st.m, st.v, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay, st.step, c.DecoupledWeightDecay) {
			return // one fused kernel did the whole step
		}
		a.composedStep(c, p, g, st)
	})
}

// composedStep is the step of one parameter composed from elementwise ops,
// for tensors the fused step declines (not contiguous). It follows the
// fused kernels: 16-bit tensors are computed in float32, and p (after
// decoupled decay), m and v are rounded to their dtype when stored, the
// update reading them back from there.
func (a *Adam) composedStep(c AdamConfig, p, g *vram.Tensor, st *adamState) {
	pw, gw := opMath(p), opMath(g)
	if c.WeightDecay != 0 {
		if c.DecoupledWeightDecay {
			pw = storeBack(p, pw.MulScalarInPlace(1-c.LR*c.WeightDecay))
		} else {
			gw = gw.Add(pw.MulScalar(c.WeightDecay))
		}
	}
	mw := storeBack(st.m, opMath(st.m).MulScalarInPlace(c.Beta1).AddScaledInPlace(gw, 1-c.Beta1))
	vw := storeBack(st.v, opMath(st.v).MulScalarInPlace(c.Beta2).AddScaledInPlace(gw.Square(), 1-c.Beta2))
	if c.AMSGrad {
		vw = storeBack(st.vmax, opMath(st.vmax).Maximum(vw))
	}
	bc1 := 1 - math.Pow(c.Beta1, float64(st.step))
	bc2 := 1 - math.Pow(c.Beta2, float64(st.step))
	denom := vw.Sqrt().DivScalar(math.Sqrt(bc2)).AddScalar(c.Eps)
	storeBack(p, pw.AddScaledInPlace(mw.Div(denom), -c.LR/bc1))
}

// ZeroGrad releases the gradients of the parameters of every group.
func (a *Adam) ZeroGrad() { zeroGrad(a.params) }

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (a *Adam) Config() AdamConfig { return a.cfgs[0] }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them: a zero field is a zero, not a default. It panics with
// an *vram.Error of kind vram.ErrIndex when there is no group i.
func (a *Adam) GroupConfig(i int) AdamConfig {
	a.checkGroup("group_config", i)
	return a.cfgs[i]
}

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (a *Adam) Defaults() AdamConfig { return a.defaults }

// Release frees the moment estimates and resets the step counts. The
// optimizer stays usable: its state starts over at the next Step.
func (a *Adam) Release() {
	for i := range a.state {
		a.state[i].release()
	}
}

// release frees the tensors of st and resets it.
func (st *adamState) release() {
	st.m.Release()
	st.v.Release()
	st.vmax.Release()
	*st = adamState{}
}

func (a *Adam) kind() string { return a.op }

// hypers returns the hyper-parameters of group i by PyTorch's names.
func (a *Adam) hypers(i int) map[string]any {
	c := a.cfgs[i]
	return map[string]any{"lr": c.LR, "betas": []float64{c.Beta1, c.Beta2}, "eps": c.Eps,
		"weight_decay": c.WeightDecay, "amsgrad": c.AMSGrad, "maximize": c.Maximize,
		"decoupled_weight_decay": c.DecoupledWeightDecay}
}

func (a *Adam) restoreGroups(opts [][]Option) (func(), error) { return a.restore(opts, a.resolve) }

func (a *Adam) parameters() []*vram.Tensor { return a.params }
func (a *Adam) stateNames() []string {
	return []string{"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"}
}

// requiredState returns the state a parameter with state must have in a
// checkpoint: its max_exp_avg_sq too when c has amsgrad.
func (a *Adam) requiredState(c AdamConfig) []string {
	if c.AMSGrad {
		return []string{"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"}
	}
	return []string{"exp_avg", "exp_avg_sq", "step"}
}

// stateNeeded returns the state names parameter i must have in a
// checkpoint whose group of i has the Options opts (nil for none).
func (a *Adam) stateNeeded(i int, opts []Option) []string {
	c, err := a.resolve(a.cfgs[a.groupOf(i)], opts)
	if err != nil {
		c = a.cfgs[a.groupOf(i)] // restoreGroups reports the error
	}
	return a.requiredState(c)
}

// stateOf returns parameter i's moments and its step count, the latter as
// a new 0-dimensional float32 tensor (PyTorch's form) that the caller
// releases.
func (a *Adam) stateOf(i int) map[string]*vram.Tensor {
	st := a.state[i]
	if st.m == nil {
		return nil
	}
	m := map[string]*vram.Tensor{"exp_avg": st.m, "exp_avg_sq": st.v, "step": vram.Scalar(float64(st.step), vram.Float32)}
	if st.vmax != nil {
		m["max_exp_avg_sq"] = st.vmax
	}
	return m
}

// setState takes over st's moments and reads, then releases, its step.
func (a *Adam) setState(i int, st map[string]*vram.Tensor) {
	a.state[i].release()
	if st == nil {
		return
	}
	step := st["step"]
	a.state[i] = adamState{step: int(step.Item()), m: vram.Keep(st["exp_avg"]), v: vram.Keep(st["exp_avg_sq"])}
	if vmax := st["max_exp_avg_sq"]; vmax != nil {
		a.state[i].vmax = vram.Keep(vmax)
	}
	step.Release()
}
