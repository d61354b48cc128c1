package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// RpropConfig holds the hyper-parameters of [Rprop]. Zero values mean
// PyTorch's defaults: LR 1e-2, EtaMinus 0.5, EtaPlus 1.2, StepSizeMin
// 1e-6 and StepSizeMax 50 (a group that needs a smallest step size of 0
// sets it with [WithStepSizes]).
type RpropConfig struct {
	LR          float64 // the starting step size of every element
	EtaMinus    float64 // the factor of a step size whose gradient changed sign, in (0, 1)
	EtaPlus     float64 // the factor of a step size whose gradient kept its sign, above 1
	StepSizeMin float64 // the smallest step size, at least 0
	StepSizeMax float64 // the largest step size, finite and at least StepSizeMin
	Maximize    bool    // maximize the objective: step along the gradient, not against it
}

// Rprop is the resilient backpropagation optimizer (torch.optim.Rprop),
// which steps each element by a step size of its own along the sign of
// its gradient, growing the step size while the sign holds and shrinking
// it when the sign flips. For each parameter p with gradient g and the
// gradient g' it kept from its last step (zero at first), a step
// computes, exactly as PyTorch does, element by element,
//
//	g = -g                                        (maximize only)
//	f = eta_plus if g·g' > 0, eta_minus if g·g' < 0, else 1
//	s = clamp(s·f, step_size_min, step_size_max)
//	g = 0 where g·g' < 0                          (no step after a sign flip)
//	p = p - sign(g)·s
//	g' = g
//
// where every step size s starts at the group's learning rate at the
// parameter's first step, so that later changes of the rate (a
// [Schedule]) leave parameters already stepped alone, as in PyTorch. Its
// state names are PyTorch's: prev, step_size and step. The step is
// composed from elementwise tensor ops, so it runs on every device;
// float16 and bfloat16 parameters are updated in float32 arithmetic,
// their state kept in their own dtype. Rprop is meant for full-batch
// training; its parameters may be split into groups ([NewRpropGroups],
// AddParamGroup).
type Rprop struct {
	elementwise[RpropConfig]
}

var _ GroupedOptimizer = (*Rprop)(nil)

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (e *Rprop) Config() RpropConfig { return e.firstConfig() }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them. It panics with an *vram.Error of kind vram.ErrIndex
// when there is no group i.
func (e *Rprop) GroupConfig(i int) RpropConfig { return e.groupConfig(i) }

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (e *Rprop) Defaults() RpropConfig { return e.defaultConfig() }

// NewRprop returns an Rprop optimizer of params, one parameter group with
// the hyper-parameters cfg. It returns an error for an empty or invalid
// parameter list (nil, released, non-float, non-leaf or repeated
// tensors), a negative, NaN or infinite learning rate, etas that are not
// 0 < EtaMinus < 1 < EtaPlus (EtaPlus finite), or step sizes that are
// not 0 <= StepSizeMin <= StepSizeMax, both finite. The errors match vram.ErrArgument
// under errors.Is (vram.ErrReleased for a released tensor, vram.ErrDType
// for a non-float one).
func NewRprop(params []*vram.Tensor, cfg RpropConfig) (*Rprop, error) {
	return NewRpropGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewRpropGroups returns an Rprop optimizer of the parameter groups pgs,
// whose hyper-parameters default to those of defaults, its zero fields
// meaning PyTorch's defaults as in [NewRprop]. Its errors are those of
// NewRprop, for defaults and for each group's hyper-parameters, and for
// an empty group, a parameter in two groups, and an Option Rprop has no
// use for.
func NewRpropGroups(pgs []ParamGroup, defaults RpropConfig) (*Rprop, error) {
	fillDefaults(defaulted{&defaults.LR, 1e-2}, defaulted{&defaults.EtaMinus, 0.5},
		defaulted{&defaults.EtaPlus, 1.2}, defaulted{&defaults.StepSizeMin, 1e-6},
		defaulted{&defaults.StepSizeMax, 50})
	e, err := newElementwise(rpropRule, pgs, defaults, checkRprop)
	if err != nil {
		return nil, err
	}
	return &Rprop{*e}, nil
}

func (c RpropConfig) lr() float64                   { return c.LR }
func (c RpropConfig) withLR(lr float64) RpropConfig { c.LR = lr; return c }
func (c RpropConfig) maximize() bool                { return c.Maximize }

// checkRprop returns an error for invalid hyper-parameters.
func checkRprop(c RpropConfig) error {
	if err := checkRate(c.LR); err != nil {
		return err
	}
	switch {
	case !(0 < c.EtaMinus && c.EtaMinus < 1 && 1 < c.EtaPlus) || math.IsInf(c.EtaPlus, 1):
		return errorf(vram.ErrArgument, "invalid etas (%v, %v), want 0 < eta_minus < 1 < eta_plus, eta_plus finite", c.EtaMinus, c.EtaPlus)
	case !(0 <= c.StepSizeMin && c.StepSizeMin <= c.StepSizeMax) || math.IsInf(c.StepSizeMax, 1):
		return errorf(vram.ErrArgument, "invalid step sizes (%v, %v), want 0 <= smallest <= largest, both finite", c.StepSizeMin, c.StepSizeMax)
	}
	return nil
}

// WithEtas sets Rprop's factors of the step sizes ("etas"): etaMinus for
// a gradient that changed sign, in (0, 1), and etaPlus for one that kept
// it, above 1.
func WithEtas(etaMinus, etaPlus float64) Option {
	return Option{key: "etas", x: etaMinus, y: etaPlus}
}

// WithStepSizes sets Rprop's smallest and largest step sizes
// ("step_sizes"), 0 <= smallest <= largest, both finite.
func WithStepSizes(smallest, largest float64) Option {
	return Option{key: "step_sizes", x: smallest, y: largest}
}

var rpropRule = &rule[RpropConfig]{
	op: "Rprop",
	resolve: func(c RpropConfig, opts []Option) (RpropConfig, error) {
		for _, o := range opts {
			switch o.key {
			case "lr":
				c.LR = o.x
			case "etas":
				c.EtaMinus, c.EtaPlus = o.x, o.y
			case "step_sizes":
				c.StepSizeMin, c.StepSizeMax = o.x, o.y
			case "maximize":
				c.Maximize = o.b
			default:
				return c, errNoOption("Rprop", o.key)
			}
		}
		return c, checkRprop(c)
	},
	hypers: func(c RpropConfig) map[string]any {
		return map[string]any{"lr": c.LR, "etas": []float64{c.EtaMinus, c.EtaPlus},
			"step_sizes": []float64{c.StepSizeMin, c.StepSizeMax}, "maximize": c.Maximize}
	},
	tensors: []string{"prev", "step_size"},
	init: func(c RpropConfig, ts []*vram.Tensor, _ []float64) {
		ts[1].FillInPlace(c.LR)
	},
	update: func(c RpropConfig, p, g *vram.Tensor, st *ewState) {
		prev, size := st.tensors[0], st.tensors[1]
		pw, gw := opMath(p), opMath(g)
		s := gw.Mul(opMath(prev)).Sign() // 0 for NaN, as in PyTorch: the step size stays
		kept, flipped, zero := s.GtScalar(0), s.LtScalar(0), s.EqScalar(0)
		f := s.MaskedFill(kept, c.EtaPlus).MaskedFill(flipped, c.EtaMinus).MaskedFill(zero, 1)
		sw := storeBack(size, opMath(size).Mul(f).Clamp(c.StepSizeMin, c.StepSizeMax))
		gw = gw.MaskedFill(flipped, 0)
		storeBack(p, pw.Addcmul(gw.Sign(), sw, -1))
		prev.CopyFrom(gw)
	},
}
