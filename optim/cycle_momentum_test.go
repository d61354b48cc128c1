package optim_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// groupMomenta returns the momentum each group of o has: SGD's and
// RMSprop's momentum, the beta1 of the Adam family.
func groupMomenta(t *testing.T, o optim.GroupedOptimizer) []float64 {
	t.Helper()
	out := make([]float64, o.NumGroups())
	for i := range out {
		switch o := o.(type) {
		case *optim.SGD:
			out[i] = o.GroupConfig(i).Momentum
		case *optim.RMSprop:
			out[i] = o.GroupConfig(i).Momentum
		case *optim.Adam:
			out[i] = o.GroupConfig(i).Beta1
		case *optim.Adamax:
			out[i] = o.GroupConfig(i).Beta1
		case *optim.NAdam:
			out[i] = o.GroupConfig(i).Beta1
		case *optim.RAdam:
			out[i] = o.GroupConfig(i).Beta1
		default:
			t.Fatalf("%T has no momentum", o)
		}
	}
	return out
}

// refOneCycleMomentum is PyTorch's OneCycleLR momentum at step e
// (cycle_momentum=True): the phases of the rate, from max_momentum down
// to base_momentum while the rate rises and back up while it falls (a
// third phase holding max_momentum), annealed as the rate is:
//
//	cos:    end + (start − end)/2·(1 + cos(π·pct))
//	linear: start + (end − start)·pct
func refOneCycleMomentum(e, total int, pct float64, linear, three bool, base, max float64) float64 {
	type phase struct{ end, from, to float64 }
	n := float64(total)
	phases := []phase{{pct*n - 1, max, base}, {n - 1, base, max}}
	if three {
		phases = []phase{{pct*n - 1, max, base}, {2*pct*n - 2, base, max}, {n - 1, max, max}}
	}
	start := 0.0
	for i, ph := range phases {
		if float64(e) <= ph.end || i == len(phases)-1 {
			p := (float64(e) - start) / (ph.end - start)
			if linear {
				return ph.from + (ph.to-ph.from)*min(p, 1)
			}
			return ph.to + (ph.from-ph.to)/2*(1+math.Cos(math.Pi*p))
		}
		start = ph.end
	}
	panic("unreachable")
}

// TestOneCycleLRCyclesMomentum checks that OneCycleLR cycles the
// momentum inversely to the rate, as PyTorch's does by default
// (cycle_momentum=True, base_momentum 0.85, max_momentum 0.95): SGD's and
// RMSprop's momentum, the beta1 of Adam, AdamW, Adamax, NAdam and RAdam,
// of every group, at each of its steps.
func TestOneCycleLRCyclesMomentum(t *testing.T) {
	ps := func() []*vram.Tensor {
		return []*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad()), vram.Zeros(vram.Shape{1}, vram.WithGrad())}
	}
	two := func(p []*vram.Tensor) []optim.ParamGroup {
		return []optim.ParamGroup{optim.Group(p[:1]), optim.Group(p[1:], optim.WithLR(0.01))}
	}
	makers := []struct {
		name string
		make func() (optim.GroupedOptimizer, error)
	}{
		{"SGD", func() (optim.GroupedOptimizer, error) { return optim.NewSGDGroups(two(ps()), optim.SGDConfig{LR: 0.1}) }},
		{"SGD nesterov", func() (optim.GroupedOptimizer, error) {
			return optim.NewSGDGroups(two(ps()), optim.SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true})
		}},
		{"RMSprop", func() (optim.GroupedOptimizer, error) {
			return optim.NewRMSpropGroups(two(ps()), optim.RMSpropConfig{})
		}},
		{"Adam", func() (optim.GroupedOptimizer, error) { return optim.NewAdamGroups(two(ps()), optim.AdamConfig{}) }},
		{"AdamW", func() (optim.GroupedOptimizer, error) { return optim.NewAdamWGroups(two(ps()), optim.AdamConfig{}) }},
		{"Adamax", func() (optim.GroupedOptimizer, error) { return optim.NewAdamaxGroups(two(ps()), optim.AdamaxConfig{}) }},
		{"NAdam", func() (optim.GroupedOptimizer, error) { return optim.NewNAdamGroups(two(ps()), optim.NAdamConfig{}) }},
		{"RAdam", func() (optim.GroupedOptimizer, error) { return optim.NewRAdamGroups(two(ps()), optim.RAdamConfig{}) }},
	}
	settings := []struct {
		name      string
		total     int
		o         optim.OneCycleOptions
		base, max float64
	}{
		{"defaults", 20, optim.OneCycleOptions{}, 0.85, 0.95},
		{"linear three phases", 17, optim.OneCycleOptions{Linear: true, ThreePhase: true, PctStart: 0.4}, 0.85, 0.95},
		{"own bounds", 9, optim.OneCycleOptions{BaseMomentum: 0.5, MaxMomentum: 0.8}, 0.5, 0.8},
	}
	for _, m := range makers {
		for _, st := range settings {
			t.Run(m.name+"/"+st.name, func(t *testing.T) {
				o, err := m.make()
				if err != nil {
					t.Fatal(err)
				}
				s, err := optim.NewOneCycleLR(o, 0.5, st.total, st.o)
				if err != nil {
					t.Fatal(err)
				}
				pct := st.o.PctStart
				if pct == 0 {
					pct = 0.3
				}
				for e := 0; e <= st.total; e++ {
					if e > 0 {
						s.Step()
					}
					w := refOneCycleMomentum(e, st.total, pct, st.o.Linear, st.o.ThreePhase, st.base, st.max)
					checkValues(t, fmt.Sprintf("momentum at step %d", e), groupMomenta(t, o), []float64{w, w}, 1e-12)
				}
			})
		}
	}
}

// TestCyclicLRCyclesMomentum checks CyclicLR's momentum against
// PyTorch's, cycled inversely to the rate by default (base_momentum 0.8,
// max_momentum 0.9): max_momentum − (max_momentum − base_momentum)·f·scale,
// with f and scale those of the rate.
func TestCyclicLRCyclesMomentum(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         optim.CyclicOptions
		base, max float64
		scale     func(cycle, e float64) float64
	}{
		{"triangular", optim.CyclicOptions{StepSizeUp: 2, StepSizeDown: 3}, 0.8, 0.9, func(float64, float64) float64 { return 1 }},
		{"triangular2", optim.CyclicOptions{StepSizeUp: 2, Mode: optim.Triangular2, BaseMomentum: 0.6, MaxMomentum: 0.7}, 0.6, 0.7,
			func(c, _ float64) float64 { return 1 / math.Pow(2, c-1) }},
		{"exp_range", optim.CyclicOptions{StepSizeUp: 3, Mode: optim.ExpRange, Gamma: 0.9}, 0.8, 0.9,
			func(_, e float64) float64 { return math.Pow(0.9, e) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
			o, err := optim.NewAdam([]*vram.Tensor{p}, optim.AdamConfig{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := optim.NewCyclicLR(o, 0.01, 0.1, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			up := float64(tc.o.StepSizeUp)
			down := up
			if tc.o.StepSizeDown != 0 {
				down = float64(tc.o.StepSizeDown)
			}
			for e := 0; e <= 14; e++ {
				if e > 0 {
					s.Step()
				}
				x := float64(e)
				cycle := math.Floor(1 + x/(up+down))
				r := 1 + x/(up+down) - cycle
				f := r / (up / (up + down))
				if r > up/(up+down) {
					f = (r - 1) / (up/(up+down) - 1)
				}
				w := tc.max - (tc.max-tc.base)*f*tc.scale(cycle, x)
				checkValues(t, fmt.Sprintf("beta1 at step %d", e), groupMomenta(t, o), []float64{w}, 1e-12)
			}
		})
	}
}

// TestCycleMomentumRefusals checks that OneCycleLR and CyclicLR refuse,
// as PyTorch raises, an optimizer without a momentum or beta1 to cycle
// unless NoCycleMomentum is set, and momentum bounds outside [0, 1),
// changing no rate.
func TestCycleMomentumRefusals(t *testing.T) {
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	ada, err := optim.NewAdagrad([]*vram.Tensor{p}, optim.AdagradConfig{LR: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	sgd := newSGD(t, 0.3)
	tests := []struct {
		name string
		opt  optim.GroupedOptimizer
		make func(o optim.Optimizer) (*optim.Schedule, error)
		ok   bool
	}{
		{"OneCycleLR Adagrad", ada, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewOneCycleLR(o, 1, 10, optim.OneCycleOptions{})
		}, false},
		{"CyclicLR Adagrad", ada, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCyclicLR(o, 0.1, 1, optim.CyclicOptions{})
		}, false},
		{"OneCycleLR max momentum 1", sgd, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewOneCycleLR(o, 1, 10, optim.OneCycleOptions{MaxMomentum: 1})
		}, false},
		{"OneCycleLR base momentum NaN", sgd, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewOneCycleLR(o, 1, 10, optim.OneCycleOptions{BaseMomentum: math.NaN()})
		}, false},
		{"CyclicLR max momentum -0.5", sgd, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCyclicLR(o, 0.1, 1, optim.CyclicOptions{MaxMomentum: -0.5})
		}, false},
		{"OneCycleLR Adagrad without cycling", ada, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewOneCycleLR(o, 1, 10, optim.OneCycleOptions{NoCycleMomentum: true})
		}, true},
		{"CyclicLR Adagrad without cycling", ada, func(o optim.Optimizer) (*optim.Schedule, error) {
			return optim.NewCyclicLR(o, 0.1, 1, optim.CyclicOptions{NoCycleMomentum: true})
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := tc.opt.LR()
			_, err := tc.make(tc.opt)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				tc.opt.SetLR(lr)
				return
			}
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("err = %v, want vram.ErrArgument", err)
			}
			if tc.opt.LR() != lr {
				t.Fatalf("rate %v after the refusal, was %v", tc.opt.LR(), lr)
			}
		})
	}
	// Without cycling, SGD's momentum stays as it was.
	s, err := optim.NewOneCycleLR(sgd, 1, 10, optim.OneCycleOptions{NoCycleMomentum: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Step()
	if m := sgd.Config().Momentum; m != 0 {
		t.Fatalf("momentum %v without cycling, want 0", m)
	}
}

// TestCycledMomentumResumes checks that a run with a momentum-cycling
// schedule, stopped and resumed through Save, Load and LoadState, steps
// as the run that did not stop: the checkpoint keeps the momentum (SGD's,
// turned on by the schedule) and LoadState sets that of the step it
// resumes at. It also checks that a SequentialLR cycles the momentum
// while its OneCycleLR part runs and leaves it after.
func TestCycledMomentumResumes(t *testing.T) {
	const total, stop = 10, 4
	mk := func() (*optim.SGD, *vram.Tensor) {
		p := vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad())
		o, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		return o, p
	}
	sched := func(o optim.Optimizer) *optim.Schedule {
		s, err := optim.NewOneCycleLR(o, 0.5, total, optim.OneCycleOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	step := func(o *optim.SGD, s *optim.Schedule, p *vram.Tensor, e int) {
		p.SetGrad(vram.FromSlice(refGrad(p.Float64s(), e), nil))
		o.Step()
		o.ZeroGrad()
		s.Step()
	}
	whole, wp := mk()
	ws := sched(whole)
	for e := 1; e <= total; e++ {
		step(whole, ws, wp, e)
	}
	first, fp := mk()
	fs := sched(first)
	for e := 1; e <= stop; e++ {
		step(first, fs, fp, e)
	}
	path := t.TempDir() + "/sgd.safetensors"
	if err := optim.Save(first, path); err != nil {
		t.Fatal(err)
	}
	resumed, rp := mk()
	vram.NoGrad(func() { rp.CopyFrom(fp) })
	if err := optim.Load(resumed, path); err != nil {
		t.Fatal(err)
	}
	rs := sched(resumed)
	if err := rs.LoadState(fs.State()); err != nil {
		t.Fatal(err)
	}
	if got, want := resumed.Config().Momentum, first.Config().Momentum; got != want {
		t.Fatalf("momentum after LoadState %v, want %v", got, want)
	}
	for e := stop + 1; e <= total; e++ {
		step(resumed, rs, rp, e)
	}
	checkValues(t, "resumed", rp.Float64s(), wp.Float64s(), 0)

	o, _ := mk()
	one := sched(o)
	c, err := optim.NewConstantLR(o, 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := optim.NewSequentialLR(o, []*optim.Schedule{one, c}, []int{6})
	if err != nil {
		t.Fatal(err)
	}
	for e := 0; e <= 9; e++ {
		if e > 0 {
			seq.Step()
		}
		w := refOneCycleMomentum(min(e, 5), total, 0.3, false, false, 0.85, 0.95)
		checkValues(t, fmt.Sprintf("SequentialLR momentum at step %d", e), []float64{o.Config().Momentum}, []float64{w}, 1e-12)
	}
}
