package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// SGDConfig holds the hyper-parameters of [SGD], with PyTorch's meanings.
// A zero LR means PyTorch's default, 1e-3 (since PyTorch 2.2; lr was
// required before); a group that needs a rate of 0 sets it with [WithLR].
type SGDConfig struct {
	LR          float64 // learning rate
	Momentum    float64 // momentum factor (0: plain SGD)
	Dampening   float64 // dampening for momentum
	WeightDecay float64 // L2 penalty added to the gradient
	Nesterov    bool    // Nesterov momentum; needs Momentum > 0 and Dampening 0
	Maximize    bool    // maximize the objective: step along the gradient, not against it
}

// SGD is stochastic gradient descent with optional momentum, dampening,
// Nesterov momentum and weight decay (torch.optim.SGD). For each parameter
// p with gradient g, a step computes, exactly as PyTorch does,
//
//	g = -g                                 (maximize only)
//	g = g + weight_decay·p
//	b = g                                  (first step)
//	b = momentum·b + (1 - dampening)·g     (later steps)
//	g = g + momentum·b  if nesterov, else  g = b
//	p = p - lr·g
//
// where the momentum lines apply only when momentum is nonzero. Each
// parameter's step is one fused pass ([vram.FusedSGDStep]: one kernel
// launch on CUDA, the same arithmetic on the CPU and sim devices), and on
// a device that can, the passes of many parameters share a launch
// ([vram.FusedSGDSteps]); for non-contiguous tensors it is composed of
// elementwise ops. float16 and
// bfloat16 parameters are updated in float32 arithmetic either way.
//
// Its parameters may be split into groups with hyper-parameters of their
// own ([NewSGDGroups], [SGD.AddParamGroup]); [NewSGD] makes one group.
type SGD struct {
	groups[SGDConfig]
	bufs []*vram.Tensor // momentum buffers by parameter, nil until first needed
}

var _ GroupedOptimizer = (*SGD)(nil)

// NewSGD returns an SGD optimizer of params, one parameter group with the
// hyper-parameters cfg. It returns an error for an empty or invalid
// parameter list (nil, released, non-float, non-leaf or repeated
// tensors), a negative, NaN or infinite learning rate, a negative momentum,
// dampening or weight decay, or Nesterov momentum without momentum or
// with dampening. The errors match vram.ErrArgument under errors.Is
// (vram.ErrReleased for a released tensor, vram.ErrDType for a non-float
// one).
func NewSGD(params []*vram.Tensor, cfg SGDConfig) (*SGD, error) {
	return NewSGDGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewSGDGroups returns an SGD optimizer of the parameter groups pgs,
// whose hyper-parameters default to those of defaults
// (torch.optim.SGD([{'params': ...}, ...], lr=..., momentum=...)), a
// zero defaults.LR meaning PyTorch's 1e-3. Its errors are those of
// [NewSGD], for defaults and for each group's hyper-parameters, and for
// an empty group, a parameter in two groups, and an Option SGD has no use
// for.
func NewSGDGroups(pgs []ParamGroup, defaults SGDConfig) (*SGD, error) {
	if defaults.LR == 0 {
		defaults.LR = 1e-3
	}
	gs, err := newGroups("SGD", pgs, defaults, checkSGD, resolveSGD)
	if err != nil {
		return nil, err
	}
	return &SGD{groups: *gs, bufs: make([]*vram.Tensor, len(gs.params))}, nil
}

// checkSGD returns an error for invalid hyper-parameters.
func checkSGD(c SGDConfig) error {
	switch {
	case !(c.LR >= 0) || math.IsInf(c.LR, 1):
		return errorf(vram.ErrArgument, "learning rate must be finite and not negative, got %v", c.LR)
	case !(c.Momentum >= 0) || math.IsInf(c.Momentum, 1):
		return errorf(vram.ErrArgument, "invalid momentum %v", c.Momentum)
	case !(c.Dampening >= 0) || math.IsInf(c.Dampening, 1):
		return errorf(vram.ErrArgument, "invalid dampening %v", c.Dampening)
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 1):
		return errorf(vram.ErrArgument, "invalid weight decay %v", c.WeightDecay)
	case c.Nesterov && (c.Momentum <= 0 || c.Dampening != 0):
		return errorf(vram.ErrArgument, "Nesterov momentum requires a positive momentum and zero dampening")
	}
	return nil
}

// resolveSGD returns defaults with opts applied, checked.
func resolveSGD(c SGDConfig, opts []Option) (SGDConfig, error) {
	for _, o := range opts {
		switch o.key {
		case "lr":
			c.LR = o.x
		case "momentum":
			c.Momentum = o.x
		case "dampening":
			c.Dampening = o.x
		case "weight_decay":
			c.WeightDecay = o.x
		case "nesterov":
			c.Nesterov = o.b
		case "maximize":
			c.Maximize = o.b
		default:
			return c, errNoOption("SGD", o.key)
		}
	}
	return c, checkSGD(c)
}

// AddParamGroup adds the parameter group g, its hyper-parameters
// defaulting to the optimizer's defaults (PyTorch's add_param_group). It
// returns an error, adding nothing, for an invalid group: those of
// [NewSGDGroups], and a parameter the optimizer already has.
func (s *SGD) AddParamGroup(g ParamGroup) error {
	if err := s.add("SGD", g, resolveSGD); err != nil {
		return err
	}
	s.bufs = append(s.bufs, make([]*vram.Tensor, len(s.params)-len(s.bufs))...)
	return nil
}

// Step updates every parameter that has a gradient. The parameters of
// each device are stepped together where the device can
// ([vram.FusedSGDSteps]), else one by one.
func (s *SGD) Step() {
	s.checkGrads("SGD")
	s.refuseCapture("SGD", func(i int, c SGDConfig) string {
		if c.Momentum != 0 && s.bufs[i] == nil {
			return firstStep
		}
		return ""
	})
	vram.NoGrad(func() {
		for k, c := range s.cfgs {
			s.stepGroup(s.start[k], s.end(k), c)
		}
	})
}

// stepGroup steps params[from:to], a group with hyper-parameters c.
func (s *SGD) stepGroup(from, to int, c SGDConfig) {
	vram.Tidy(func() { s.stepTidy(from, to, c) })
}

// stepTidy is stepGroup inside a vram.Tidy, which releases the negated
// gradients of a group that maximizes.
func (s *SGD) stepTidy(from, to int, c SGDConfig) {
	var devs []vram.Device
	byDev := map[vram.Device][]sgdItem{}
	for i := from; i < to; i++ {
		p := s.params[i]
		g := p.Grad()
		if g == nil {
			continue
		}
		if c.Maximize {
			g = g.Neg()
		}
		it := sgdItem{i: i, p: p, g: g}
		if c.Momentum != 0 {
			if s.bufs[i] == nil {
				s.bufs[i] = vram.Keep(newState(p, false))
				it.first = true
			} else {
				follow(p, s.bufs[i])
			}
		}
		d := p.Device()
		if _, ok := byDev[d]; !ok {
			devs = append(devs, d)
		}
		byDev[d] = append(byDev[d], it)
	}
	for _, d := range devs {
		items := byDev[d]
		ps, gs, first := make([]*vram.Tensor, len(items)), make([]*vram.Tensor, len(items)), make([]bool, len(items))
		var bufs []*vram.Tensor
		if c.Momentum != 0 {
			bufs = make([]*vram.Tensor, len(items))
		}
		for k, it := range items {
			ps[k], gs[k], first[k] = it.p, it.g, it.first
			if bufs != nil {
				bufs[k] = s.bufs[it.i]
			}
		}
		if vram.FusedSGDSteps(ps, gs, bufs, first, c.LR, c.Momentum, c.Dampening, c.WeightDecay, c.Nesterov) {
			continue
		}
		for _, it := range items {
			vram.Tidy(func() {
				if !vram.FusedSGDStep(it.p, it.g, s.bufs[it.i], c.LR, c.Momentum, c.Dampening, c.WeightDecay, c.Nesterov, it.first) {
					composedSGDStep(c, it.p, it.g, s.bufs[it.i], it.first)
				}
			})
		}
	}
}

// sgdItem is one parameter of a step: its index, the parameter, its
// gradient, and whether its momentum buffer starts with this step.
type sgdItem struct {
	i     int
	p, g  *vram.Tensor
	first bool
}

// composedSGDStep is the step of one parameter composed from elementwise ops,
// for tensors the fused step declines (not contiguous). Like the fused
// kernels it computes 16-bit tensors in float32 and rounds the momentum
// buffer to its dtype when stored, the update reading it back.
func composedSGDStep(c SGDConfig, p, g, buf *vram.Tensor, first bool) {
	pw, d := opMath(p), opMath(g)
	if c.WeightDecay != 0 {
		d = d.Add(pw.MulScalar(c.WeightDecay))
	}
	if c.Momentum != 0 {
		var b *vram.Tensor
		if first {
			b = storeBack(buf, d.Clone()) // a copy of the first gradient, rounded to p's dtype
		} else {
			b = storeBack(buf, opMath(buf).MulScalarInPlace(c.Momentum).AddScaledInPlace(d, 1-c.Dampening))
		}
		if c.Nesterov {
			d = d.Add(b.MulScalar(c.Momentum))
		} else {
			d = b
		}
	}
	storeBack(p, pw.AddScaledInPlace(d, -c.LR))
}

// ZeroGrad releases the gradients of the parameters of every group.
func (s *SGD) ZeroGrad() { zeroGrad(s.params) }

// Config returns the hyper-parameters of the first parameter group.
func (s *SGD) Config() SGDConfig { return s.cfgs[0] }

// GroupConfig returns the hyper-parameters of parameter group i. It
// panics with an *vram.Error of kind vram.ErrIndex when there is no
// group i.
func (s *SGD) GroupConfig(i int) SGDConfig {
	s.checkGroup("group_config", i)
	return s.cfgs[i]
}

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them.
func (s *SGD) Defaults() SGDConfig { return s.defaults }

// Release frees the momentum buffers. The optimizer stays usable: the
// buffers start over at the next Step.
func (s *SGD) Release() {
	for i, b := range s.bufs {
		b.Release()
		s.bufs[i] = nil
	}
}

func (s *SGD) kind() string { return "SGD" }

// hypers returns the hyper-parameters of group i by PyTorch's names.
func (s *SGD) hypers(i int) map[string]any {
	c := s.cfgs[i]
	return map[string]any{"lr": c.LR, "momentum": c.Momentum, "dampening": c.Dampening,
		"weight_decay": c.WeightDecay, "nesterov": c.Nesterov, "maximize": c.Maximize}
}

func (s *SGD) restoreGroups(opts [][]Option) (func(), error) { return s.restore(opts, resolveSGD) }

func (s *SGD) parameters() []*vram.Tensor { return s.params }
func (s *SGD) stateNames() []string       { return []string{"momentum_buffer"} }

// stateNeeded returns the state names a parameter with state must have in
// a checkpoint.
func (s *SGD) stateNeeded(int, []Option) []string { return s.stateNames() }
func (s *SGD) stateOf(i int) map[string]*vram.Tensor {
	if s.bufs[i] == nil {
		return nil
	}
	return map[string]*vram.Tensor{"momentum_buffer": s.bufs[i]}
}

func (s *SGD) setState(i int, st map[string]*vram.Tensor) {
	s.bufs[i].Release()
	s.bufs[i] = nil
	if b := st["momentum_buffer"]; b != nil {
		s.bufs[i] = vram.Keep(b)
	}
}
