package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// RMSpropConfig holds the hyper-parameters of [RMSprop]. Zero values of
// LR, Alpha and Eps mean PyTorch's defaults: LR 1e-2, Alpha 0.99, Eps
// 1e-8; a group that needs a zero alpha or epsilon sets it with
// [WithAlpha] or [WithEps]. Momentum, WeightDecay and Centered are off
// when zero, as in PyTorch.
type RMSpropConfig struct {
	LR          float64 // learning rate
	Alpha       float64 // smoothing constant of the squared-gradient average, at least 0
	Eps         float64 // added to the denominator for stability
	WeightDecay float64 // L2 penalty added to the gradient
	Momentum    float64 // momentum factor (0: none)
	Centered    bool    // divide by an estimate of the gradient's variance rather than its second moment
	Maximize    bool    // maximize the objective: step along the gradient, not against it
}

// RMSprop is the RMSprop optimizer (torch.optim.RMSprop). For each
// parameter p with gradient g, a step computes, exactly as PyTorch does,
//
//	g = -g                                      (maximize only)
//	g = g + weight_decay·p
//	v = alpha·v + (1 - alpha)·g²
//	a = alpha·a + (1 - alpha)·g                 (centered only)
//	d = sqrt(v - a²) + eps  if centered, else  d = sqrt(v) + eps
//	b = momentum·b + g/d;  p = p - lr·b         (momentum > 0)
//	p = p - lr·g/d                              (momentum 0)
//
// with v, a and b starting at zero. The step is composed from elementwise
// tensor ops, so it runs on every device; float16 and bfloat16 parameters
// are updated in float32 arithmetic, their state kept in their own dtype.
//
// Its parameters may be split into groups with hyper-parameters of their
// own ([NewRMSpropGroups], [RMSprop.AddParamGroup]); [NewRMSprop] makes
// one group.
type RMSprop struct {
	groups[RMSpropConfig]
	state []rmspropState // by parameter
}

type rmspropState struct {
	step         int
	sq, avg, buf *vram.Tensor // square_avg; grad_avg (centered) and momentum_buffer (momentum), nil without
}

var _ GroupedOptimizer = (*RMSprop)(nil)

// NewRMSprop returns an RMSprop optimizer of params, one parameter group
// with the hyper-parameters cfg. It returns an error for an empty or
// invalid parameter list (nil, released, non-float, non-leaf or repeated
// tensors) and for a negative, NaN or infinite learning rate, alpha,
// epsilon, weight decay or momentum. The errors match vram.ErrArgument
// under errors.Is (vram.ErrReleased for a released tensor, vram.ErrDType
// for a non-float one).
func NewRMSprop(params []*vram.Tensor, cfg RMSpropConfig) (*RMSprop, error) {
	return NewRMSpropGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewRMSpropGroups returns an RMSprop optimizer of the parameter groups
// pgs, whose hyper-parameters default to those of defaults, its zero
// fields meaning PyTorch's defaults as in [NewRMSprop]. Its errors are
// those of NewRMSprop, for defaults and for each group's
// hyper-parameters, and for an empty group, a parameter in two groups,
// and an Option RMSprop has no use for.
func NewRMSpropGroups(pgs []ParamGroup, defaults RMSpropConfig) (*RMSprop, error) {
	for _, f := range []struct {
		v   *float64
		def float64
	}{{&defaults.LR, 1e-2}, {&defaults.Alpha, 0.99}, {&defaults.Eps, 1e-8}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	gs, err := newGroups("RMSprop", pgs, defaults, checkRMSprop, resolveRMSprop)
	if err != nil {
		return nil, err
	}
	return &RMSprop{groups: *gs, state: make([]rmspropState, len(gs.params))}, nil
}

// checkNonNeg returns an error unless v is finite and not negative.
func checkNonNeg(name string, v float64) error {
	if !(v >= 0) || math.IsInf(v, 1) {
		return errorf(vram.ErrArgument, "invalid %s %v, want a finite value of at least 0", name, v)
	}
	return nil
}

// checkRMSprop returns an error for invalid hyper-parameters.
func checkRMSprop(c RMSpropConfig) error {
	if err := checkRate(c.LR); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"alpha", c.Alpha}, {"epsilon", c.Eps}, {"weight decay", c.WeightDecay}, {"momentum", c.Momentum}} {
		if err := checkNonNeg(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// resolveRMSprop returns defaults with opts applied, checked.
func resolveRMSprop(c RMSpropConfig, opts []Option) (RMSpropConfig, error) {
	for _, o := range opts {
		switch o.key {
		case "lr":
			c.LR = o.x
		case "alpha":
			c.Alpha = o.x
		case "eps":
			c.Eps = o.x
		case "weight_decay":
			c.WeightDecay = o.x
		case "momentum":
			c.Momentum = o.x
		case "centered":
			c.Centered = o.b
		case "maximize":
			c.Maximize = o.b
		default:
			return c, errNoOption("RMSprop", o.key)
		}
	}
	return c, checkRMSprop(c)
}

func (c RMSpropConfig) lr() float64                     { return c.LR }
func (c RMSpropConfig) withLR(lr float64) RMSpropConfig { c.LR = lr; return c }

// AddParamGroup adds the parameter group g, its hyper-parameters
// defaulting to the optimizer's defaults (PyTorch's add_param_group). It
// returns an error, adding nothing, for an invalid group: those of
// [NewRMSpropGroups], and a parameter the optimizer already has.
func (r *RMSprop) AddParamGroup(g ParamGroup) error {
	if err := r.add("RMSprop", g, resolveRMSprop); err != nil {
		return err
	}
	r.state = append(r.state, make([]rmspropState, len(r.params)-len(r.state))...)
	return nil
}

// Step updates every parameter that has a gradient.
func (r *RMSprop) Step() {
	r.checkGrads("RMSprop")
	r.refuseCapture("RMSprop", func(i int, c RMSpropConfig) string {
		if st := &r.state[i]; st.sq == nil || c.Centered && st.avg == nil || c.Momentum > 0 && st.buf == nil {
			return firstStep
		}
		return ""
	})
	vram.NoGrad(func() {
		for k, c := range r.cfgs {
			for i := r.start[k]; i < r.end(k); i++ {
				r.stepParam(i, c)
			}
		}
	})
}

// stepParam steps parameter i with the hyper-parameters c of its group,
// unless it has no gradient.
func (r *RMSprop) stepParam(i int, c RMSpropConfig) {
	p := r.params[i]
	g := p.Grad()
	if g == nil {
		return
	}
	st := &r.state[i]
	vram.Tidy(func() {
		if st.sq == nil {
			st.sq = vram.Keep(newState(p, true))
		}
		if c.Centered && st.avg == nil {
			st.avg = vram.Keep(newState(p, true))
		}
		if c.Momentum > 0 && st.buf == nil {
			st.buf = vram.Keep(newState(p, true))
		}
		follow(p, st.sq, st.avg, st.buf)
		st.step++
		pw, gw := opMath(p), opMath(g)
		if c.Maximize {
			gw = gw.Neg()
		}
		if c.WeightDecay != 0 {
			gw = gw.Add(pw.MulScalar(c.WeightDecay))
		}
		sq := storeBack(st.sq, opMath(st.sq).MulScalarInPlace(c.Alpha).AddScaledInPlace(gw.Square(), 1-c.Alpha))
		var d *vram.Tensor
		if c.Centered {
			avg := storeBack(st.avg, opMath(st.avg).MulScalarInPlace(c.Alpha).AddScaledInPlace(gw, 1-c.Alpha))
			d = sq.Sub(avg.Square()).Sqrt().AddScalar(c.Eps)
		} else {
			d = sq.Sqrt().AddScalar(c.Eps)
		}
		u := gw.Div(d)
		if c.Momentum > 0 {
			u = storeBack(st.buf, opMath(st.buf).MulScalarInPlace(c.Momentum).AddScaledInPlace(u, 1))
		}
		storeBack(p, pw.AddScaledInPlace(u, -c.LR))
	})
}

// ZeroGrad releases the gradients of the parameters of every group.
func (r *RMSprop) ZeroGrad() { zeroGrad(r.params) }

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (r *RMSprop) Config() RMSpropConfig { return r.cfgs[0] }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them. It panics with an *vram.Error of kind vram.ErrIndex
// when there is no group i.
func (r *RMSprop) GroupConfig(i int) RMSpropConfig {
	r.checkGroup("group_config", i)
	return r.cfgs[i]
}

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (r *RMSprop) Defaults() RMSpropConfig { return r.defaults }

// Release frees the optimizer's state and resets the step counts. The
// optimizer stays usable: its state starts over at the next Step.
func (r *RMSprop) Release() {
	for i := range r.state {
		r.state[i].release()
	}
}

// release frees the tensors of st and resets it.
func (st *rmspropState) release() {
	st.sq.Release()
	st.avg.Release()
	st.buf.Release()
	*st = rmspropState{}
}

func (r *RMSprop) kind() string { return "RMSprop" }

// hypers returns the hyper-parameters of group i by PyTorch's names.
func (r *RMSprop) hypers(i int) map[string]any {
	c := r.cfgs[i]
	return map[string]any{"lr": c.LR, "alpha": c.Alpha, "eps": c.Eps, "weight_decay": c.WeightDecay,
		"momentum": c.Momentum, "centered": c.Centered, "maximize": c.Maximize}
}

func (r *RMSprop) restoreGroups(opts [][]Option) (func(), error) {
	return r.restore(opts, resolveRMSprop)
}

func (r *RMSprop) parameters() []*vram.Tensor { return r.params }
func (r *RMSprop) stateNames() []string {
	return []string{"square_avg", "grad_avg", "momentum_buffer", "step"}
}

// stateNeeded returns the state names parameter i must have in a
// checkpoint whose group of i has the Options opts (nil for none).
func (r *RMSprop) stateNeeded(i int, opts []Option) []string {
	c, err := resolveRMSprop(r.cfgs[r.groupOf(i)], opts)
	if err != nil {
		c = r.cfgs[r.groupOf(i)] // restoreGroups reports the error
	}
	names := []string{"square_avg", "step"}
	if c.Centered {
		names = append(names, "grad_avg")
	}
	if c.Momentum > 0 {
		names = append(names, "momentum_buffer")
	}
	return names
}

// stateOf returns parameter i's state and its step count, the latter as
// a new 0-dimensional float32 tensor (PyTorch's form) that the caller
// releases.
func (r *RMSprop) stateOf(i int) map[string]*vram.Tensor {
	st := r.state[i]
	if st.sq == nil {
		return nil
	}
	m := map[string]*vram.Tensor{"square_avg": st.sq, "step": vram.Scalar(float64(st.step), vram.Float32)}
	if st.avg != nil {
		m["grad_avg"] = st.avg
	}
	if st.buf != nil {
		m["momentum_buffer"] = st.buf
	}
	return m
}

// setState takes over st's tensors and reads, then releases, its step.
func (r *RMSprop) setState(i int, st map[string]*vram.Tensor) {
	r.state[i].release()
	if st == nil {
		return
	}
	step := st["step"]
	r.state[i] = rmspropState{step: int(step.Item()), sq: vram.Keep(st["square_avg"])}
	if t := st["grad_avg"]; t != nil {
		r.state[i].avg = vram.Keep(t)
	}
	if t := st["momentum_buffer"]; t != nil {
		r.state[i].buf = vram.Keep(t)
	}
	step.Release()
}
