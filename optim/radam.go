package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// RAdamConfig holds the hyper-parameters of [RAdam]. Zero values of LR,
// Beta1, Beta2 and Eps mean PyTorch's defaults: LR 1e-3, Beta1 0.9, Beta2
// 0.999, Eps 1e-8 (a group that needs a zero sets it with [WithBetas] or
// [WithEps]). WeightDecay is off when zero, as in PyTorch.
type RAdamConfig struct {
	LR                   float64 // learning rate
	Beta1                float64 // decay rate of the first moment estimate, in [0, 1)
	Beta2                float64 // decay rate of the second moment estimate, in [0, 1)
	Eps                  float64 // added to the denominator for stability
	WeightDecay          float64 // L2 penalty, or decoupled decay with DecoupledWeightDecay
	DecoupledWeightDecay bool    // shrink p by 1 - lr·weight_decay, as AdamW, rather than add to the gradient
	Maximize             bool    // maximize the objective: step along the gradient, not against it
}

// RAdam is the RAdam optimizer (torch.optim.RAdam), Adam with a rectified
// adaptive rate. For each parameter p with gradient g, step t (counted per
// parameter, from 1) computes, exactly as PyTorch does,
//
//	g = -g                                       (maximize only)
//	g = g + weight_decay·p                       (decoupled instead: p = p·(1 - lr·weight_decay))
//	m = beta1·m + (1 - beta1)·g
//	v = beta2·v + (1 - beta2)·g²
//	ρ∞ = 2/(1 - beta2) - 1;  ρₜ = ρ∞ - 2t·beta2ᵗ/(1 - beta2ᵗ)
//	r = sqrt((ρₜ-4)(ρₜ-2)ρ∞ / ((ρ∞-4)(ρ∞-2)ρₜ))
//	p = p - lr·m/(1 - beta1ᵗ) · r·sqrt(1 - beta2ᵗ)/(sqrt(v) + eps)   (ρₜ > 5)
//	p = p - lr·m/(1 - beta1ᵗ)                                         (otherwise)
//
// with m and v starting at zero. Its state names are PyTorch's: exp_avg,
// exp_avg_sq and step. The step is composed from elementwise tensor ops,
// so it runs on every device; float16 and bfloat16 parameters are updated
// in float32 arithmetic, their state kept in their own dtype. Its
// parameters may be split into groups ([NewRAdamGroups], AddParamGroup).
type RAdam struct {
	elementwise[RAdamConfig]
}

var _ GroupedOptimizer = (*RAdam)(nil)

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (e *RAdam) Config() RAdamConfig { return e.firstConfig() }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them. It panics with an *vram.Error of kind vram.ErrIndex
// when there is no group i.
func (e *RAdam) GroupConfig(i int) RAdamConfig { return e.groupConfig(i) }

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (e *RAdam) Defaults() RAdamConfig { return e.defaultConfig() }

// NewRAdam returns an RAdam optimizer of params, one parameter group with
// the hyper-parameters cfg. It returns an error for an empty or invalid
// parameter list (nil, released, non-float, non-leaf or repeated
// tensors), a negative, NaN or infinite learning rate, epsilon or weight
// decay, or a beta outside [0, 1). The errors match vram.ErrArgument under
// errors.Is (vram.ErrReleased for a released tensor, vram.ErrDType for a
// non-float one).
func NewRAdam(params []*vram.Tensor, cfg RAdamConfig) (*RAdam, error) {
	return NewRAdamGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewRAdamGroups returns an RAdam optimizer of the parameter groups pgs,
// whose hyper-parameters default to those of defaults, its zero fields
// meaning PyTorch's defaults as in [NewRAdam]. Its errors are those of
// NewRAdam, for defaults and for each group's hyper-parameters, and for an
// empty group, a parameter in two groups, and an Option RAdam has no use
// for.
func NewRAdamGroups(pgs []ParamGroup, defaults RAdamConfig) (*RAdam, error) {
	fillDefaults(defaulted{&defaults.LR, 1e-3}, defaulted{&defaults.Beta1, 0.9},
		defaulted{&defaults.Beta2, 0.999}, defaulted{&defaults.Eps, 1e-8})
	e, err := newElementwise(radamRule, pgs, defaults, checkRAdam)
	if err != nil {
		return nil, err
	}
	return &RAdam{*e}, nil
}

func (c RAdamConfig) lr() float64                   { return c.LR }
func (c RAdamConfig) withLR(lr float64) RAdamConfig { c.LR = lr; return c }
func (c RAdamConfig) maximize() bool                { return c.Maximize }

// checkRAdam returns an error for invalid hyper-parameters.
func checkRAdam(c RAdamConfig) error {
	if err := checkAll(c.LR, named{"epsilon", c.Eps}, named{"weight decay", c.WeightDecay}); err != nil {
		return err
	}
	return checkBetas(c.Beta1, c.Beta2)
}

// radamRectifyAbove is the length of the approximated simple moving
// average above which RAdam uses the adaptive rate (PyTorch's 5).
const radamRectifyAbove = 5

var radamRule = &rule[RAdamConfig]{
	op:        "RAdam",
	hostSteps: true,
	resolve: func(c RAdamConfig, opts []Option) (RAdamConfig, error) {
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
			case "decoupled_weight_decay":
				c.DecoupledWeightDecay = o.b
			case "maximize":
				c.Maximize = o.b
			default:
				return c, errNoOption("RAdam", o.key)
			}
		}
		return c, checkRAdam(c)
	},
	hypers: func(c RAdamConfig) map[string]any {
		return map[string]any{"lr": c.LR, "betas": []float64{c.Beta1, c.Beta2}, "eps": c.Eps,
			"weight_decay": c.WeightDecay, "decoupled_weight_decay": c.DecoupledWeightDecay, "maximize": c.Maximize}
	},
	tensors: []string{"exp_avg", "exp_avg_sq"},
	init:    func(RAdamConfig, []*vram.Tensor, []float64) {},
	update: func(c RAdamConfig, p, g *vram.Tensor, st *ewState) {
		m, v := st.tensors[0], st.tensors[1]
		t := float64(st.step)
		pw, gw := opMath(p), opMath(g)
		if c.WeightDecay != 0 {
			if c.DecoupledWeightDecay {
				pw = storeBack(p, pw.MulScalarInPlace(1-c.LR*c.WeightDecay))
			} else {
				gw = gw.Add(pw.MulScalar(c.WeightDecay))
			}
		}
		mw := storeBack(m, opMath(m).MulScalarInPlace(c.Beta1).AddScaledInPlace(gw, 1-c.Beta1))
		vw := storeBack(v, opMath(v).MulScalarInPlace(c.Beta2).AddScaledInPlace(gw.Square(), 1-c.Beta2))
		bc1 := 1 - math.Pow(c.Beta1, t)
		bc2 := 1 - math.Pow(c.Beta2, t)
		rhoInf := 2/(1-c.Beta2) - 1
		rhoT := rhoInf - 2*t*math.Pow(c.Beta2, t)/bc2
		if rhoT > radamRectifyAbove {
			rect := math.Sqrt((rhoT - 4) * (rhoT - 2) * rhoInf / ((rhoInf - 4) * (rhoInf - 2) * rhoT))
			u := mw.Div(vw.Sqrt().AddScalar(c.Eps))
			storeBack(p, pw.AddScaledInPlace(u, -c.LR/bc1*math.Sqrt(bc2)*rect))
			return
		}
		storeBack(p, pw.AddScaledInPlace(mw, -c.LR/bc1))
	},
}
