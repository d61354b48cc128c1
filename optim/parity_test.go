package optim_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// groupedCase makes one of the optimizers that take parameter groups, with
// hyper-parameters that give it state (momentum, moments, sums).
type groupedCase struct {
	name string
	make func(pgs []optim.ParamGroup) (optim.GroupedOptimizer, error)
}

// groupedCases returns a case for every optimizer of the package that
// takes parameter groups.
func groupedCases() []groupedCase {
	return []groupedCase{
		{"SGD", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewSGDGroups(p, optim.SGDConfig{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01})
		}},
		{"SGD nesterov", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewSGDGroups(p, optim.SGDConfig{LR: 0.05, Momentum: 0.9, Nesterov: true})
		}},
		{"Adam amsgrad", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewAdamGroups(p, optim.AdamConfig{LR: 0.05, AMSGrad: true, WeightDecay: 0.01})
		}},
		{"AdamW", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewAdamWGroups(p, optim.AdamConfig{LR: 0.05})
		}},
		{"RMSprop", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewRMSpropGroups(p, optim.RMSpropConfig{LR: 0.01, Momentum: 0.5, Centered: true})
		}},
		{"Adagrad", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewAdagradGroups(p, optim.AdagradConfig{LR: 0.1, LRDecay: 0.1, InitialAccumulatorValue: 0.5})
		}},
		{"Adamax", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewAdamaxGroups(p, optim.AdamaxConfig{LR: 0.05})
		}},
		{"NAdam", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewNAdamGroups(p, optim.NAdamConfig{LR: 0.05})
		}},
		{"RAdam", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewRAdamGroups(p, optim.RAdamConfig{LR: 0.05})
		}},
		{"Adadelta", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewAdadeltaGroups(p, optim.AdadeltaConfig{LR: 0.5})
		}},
		{"ASGD", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewASGDGroups(p, optim.ASGDConfig{LR: 0.05, Lambd: 0.1, T0: 1})
		}},
		{"Rprop", func(p []optim.ParamGroup) (optim.GroupedOptimizer, error) {
			return optim.NewRpropGroups(p, optim.RpropConfig{LR: 0.05})
		}},
	}
}

// TestOptimizersSkipParametersWithoutGrad checks, for every optimizer,
// PyTorch's rule that a parameter whose grad is None is skipped: it does
// not change, and its state (momentum buffer, moments, step count) waits,
// so that after steps 1, 3 and 5 it is where an optimizer of that
// parameter alone, stepped with the same three gradients, puts it. It
// also checks that ZeroGrad leaves every gradient nil (PyTorch's
// zero_grad(set_to_none=True)).
func TestOptimizersSkipParametersWithoutGrad(t *testing.T) {
	grad := func(s int) []float64 { return []float64{0.3 * float64(s), -0.7 + 0.1*float64(s)} }
	for _, tc := range groupedCases() {
		for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
			for _, dt := range []vram.DType{vram.Float64, vram.Float32} {
				t.Run(fmt.Sprintf("%s/%v/%v", tc.name, dev, dt), func(t *testing.T) {
					p1 := vram.FromSlice([]float64{1, -2}, nil, dt, dev, vram.WithGrad())
					p2 := vram.FromSlice([]float64{0.5, 3}, nil, dt, dev, vram.WithGrad())
					alone := vram.FromSlice([]float64{0.5, 3}, nil, dt, dev, vram.WithGrad())
					both, err := tc.make([]optim.ParamGroup{optim.Group([]*vram.Tensor{p1, p2})})
					if err != nil {
						t.Fatal(err)
					}
					defer optim.Release(both)
					one, err := tc.make([]optim.ParamGroup{optim.Group([]*vram.Tensor{alone})})
					if err != nil {
						t.Fatal(err)
					}
					defer optim.Release(one)
					for s := 1; s <= 5; s++ {
						setGrad(p1, grad(s)...)
						if s%2 == 1 {
							setGrad(p2, grad(s)...)
							setGrad(alone, grad(s)...)
							one.Step()
							one.ZeroGrad()
						}
						before := p2.Float64s()
						both.Step()
						both.ZeroGrad()
						if p1.Grad() != nil || p2.Grad() != nil {
							t.Fatalf("step %d: ZeroGrad left a gradient", s)
						}
						if s%2 == 0 {
							checkValues(t, fmt.Sprintf("step %d, without a gradient", s), p2.Float64s(), before, 0)
						}
					}
					checkValues(t, "after its three steps", p2.Float64s(), alone.Float64s(), 0)
				})
			}
		}
	}
}

// TestConstructorsRefuseBadHyperParameters checks that every constructor
// refuses, with an error matching vram.ErrArgument and no panic, what
// PyTorch's raise ValueError for: a negative learning rate, momentum,
// epsilon or weight decay, betas outside [0, 1), Nesterov momentum without
// momentum or with dampening, and NaN for any of them (PyTorch's checks,
// "not 0.0 <= x", refuse NaN too); and an empty parameter list ("optimizer
// got an empty parameter list") and a parameter given twice ("some
// parameters appear in more than one parameter group"), in a config's
// list, in groups, and in a group added later.
func TestConstructorsRefuseBadHyperParameters(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	q := vram.Zeros(vram.Shape{3}, vram.WithGrad())
	one := []*vram.Tensor{p}
	groups := func(opts ...optim.Option) []optim.ParamGroup { return []optim.ParamGroup{optim.Group(one, opts...)} }
	type made = func() (any, error)
	tests := []struct {
		name string
		make made
		want string // a part of the message, "" for any
	}{
		{"SGD lr -1", func() (any, error) { return optim.NewSGD(one, optim.SGDConfig{LR: -1}) }, "learning rate"},
		{"SGD lr NaN", func() (any, error) { return optim.NewSGD(one, optim.SGDConfig{LR: nan}) }, "learning rate"},
		{"SGD lr Inf", func() (any, error) { return optim.NewSGD(one, optim.SGDConfig{LR: inf}) }, "learning rate"},
		{"SGD momentum -0.1", func() (any, error) { return optim.NewSGD(one, optim.SGDConfig{LR: 1, Momentum: -0.1}) }, "momentum"},
		{"SGD momentum NaN", func() (any, error) { return optim.NewSGD(one, optim.SGDConfig{LR: 1, Momentum: nan}) }, "momentum"},
		{"SGD dampening NaN", func() (any, error) { return optim.NewSGD(one, optim.SGDConfig{LR: 1, Dampening: nan}) }, "dampening"},
		{"SGD weight decay -1", func() (any, error) { return optim.NewSGD(one, optim.SGDConfig{LR: 1, WeightDecay: -1}) }, "weight decay"},
		{"SGD nesterov without momentum", func() (any, error) { return optim.NewSGD(one, optim.SGDConfig{LR: 1, Nesterov: true}) }, "Nesterov"},
		{"SGD nesterov with dampening", func() (any, error) {
			return optim.NewSGD(one, optim.SGDConfig{LR: 1, Nesterov: true, Momentum: 0.9, Dampening: 0.1})
		}, "Nesterov"},
		{"SGD group nesterov without momentum", func() (any, error) {
			return optim.NewSGDGroups(groups(optim.WithNesterov(true)), optim.SGDConfig{LR: 1})
		}, "Nesterov"},
		{"Adam lr -1", func() (any, error) { return optim.NewAdam(one, optim.AdamConfig{LR: -1}) }, "learning rate"},
		{"Adam lr NaN", func() (any, error) { return optim.NewAdam(one, optim.AdamConfig{LR: nan}) }, "learning rate"},
		{"Adam beta1 1", func() (any, error) { return optim.NewAdam(one, optim.AdamConfig{Beta1: 1}) }, "beta1"},
		{"Adam beta1 NaN", func() (any, error) { return optim.NewAdam(one, optim.AdamConfig{Beta1: nan}) }, "beta1"},
		{"Adam beta2 -0.1", func() (any, error) { return optim.NewAdam(one, optim.AdamConfig{Beta2: -0.1}) }, "beta2"},
		{"Adam group beta2 1", func() (any, error) { return optim.NewAdamGroups(groups(optim.WithBetas(0.9, 1)), optim.AdamConfig{}) }, "beta2"},
		{"Adam group beta1 -0.5", func() (any, error) {
			return optim.NewAdamGroups(groups(optim.WithBetas(-0.5, 0.9)), optim.AdamConfig{})
		}, "beta1"},
		{"Adam eps -1", func() (any, error) { return optim.NewAdam(one, optim.AdamConfig{Eps: -1}) }, "epsilon"},
		{"Adam eps NaN", func() (any, error) { return optim.NewAdam(one, optim.AdamConfig{Eps: nan}) }, "epsilon"},
		{"Adam group eps -1", func() (any, error) { return optim.NewAdamGroups(groups(optim.WithEps(-1)), optim.AdamConfig{}) }, "epsilon"},
		{"AdamW weight decay NaN", func() (any, error) { return optim.NewAdamW(one, optim.AdamConfig{WeightDecay: nan}) }, "weight decay"},
		{"AdamW weight decay -1", func() (any, error) { return optim.NewAdamW(one, optim.AdamConfig{WeightDecay: -1}) }, "weight decay"},
		{"RMSprop alpha -1", func() (any, error) { return optim.NewRMSprop(one, optim.RMSpropConfig{Alpha: -1}) }, "alpha"},
		{"RMSprop momentum NaN", func() (any, error) { return optim.NewRMSprop(one, optim.RMSpropConfig{Momentum: nan}) }, "momentum"},
		{"RMSprop eps -1", func() (any, error) { return optim.NewRMSprop(one, optim.RMSpropConfig{Eps: -1}) }, "epsilon"},
		{"Adagrad lr decay -1", func() (any, error) { return optim.NewAdagrad(one, optim.AdagradConfig{LRDecay: -1}) }, "learning rate decay"},
		{"Adagrad initial accumulator NaN", func() (any, error) {
			return optim.NewAdagrad(one, optim.AdagradConfig{InitialAccumulatorValue: nan})
		}, "initial accumulator"},
		{"Adamax beta1 1", func() (any, error) { return optim.NewAdamax(one, optim.AdamaxConfig{Beta1: 1}) }, "beta1"},
		{"NAdam beta2 NaN", func() (any, error) { return optim.NewNAdam(one, optim.NAdamConfig{Beta2: nan}) }, "beta2"},
		{"NAdam momentum decay -1", func() (any, error) { return optim.NewNAdam(one, optim.NAdamConfig{MomentumDecay: -1}) }, "momentum decay"},
		{"RAdam eps -1", func() (any, error) { return optim.NewRAdam(one, optim.RAdamConfig{Eps: -1}) }, "epsilon"},
		{"Adadelta rho 1.5", func() (any, error) { return optim.NewAdadelta(one, optim.AdadeltaConfig{Rho: 1.5}) }, "rho"},
		{"Adadelta lr -1", func() (any, error) { return optim.NewAdadelta(one, optim.AdadeltaConfig{LR: -1}) }, "learning rate"},
		{"ASGD lambd -1", func() (any, error) { return optim.NewASGD(one, optim.ASGDConfig{Lambd: -1}) }, "lambd"},
		{"Rprop eta minus 1", func() (any, error) { return optim.NewRprop(one, optim.RpropConfig{EtaMinus: 1}) }, "etas"},
		{"LBFGS lr NaN", func() (any, error) { return optim.NewLBFGS(one, optim.LBFGSConfig{LR: nan}) }, "learning rate"},

		{"SGD nil list", func() (any, error) { return optim.NewSGD(nil, optim.SGDConfig{LR: 1}) }, "empty parameter list"},
		{"SGD no groups", func() (any, error) { return optim.NewSGDGroups(nil, optim.SGDConfig{LR: 1}) }, "empty parameter list"},
		{"Adam empty list", func() (any, error) { return optim.NewAdam([]*vram.Tensor{}, optim.AdamConfig{}) }, "empty parameter list"},
		{"Adam empty group", func() (any, error) {
			return optim.NewAdamGroups([]optim.ParamGroup{optim.Group(one), optim.Group(nil)}, optim.AdamConfig{})
		}, "no parameters"},
		{"RMSprop empty list", func() (any, error) { return optim.NewRMSprop(nil, optim.RMSpropConfig{}) }, "empty parameter list"},
		{"Rprop empty list", func() (any, error) { return optim.NewRprop(nil, optim.RpropConfig{}) }, "empty parameter list"},
		{"LBFGS empty list", func() (any, error) { return optim.NewLBFGS(nil, optim.LBFGSConfig{}) }, "empty parameter list"},

		{"SGD twice in a list", func() (any, error) { return optim.NewSGD([]*vram.Tensor{p, q, p}, optim.SGDConfig{LR: 1}) }, "same tensor"},
		{"Adam in two groups", func() (any, error) {
			return optim.NewAdamGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p, q}), optim.Group([]*vram.Tensor{p})}, optim.AdamConfig{})
		}, "already in group 0"},
		{"Adagrad added group", func() (any, error) {
			o, err := optim.NewAdagrad([]*vram.Tensor{p}, optim.AdagradConfig{})
			if err != nil {
				return nil, err
			}
			return o, o.AddParamGroup(optim.Group([]*vram.Tensor{q, p}))
		}, "already in group 0"},
		{"LBFGS twice", func() (any, error) { return optim.NewLBFGS([]*vram.Tensor{p, p}, optim.LBFGSConfig{}) }, "same tensor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if perr := vram.Catch(func() { _, err = tc.make() }); perr != nil {
				t.Fatalf("panicked: %v", perr)
			}
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one matching vram.ErrArgument that says %q", err, tc.want)
			}
		})
	}
}

// TestCosineAnnealingLRThreeCycles compares CosineAnnealingLR's rates over
// three full cycles of the cosine (6·T_max steps; the rate falls to
// eta_min and rises back to the base each 2·T_max) with both of PyTorch's
// forms: the closed form eta_min + (base − eta_min)·(1 + cos(π·t/T_max))/2
// (_get_closed_form_lr), and the recursive get_lr that step() applies,
//
//	lr_t = lr_{t−1} + (base − eta_min)·(1 − cos(π/T_max))/2   when (t − 1 − T_max) mod 2·T_max = 0
//	lr_t = (1 + cos(π·t/T_max)) / (1 + cos(π·(t−1)/T_max)) · (lr_{t−1} − eta_min) + eta_min   otherwise
//
// which agree but for rounding.
func TestCosineAnnealingLRThreeCycles(t *testing.T) {
	for _, tc := range []struct {
		tMax   int
		etaMin float64
	}{{1, 0}, {4, 0}, {5, 1e-3}, {10, 0.02}} {
		t.Run(fmt.Sprintf("T_max %d eta_min %v", tc.tMax, tc.etaMin), func(t *testing.T) {
			bases := []float64{0.1, 0.004}
			o := twoGroups(t, bases)
			s, err := optim.NewCosineAnnealingLR(o, tc.tMax, tc.etaMin)
			if err != nil {
				t.Fatal(err)
			}
			tm := float64(tc.tMax)
			rec := append([]float64(nil), bases...)
			for e := 1; e <= 6*tc.tMax; e++ {
				s.Step()
				closed := make([]float64, len(bases))
				for g, base := range bases {
					if (e-1-tc.tMax)%(2*tc.tMax) == 0 {
						rec[g] += (base - tc.etaMin) * (1 - math.Cos(math.Pi/tm)) / 2
					} else {
						rec[g] = (1+math.Cos(math.Pi*float64(e)/tm))/(1+math.Cos(math.Pi*float64(e-1)/tm))*(rec[g]-tc.etaMin) + tc.etaMin
					}
					closed[g] = tc.etaMin + (base-tc.etaMin)*(1+math.Cos(math.Pi*float64(e)/tm))/2
				}
				checkValues(t, fmt.Sprintf("step %d against the closed form", e), s.LRs(), closed, 1e-12)
				checkValues(t, fmt.Sprintf("step %d against the recursive form", e), s.LRs(), rec, 1e-9)
				checkValues(t, fmt.Sprintf("step %d: the optimizer's rates", e), groupLRs(o), s.LRs(), 0)
			}
		})
	}
}
