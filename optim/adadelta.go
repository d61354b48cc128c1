package optim

import (
	"github.com/vramgo/vram"
)

// AdadeltaConfig holds the hyper-parameters of [Adadelta]. Zero values of
// LR, Rho and Eps mean PyTorch's defaults: LR 1.0, Rho 0.9, Eps 1e-6 (a
// group that needs a zero sets it with [WithLR], [WithRho] or [WithEps]).
// WeightDecay is off when zero, as in PyTorch.
type AdadeltaConfig struct {
	LR          float64 // learning rate, the factor of the delta
	Rho         float64 // decay rate of the running averages, in [0, 1]
	Eps         float64 // added inside the square roots for stability
	WeightDecay float64 // L2 penalty added to the gradient
	Maximize    bool    // maximize the objective: step along the gradient, not against it
}

// Adadelta is the Adadelta optimizer (torch.optim.Adadelta). For each
// parameter p with gradient g, a step computes, exactly as PyTorch does,
//
//	g = -g                                   (maximize only)
//	g = g + weight_decay·p
//	v = rho·v + (1 - rho)·g²
//	δ = sqrt(u + eps)/sqrt(v + eps) · g
//	u = rho·u + (1 - rho)·δ²
//	p = p - lr·δ
//
// with v and u starting at zero. Its state names are PyTorch's:
// square_avg, acc_delta and step. The step is composed from elementwise
// tensor ops, so it runs on every device; float16 and bfloat16 parameters
// are updated in float32 arithmetic, their state kept in their own dtype.
// Its parameters may be split into groups ([NewAdadeltaGroups],
// AddParamGroup).
type Adadelta struct {
	elementwise[AdadeltaConfig]
}

var _ GroupedOptimizer = (*Adadelta)(nil)

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (e *Adadelta) Config() AdadeltaConfig { return e.firstConfig() }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them. It panics with an *vram.Error of kind vram.ErrIndex
// when there is no group i.
func (e *Adadelta) GroupConfig(i int) AdadeltaConfig { return e.groupConfig(i) }

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (e *Adadelta) Defaults() AdadeltaConfig { return e.defaultConfig() }

// NewAdadelta returns an Adadelta optimizer of params, one parameter group
// with the hyper-parameters cfg. It returns an error for an empty or
// invalid parameter list (nil, released, non-float, non-leaf or repeated
// tensors), a negative, NaN or infinite learning rate, epsilon or weight
// decay, or a rho outside [0, 1]. The errors match vram.ErrArgument under
// errors.Is (vram.ErrReleased for a released tensor, vram.ErrDType for a
// non-float one).
func NewAdadelta(params []*vram.Tensor, cfg AdadeltaConfig) (*Adadelta, error) {
	return NewAdadeltaGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewAdadeltaGroups returns an Adadelta optimizer of the parameter groups
// pgs, whose hyper-parameters default to those of defaults, its zero
// fields meaning PyTorch's defaults as in [NewAdadelta]. Its errors are
// those of NewAdadelta, for defaults and for each group's
// hyper-parameters, and for an empty group, a parameter in two groups,
// and an Option Adadelta has no use for.
func NewAdadeltaGroups(pgs []ParamGroup, defaults AdadeltaConfig) (*Adadelta, error) {
	fillDefaults(defaulted{&defaults.LR, 1}, defaulted{&defaults.Rho, 0.9}, defaulted{&defaults.Eps, 1e-6})
	e, err := newElementwise(adadeltaRule, pgs, defaults, checkAdadelta)
	if err != nil {
		return nil, err
	}
	return &Adadelta{*e}, nil
}

func (c AdadeltaConfig) lr() float64                      { return c.LR }
func (c AdadeltaConfig) withLR(lr float64) AdadeltaConfig { c.LR = lr; return c }
func (c AdadeltaConfig) maximize() bool                   { return c.Maximize }

// checkAdadelta returns an error for invalid hyper-parameters.
func checkAdadelta(c AdadeltaConfig) error {
	if err := checkAll(c.LR, named{"epsilon", c.Eps}, named{"weight decay", c.WeightDecay}); err != nil {
		return err
	}
	if !(c.Rho >= 0 && c.Rho <= 1) {
		return errorf(vram.ErrArgument, "invalid rho %v, want a value in [0, 1]", c.Rho)
	}
	return nil
}

var adadeltaRule = &rule[AdadeltaConfig]{
	op: "Adadelta",
	resolve: func(c AdadeltaConfig, opts []Option) (AdadeltaConfig, error) {
		for _, o := range opts {
			switch o.key {
			case "lr":
				c.LR = o.x
			case "rho":
				c.Rho = o.x
			case "eps":
				c.Eps = o.x
			case "weight_decay":
				c.WeightDecay = o.x
			case "maximize":
				c.Maximize = o.b
			default:
				return c, errNoOption("Adadelta", o.key)
			}
		}
		return c, checkAdadelta(c)
	},
	hypers: func(c AdadeltaConfig) map[string]any {
		return map[string]any{"lr": c.LR, "rho": c.Rho, "eps": c.Eps, "weight_decay": c.WeightDecay, "maximize": c.Maximize}
	},
	tensors: []string{"square_avg", "acc_delta"},
	init:    func(AdadeltaConfig, []*vram.Tensor, []float64) {},
	update: func(c AdadeltaConfig, p, g *vram.Tensor, st *ewState) {
		v, u := st.tensors[0], st.tensors[1]
		pw, gw := opMath(p), opMath(g)
		if c.WeightDecay != 0 {
			gw = gw.Add(pw.MulScalar(c.WeightDecay))
		}
		vw := storeBack(v, opMath(v).MulScalarInPlace(c.Rho).AddScaledInPlace(gw.Square(), 1-c.Rho))
		uw := opMath(u)
		delta := uw.AddScalar(c.Eps).Sqrt().Div(vw.AddScalar(c.Eps).Sqrt()).Mul(gw)
		storeBack(u, uw.MulScalarInPlace(c.Rho).AddScaledInPlace(delta.Square(), 1-c.Rho))
		storeBack(p, pw.AddScaledInPlace(delta, -c.LR))
	},
}
