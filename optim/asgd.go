package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// ASGDConfig holds the hyper-parameters of [ASGD]. Zero values of LR,
// Lambd, Alpha and T0 mean PyTorch's defaults: LR 1e-2, Lambd 1e-4, Alpha
// 0.75, T0 1e6 (a group that needs a zero sets it with [WithLambd],
// [WithAlpha] or [WithT0]). WeightDecay is off when zero, as in PyTorch.
type ASGDConfig struct {
	LR          float64 // learning rate
	Lambd       float64 // decay term
	Alpha       float64 // power of the rate's decay
	T0          float64 // the step from which the parameters are averaged
	WeightDecay float64 // L2 penalty added to the gradient
	Maximize    bool    // maximize the objective: step along the gradient, not against it
}

// ASGD is averaged stochastic gradient descent (torch.optim.ASGD). For
// each parameter p with gradient g, step t (counted per parameter, from 1)
// computes, exactly as PyTorch does,
//
//	g = -g                                   (maximize only)
//	g = g + weight_decay·p
//	p = p·(1 - lambd·η) - η·g
//	ax = ax + μ·(p - ax)                     (ax = p while μ is 1)
//	η = lr/(1 + lambd·lr·t)^alpha
//	μ = 1/max(1, t - t0)
//
// with η starting at lr, μ at 1 and ax at zero; η and μ are kept in
// float32, as PyTorch keeps them. ax, the average of the parameter over
// the steps since t0, is the state "ax" ([ASGD.Average]); the others are
// PyTorch's eta, mu and step. The step is composed from elementwise tensor
// ops, so it runs on every device; float16 and bfloat16 parameters are
// updated in float32 arithmetic, their state kept in their own dtype. Its
// parameters may be split into groups ([NewASGDGroups], AddParamGroup).
type ASGD struct {
	elementwise[ASGDConfig]
}

var _ GroupedOptimizer = (*ASGD)(nil)

// Config returns the hyper-parameters of the first parameter group, with
// defaults filled in.
func (e *ASGD) Config() ASGDConfig { return e.firstConfig() }

// GroupConfig returns the hyper-parameters of parameter group i, as the
// group uses them. It panics with an *vram.Error of kind vram.ErrIndex
// when there is no group i.
func (e *ASGD) GroupConfig(i int) ASGDConfig { return e.groupConfig(i) }

// Defaults returns the hyper-parameters that groups take when their
// Options do not set them, with PyTorch's defaults filled in.
func (e *ASGD) Defaults() ASGDConfig { return e.defaultConfig() }

// NewASGD returns an ASGD optimizer of params, one parameter group with
// the hyper-parameters cfg. It returns an error for an empty or invalid
// parameter list (nil, released, non-float, non-leaf or repeated
// tensors), and a negative, NaN or infinite learning rate, lambd, alpha,
// t0 or weight decay. The errors match vram.ErrArgument under errors.Is
// (vram.ErrReleased for a released tensor, vram.ErrDType for a non-float
// one).
func NewASGD(params []*vram.Tensor, cfg ASGDConfig) (*ASGD, error) {
	return NewASGDGroups([]ParamGroup{{Params: params}}, cfg)
}

// NewASGDGroups returns an ASGD optimizer of the parameter groups pgs,
// whose hyper-parameters default to those of defaults, its zero fields
// meaning PyTorch's defaults as in [NewASGD]. Its errors are those of
// NewASGD, for defaults and for each group's hyper-parameters, and for an
// empty group, a parameter in two groups, and an Option ASGD has no use
// for.
func NewASGDGroups(pgs []ParamGroup, defaults ASGDConfig) (*ASGD, error) {
	fillDefaults(defaulted{&defaults.LR, 1e-2}, defaulted{&defaults.Lambd, 1e-4},
		defaulted{&defaults.Alpha, 0.75}, defaulted{&defaults.T0, 1e6})
	e, err := newElementwise(asgdRule, pgs, defaults, checkASGD)
	if err != nil {
		return nil, err
	}
	return &ASGD{*e}, nil
}

// Average returns the running average (the state "ax") of parameter i,
// numbered over all groups as the optimizer has them, or nil before its
// first Step. The tensor belongs to the optimizer: read it or copy it
// (model weights for evaluation), do not release it. It panics with an
// *vram.Error of kind vram.ErrIndex when there is no parameter i.
func (a *ASGD) Average(i int) *vram.Tensor {
	if i < 0 || i >= len(a.params) {
		panic(&vram.Error{Op: "asgd_average", Kind: vram.ErrIndex, Detail: "parameter index out of range"})
	}
	if a.state[i].tensors == nil {
		return nil
	}
	return a.state[i].tensors[0]
}

func (c ASGDConfig) lr() float64                  { return c.LR }
func (c ASGDConfig) withLR(lr float64) ASGDConfig { c.LR = lr; return c }
func (c ASGDConfig) maximize() bool               { return c.Maximize }

// checkASGD returns an error for invalid hyper-parameters.
func checkASGD(c ASGDConfig) error {
	return checkAll(c.LR, named{"lambd", c.Lambd}, named{"alpha", c.Alpha}, named{"t0", c.T0},
		named{"weight decay", c.WeightDecay})
}

var asgdRule = &rule[ASGDConfig]{
	op:        "ASGD",
	hostSteps: true,
	resolve: func(c ASGDConfig, opts []Option) (ASGDConfig, error) {
		for _, o := range opts {
			switch o.key {
			case "lr":
				c.LR = o.x
			case "lambd":
				c.Lambd = o.x
			case "alpha":
				c.Alpha = o.x
			case "t0":
				c.T0 = o.x
			case "weight_decay":
				c.WeightDecay = o.x
			case "maximize":
				c.Maximize = o.b
			default:
				return c, errNoOption("ASGD", o.key)
			}
		}
		return c, checkASGD(c)
	},
	hypers: func(c ASGDConfig) map[string]any {
		return map[string]any{"lr": c.LR, "lambd": c.Lambd, "alpha": c.Alpha, "t0": c.T0,
			"weight_decay": c.WeightDecay, "maximize": c.Maximize}
	},
	tensors: []string{"ax"},
	scalars: []string{"eta", "mu"},
	init: func(c ASGDConfig, _ []*vram.Tensor, s []float64) {
		s[0], s[1] = round32(c.LR), 1
	},
	update: func(c ASGDConfig, p, g *vram.Tensor, st *ewState) {
		ax := st.tensors[0]
		eta, mu := st.scalars[0], st.scalars[1]
		pw, gw := opMath(p), opMath(g)
		if c.WeightDecay != 0 {
			gw = gw.Add(pw.MulScalar(c.WeightDecay))
		}
		pw = storeBack(p, pw.MulScalarInPlace(1-c.Lambd*eta).AddScaledInPlace(gw, -eta))
		if mu != 1 {
			axw := opMath(ax)
			storeBack(ax, axw.AddScaledInPlace(pw.Sub(axw), mu))
		} else {
			ax.CopyFrom(p)
		}
		t := float64(st.step)
		st.scalars[0] = round32(c.LR / math.Pow(1+c.Lambd*c.LR*t, c.Alpha))
		st.scalars[1] = round32(1 / math.Max(1, t-c.T0))
	},
}

// round32 returns x rounded to float32, as PyTorch keeps the scalar state
// of NAdam and ASGD in 0-dimensional float32 tensors.
func round32(x float64) float64 { return float64(float32(x)) }
