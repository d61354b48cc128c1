package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// NAdamConfig holds the hyper-parameters of [NAdam]. Zero values of LR,
// Beta1, Beta2, Eps and MomentumDecay mean PyTorch's defaults: LR 2e-3,
// Beta1 0.9, Beta2 0.999, Eps 1e-8, MomentumDecay 4e-3 (a group that needs
// a zero sets it with [WithBetas], [WithEps] or [WithMomentumDecay]).
// WeightDecay is off when zero, as in PyTorch.
type NAdamConfig struct {
	LR                   float64 // learning rate
	Beta1                float64 // decay rate of the first moment estimate, in [0, 1)
	Beta2                float64 // decay rate of the second moment estimate, in [0, 1)
	Eps                  float64 // added to the denominator for stability
	WeightDecay          float64 // L2 penalty, or decoupled decay with DecoupledWeightDecay
	MomentumDecay        float64 // the psi of the momentum schedule
	DecoupledWeightDecay bool    // shrink p by 1 - lr·weight_decay, as AdamW, rather than add to the gradient
	Maximize             bool    // maximize the objective: step along the gradient, not against it
}

// NAdam is the NAdam optimizer (torch.optim.NAdam), Adam with Nesterov
// momentum. For each parameter p with gradient g, step t (counted per
// parameter, from 1) computes, exactly as PyTorch does,
//
//	g = -g                                       (maximize only)
//	g = g + weight_decay·p                       (decoupled instead: p = p·(1 - lr·weight_decay))
//	μₜ = beta1·(1 - 0.5·0.96^(t·momentum_decay))
//	π = π·μₜ                                     (mu_product, from 1)
//	m = beta1·m + (1 - beta1)·g
//	v = beta2·v + (1 - beta2)·g²
//	d = sqrt(v/(1 - beta2ᵗ)) + eps
//	p = p - lr·(1 - μₜ)/(1 - π) · g/d - lr·μₜ₊₁/(1 - π·μₜ₊₁) · m/d
//
// with m and v starting at zero and π kept in float32, as PyTorch keeps
// it. Its state names are PyTorch's: exp_avg, exp_avg_sq, mu_product and
// step. The step is composed from elementwise tensor ops, so it runs on
// every device; float16 and bfloat16 parameters are updated in float32
// arithmetic, their state kept in their own dtype. Its parameters may be
// split into groups ([NewNAdamGroups], AddParamGroup).
type NAdam struct {
	elementwise[NAdamConfig]
}

var _ GroupedOptimizer = (*NAdam)(nil)

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (e *NAdam) Config() NAdamConfig { return e.firstConfig() }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them. It panics with an *vram.Error of kind vram.ErrIndex
// when there is no group i.
func (e *NAdam) GroupConfig(i int) NAdamConfig { return e.groupConfig(i) }

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (e *NAdam) Defaults() NAdamConfig { return e.defaultConfig() }

// NewNAdam returns an NAdam optimizer of params, one parameter group with
// the hyper-parameters cfg. It returns an error for an empty or invalid
// parameter list (nil, released, non-float, non-leaf or repeated
// tensors), a negative, NaN or infinite learning rate, epsilon, weight
// decay or momentum decay, or a beta outside [0, 1). The errors match
// vram.ErrArgument under errors.Is (vram.ErrReleased for a released
// tensor, vram.ErrDType for a non-float one).
func NewNAdam(params []*vram.Tensor, cfg NAdamConfig) (*NAdam, error) {
	return NewNAdamGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewNAdamGroups returns an NAdam optimizer of the parameter groups pgs,
// whose hyper-parameters default to those of defaults, its zero fields
// meaning PyTorch's defaults as in [NewNAdam]. Its errors are those of
// NewNAdam, for defaults and for each group's hyper-parameters, and for an
// empty group, a parameter in two groups, and an Option NAdam has no use
// for.
func NewNAdamGroups(pgs []ParamGroup, defaults NAdamConfig) (*NAdam, error) {
	fillDefaults(defaulted{&defaults.LR, 2e-3}, defaulted{&defaults.Beta1, 0.9}, defaulted{&defaults.Beta2, 0.999},
		defaulted{&defaults.Eps, 1e-8}, defaulted{&defaults.MomentumDecay, 4e-3})
	e, err := newElementwise(nadamRule, pgs, defaults, checkNAdam)
	if err != nil {
		return nil, err
	}
	return &NAdam{*e}, nil
}

func (c NAdamConfig) lr() float64                   { return c.LR }
func (c NAdamConfig) withLR(lr float64) NAdamConfig { c.LR = lr; return c }
func (c NAdamConfig) maximize() bool                { return c.Maximize }

// checkNAdam returns an error for invalid hyper-parameters.
func checkNAdam(c NAdamConfig) error {
	if err := checkAll(c.LR, named{"epsilon", c.Eps}, named{"weight decay", c.WeightDecay},
		named{"momentum decay", c.MomentumDecay}); err != nil {
		return err
	}
	return checkBetas(c.Beta1, c.Beta2)
}

var nadamRule = &rule[NAdamConfig]{
	op:        "NAdam",
	hostSteps: true,
	resolve: func(c NAdamConfig, opts []Option) (NAdamConfig, error) {
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
			case "momentum_decay":
				c.MomentumDecay = o.x
			case "decoupled_weight_decay":
				c.DecoupledWeightDecay = o.b
			case "maximize":
				c.Maximize = o.b
			default:
				return c, errNoOption("NAdam", o.key)
			}
		}
		return c, checkNAdam(c)
	},
	hypers: func(c NAdamConfig) map[string]any {
		return map[string]any{"lr": c.LR, "betas": []float64{c.Beta1, c.Beta2}, "eps": c.Eps,
			"weight_decay": c.WeightDecay, "momentum_decay": c.MomentumDecay,
			"decoupled_weight_decay": c.DecoupledWeightDecay, "maximize": c.Maximize}
	},
	tensors: []string{"exp_avg", "exp_avg_sq"},
	scalars: []string{"mu_product"},
	init:    func(_ NAdamConfig, _ []*vram.Tensor, s []float64) { s[0] = 1 },
	update: func(c NAdamConfig, p, g *vram.Tensor, st *ewState) {
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
		mu := c.Beta1 * (1 - 0.5*math.Pow(0.96, t*c.MomentumDecay))
		muNext := c.Beta1 * (1 - 0.5*math.Pow(0.96, (t+1)*c.MomentumDecay))
		st.scalars[0] = float64(float32(st.scalars[0]) * float32(mu)) // a float32 tensor times a number, in PyTorch
		muProduct := st.scalars[0]
		mw := storeBack(m, opMath(m).MulScalarInPlace(c.Beta1).AddScaledInPlace(gw, 1-c.Beta1))
		vw := storeBack(v, opMath(v).MulScalarInPlace(c.Beta2).AddScaledInPlace(gw.Square(), 1-c.Beta2))
		bc2 := 1 - math.Pow(c.Beta2, t)
		d := vw.DivScalar(bc2).Sqrt().AddScalar(c.Eps)
		pw.AddScaledInPlace(gw.Div(d), -c.LR*(1-mu)/(1-muProduct))
		storeBack(p, pw.AddScaledInPlace(mw.Div(d), -c.LR*muNext/(1-muProduct*muNext)))
	},
}
