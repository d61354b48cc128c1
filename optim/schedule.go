package optim

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// Schedule sets an optimizer's learning rate from a count of steps, as the
// schedulers of torch.optim.lr_scheduler do. Its base rate is the
// optimizer's rate when the Schedule is made, or, of this package's
// optimizers, when the optimizer's first Schedule was made (PyTorch's
// initial_lr, which [Save] and [Load] keep), so that a cosine schedule
// made after a warm-up schedule decays from the rate the warm-up leads to.
// Making it already sets the rate for step 0 (LinearLR's warm-up starts
// below the base at once; a schedule whose rule leaves the rate alone at
// step 0 keeps the rate another Schedule set), and each call of Step
// counts one more step (an epoch or a batch, as the caller chooses) and
// sets the rate for it:
//
//	sched, err := optim.NewCosineAnnealingLR(opt, epochs, 0)
//	for range epochs {
//		... train an epoch: opt.Step() per batch ...
//		sched.Step()
//	}
//
// The rate is computed in closed form from the step count, so it is the
// same however often LR is read. A rate changed since the Schedule set it
// (by another Schedule of the same optimizer, a [ReduceLROnPlateau] or
// SetLR) goes on from where it is at the next Step, by PyTorch's
// chainable rule (its get_lr), as PyTorch's step does: two schedules
// stepped one after the other compose, a LinearLR warm-up that has ended
// leaves the rates alone, and ExponentialLR multiplies whatever rate it
// finds. LambdaLR, OneCycleLR and CyclicLR, whose rules ignore the rate
// they find, set their own; SequentialLR and ChainedScheduler follow the
// rules of their parts. OneCycleLR and CyclicLR also set the momentum
// (or beta1) of every group at each step, as PyTorch's do by default.
//
// Of a [GroupedOptimizer] (the optimizers of this package), a Schedule
// sets the rate of every parameter group from the group's own base rate
// (PyTorch's base_lrs), so groups
// keep their ratios: a group at a tenth of the others' rate stays at a
// tenth. A group added after the Schedule was made takes its rate at the
// next Step as its base. Of any other Optimizer, it sets the one rate
// through SetLR.
//
// To resume a run, make the Schedule again after loading the optimizer
// ([Load]) and give it the [ScheduleState] the stopped run's
// [Schedule.State] returned ([Schedule.LoadState]): the loaded rates are
// already scheduled, so they cannot serve as base rates. A Schedule is
// not safe for concurrent use.
type Schedule struct {
	opt   Optimizer
	bases []float64 // by group
	step  int
	// rate is the closed form: the rate of group g at step from its base.
	rate func(g int, base float64, step int) float64
	// chain is PyTorch's get_lr, the rate of group g at step from the
	// rate lr of the step before (of step 0: the rate before the
	// Schedule was made), so that schedules compose as PyTorch's do; nil
	// for a schedule whose get_lr ignores lr (LambdaLR, OneCycleLR,
	// CyclicLR), rate serving instead.
	chain func(g int, lr, base float64, step int) float64
	op    string    // the schedule's name, for errors
	limit int       // the most steps the schedule has rates for; 0: no limit
	last  []float64 // by group: the rates the Schedule set last
	// chaining is by group: whether its rate has left the closed form
	// (changed by other code, or by the rule of step 0 applied to a rate
	// another Schedule set), so that Step applies the chainable rule.
	chaining []bool
	// momentum, when the schedule cycles the momentum (OneCycleLR and
	// CyclicLR, SequentialLR and ChainedScheduler of them), is the
	// momentum (or beta1) of group g at step, and whether the step sets
	// one; nil otherwise.
	momentum func(g, step int) (float64, bool)
	// replays is set when rate computes the rate of a step it has not
	// seen by going through every step before it (MultiplicativeLR,
	// ChainedScheduler, and a SequentialLR of one), so that LoadState
	// takes no more than maxReplaySteps.
	replays bool
}

// maxSteps is the largest step count a loaded state may hold: 2^53, the
// largest whole number float64 counts exactly to, far beyond any run, so
// that the Steps after it cannot count past the largest int.
const maxSteps = 1 << 53

// maxReplaySteps is the largest step count [Schedule.LoadState] takes of
// a Schedule that replays every step to compute a rate: some 67 million
// steps, about a second of replay for each group, where a crafted count
// would keep LoadState replaying for hours.
const maxReplaySteps = 1 << 26

// newSchedule makes a Schedule of opt with the rate function rate and
// the chainable rule chain (nil for none) and sets the rate of step 0:
// with a chain, the rule of step 0 applied to the optimizer's rates, as
// PyTorch's constructors do (so that a Schedule made after another
// starts from the rates the other set).
func newSchedule(op string, opt Optimizer, rate func(base float64, step int) float64, chain func(lr, base float64, step int) float64) (*Schedule, error) {
	var gchain func(int, float64, float64, int) float64
	if chain != nil {
		gchain = func(_ int, lr, base float64, step int) float64 { return chain(lr, base, step) }
	}
	return newGroupSchedule(op, opt, func(_ int, base float64, step int) float64 { return rate(base, step) }, gchain)
}

// newGroupSchedule is newSchedule for rules that differ by group, given
// the group's number.
func newGroupSchedule(op string, opt Optimizer, rate func(g int, base float64, step int) float64, chain func(g int, lr, base float64, step int) float64) (*Schedule, error) {
	if isNil(opt) {
		return nil, errorf(vram.ErrArgument, "optim: %s: nil optimizer", op)
	}
	s := &Schedule{opt: opt, rate: rate, op: op, chain: chain}
	lrs := s.rates()
	if chain != nil {
		cur := s.current()
		s.chaining = make([]bool, len(lrs))
		for i, closed := range lrs {
			if lr := finite(chain(i, cur[i], s.bases[i], 0)); !near(lr, closed) {
				lrs[i], s.chaining[i] = lr, true
			}
		}
	}
	for i, lr := range lrs {
		if !(lr >= 0) {
			what := "the rate of step 0"
			if len(lrs) > 1 {
				what = fmt.Sprintf("the rate of group %d at step 0", i)
			}
			return nil, errorf(vram.ErrArgument, "optim: %s: %s is %v; it must be finite and not negative", op, what, lr)
		}
	}
	s.set(lrs)
	return s, nil
}

// current returns the optimizer's rates by group.
func (s *Schedule) current() []float64 { return groupRates(s.opt) }

// groupRates returns opt's rates by group, one for an Optimizer that is
// not a GroupedOptimizer.
func groupRates(opt Optimizer) []float64 {
	g, grouped := opt.(GroupedOptimizer)
	if !grouped {
		return []float64{opt.LR()}
	}
	lrs := make([]float64, g.NumGroups())
	for i := range lrs {
		lrs[i] = g.GroupLR(i)
	}
	return lrs
}

// near reports whether the rate a is b but for rounding: a rule that
// gives the rate of the closed form so nearly leaves the closed form in
// charge.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }

// finite returns lr, or the largest float64 for +Inf.
func finite(lr float64) float64 {
	if math.IsInf(lr, 1) {
		return math.MaxFloat64
	}
	return lr
}

// rates returns the rate of every group for the current step, taking the
// rate of a group the Schedule has not seen before as its base. A rate
// that overflows to +Inf (an ExponentialLR with a gamma above 1, run long
// enough) is held at the largest float64.
func (s *Schedule) rates() []float64 {
	n := 1
	g, grouped := s.opt.(GroupedOptimizer)
	if grouped {
		n = g.NumGroups()
	}
	ir, hasInitial := s.opt.(initialRated)
	for i := len(s.bases); i < n; i++ {
		switch {
		case hasInitial:
			b, ok := ir.initialLR(i)
			if !ok {
				b = g.GroupLR(i)
				ir.setInitialLR(i, b)
			}
			s.bases = append(s.bases, b)
		case grouped:
			s.bases = append(s.bases, g.GroupLR(i))
		default:
			s.bases = append(s.bases, s.opt.LR())
		}
	}
	lrs := make([]float64, n)
	for i := range lrs {
		lrs[i] = finite(s.rate(i, s.bases[i], s.step))
	}
	return lrs
}

// initialRated is an optimizer that keeps the rate of each group from
// when its first Schedule was made (PyTorch's initial_lr), which later
// Schedules take as their base rates: the optimizers of this package.
type initialRated interface {
	GroupedOptimizer
	initialLR(i int) (float64, bool)
	setInitialLR(i int, lr float64)
}

// set gives the optimizer the rates lrs, after checking them all, so that
// a bad one changes none, and records them as the last set.
func (s *Schedule) set(lrs []float64) {
	for _, lr := range lrs {
		checkLR(lr)
	}
	s.last = slices.Clone(lrs)
	g, grouped := s.opt.(GroupedOptimizer)
	if !grouped {
		s.opt.SetLR(lrs[0])
		return
	}
	for i, lr := range lrs {
		g.SetGroupLR(i, lr)
	}
}

// Step counts one step and sets the optimizer's rates for it (PyTorch's
// scheduler.step()). A rate function that gives a negative or NaN rate
// makes it panic with an *vram.Error of kind vram.ErrArgument, as SetLR
// does, leaving every rate as it was; the step still counts.
//
// Of a schedule with a fixed number of steps ([NewOneCycleLR]), a Step
// beyond that number panics with an *vram.Error of kind vram.ErrArgument,
// as PyTorch raises, counting nothing and changing no rate.
func (s *Schedule) Step() {
	if s.limit > 0 && s.step >= s.limit {
		panic(&vram.Error{Op: "schedule_step", Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("%s: tried to step %d times; the schedule has %d steps in all", s.op, s.step+1, s.limit)})
	}
	s.step++
	lrs := s.rates()
	if s.chain != nil {
		// A rate changed since the Schedule set it (by another Schedule,
		// a ReduceLROnPlateau, SetLR) goes on from where it is, by the
		// chainable rule, as PyTorch's step does, and keeps doing so.
		chaining := slices.Clone(s.chaining)
		for i, cur := range s.current() {
			if i >= len(lrs) || i >= len(s.last) {
				break
			}
			if i < len(chaining) && chaining[i] || cur != s.last[i] {
				lrs[i] = finite(s.chain(i, cur, s.bases[i], s.step))
				for len(chaining) <= i {
					chaining = append(chaining, false)
				}
				chaining[i] = true
			}
		}
		s.set(lrs)
		s.chaining = chaining
		s.setMomentum()
		return
	}
	s.set(lrs)
	s.setMomentum()
}

// Steps returns how many times Step was called (PyTorch's last_epoch).
func (s *Schedule) Steps() int { return s.step }

// LR returns the rate the Schedule set last, that of the first group of a
// GroupedOptimizer.
func (s *Schedule) LR() float64 { return s.LRs()[0] }

// LRs returns the rates the Schedule set last, one for each of the
// optimizer's groups, one for an Optimizer that is not a GroupedOptimizer
// (get_last_lr()): when other code (another Schedule) changed the rates
// since, they are not the optimizer's rates. A group added since is given
// its rate.
func (s *Schedule) LRs() []float64 {
	lrs := s.current()
	copy(lrs, s.last)
	return lrs
}

// BaseLR returns the optimizer's rate when the Schedule was made, that of
// the first group of a GroupedOptimizer.
func (s *Schedule) BaseLR() float64 { return s.bases[0] }

// BaseLRs returns the base rate of each group the Schedule has seen
// (PyTorch's base_lrs).
func (s *Schedule) BaseLRs() []float64 { return slices.Clone(s.bases) }

// ScheduleState is a [Schedule]'s state, for checkpoints (the part of
// PyTorch's scheduler.state_dict() that is not its settings). It encodes
// to JSON with PyTorch's field names.
type ScheduleState struct {
	Steps   int       `json:"last_epoch"` // how many times Step was called
	BaseLRs []float64 `json:"base_lrs"`   // the base rate of each group
	// LastLRs are the rates the Schedule set last (get_last_lr()), which
	// differ from those of its closed form when other code changed the
	// rates (schedules stepped together); nil in states saved before they
	// were kept, the closed form serving then.
	LastLRs []float64 `json:"_last_lr,omitempty"`
}

// State returns the Schedule's state, for a checkpoint beside the
// optimizer's ([Save]).
func (s *Schedule) State() ScheduleState {
	return ScheduleState{Steps: s.step, BaseLRs: s.BaseLRs(), LastLRs: s.LRs()}
}

// LoadState restores a state from [Schedule.State] into a Schedule made
// again with the same settings, so that a resumed run goes on with the
// rates of the run that stopped: it takes st's base rates and step count
// and sets the optimizer's rates to st's last rates (those of the closed
// form for that step, when st has none). Of schedules of one optimizer
// stepped together, load the states in the order they are stepped, so
// that the last sets the rates the run stopped with. It returns an error
// of kind vram.ErrArgument, changing nothing, for a negative step count
// or one above 2^53 (above 2^26 for a schedule that replays every step
// to compute a rate: MultiplicativeLR, ChainedScheduler and a
// SequentialLR of one), a base or last rate that is negative, NaN or
// infinite, a number of base or last rates that is not the optimizer's
// number of groups, or a rate for that step that the optimizer would
// refuse.
func (s *Schedule) LoadState(st ScheduleState) error {
	n := 1
	if g, ok := s.opt.(GroupedOptimizer); ok {
		n = g.NumGroups()
	}
	switch {
	case st.Steps < 0:
		return errorf(vram.ErrArgument, "optim: schedule: load state: step count %d is negative", st.Steps)
	case st.Steps > maxSteps:
		return errorf(vram.ErrArgument, "optim: schedule: load state: step count %d is above 2^53", st.Steps)
	case s.replays && st.Steps > maxReplaySteps:
		return errorf(vram.ErrArgument, "optim: schedule: load state: step count %d is above 2^26, the most steps %s replays to restore a rate", st.Steps, s.op)
	case s.limit > 0 && st.Steps > s.limit:
		return errorf(vram.ErrArgument, "optim: schedule: load state: step count %d is past the %d steps of %s", st.Steps, s.limit, s.op)
	case len(st.BaseLRs) != n:
		return errorf(vram.ErrArgument, "optim: schedule: load state: %d base rates for %d parameter groups", len(st.BaseLRs), n)
	case st.LastLRs != nil && len(st.LastLRs) != n:
		return errorf(vram.ErrArgument, "optim: schedule: load state: %d last rates for %d parameter groups", len(st.LastLRs), n)
	}
	for i, b := range st.BaseLRs {
		if err := checkRate(b); err != nil {
			return fmt.Errorf("optim: schedule: load state: group %d: %w", i, err)
		}
	}
	for i, b := range st.LastLRs {
		if err := checkRate(b); err != nil {
			return fmt.Errorf("optim: schedule: load state: last rate of group %d: %w", i, err)
		}
	}
	old := *s
	s.bases, s.step = slices.Clone(st.BaseLRs), st.Steps
	lrs := s.rates()
	for i, lr := range lrs {
		if !(lr >= 0) {
			*s = old
			return errorf(vram.ErrArgument, "optim: schedule: load state: the rate of group %d at step %d is %v", i, st.Steps, lr)
		}
	}
	s.chaining = nil
	if st.LastLRs != nil && s.chain != nil {
		s.chaining = make([]bool, n)
		for i, closed := range lrs {
			if lr := st.LastLRs[i]; !near(lr, closed) {
				lrs[i], s.chaining[i] = lr, true
			}
		}
	}
	s.set(lrs)
	s.setMomentum()
	if ir, ok := s.opt.(initialRated); ok {
		for i, b := range st.BaseLRs {
			ir.setInitialLR(i, b)
		}
	}
	return nil
}

// checkFactor returns an error unless v is finite and not negative.
func checkFactor(op, name string, v float64) error {
	if !(v >= 0) || math.IsInf(v, 1) {
		return errorf(vram.ErrArgument, "optim: %s: %s must be finite and not negative, got %v", op, name, v)
	}
	return nil
}

// NewStepLR returns a Schedule that multiplies the base rate by gamma
// every stepSize steps (torch.optim.lr_scheduler.StepLR): base ·
// gamma^⌊step/stepSize⌋. stepSize must be at least 1.
func NewStepLR(opt Optimizer, stepSize int, gamma float64) (*Schedule, error) {
	const op = "StepLR"
	if stepSize < 1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: step size must be at least 1, got %d", op, stepSize)
	}
	if err := checkFactor(op, "gamma", gamma); err != nil {
		return nil, err
	}
	return newSchedule(op, opt, func(base float64, step int) float64 {
		return base * math.Pow(gamma, float64(step/stepSize))
	}, func(lr, _ float64, step int) float64 {
		if step == 0 || step%stepSize != 0 {
			return lr
		}
		return lr * gamma
	})
}

// NewMultiStepLR returns a Schedule that multiplies the base rate by gamma
// at each of the milestones (torch.optim.lr_scheduler.MultiStepLR): base ·
// gamma^(milestones reached), a milestone m being reached from step m on.
// Milestones must be positive; they are sorted, and one given twice counts
// twice, as in PyTorch.
func NewMultiStepLR(opt Optimizer, milestones []int, gamma float64) (*Schedule, error) {
	const op = "MultiStepLR"
	ms := slices.Clone(milestones)
	slices.Sort(ms)
	if len(ms) > 0 && ms[0] < 1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: milestones must be positive, got %d", op, ms[0])
	}
	if err := checkFactor(op, "gamma", gamma); err != nil {
		return nil, err
	}
	return newSchedule(op, opt, func(base float64, step int) float64 {
		reached, _ := slices.BinarySearch(ms, step+1) // milestones <= step
		return base * math.Pow(gamma, float64(reached))
	}, func(lr, _ float64, step int) float64 {
		from, _ := slices.BinarySearch(ms, step)
		to, _ := slices.BinarySearch(ms, step+1)
		return lr * math.Pow(gamma, float64(to-from)) // gamma once for each time step is a milestone
	})
}

// NewExponentialLR returns a Schedule that multiplies the rate by gamma
// every step (torch.optim.lr_scheduler.ExponentialLR): base · gamma^step.
func NewExponentialLR(opt Optimizer, gamma float64) (*Schedule, error) {
	const op = "ExponentialLR"
	if err := checkFactor(op, "gamma", gamma); err != nil {
		return nil, err
	}
	return newSchedule(op, opt, func(base float64, step int) float64 {
		return base * math.Pow(gamma, float64(step))
	}, func(lr, _ float64, step int) float64 {
		if step == 0 {
			return lr
		}
		return lr * gamma
	})
}

// NewCosineAnnealingLR returns a Schedule that follows half a cosine from
// the base rate down to etaMin over tMax steps
// (torch.optim.lr_scheduler.CosineAnnealingLR, without restarts): etaMin +
// (base − etaMin)·(1 + cos(π·step/tMax))/2. Past tMax steps the cosine
// goes on, rising again, as PyTorch's does. tMax must be at least 1.
func NewCosineAnnealingLR(opt Optimizer, tMax int, etaMin float64) (*Schedule, error) {
	const op = "CosineAnnealingLR"
	if tMax < 1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: T_max must be at least 1, got %d", op, tMax)
	}
	if err := checkFactor(op, "eta_min", etaMin); err != nil {
		return nil, err
	}
	return newSchedule(op, opt, func(base float64, step int) float64 {
		return etaMin + (base-etaMin)*(1+math.Cos(math.Pi*float64(step)/float64(tMax)))/2
	}, func(lr, base float64, step int) float64 {
		t := float64(tMax)
		switch {
		case step == 0:
			return lr
		case (step-1-tMax)%(2*tMax) == 0:
			return lr + (base-etaMin)*(1-math.Cos(math.Pi/t))/2
		}
		return (1+math.Cos(math.Pi*float64(step)/t))/(1+math.Cos(math.Pi*float64(step-1)/t))*(lr-etaMin) + etaMin
	})
}

// NewLinearLR returns a Schedule that scales the base rate by a factor
// going linearly from startFactor to endFactor over totalIters steps and
// staying there (torch.optim.lr_scheduler.LinearLR, the usual warm-up:
// PyTorch's defaults are 1/3, 1 and 5). startFactor must be in (0, 1],
// endFactor in [0, 1] and totalIters at least 1.
func NewLinearLR(opt Optimizer, startFactor, endFactor float64, totalIters int) (*Schedule, error) {
	const op = "LinearLR"
	if !(startFactor > 0 && startFactor <= 1) {
		return nil, errorf(vram.ErrArgument, "optim: %s: start factor must be greater than 0 and at most 1, got %v", op, startFactor)
	}
	if !(endFactor >= 0 && endFactor <= 1) {
		return nil, errorf(vram.ErrArgument, "optim: %s: end factor must be between 0 and 1, got %v", op, endFactor)
	}
	if totalIters < 1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: total iterations must be at least 1, got %d", op, totalIters)
	}
	return newSchedule(op, opt, func(base float64, step int) float64 {
		t := float64(min(step, totalIters)) / float64(totalIters)
		return base * (startFactor + (endFactor-startFactor)*t)
	}, func(lr, _ float64, step int) float64 {
		switch {
		case step == 0:
			return lr * startFactor
		case step > totalIters:
			return lr
		}
		d := endFactor - startFactor
		return lr * (1 + d/(float64(totalIters)*startFactor+float64(step-1)*d))
	})
}

// NewLambdaLR returns a Schedule that sets the rate to base · factor(step)
// (torch.optim.lr_scheduler.LambdaLR). A factor that returns a negative
// number, NaN or +Inf is refused: for step 0 the constructor returns an
// error, and later a Step panics with an *vram.Error of kind
// vram.ErrArgument, as SetLR does.
func NewLambdaLR(opt Optimizer, factor func(step int) float64) (*Schedule, error) {
	const op = "LambdaLR"
	if factor == nil {
		return nil, errorf(vram.ErrArgument, "optim: %s: nil factor function", op)
	}
	return newSchedule(op, opt, func(base float64, step int) float64 {
		f := factor(step)
		if math.IsInf(f, 1) {
			return math.NaN() // refused by SetLR rather than held at the largest float64
		}
		return base * f
	}, nil)
}

// OneCycleOptions holds the settings of [NewOneCycleLR] besides the peak
// rate and the number of steps, with PyTorch's names. The zero value
// means PyTorch's defaults.
type OneCycleOptions struct {
	// PctStart is the fraction of the steps spent raising the rate, in
	// (0, 1]; 0 means 0.3.
	PctStart float64
	// Linear anneals along straight lines instead of cosines
	// (anneal_strategy='linear').
	Linear bool
	// DivFactor sets the starting rate, maxLR/DivFactor; 0 means 25.
	DivFactor float64
	// FinalDivFactor sets the final rate, maxLR/DivFactor/FinalDivFactor;
	// 0 means 1e4.
	FinalDivFactor float64
	// ThreePhase brings the rate back down to the starting rate before
	// annealing it to the final one (three_phase=True).
	ThreePhase bool
	// BaseMomentum and MaxMomentum bound the momentum, which cycles
	// inversely to the rate: MaxMomentum at the starting rate,
	// BaseMomentum at the peak (base_momentum, max_momentum). Each is in
	// [0, 1); 0 means 0.85 and 0.95.
	BaseMomentum, MaxMomentum float64
	// NoCycleMomentum leaves the momentum alone (cycle_momentum=False),
	// as an optimizer without a momentum or beta1 needs.
	NoCycleMomentum bool
}

// NewOneCycleLR returns a Schedule of the 1cycle policy
// (torch.optim.lr_scheduler.OneCycleLR): over totalSteps steps the rate
// of every group rises from maxLR/DivFactor to maxLR, then falls to
// maxLR/DivFactor/FinalDivFactor, along cosines (or lines), with
// PyTorch's phase boundaries, so that its rate at each step is the one
// PyTorch computes. The schedule is meant to be stepped after every
// batch, totalSteps times in all (once after each of totalSteps
// optimizer steps, the last rate going unused); one Step more panics
// with an *vram.Error of kind vram.ErrArgument, as PyTorch raises. Its base rates (BaseLRs) are the starting rates.
//
// The last rate, after the totalSteps-th Step, is PyTorch's too: the
// cosine a little past its end; with Linear, where PyTorch's line would
// go below the final rate (to a negative one for a short phase), it
// stays at the final rate.
//
// As PyTorch's does by default, it cycles the momentum inversely to the
// rate (cycle_momentum=True), from o.MaxMomentum down to o.BaseMomentum
// while the rate rises and back while it falls (held at MaxMomentum in a
// third phase), along the same cosines or lines: the momentum of SGD and
// RMSprop, the beta1 of Adam, AdamW, Adamax, NAdam and RAdam, in every
// group, set at each Step (so that [Save] keeps it) and when the
// Schedule is made (an SGD without momentum gets one, as in PyTorch).
// Other optimizers are refused unless o.NoCycleMomentum is set.
//
// totalSteps must be at least 1, maxLR finite and positive, and o's
// settings as documented; otherwise it returns an error of kind
// vram.ErrArgument, changing no rate.
func NewOneCycleLR(opt Optimizer, maxLR float64, totalSteps int, o OneCycleOptions) (*Schedule, error) {
	const op = "OneCycleLR"
	if isNil(opt) {
		return nil, errorf(vram.ErrArgument, "optim: %s: nil optimizer", op)
	}
	if o.PctStart == 0 {
		o.PctStart = 0.3
	}
	if o.DivFactor == 0 {
		o.DivFactor = 25
	}
	if o.FinalDivFactor == 0 {
		o.FinalDivFactor = 1e4
	}
	switch {
	case totalSteps < 1:
		return nil, errorf(vram.ErrArgument, "optim: %s: total steps must be at least 1, got %d", op, totalSteps)
	case !(maxLR > 0) || math.IsInf(maxLR, 1):
		return nil, errorf(vram.ErrArgument, "optim: %s: max rate must be finite and positive, got %v", op, maxLR)
	case !(o.PctStart > 0 && o.PctStart <= 1):
		return nil, errorf(vram.ErrArgument, "optim: %s: pct_start must be in (0, 1], got %v", op, o.PctStart)
	case !(o.DivFactor > 0) || math.IsInf(o.DivFactor, 1):
		return nil, errorf(vram.ErrArgument, "optim: %s: div factor must be finite and positive, got %v", op, o.DivFactor)
	case !(o.FinalDivFactor > 0) || math.IsInf(o.FinalDivFactor, 1):
		return nil, errorf(vram.ErrArgument, "optim: %s: final div factor must be finite and positive, got %v", op, o.FinalDivFactor)
	}
	var mBase, mMax float64
	if !o.NoCycleMomentum {
		var err error
		if mBase, mMax, err = cycleMomentum(op, opt, o.BaseMomentum, o.MaxMomentum, 0.85, 0.95); err != nil {
			return nil, err
		}
	}
	initial := maxLR / o.DivFactor
	final := initial / o.FinalDivFactor
	// A phase anneals the rate from lr[0] to lr[1] and the momentum from
	// m[0] to m[1] until its end step.
	type phase struct {
		end   float64
		lr, m [2]float64
	}
	total := float64(totalSteps)
	phases := []phase{{o.PctStart*total - 1, [2]float64{initial, maxLR}, [2]float64{mMax, mBase}},
		{total - 1, [2]float64{maxLR, final}, [2]float64{mBase, mMax}}}
	if o.ThreePhase {
		phases = []phase{{o.PctStart*total - 1, [2]float64{initial, maxLR}, [2]float64{mMax, mBase}},
			{2*o.PctStart*total - 2, [2]float64{maxLR, initial}, [2]float64{mBase, mMax}},
			{total - 1, [2]float64{initial, final}, [2]float64{mMax, mMax}}}
	}
	anneal := func(ends [2]float64, pct float64) float64 {
		from, to := ends[0], ends[1]
		if o.Linear {
			// The last rate, one step past the cycle, where PyTorch's
			// line goes on below the final rate (to a negative one, when
			// the phase is short), stays at the final rate; the momentum
			// likewise stays at its bound.
			return (to-from)*min(pct, 1) + from
		}
		return to + (from-to)/2*(1+math.Cos(math.Pi*pct))
	}
	// at returns the phase of step and how far into it the step is.
	at := func(step int) (phase, float64) {
		start := 0.0
		for i, ph := range phases {
			if float64(step) <= ph.end || i == len(phases)-1 {
				pct := 0.0 // a phase of no length (where PyTorch divides by zero) starts at its start
				if ph.end != start {
					pct = (float64(step) - start) / (ph.end - start)
				}
				return ph, pct
			}
			start = ph.end
		}
		panic("unreachable")
	}
	s, err := newSchedule(op, opt, func(_ float64, step int) float64 {
		ph, pct := at(step)
		return anneal(ph.lr, pct)
	}, nil)
	if err != nil {
		return nil, err
	}
	if !o.NoCycleMomentum {
		s.momentum = func(_, step int) (float64, bool) {
			ph, pct := at(step)
			return anneal(ph.m, pct), true
		}
		s.setMomentum()
	}
	s.limit = totalSteps
	ir, hasInitial := opt.(initialRated)
	for i := range s.bases {
		s.bases[i] = initial
		if hasInitial {
			ir.setInitialLR(i, initial) // PyTorch's OneCycleLR writes initial_lr
		}
	}
	return s, nil
}
