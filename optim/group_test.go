package optim_test

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// releaser is an optimizer with state to release.
type releaser interface {
	optim.Optimizer
	Release()
}

// TestParamGroupsStep checks that each group of a grouped optimizer steps
// exactly as an optimizer of that group alone with the group's
// hyper-parameters would.
func TestParamGroupsStep(t *testing.T) {
	tests := []struct {
		name    string
		grouped func(a, b []*vram.Tensor) (releaser, error)
		alone   func(a, b []*vram.Tensor) (releaser, releaser, error)
	}{
		{"SGD", func(a, b []*vram.Tensor) (releaser, error) {
			return optim.NewSGDGroups([]optim.ParamGroup{
				optim.Group(a),
				optim.Group(b, optim.WithLR(0.01), optim.WithMomentum(0.5), optim.WithNesterov(true), optim.WithWeightDecay(0)),
			}, optim.SGDConfig{LR: 0.1, Momentum: 0.9, Dampening: 0, WeightDecay: 0.1})
		}, func(a, b []*vram.Tensor) (releaser, releaser, error) {
			oa, err := optim.NewSGD(a, optim.SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 0.1})
			if err != nil {
				return nil, nil, err
			}
			ob, err := optim.NewSGD(b, optim.SGDConfig{LR: 0.01, Momentum: 0.5, Nesterov: true})
			return oa, ob, err
		}},
		{"SGD dampening", func(a, b []*vram.Tensor) (releaser, error) {
			return optim.NewSGDGroups([]optim.ParamGroup{
				optim.Group(a, optim.WithDampening(0.5)),
				optim.Group(b, optim.WithMomentum(0)),
			}, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		}, func(a, b []*vram.Tensor) (releaser, releaser, error) {
			oa, err := optim.NewSGD(a, optim.SGDConfig{LR: 0.1, Momentum: 0.9, Dampening: 0.5})
			if err != nil {
				return nil, nil, err
			}
			ob, err := optim.NewSGD(b, optim.SGDConfig{LR: 0.1})
			return oa, ob, err
		}},
		{"Adam", func(a, b []*vram.Tensor) (releaser, error) {
			return optim.NewAdamGroups([]optim.ParamGroup{
				optim.Group(a, optim.WithWeightDecay(0.1)),
				optim.Group(b, optim.WithLR(0.05), optim.WithBetas(0.5, 0.75), optim.WithEps(0.1)),
			}, optim.AdamConfig{LR: 0.01})
		}, func(a, b []*vram.Tensor) (releaser, releaser, error) {
			oa, err := optim.NewAdam(a, optim.AdamConfig{LR: 0.01, WeightDecay: 0.1})
			if err != nil {
				return nil, nil, err
			}
			ob, err := optim.NewAdam(b, optim.AdamConfig{LR: 0.05, Beta1: 0.5, Beta2: 0.75, Eps: 0.1})
			return oa, ob, err
		}},
		{"AdamW without decay on b", func(a, b []*vram.Tensor) (releaser, error) {
			return optim.NewAdamWGroups([]optim.ParamGroup{
				optim.Group(a),
				optim.Group(b, optim.WithWeightDecay(0)),
			}, optim.AdamConfig{LR: 0.01, WeightDecay: 0.5})
		}, func(a, b []*vram.Tensor) (releaser, releaser, error) {
			oa, err := optim.NewAdamW(a, optim.AdamConfig{LR: 0.01, WeightDecay: 0.5})
			if err != nil {
				return nil, nil, err
			}
			ob, err := optim.NewAdam(b, optim.AdamConfig{LR: 0.01}) // AdamW without decay
			return oa, ob, err
		}},
	}
	newParams := func(dev vram.Device) (a, b []*vram.Tensor) {
		g := vram.NewGenerator(7)
		a = []*vram.Tensor{vram.Randn(vram.Shape{3, 2}, vram.Float64, dev, vram.WithGenerator(g), vram.WithGrad())}
		b = []*vram.Tensor{vram.Randn(vram.Shape{2}, vram.Float64, dev, vram.WithGenerator(g), vram.WithGrad()),
			vram.Randn(vram.Shape{4}, vram.Float64, dev, vram.WithGenerator(g), vram.WithGrad())}
		return a, b
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The grouped optimizer's parameters span two devices.
			ga, gb := newParams(vram.CPU)
			gb[1].MoveTo(vram.Sim(0))
			sa, sb := newParams(vram.CPU)
			grouped, err := tt.grouped(ga, gb)
			if err != nil {
				t.Fatal(err)
			}
			defer grouped.Release()
			oa, ob, err := tt.alone(sa, sb)
			if err != nil {
				t.Fatal(err)
			}
			defer oa.Release()
			defer ob.Release()
			gps, sps := append(ga, gb...), append(sa, sb...)
			for step := range 3 {
				for i := range gps {
					if step == 1 && i == 1 {
						continue // a parameter without a gradient is skipped
					}
					g := vram.Randn(gps[i].Shape(), vram.Float64, vram.WithGenerator(vram.NewGenerator(uint64(10*step+i))))
					sps[i].SetGrad(g)
					gps[i].SetGrad(g.To(gps[i].Device()))
				}
				grouped.Step()
				oa.Step()
				ob.Step()
				grouped.ZeroGrad()
				oa.ZeroGrad()
				ob.ZeroGrad()
				for i := range gps {
					checkValues(t, "parameter", gps[i].Float64s(), sps[i].Float64s(), 1e-12)
				}
			}
		})
	}
}

// TestParamGroupErrors checks that invalid groups are refused with an
// error of the right kind, and that AddParamGroup adds nothing then.
func TestParamGroupErrors(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	q := vram.Zeros(vram.Shape{3}, vram.WithGrad())
	r := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	released := vram.Zeros(vram.Shape{2})
	released.Release()
	nonLeaf := p.MulScalar(2)
	sgd := optim.SGDConfig{LR: 0.1, Momentum: 0.9}
	tests := []struct {
		name   string
		groups []optim.ParamGroup
		adam   bool
		kind   error
		want   string
	}{
		{"no groups", nil, false, vram.ErrArgument, "empty parameter list"},
		{"empty group", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group(nil)}, false, vram.ErrArgument, "group 1 has no parameters"},
		{"parameter in two groups", []optim.ParamGroup{optim.Group([]*vram.Tensor{p, q}), optim.Group([]*vram.Tensor{r, q})}, true,
			vram.ErrArgument, "parameter 1 of group 1 is already in group 0"},
		{"repeated in a group", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{q, r, q})}, false,
			vram.ErrArgument, "parameters 0 and 2 of group 1 are the same tensor"},
		{"nil", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{nil})}, false, vram.ErrArgument, "parameter 0 of group 1 is nil"},
		{"released", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{released})}, true, vram.ErrReleased, "released"},
		{"int", []optim.ParamGroup{optim.Group([]*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.Int32)})}, false, vram.ErrDType, "floating-point"},
		{"non-leaf", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{nonLeaf})}, false, vram.ErrArgument, "not a leaf"},
		{"negative lr", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithLR(-1))}, false, vram.ErrArgument, "group 0: learning rate"},
		{"NaN lr", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{q}, optim.WithLR(math.NaN()))}, true,
			vram.ErrArgument, "group 1: invalid learning rate NaN"},
		{"infinite lr", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithLR(math.Inf(1)))}, true, vram.ErrArgument, "learning rate"},
		{"negative momentum", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithMomentum(-0.1))}, false, vram.ErrArgument, "momentum"},
		{"infinite momentum", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithMomentum(math.Inf(1)))}, false, vram.ErrArgument, "momentum"},
		{"nesterov with dampening", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithNesterov(true), optim.WithDampening(0.1))}, false,
			vram.ErrArgument, "Nesterov"},
		{"nesterov without momentum", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithNesterov(true), optim.WithMomentum(0))}, false,
			vram.ErrArgument, "Nesterov"},
		{"negative weight decay", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithWeightDecay(-1))}, true, vram.ErrArgument, "weight decay"},
		{"beta1 one", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithBetas(1, 0.9))}, true, vram.ErrArgument, "beta1"},
		{"beta2 NaN", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithBetas(0.9, math.NaN()))}, true, vram.ErrArgument, "beta2"},
		{"negative eps", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithEps(-1))}, true, vram.ErrArgument, "epsilon"},
		{"betas for SGD", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithBetas(0.9, 0.99))}, false, vram.ErrArgument, `SGD has no hyper-parameter "betas"`},
		{"momentum for Adam", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithMomentum(0.9))}, true, vram.ErrArgument, `Adam has no hyper-parameter "momentum"`},
		{"zero Option", []optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.Option{})}, true, vram.ErrArgument, `no hyper-parameter ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.adam {
				_, err = optim.NewAdamGroups(tt.groups, optim.AdamConfig{})
			} else {
				_, err = optim.NewSGDGroups(tt.groups, sgd)
			}
			if err == nil || !errors.Is(err, tt.kind) || !strings.HasPrefix(err.Error(), "optim: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one of kind %v about %q", err, tt.kind, tt.want)
			}
			if len(tt.groups) < 2 {
				return
			}
			// The same group added to an optimizer of the first is
			// refused, leaving the optimizer as it was.
			var o interface {
				optim.GroupedOptimizer
				AddParamGroup(optim.ParamGroup) error
			}
			if tt.adam {
				o, err = optim.NewAdamGroups(tt.groups[:1], optim.AdamConfig{})
			} else {
				o, err = optim.NewSGDGroups(tt.groups[:1], sgd)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := o.AddParamGroup(tt.groups[1]); err == nil || !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddParamGroup: err = %v, want one of kind %v about %q", err, tt.kind, tt.want)
			}
			if o.NumGroups() != 1 {
				t.Fatalf("%d groups after a refused AddParamGroup", o.NumGroups())
			}
		})
	}
	// Without a rate in the config, a group takes PyTorch's default 1e-3
	// unless it sets its own, which may be 0.
	perGroup, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithLR(0.1)), optim.Group([]*vram.Tensor{q}, optim.WithLR(0))},
		optim.SGDConfig{Momentum: 0.9})
	if err != nil || perGroup.GroupLR(0) != 0.1 || perGroup.GroupLR(1) != 0 {
		t.Fatalf("rates set per group: %v", err)
	}
	if err := perGroup.AddParamGroup(optim.Group([]*vram.Tensor{r})); err != nil || perGroup.GroupLR(2) != 1e-3 {
		t.Fatalf("AddParamGroup without a rate: %v", err)
	}
	// A parameter already in the optimizer cannot be added again.
	o, err := optim.NewSGD([]*vram.Tensor{p, q}, sgd)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.AddParamGroup(optim.Group([]*vram.Tensor{r, p})); !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "already in group 0") {
		t.Fatalf("AddParamGroup of a parameter the optimizer has: %v", err)
	}
	if err := o.AddParamGroup(optim.Group([]*vram.Tensor{r}, optim.WithLR(0))); err != nil {
		t.Fatalf("a group with rate 0: %v", err)
	}
	if got := o.GroupParams(1); len(got) != 1 || got[0] != r || o.GroupConfig(1).Momentum != 0.9 {
		t.Fatalf("group 1: %v, %+v", got, o.GroupConfig(1))
	}
	for _, bad := range []func(){func() { o.GroupLR(2) }, func() { o.SetGroupLR(-1, 0.1) }, func() { o.GroupConfig(2) }, func() { o.GroupParams(5) }} {
		if err := vram.Catch(bad); !errors.Is(err, vram.ErrIndex) {
			t.Errorf("group out of range: %v", err)
		}
	}
	if err := vram.Catch(func() { o.SetGroupLR(1, math.NaN()) }); !errors.Is(err, vram.ErrArgument) || o.GroupLR(1) != 0 {
		t.Errorf("SetGroupLR(NaN): %v, rate %v", err, o.GroupLR(1))
	}
}

// TestAddParamGroupSteps checks that a group added after some steps gets
// its own state and hyper-parameters and that SetLR sets every group's
// rate.
func TestAddParamGroupSteps(t *testing.T) {
	p := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
	q := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
	o, err := optim.NewAdamW([]*vram.Tensor{p}, optim.AdamConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	setGrad(p, grads[0]...)
	o.Step()
	if err := o.AddParamGroup(optim.Group([]*vram.Tensor{q}, optim.WithWeightDecay(0.01))); err != nil {
		t.Fatal(err)
	}
	setGrad(q, grads[0]...)
	o.ZeroGrad()
	if p.Grad() != nil || q.Grad() != nil {
		t.Fatal("ZeroGrad left a gradient")
	}
	setGrad(q, grads[0]...)
	o.Step()
	// q's first step is step 1 of AdamW, as p's was (TestAdamSteps).
	checkValues(t, "q", q.Float64s(), []float64{0.899000002, -2.0979999990000002}, 1e-12)
	checkValues(t, "p", p.Float64s(), []float64{0.899000002, -2.0979999990000002}, 1e-12)
	o.SetLR(0.5)
	if o.GroupLR(0) != 0.5 || o.GroupLR(1) != 0.5 || o.LR() != 0.5 {
		t.Fatalf("rates %v and %v after SetLR(0.5)", o.GroupLR(0), o.GroupLR(1))
	}
	if d := o.Defaults(); d.LR != 0.1 || d.WeightDecay != 0.01 {
		t.Fatalf("defaults %+v", d)
	}
}

// TestScheduleDrivesGroups checks that a Schedule sets each group's rate
// from the group's own base rate, as PyTorch's schedulers do.
func TestScheduleDrivesGroups(t *testing.T) {
	ps := []*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad()), vram.Zeros(vram.Shape{1}, vram.WithGrad()), vram.Zeros(vram.Shape{1}, vram.WithGrad())}
	tests := []struct {
		name string
		make func(optim.Optimizer) (*optim.Schedule, error)
		want [][]float64 // the rates of groups 0 and 1 after 0, 1, 2 steps
	}{
		{"StepLR", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewStepLR(o, 1, 0.5) },
			[][]float64{{0.1, 0.01}, {0.05, 0.005}, {0.025, 0.0025}}},
		{"CosineAnnealingLR", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewCosineAnnealingLR(o, 4, 0) },
			[][]float64{{0.1, 0.01}, {0.08535533905932738, 0.008535533905932738}, {0.05, 0.005}}},
		{"LinearLR", func(o optim.Optimizer) (*optim.Schedule, error) { return optim.NewLinearLR(o, 0.5, 1, 2) },
			[][]float64{{0.05, 0.005}, {0.075, 0.0075}, {0.1, 0.01}}},
		{"LambdaLR", func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewLambdaLR(o, func(step int) float64 { return float64(step + 1) })
		}, [][]float64{{0.1, 0.01}, {0.2, 0.02}, {0.3, 0.03}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group(ps[:1]), optim.Group(ps[1:2], optim.WithLR(0.01))}, optim.SGDConfig{LR: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			s, err := tt.make(o)
			if err != nil {
				t.Fatal(err)
			}
			for step, want := range tt.want {
				if step > 0 {
					s.Step()
				}
				checkValues(t, "rates", s.LRs(), want, 1e-12)
			}
			checkValues(t, "base rates", s.BaseLRs(), []float64{0.1, 0.01}, 0)
			// A group added later is driven from its rate at the next step.
			if err := o.AddParamGroup(optim.Group(ps[2:], optim.WithLR(1))); err != nil {
				t.Fatal(err)
			}
			s.Step()
			if b := s.BaseLRs(); len(b) != 3 || b[2] != 1 {
				t.Fatalf("base rates %v after adding a group of rate 1", b)
			}
			if lr := o.GroupLR(2); lr != s.LRs()[2] || math.Abs(lr/o.GroupLR(0)-10) > 1e-9 {
				t.Fatalf("rates %v: the new group does not keep its ratio", s.LRs())
			}
		})
	}
	// A rate function that turns bad changes no group's rate.
	o, err := optim.NewAdamGroups([]optim.ParamGroup{optim.Group(ps[:1]), optim.Group(ps[1:2], optim.WithLR(0.01))}, optim.AdamConfig{LR: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := optim.NewLambdaLR(o, func(step int) float64 { return 1 - float64(step) })
	if err != nil {
		t.Fatal(err)
	}
	if err := vram.Catch(s.Step); err != nil {
		t.Fatal(err) // factor 0
	}
	if err := vram.Catch(s.Step); !errors.Is(err, vram.ErrArgument) {
		t.Fatalf("negative factor: %v", err)
	}
	checkValues(t, "rates after a refused step", s.LRs(), []float64{0, 0}, 0)
}

// TestCheckpointGroups checks that Save writes every group's
// hyper-parameters, that Load restores them, and that Load refuses a file
// whose groups do not match the optimizer's, changing nothing.
func TestCheckpointGroups(t *testing.T) {
	dir := t.TempDir()
	mk := func() []*vram.Tensor {
		return []*vram.Tensor{vram.Ones(vram.Shape{2}, vram.WithGrad()), vram.Ones(vram.Shape{3}, vram.WithGrad()), vram.Ones(vram.Shape{1}, vram.WithGrad())}
	}
	ps := mk()
	saved, err := optim.NewSGDGroups([]optim.ParamGroup{
		optim.Group(ps[:2], optim.WithWeightDecay(0.5)),
		optim.Group(ps[2:], optim.WithLR(0.02), optim.WithMomentum(0.8), optim.WithNesterov(true), optim.WithMaximize(true)),
	}, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	defer saved.Release()
	for _, p := range ps {
		p.SetGrad(vram.OnesLike(p))
	}
	saved.Step()
	saved.SetGroupLR(0, 0.07)
	path := filepath.Join(dir, "sgd.safetensors")
	if err := optim.Save(saved, path); err != nil {
		t.Fatal(err)
	}
	_, meta := readCheckpoint(t, path)
	if !strings.Contains(meta["param_groups"], `"params":[0,1]`) || !strings.Contains(meta["param_groups"], `"params":[2]`) {
		t.Fatalf("param_groups %s", meta["param_groups"])
	}

	qs := mk()
	same := func() *optim.SGD {
		o, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group(qs[:2]), optim.Group(qs[2:])}, optim.SGDConfig{LR: 1})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := same()
	if err := optim.Load(o, path); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		if got, want := o.GroupConfig(k), saved.GroupConfig(k); got != want {
			t.Errorf("group %d: %+v after Load, want %+v", k, got, want)
		}
	}
	if o.GroupConfig(0).LR != 0.07 {
		t.Errorf("group 0's rate %v, want 0.07", o.GroupConfig(0).LR)
	}

	tests := []struct {
		name   string
		groups []optim.ParamGroup
		want   string
	}{
		{"one group", []optim.ParamGroup{optim.Group(qs)}, "the file has 2 parameter groups, the optimizer 1"},
		{"other sizes", []optim.ParamGroup{optim.Group(qs[:1]), optim.Group(qs[1:])}, "group 0 has 2 parameters in the file, 1 in the optimizer"},
		{"three groups", []optim.ParamGroup{optim.Group(qs[:1]), optim.Group(qs[1:2]), optim.Group(qs[2:])}, "the file has 2 parameter groups, the optimizer 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := optim.NewSGDGroups(tt.groups, optim.SGDConfig{LR: 1})
			if err != nil {
				t.Fatal(err)
			}
			err = optim.Load(o, path)
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one about %q", err, tt.want)
			}
			for k := range o.NumGroups() {
				if o.GroupLR(k) != 1 {
					t.Fatalf("the failed load set group %d's rate to %v", k, o.GroupLR(k))
				}
			}
		})
	}
}
