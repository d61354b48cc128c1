package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// AdamaxConfig holds the hyper-parameters of [Adamax]. Zero values of LR,
// Beta1, Beta2 and Eps mean PyTorch's defaults: LR 2e-3, Beta1 0.9, Beta2
// 0.999, Eps 1e-8 (a group that needs a zero beta or epsilon sets it with
// [WithBetas] or [WithEps]). WeightDecay is off when zero, as in PyTorch.
type AdamaxConfig struct {
	LR          float64 // learning rate
	Beta1       float64 // decay rate of the first moment estimate, in [0, 1)
	Beta2       float64 // decay rate of the infinity norm, in [0, 1)
	Eps         float64 // added to the infinity norm for stability
	WeightDecay float64 // L2 penalty added to the gradient
	Maximize    bool    // maximize the objective: step along the gradient, not against it
}

// Adamax is the Adamax optimizer (torch.optim.Adamax), Adam with the
// infinity norm. For each parameter p with gradient g, step t (counted
// per parameter, from 1) computes, exactly as PyTorch does,
//
//	g = -g                                   (maximize only)
//	g = g + weight_decay·p
//	m = beta1·m + (1 - beta1)·g
//	u = max(beta2·u, |g| + eps)
//	p = p - lr/(1 - beta1ᵗ) · m/u
//
// with m and u starting at zero. Its state names are PyTorch's: exp_avg,
// exp_inf and step. The step is composed from elementwise tensor ops, so
// it runs on every device; float16 and bfloat16 parameters are updated in
// float32 arithmetic, their state kept in their own dtype. Its parameters
// may be split into groups ([NewAdamaxGroups], AddParamGroup).
type Adamax struct {
	elementwise[AdamaxConfig]
}

var _ GroupedOptimizer = (*Adamax)(nil)

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (e *Adamax) Config() AdamaxConfig { return e.firstConfig() }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them. It panics with an *vram.Error of kind vram.ErrIndex
// when there is no group i.
func (e *Adamax) GroupConfig(i int) AdamaxConfig { return e.groupConfig(i) }

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (e *Adamax) Defaults() AdamaxConfig { return e.defaultConfig() }

// NewAdamax returns an Adamax optimizer of params, one parameter group
// with the hyper-parameters cfg. It returns an error for an empty or
// invalid parameter list (nil, released, non-float, non-leaf or repeated
// tensors), a negative, NaN or infinite learning rate, epsilon or weight
// decay, or a beta outside [0, 1). The errors match vram.ErrArgument under
// errors.Is (vram.ErrReleased for a released tensor, vram.ErrDType for a
// non-float one).
func NewAdamax(params []*vram.Tensor, cfg AdamaxConfig) (*Adamax, error) {
	return NewAdamaxGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewAdamaxGroups returns an Adamax optimizer of the parameter groups pgs,
// whose hyper-parameters default to those of defaults, its zero fields
// meaning PyTorch's defaults as in [NewAdamax]. Its errors are those of
// NewAdamax, for defaults and for each group's hyper-parameters, and for
// an empty group, a parameter in two groups, and an Option Adamax has no
// use for.
func NewAdamaxGroups(pgs []ParamGroup, defaults AdamaxConfig) (*Adamax, error) {
	fillDefaults(defaulted{&defaults.LR, 2e-3}, defaulted{&defaults.Beta1, 0.9},
		defaulted{&defaults.Beta2, 0.999}, defaulted{&defaults.Eps, 1e-8})
	e, err := newElementwise(adamaxRule, pgs, defaults, checkAdamax)
	if err != nil {
		return nil, err
	}
	return &Adamax{*e}, nil
}

func (c AdamaxConfig) lr() float64                    { return c.LR }
func (c AdamaxConfig) withLR(lr float64) AdamaxConfig { c.LR = lr; return c }
func (c AdamaxConfig) maximize() bool                 { return c.Maximize }

// checkAdamax returns an error for invalid hyper-parameters.
func checkAdamax(c AdamaxConfig) error {
	if err := checkAll(c.LR, named{"epsilon", c.Eps}, named{"weight decay", c.WeightDecay}); err != nil {
		return err
	}
	return checkBetas(c.Beta1, c.Beta2)
}

var adamaxRule = &rule[AdamaxConfig]{
	op:        "Adamax",
	hostSteps: true,
	resolve: func(c AdamaxConfig, opts []Option) (AdamaxConfig, error) {
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
			default:
				return c, errNoOption("Adamax", o.key)
			}
		}
		return c, checkAdamax(c)
	},
	hypers: func(c AdamaxConfig) map[string]any {
		return map[string]any{"lr": c.LR, "betas": []float64{c.Beta1, c.Beta2}, "eps": c.Eps,
			"weight_decay": c.WeightDecay, "maximize": c.Maximize}
	},
	tensors: []string{"exp_avg", "exp_inf"},
	init:    func(AdamaxConfig, []*vram.Tensor, []float64) {},
	update: func(c AdamaxConfig, p, g *vram.Tensor, st *ewState) {
		m, u := st.tensors[0], st.tensors[1]
		pw, gw := opMath(p), opMath(g)
		if c.WeightDecay != 0 {
			gw = gw.Add(pw.MulScalar(c.WeightDecay))
		}
		mw := storeBack(m, opMath(m).MulScalarInPlace(c.Beta1).AddScaledInPlace(gw, 1-c.Beta1))
		uw := storeBack(u, opMath(u).MulScalarInPlace(c.Beta2).Maximum(gw.Abs().AddScalar(c.Eps)))
		clr := c.LR / (1 - math.Pow(c.Beta1, float64(st.step)))
		storeBack(p, pw.AddScaledInPlace(mw.Div(uw), -clr))
	},
}
