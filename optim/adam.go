package optim

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// AdamConfig holds the hyper-parameters of [Adam] and [AdamW]. Zero values
// mean PyTorch's defaults: LR 1e-3, Beta1 0.9, Beta2 0.999, Eps 1e-8, and
// WeightDecay 0 for Adam and 0.01 for AdamW. (So a zero beta or a zero
// AdamW weight decay cannot be asked for; AdamW without weight decay is
// Adam.)
type AdamConfig struct {
	LR          float64 // learning rate
	Beta1       float64 // decay rate of the first moment estimate, in [0, 1)
	Beta2       float64 // decay rate of the second moment estimate, in [0, 1)
	Eps         float64 // added to the denominator for stability
	WeightDecay float64 // L2 penalty (Adam) or decoupled decay (AdamW)
}

// Adam is the Adam optimizer (torch.optim.Adam, without amsgrad). For each
// parameter p with gradient g, step t (counted per parameter, from 1)
// computes, exactly as PyTorch does,
//
//	g = g + weight_decay·p                       (Adam; AdamW instead: p = p·(1 - lr·weight_decay))
//	m = beta1·m + (1 - beta1)·g
//	v = beta2·v + (1 - beta2)·g²
//	p = p - lr/(1 - beta1ᵗ) · m / (sqrt(v)/sqrt(1 - beta2ᵗ) + eps)
//
// with m and v starting at zero. AdamW is the same type with decoupled
// weight decay. Each parameter's step is one fused pass
// ([vram.FusedAdamStep]: one kernel launch on CUDA, the same arithmetic on
// the CPU and sim devices); for non-contiguous tensors, or on a device
// without the fused step, it is composed from elementwise ops. Either way
// float16 and bfloat16 parameters are updated in float32 arithmetic, their
// moments kept in their own dtype, as on the GPU.
type Adam struct {
	params    []*vram.Tensor
	cfg       AdamConfig
	decoupled bool
	state     []adamState
}

type adamState struct {
	step int
	m, v *vram.Tensor
}

// AdamW is Adam with decoupled weight decay (torch.optim.AdamW), as made by
// [NewAdamW].
type AdamW = Adam

var _ Optimizer = (*Adam)(nil)

// NewAdam returns an Adam optimizer of params, with weight decay added to
// the gradient (L2 regularisation). It returns an error for an empty or
// invalid parameter list (nil, released, non-float, non-leaf or repeated
// tensors), a negative learning rate, epsilon or weight decay, or a beta
// outside [0, 1).
func NewAdam(params []*vram.Tensor, cfg AdamConfig) (*Adam, error) {
	return newAdam("Adam", params, cfg, false)
}

// NewAdamW returns an AdamW optimizer of params: Adam with decoupled weight
// decay, which shrinks the parameters by the factor 1 - lr·weight_decay at
// each step instead of adding to the gradient (default weight decay 0.01).
// Its errors are those of [NewAdam].
func NewAdamW(params []*vram.Tensor, cfg AdamConfig) (*AdamW, error) {
	return newAdam("AdamW", params, cfg, true)
}

func newAdam(op string, params []*vram.Tensor, cfg AdamConfig, decoupled bool) (*Adam, error) {
	ps, err := checkParams(op, params)
	if err != nil {
		return nil, err
	}
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
	switch {
	case !(cfg.LR >= 0) || math.IsInf(cfg.LR, 1):
		return nil, fmt.Errorf("optim: %s: invalid learning rate %v", op, cfg.LR)
	case !(cfg.Beta1 >= 0 && cfg.Beta1 < 1):
		return nil, fmt.Errorf("optim: %s: invalid beta1 %v, want a value in [0, 1)", op, cfg.Beta1)
	case !(cfg.Beta2 >= 0 && cfg.Beta2 < 1):
		return nil, fmt.Errorf("optim: %s: invalid beta2 %v, want a value in [0, 1)", op, cfg.Beta2)
	case !(cfg.Eps >= 0) || math.IsInf(cfg.Eps, 1):
		return nil, fmt.Errorf("optim: %s: invalid epsilon %v", op, cfg.Eps)
	case !(cfg.WeightDecay >= 0) || math.IsInf(cfg.WeightDecay, 1):
		return nil, fmt.Errorf("optim: %s: invalid weight decay %v", op, cfg.WeightDecay)
	}
	return &Adam{params: ps, cfg: cfg, decoupled: decoupled, state: make([]adamState, len(ps))}, nil
}

// Step updates every parameter that has a gradient.
func (a *Adam) Step() {
	c := a.cfg
	vram.NoGrad(func() {
		for i, p := range a.params {
			g := p.Grad()
			if g == nil {
				continue
			}
			st := &a.state[i]
			vram.Tidy(func() {
				if st.m == nil {
					st.m = vram.Keep(newState(p, true))
					st.v = vram.Keep(newState(p, true))
				} else {
					follow(p, st.m, st.v)
				}
				st.step++
				if vram.FusedAdamStep(p, g, st.m, st.v, c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay, st.step, a.decoupled) {
					return // one fused kernel did the whole step
				}
				a.composedStep(p, g, st)
			})
		}
	})
}

// composedStep is the step of one parameter composed from elementwise ops,
// for tensors the fused step declines (not contiguous). It follows the
// fused kernels: 16-bit tensors are computed in float32, and p (after
// decoupled decay), m and v are rounded to their dtype when stored, the
// update reading them back from there.
func (a *Adam) composedStep(p, g *vram.Tensor, st *adamState) {
	c := a.cfg
	pw, gw := opMath(p), opMath(g)
	if c.WeightDecay != 0 {
		if a.decoupled {
			pw = storeBack(p, pw.MulScalarInPlace(1-c.LR*c.WeightDecay))
		} else {
			gw = gw.Add(pw.MulScalar(c.WeightDecay))
		}
	}
	mw := storeBack(st.m, opMath(st.m).MulScalarInPlace(c.Beta1).AddScaledInPlace(gw, 1-c.Beta1))
	vw := storeBack(st.v, opMath(st.v).MulScalarInPlace(c.Beta2).AddScaledInPlace(gw.Square(), 1-c.Beta2))
	bc1 := 1 - math.Pow(c.Beta1, float64(st.step))
	bc2 := 1 - math.Pow(c.Beta2, float64(st.step))
	denom := vw.Sqrt().DivScalar(math.Sqrt(bc2)).AddScalar(c.Eps)
	storeBack(p, pw.AddScaledInPlace(mw.Div(denom), -c.LR/bc1))
}

// ZeroGrad releases the gradients of the parameters.
func (a *Adam) ZeroGrad() { zeroGrad(a.params) }

// LR returns the learning rate.
func (a *Adam) LR() float64 { return a.cfg.LR }

// SetLR changes the learning rate. It panics with an *vram.Error of kind
// vram.ErrArgument for a negative, infinite or NaN rate.
func (a *Adam) SetLR(lr float64) {
	checkLR(lr)
	a.cfg.LR = lr
}

// Config returns the optimizer's hyper-parameters, with defaults filled in.
func (a *Adam) Config() AdamConfig { return a.cfg }

// Release frees the moment estimates and resets the step counts. The
// optimizer stays usable: its state starts over at the next Step.
func (a *Adam) Release() {
	for i := range a.state {
		a.state[i].m.Release()
		a.state[i].v.Release()
		a.state[i] = adamState{}
	}
}

func (a *Adam) kind() string {
	if a.decoupled {
		return "AdamW"
	}
	return "Adam"
}

func (a *Adam) parameters() []*vram.Tensor { return a.params }
func (a *Adam) stateNames() []string       { return []string{"exp_avg", "exp_avg_sq", "step"} }

// stateOf returns parameter i's moments and its step count, the latter as
// a new 0-dimensional float32 tensor (PyTorch's form) that the caller
// releases.
func (a *Adam) stateOf(i int) map[string]*vram.Tensor {
	st := a.state[i]
	if st.m == nil {
		return nil
	}
	return map[string]*vram.Tensor{"exp_avg": st.m, "exp_avg_sq": st.v, "step": vram.Scalar(float64(st.step), vram.Float32)}
}

// setState takes over st's moments and reads, then releases, its step.
func (a *Adam) setState(i int, st map[string]*vram.Tensor) {
	a.state[i].m.Release()
	a.state[i].v.Release()
	a.state[i] = adamState{}
	if st == nil {
		return
	}
	step := st["step"]
	a.state[i] = adamState{step: int(step.Item()), m: vram.Keep(st["exp_avg"]), v: vram.Keep(st["exp_avg_sq"])}
	step.Release()
}
