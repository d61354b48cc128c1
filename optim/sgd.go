package optim

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// SGDConfig holds the hyper-parameters of [SGD], with PyTorch's meanings.
type SGDConfig struct {
	LR          float64 // learning rate; must be > 0
	Momentum    float64 // momentum factor (0: plain SGD)
	Dampening   float64 // dampening for momentum
	WeightDecay float64 // L2 penalty added to the gradient
	Nesterov    bool    // Nesterov momentum; needs Momentum > 0 and Dampening 0
}

// SGD is stochastic gradient descent with optional momentum, dampening,
// Nesterov momentum and weight decay (torch.optim.SGD). For each parameter
// p with gradient g, a step computes, exactly as PyTorch does,
//
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
type SGD struct {
	params []*vram.Tensor
	cfg    SGDConfig
	bufs   []*vram.Tensor // momentum buffers, nil until first needed
}

var _ Optimizer = (*SGD)(nil)

// NewSGD returns an SGD optimizer of params. It returns an error for an
// empty or invalid parameter list (nil, released, non-float, non-leaf or
// repeated tensors), a learning rate that is not positive, a negative
// momentum, dampening or weight decay, or Nesterov momentum without momentum
// or with dampening.
func NewSGD(params []*vram.Tensor, cfg SGDConfig) (*SGD, error) {
	ps, err := checkParams("SGD", params)
	if err != nil {
		return nil, err
	}
	switch {
	case !(cfg.LR > 0) || math.IsInf(cfg.LR, 1):
		return nil, fmt.Errorf("optim: SGD: learning rate must be positive and finite, got %v", cfg.LR)
	case !(cfg.Momentum >= 0):
		return nil, fmt.Errorf("optim: SGD: invalid momentum %v", cfg.Momentum)
	case !(cfg.Dampening >= 0):
		return nil, fmt.Errorf("optim: SGD: invalid dampening %v", cfg.Dampening)
	case !(cfg.WeightDecay >= 0):
		return nil, fmt.Errorf("optim: SGD: invalid weight decay %v", cfg.WeightDecay)
	case cfg.Nesterov && (cfg.Momentum <= 0 || cfg.Dampening != 0):
		return nil, fmt.Errorf("optim: SGD: Nesterov momentum requires a positive momentum and zero dampening")
	}
	return &SGD{params: ps, cfg: cfg, bufs: make([]*vram.Tensor, len(ps))}, nil
}

// Step updates every parameter that has a gradient. The parameters of
// each device are stepped together where the device can
// ([vram.FusedSGDSteps]), else one by one.
func (s *SGD) Step() {
	c := s.cfg
	vram.NoGrad(func() {
		var devs []vram.Device
		groups := map[vram.Device][]sgdItem{}
		for i, p := range s.params {
			g := p.Grad()
			if g == nil {
				continue
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
			if _, ok := groups[d]; !ok {
				devs = append(devs, d)
			}
			groups[d] = append(groups[d], it)
		}
		for _, d := range devs {
			items := groups[d]
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
						s.composedStep(it.p, it.g, s.bufs[it.i], it.first)
					}
				})
			}
		}
	})
}

// sgdItem is one parameter of a step: its index, the parameter, its
// gradient, and whether its momentum buffer starts with this step.
type sgdItem struct {
	i     int
	p, g  *vram.Tensor
	first bool
}

// composedStep is the step of one parameter composed from elementwise ops,
// for tensors the fused step declines (not contiguous). Like the fused
// kernels it computes 16-bit tensors in float32 and rounds the momentum
// buffer to its dtype when stored, the update reading it back.
func (s *SGD) composedStep(p, g, buf *vram.Tensor, first bool) {
	c := s.cfg
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

// ZeroGrad releases the gradients of the parameters.
func (s *SGD) ZeroGrad() { zeroGrad(s.params) }

// LR returns the learning rate.
func (s *SGD) LR() float64 { return s.cfg.LR }

// SetLR changes the learning rate. It panics with an *vram.Error of kind
// vram.ErrArgument for a negative, infinite or NaN rate.
func (s *SGD) SetLR(lr float64) {
	checkLR(lr)
	s.cfg.LR = lr
}

// Config returns the optimizer's hyper-parameters.
func (s *SGD) Config() SGDConfig { return s.cfg }

// Release frees the momentum buffers. The optimizer stays usable: the
// buffers start over at the next Step.
func (s *SGD) Release() {
	for i, b := range s.bufs {
		b.Release()
		s.bufs[i] = nil
	}
}

func (s *SGD) kind() string               { return "SGD" }
func (s *SGD) parameters() []*vram.Tensor { return s.params }
func (s *SGD) stateNames() []string       { return []string{"momentum_buffer"} }
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
