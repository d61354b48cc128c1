package optim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// twoGroups returns an SGD optimizer of two groups with the rates bases.
func twoGroups(t *testing.T, bases []float64) *optim.SGD {
	t.Helper()
	ps := []*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad()), vram.Zeros(vram.Shape{1}, vram.WithGrad())}
	o, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group(ps[:1]), optim.Group(ps[1:], optim.WithLR(bases[1]))},
		optim.SGDConfig{LR: bases[0]})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// groupLRs returns the rates of o's groups.
func groupLRs(o optim.GroupedOptimizer) []float64 {
	lrs := make([]float64, o.NumGroups())
	for i := range lrs {
		lrs[i] = o.GroupLR(i)
	}
	return lrs
}

func cosineRate(base, etaMin float64, tMax, s int) float64 {
	return etaMin + (base-etaMin)*(1+math.Cos(math.Pi*float64(s)/float64(tMax)))/2
}

// TestComposedSchedules runs SequentialLR and ChainedScheduler for 20
// steps and compares the rates of two groups with PyTorch's.
func TestComposedSchedules(t *testing.T) {
	bases := []float64{0.1, 0.004}
	tests := []struct {
		name string
		make func(t *testing.T, o optim.Optimizer) (*optim.Schedule, error)
		want func(base float64, s int) float64
	}{
		{"SequentialLR warm-up, cosine, exponential", func(t *testing.T, o optim.Optimizer) (*optim.Schedule, error) {
			a, err1 := optim.NewLinearLR(o, 0.1, 1, 3)
			b, err2 := optim.NewCosineAnnealingLR(o, 5, 0.001)
			c, err3 := optim.NewExponentialLR(o, 0.9)
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Fatal(err)
			}
			return optim.NewSequentialLR(o, []*optim.Schedule{a, b, c}, []int{3, 8})
		}, func(base float64, s int) float64 {
			switch {
			case s < 3:
				return base * (0.1 + 0.9*float64(s)/3)
			case s < 8:
				return cosineRate(base, 0.001, 5, s-3)
			}
			return base * math.Pow(0.9, float64(s-8))
		}},
		{"SequentialLR constant then step", func(t *testing.T, o optim.Optimizer) (*optim.Schedule, error) {
			a, err1 := optim.NewConstantLR(o, 0.5, 10) // cut short by the milestone
			b, err2 := optim.NewStepLR(o, 4, 0.5)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			return optim.NewSequentialLR(o, []*optim.Schedule{a, b}, []int{2})
		}, func(base float64, s int) float64 {
			if s < 2 {
				return base * 0.5
			}
			return base * math.Pow(0.5, float64((s-2)/4))
		}},
		{"SequentialLR multiplicative twice", func(t *testing.T, o optim.Optimizer) (*optim.Schedule, error) {
			a, err1 := optim.NewMultiplicativeLR(o, func(int) float64 { return 0.5 })
			b, err2 := optim.NewMultiplicativeLR(o, func(int) float64 { return 0.8 })
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			return optim.NewSequentialLR(o, []*optim.Schedule{a, b}, []int{4})
		}, func(base float64, s int) float64 {
			if s < 4 {
				return base * math.Pow(0.5, float64(s))
			}
			return base * math.Pow(0.8, float64(s-4))
		}},
		{"ChainedScheduler constant and exponential", func(t *testing.T, o optim.Optimizer) (*optim.Schedule, error) {
			a, err1 := optim.NewConstantLR(o, 0.1, 3)
			b, err2 := optim.NewExponentialLR(o, 0.9)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			return optim.NewChainedScheduler([]*optim.Schedule{a, b})
		}, func(base float64, s int) float64 {
			f := math.Pow(0.9, float64(s))
			if s < 3 {
				f *= 0.1
			}
			return base * f
		}},
		{"ChainedScheduler warm-up and multistep", func(t *testing.T, o optim.Optimizer) (*optim.Schedule, error) {
			a, err1 := optim.NewLinearLR(o, 0.25, 1, 4)
			b, err2 := optim.NewMultiStepLR(o, []int{6, 6, 15}, 0.5)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			return optim.NewChainedScheduler([]*optim.Schedule{a, b})
		}, func(base float64, s int) float64 {
			f := 0.25 + 0.75*float64(min(s, 4))/4
			switch {
			case s >= 15:
				f *= 0.125
			case s >= 6:
				f *= 0.25
			}
			return base * f
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := twoGroups(t, bases)
			s, err := tc.make(t, o)
			if err != nil {
				t.Fatal(err)
			}
			for step := 0; step <= 20; step++ {
				if step > 0 {
					s.Step()
				}
				checkValues(t, fmt.Sprintf("step %d", step), s.LRs(), []float64{tc.want(bases[0], step), tc.want(bases[1], step)}, 1e-12)
			}
			// A Schedule made again and given the state goes on alike.
			st := s.State()
			o2 := twoGroups(t, []float64{0.5, 0.5}) // rates already scheduled
			s2, err := tc.make(t, o2)
			if err != nil {
				t.Fatal(err)
			}
			if err := s2.LoadState(st); err != nil {
				t.Fatal(err)
			}
			s.Step()
			s2.Step()
			checkValues(t, "resumed", s2.LRs(), s.LRs(), 1e-12)
		})
	}
}

// TestLaterScheduleTakesInitialRate checks that a Schedule made after
// another of the same optimizer takes the rates the optimizer had before
// the first as its base rates (PyTorch's initial_lr), not the first
// one's rates of step 0.
func TestLaterScheduleTakesInitialRate(t *testing.T) {
	bases := []float64{0.1, 0.004}
	o := twoGroups(t, bases)
	warm, err := optim.NewLinearLR(o, 0.1, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, "warm-up rates", warm.LRs(), []float64{0.01, 0.0004}, 1e-15)
	cos, err := optim.NewCosineAnnealingLR(o, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, "cosine base rates", cos.BaseLRs(), bases, 0)
	// Its rule of step 0 leaves the warm-up's rates, as PyTorch's does.
	checkValues(t, "cosine rates", cos.LRs(), []float64{0.01, 0.0004}, 1e-15)
}

// TestSchedulesSteppedTogether checks the rates when two schedules of one
// optimizer, or a schedule and other code, change the rates, against
// PyTorch's recursive rules.
func TestSchedulesSteppedTogether(t *testing.T) {
	bases := []float64{0.1, 0.004}
	lin := func(e int) float64 { return 0.1 + 0.9*float64(min(e, 5))/5 }

	t.Run("warm-up and exponential decay", func(t *testing.T) {
		o := twoGroups(t, bases)
		warm, err1 := optim.NewLinearLR(o, 0.1, 1, 5)
		decay, err2 := optim.NewExponentialLR(o, 0.9)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		for e := 0; e <= 12; e++ {
			if e > 0 {
				warm.Step()
				decay.Step()
			}
			f := lin(e) * math.Pow(0.9, float64(e))
			checkValues(t, fmt.Sprintf("rates at step %d", e), groupLRs(o), []float64{bases[0] * f, bases[1] * f}, 1e-12)
			checkValues(t, fmt.Sprintf("decay's last rates at step %d", e), decay.LRs(), groupLRs(o), 0)
			if e > 0 { // what the warm-up set, before the decay of the step
				g := lin(e) * math.Pow(0.9, float64(e-1))
				checkValues(t, fmt.Sprintf("warm-up's last rates at step %d", e), warm.LRs(), []float64{bases[0] * g, bases[1] * g}, 1e-12)
			}
		}
	})

	t.Run("ramp to half, exponential decay, resumed", func(t *testing.T) {
		// After the ramp ends neither schedule's closed form gives the
		// rate: the decay must keep applying its rule to the rate it finds.
		ramp := func(e int) float64 { return 1 - 0.5*float64(min(e, 3))/3 }
		mk := func(o optim.Optimizer) (*optim.Schedule, *optim.Schedule) {
			a, err1 := optim.NewLinearLR(o, 1, 0.5, 3)
			b, err2 := optim.NewExponentialLR(o, 0.9)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			return a, b
		}
		o := twoGroups(t, bases)
		a, b := mk(o)
		for e := 1; e <= 6; e++ {
			a.Step()
			b.Step()
			f := ramp(e) * math.Pow(0.9, float64(e))
			checkValues(t, fmt.Sprintf("rates at step %d", e), groupLRs(o), []float64{bases[0] * f, bases[1] * f}, 1e-12)
		}
		// Resume from the states (through JSON) and the optimizer's rates.
		var sts [2]optim.ScheduleState
		for k, s := range []*optim.Schedule{a, b} {
			data, err := json.Marshal(s.State())
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &sts[k]); err != nil {
				t.Fatal(err)
			}
		}
		o2 := twoGroups(t, groupLRs(o))
		a2, b2 := mk(o2)
		if err := errors.Join(a2.LoadState(sts[0]), b2.LoadState(sts[1])); err != nil {
			t.Fatal(err)
		}
		checkValues(t, "resumed rates", groupLRs(o2), groupLRs(o), 0)
		for e := 7; e <= 9; e++ {
			a.Step()
			b.Step()
			a2.Step()
			b2.Step()
			f := ramp(e) * math.Pow(0.9, float64(e))
			checkValues(t, fmt.Sprintf("rates at step %d", e), groupLRs(o), []float64{bases[0] * f, bases[1] * f}, 1e-12)
			checkValues(t, fmt.Sprintf("resumed rates at step %d", e), groupLRs(o2), groupLRs(o), 1e-15)
		}
	})

	t.Run("warm-up then plateau", func(t *testing.T) {
		o := twoGroups(t, bases)
		warm, err := optim.NewLinearLR(o, 0.5, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		cfg := optim.DefaultPlateauConfig()
		cfg.Patience = 0
		plateau, err := optim.NewReduceLROnPlateau(o, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, loss := range []float64{3, 2, 1, 1, 1} {
			warm.Step()
			plateau.Step(loss)
		}
		// Reduced twice (the fourth and fifth losses) from the warm-up's end.
		checkValues(t, "rates", groupLRs(o), []float64{bases[0] * 0.01, bases[1] * 0.01}, 1e-12)
	})

	t.Run("SetLR during composed schedules", func(t *testing.T) {
		o := twoGroups(t, bases)
		c, err1 := optim.NewConstantLR(o, 0.5, 2)
		x, err2 := optim.NewExponentialLR(o, 0.9)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		seq, err := optim.NewSequentialLR(o, []*optim.Schedule{c, x}, []int{2})
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			seq.Step()
		}
		o.SetGroupLR(0, 0.2)
		seq.Step()
		checkValues(t, "SequentialLR rates", groupLRs(o), []float64{0.2 * 0.9, bases[1] * math.Pow(0.9, 3)}, 1e-12)

		o2 := twoGroups(t, bases)
		x2, err := optim.NewExponentialLR(o2, 0.9)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := optim.NewChainedScheduler([]*optim.Schedule{x2})
		if err != nil {
			t.Fatal(err)
		}
		ch.Step()
		o2.SetGroupLR(1, 0.5)
		ch.Step()
		ch.Step()
		checkValues(t, "ChainedScheduler rates", groupLRs(o2), []float64{bases[0] * 0.729, 0.5 * 0.81}, 1e-12)
	})

	t.Run("SetLR during StepLR", func(t *testing.T) {
		o := twoGroups(t, bases)
		s, err := optim.NewStepLR(o, 2, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			s.Step()
		}
		o.SetGroupLR(0, 0.06)
		s.Step() // step 4 halves what it finds
		checkValues(t, "rates", groupLRs(o), []float64{0.03, bases[1] * 0.25}, 1e-15)
	})
}

func TestComposedSchedulesRefuseBadInput(t *testing.T) {
	o := twoGroups(t, []float64{0.1, 0.01})
	other := twoGroups(t, []float64{0.1, 0.01})
	mk := func(o optim.Optimizer) *optim.Schedule {
		s, err := optim.NewExponentialLR(o, 0.9)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	stepped := mk(o)
	stepped.Step()
	tests := []struct {
		name string
		make func() (*optim.Schedule, error)
	}{
		{"sequential no schedules", func() (*optim.Schedule, error) { return optim.NewSequentialLR(o, nil, nil) }},
		{"sequential nil optimizer", func() (*optim.Schedule, error) {
			return optim.NewSequentialLR(nil, []*optim.Schedule{mk(o)}, nil)
		}},
		{"sequential too many milestones", func() (*optim.Schedule, error) {
			return optim.NewSequentialLR(o, []*optim.Schedule{mk(o), mk(o)}, []int{2, 4})
		}},
		{"sequential decreasing milestones", func() (*optim.Schedule, error) {
			return optim.NewSequentialLR(o, []*optim.Schedule{mk(o), mk(o), mk(o)}, []int{4, 2})
		}},
		{"sequential zero milestone", func() (*optim.Schedule, error) {
			return optim.NewSequentialLR(o, []*optim.Schedule{mk(o), mk(o)}, []int{0})
		}},
		{"sequential other optimizer", func() (*optim.Schedule, error) {
			return optim.NewSequentialLR(o, []*optim.Schedule{mk(o), mk(other)}, []int{3})
		}},
		{"sequential nil schedule", func() (*optim.Schedule, error) {
			return optim.NewSequentialLR(o, []*optim.Schedule{mk(o), nil}, []int{3})
		}},
		{"sequential stepped schedule", func() (*optim.Schedule, error) {
			return optim.NewSequentialLR(o, []*optim.Schedule{stepped, mk(o)}, []int{3})
		}},
		{"chained none", func() (*optim.Schedule, error) { return optim.NewChainedScheduler(nil) }},
		{"chained other optimizer", func() (*optim.Schedule, error) {
			return optim.NewChainedScheduler([]*optim.Schedule{mk(o), mk(other)})
		}},
		{"chained stepped", func() (*optim.Schedule, error) { return optim.NewChainedScheduler([]*optim.Schedule{stepped}) }},
		{"constant factor above 1", func() (*optim.Schedule, error) { return optim.NewConstantLR(o, 1.5, 3) }},
		{"constant NaN factor", func() (*optim.Schedule, error) { return optim.NewConstantLR(o, math.NaN(), 3) }},
		{"constant zero iterations", func() (*optim.Schedule, error) { return optim.NewConstantLR(o, 0.5, 0) }},
		{"polynomial zero iterations", func() (*optim.Schedule, error) { return optim.NewPolynomialLR(o, 0, 1) }},
		{"polynomial negative power", func() (*optim.Schedule, error) { return optim.NewPolynomialLR(o, 5, -1) }},
		{"multiplicative nil factor", func() (*optim.Schedule, error) { return optim.NewMultiplicativeLR(o, nil) }},
		{"polynomial nil optimizer", func() (*optim.Schedule, error) { return optim.NewPolynomialLR(nil, 5, 1) }},
	}
	for _, tc := range tests {
		if s, err := tc.make(); !errors.Is(err, vram.ErrArgument) || s != nil {
			t.Errorf("%s: got %v, %v; want nil and an error matching vram.ErrArgument", tc.name, s, err)
		}
	}
}

// TestChainedSchedulerLimit checks that a chain with a OneCycleLR stops
// where the OneCycleLR does.
func TestChainedSchedulerLimit(t *testing.T) {
	o := twoGroups(t, []float64{0.1, 0.01})
	one, err := optim.NewOneCycleLR(o, 1, 4, optim.OneCycleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := optim.NewChainedScheduler([]*optim.Schedule{one})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		c.Step()
	}
	err = vram.Catch(c.Step)
	if !errors.Is(err, vram.ErrArgument) {
		t.Fatalf("a fifth Step: got %v, want a panic of kind vram.ErrArgument", err)
	}
}

// refPlateau is PyTorch's ReduceLROnPlateau, written out.
type refPlateau struct {
	cfg           optim.PlateauConfig
	best          float64
	bad, cooldown int
	lrs, mins     []float64
}

func (r *refPlateau) step(m float64) {
	var better bool
	th := r.cfg.Threshold
	switch {
	case !r.cfg.Max && !r.cfg.AbsThreshold:
		better = m < r.best*(1-th)
	case !r.cfg.Max:
		better = m < r.best-th
	case !r.cfg.AbsThreshold:
		better = m > r.best*(th+1)
	default:
		better = m > r.best+th
	}
	if better {
		r.best, r.bad = m, 0
	} else {
		r.bad++
	}
	if r.cooldown > 0 {
		r.cooldown--
		r.bad = 0
	}
	if r.bad > r.cfg.Patience {
		for i, old := range r.lrs {
			lr := math.Max(old*r.cfg.Factor, r.mins[i])
			if old-lr > r.cfg.Eps {
				r.lrs[i] = lr
			}
		}
		r.cooldown = r.cfg.Cooldown
		r.bad = 0
	}
}

func TestReduceLROnPlateauMatchesReference(t *testing.T) {
	// A loss that falls, stalls, wobbles, gets a NaN and falls again; and
	// its negation for mode max.
	var losses []float64
	for i := range 60 {
		l := 1 / float64(1+i)
		switch {
		case i >= 10 && i < 25:
			l = 0.09 + 0.001*math.Sin(float64(i))
		case i == 30:
			l = math.NaN()
		case i >= 25:
			l = 0.09 - 0.0004*float64(i-24)
		}
		losses = append(losses, l)
	}
	def := optim.DefaultPlateauConfig()
	with := func(f func(*optim.PlateauConfig)) optim.PlateauConfig {
		c := def
		f(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  optim.PlateauConfig
		neg  bool // feed -loss
	}{
		{"defaults", def, false},
		{"patience 2 cooldown 3", with(func(c *optim.PlateauConfig) { c.Patience, c.Cooldown = 2, 3 }), false},
		{"patience 0", with(func(c *optim.PlateauConfig) { c.Patience, c.Factor = 0, 0.5 }), false},
		{"abs threshold", with(func(c *optim.PlateauConfig) { c.Patience, c.AbsThreshold, c.Threshold = 1, true, 0.002 }), false},
		{"rel threshold 5%", with(func(c *optim.PlateauConfig) { c.Patience, c.Threshold = 1, 0.05 }), false},
		{"max rel", with(func(c *optim.PlateauConfig) { c.Max, c.Patience = true, 2 }), true},
		{"max abs cooldown", with(func(c *optim.PlateauConfig) {
			c.Max, c.AbsThreshold, c.Threshold, c.Patience, c.Cooldown = true, true, 0.001, 1, 2
		}), true},
		{"min rates per group", with(func(c *optim.PlateauConfig) { c.Patience, c.Factor, c.MinLRs = 0, 0.3, []float64{0.02, 1e-4} }), false},
		{"one min rate, big eps", with(func(c *optim.PlateauConfig) { c.Patience, c.MinLRs, c.Eps = 1, []float64{0.001}, 0.002 }), false},
	}
	bases := []float64{0.1, 0.004}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := twoGroups(t, bases)
			r, err := optim.NewReduceLROnPlateau(o, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ref := &refPlateau{cfg: tc.cfg, best: math.Inf(1), lrs: append([]float64(nil), bases...), mins: make([]float64, 2)}
			if tc.cfg.Max {
				ref.best = math.Inf(-1)
			}
			switch len(tc.cfg.MinLRs) {
			case 1:
				ref.mins = []float64{tc.cfg.MinLRs[0], tc.cfg.MinLRs[0]}
			case 2:
				copy(ref.mins, tc.cfg.MinLRs)
			}
			reductions := 0
			for i, l := range losses {
				if tc.neg {
					l = -l
				}
				if r.Step(l) {
					reductions++
				}
				ref.step(l)
				checkValues(t, fmt.Sprintf("step %d", i+1), r.LRs(), ref.lrs, 0)
				if b := r.Best(); b != ref.best && !(math.IsNaN(b) && math.IsNaN(ref.best)) {
					t.Fatalf("step %d: best %v, want %v", i+1, b, ref.best)
				}
			}
			if reductions == 0 {
				t.Errorf("no reduction in %d steps; the test checks nothing", len(losses))
			}
		})
	}
}

func TestReduceLROnPlateauState(t *testing.T) {
	cfg := optim.DefaultPlateauConfig()
	cfg.Patience, cfg.Cooldown = 1, 2
	o := twoGroups(t, []float64{0.1, 0.01})
	r, err := optim.NewReduceLROnPlateau(o, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Before any Step, Best is infinite and survives JSON.
	for _, m := range []float64{math.NaN(), 1, 0.5, 0.6, 0.7} {
		b, err := json.Marshal(r.State())
		if err != nil {
			t.Fatal(err)
		}
		var st optim.PlateauState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		o2 := twoGroups(t, groupLRs(o))
		r2, err := optim.NewReduceLROnPlateau(o2, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.LoadState(st); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if r2.State() != r.State() && !math.IsNaN(r.Best()) {
			t.Fatalf("state %+v after JSON %s, want %+v", r2.State(), b, r.State())
		}
		r.Step(m)
		r2.Step(m)
		checkValues(t, "rates", groupLRs(o2), groupLRs(o), 0)
	}
	bad := []optim.PlateauState{
		{Best: math.NaN()},
		{Best: math.Inf(-1)}, // mode min starts at +Inf
		{Best: 1, Steps: -1},
		{Best: 1, NumBadEpochs: -1},
		{Best: 1, CooldownLeft: 3},
	}
	for _, st := range bad {
		before := r.State()
		if err := r.LoadState(st); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("LoadState(%+v): got %v, want vram.ErrArgument", st, err)
		}
		if r.State() != before {
			t.Errorf("LoadState(%+v) changed the state", st)
		}
	}
	var st optim.PlateauState
	if err := json.Unmarshal([]byte(`{"best":"huge","last_epoch":1}`), &st); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("best \"huge\": got %v, want vram.ErrArgument", err)
	}
}

func TestReduceLROnPlateauRefusesBadConfig(t *testing.T) {
	o := twoGroups(t, []float64{0.1, 0.01})
	with := func(f func(*optim.PlateauConfig)) optim.PlateauConfig {
		c := optim.DefaultPlateauConfig()
		f(&c)
		return c
	}
	tests := map[string]optim.PlateauConfig{
		"factor 1":          with(func(c *optim.PlateauConfig) { c.Factor = 1 }),
		"negative factor":   with(func(c *optim.PlateauConfig) { c.Factor = -0.1 }),
		"NaN factor":        with(func(c *optim.PlateauConfig) { c.Factor = math.NaN() }),
		"negative patience": with(func(c *optim.PlateauConfig) { c.Patience = -1 }),
		"negative cooldown": with(func(c *optim.PlateauConfig) { c.Cooldown = -1 }),
		"NaN threshold":     with(func(c *optim.PlateauConfig) { c.Threshold = math.NaN() }),
		"negative eps":      with(func(c *optim.PlateauConfig) { c.Eps = -1 }),
		"three min rates":   with(func(c *optim.PlateauConfig) { c.MinLRs = []float64{0, 0, 0} }),
		"negative min rate": with(func(c *optim.PlateauConfig) { c.MinLRs = []float64{0, -1} }),
	}
	for name, cfg := range tests {
		if r, err := optim.NewReduceLROnPlateau(o, cfg); !errors.Is(err, vram.ErrArgument) || r != nil {
			t.Errorf("%s: got %v, %v; want an error matching vram.ErrArgument", name, r, err)
		}
	}
	if _, err := optim.NewReduceLROnPlateau(nil, optim.DefaultPlateauConfig()); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("nil optimizer: got %v", err)
	}
}

// TestSaveLoadKeepsInitialRate checks that a Schedule made after Load of
// an optimizer whose rates were scheduled takes the rates from before
// the schedule as its base, as PyTorch's initial_lr in param_groups
// gives.
func TestSaveLoadKeepsInitialRate(t *testing.T) {
	path := t.TempDir() + "/opt.safetensors"
	bases := []float64{0.1, 0.004}
	o := twoGroups(t, bases)
	s, err := optim.NewStepLR(o, 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	s.Step()
	s.Step()
	if err := optim.Save(o, path); err != nil {
		t.Fatal(err)
	}
	o2 := twoGroups(t, []float64{1, 1})
	if err := optim.Load(o2, path); err != nil {
		t.Fatal(err)
	}
	checkValues(t, "loaded rates", groupLRs(o2), []float64{0.025, 0.001}, 1e-15)
	s2, err := optim.NewStepLR(o2, 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, "base rates after load", s2.BaseLRs(), bases, 0)

	// A file without initial_lr (an optimizer never scheduled) clears it.
	o3 := twoGroups(t, []float64{0.3, 0.3})
	if err := optim.Save(o3, path); err != nil {
		t.Fatal(err)
	}
	if err := optim.Load(o2, path); err != nil {
		t.Fatal(err)
	}
	s3, err := optim.NewStepLR(o2, 1, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, "base rates after second load", s3.BaseLRs(), []float64{0.3, 0.3}, 0)
}

// TestOneCycleSetsInitialRate checks that a Schedule made after a
// OneCycleLR takes maxLR/DivFactor as its base, as PyTorch's OneCycleLR
// writes that rate into initial_lr.
func TestOneCycleSetsInitialRate(t *testing.T) {
	o := twoGroups(t, []float64{0.1, 0.004})
	if _, err := optim.NewOneCycleLR(o, 1, 10, optim.OneCycleOptions{DivFactor: 20}); err != nil {
		t.Fatal(err)
	}
	s, err := optim.NewExponentialLR(o, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, "base rates", s.BaseLRs(), []float64{0.05, 0.05}, 0)
}

// TestReduceLROnPlateauAddedGroup checks the minimum rate of a group
// added to the optimizer after the ReduceLROnPlateau was made: the one
// minimum of every group, 0 without one, and a refusal when the minimums
// were given by group, as PyTorch's.
func TestReduceLROnPlateauAddedGroup(t *testing.T) {
	tests := []struct {
		name    string
		mins    []float64
		want    []float64 // rates after two reductions by 0.1 from 0.1, 0.01 and 1
		refused bool
	}{
		{"no minimum", nil, []float64{1e-3, 1e-4, 0.01}, false},
		{"one minimum for every group", []float64{0.05}, []float64{0.05, 0.01, 0.05}, false},
		{"a minimum by group", []float64{0.05, 1e-3}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := optim.DefaultPlateauConfig()
			cfg.Patience, cfg.MinLRs = 0, tc.mins
			o := twoGroups(t, []float64{0.1, 0.01})
			r, err := optim.NewReduceLROnPlateau(o, cfg)
			if err != nil {
				t.Fatal(err)
			}
			r.Step(1)
			if err := o.AddParamGroup(optim.Group([]*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad())}, optim.WithLR(1))); err != nil {
				t.Fatal(err)
			}
			before := r.State()
			rates := groupLRs(o)
			err = vram.Catch(func() {
				r.Step(2)
				r.Step(3)
			})
			if tc.refused {
				if !errors.Is(err, vram.ErrArgument) || r.State() != before {
					t.Fatalf("got %v, state %+v (was %+v); want an error matching vram.ErrArgument and no change", err, r.State(), before)
				}
				checkValues(t, "rates", groupLRs(o), rates, 0)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkValues(t, "rates", groupLRs(o), tc.want, 1e-12)
		})
	}
}
