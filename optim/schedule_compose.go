package optim

import (
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// NewConstantLR returns a Schedule that multiplies the base rate by
// factor for the first totalIters steps and leaves it alone from then on
// (torch.optim.lr_scheduler.ConstantLR; PyTorch's defaults are 1/3 and
// 5). factor must be in [0, 1] and totalIters at least 1.
func NewConstantLR(opt Optimizer, factor float64, totalIters int) (*Schedule, error) {
	const op = "ConstantLR"
	if !(factor >= 0 && factor <= 1) {
		return nil, errorf(vram.ErrArgument, "optim: %s: factor must be between 0 and 1, got %v", op, factor)
	}
	if totalIters < 1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: total iterations must be at least 1, got %d", op, totalIters)
	}
	return newSchedule(op, opt, func(base float64, step int) float64 {
		if step < totalIters {
			return base * factor
		}
		return base
	}, func(lr, base float64, step int) float64 {
		switch {
		case step == 0:
			return lr * factor
		case step != totalIters:
			return lr
		case factor == 0: // PyTorch divides by zero here
			return base
		}
		return lr / factor
	})
}

// NewPolynomialLR returns a Schedule that decays the base rate to 0 over
// totalIters steps along a polynomial of degree power
// (torch.optim.lr_scheduler.PolynomialLR; PyTorch's defaults are 5 and
// 1): base·(1 − min(step, totalIters)/totalIters)^power. totalIters must
// be at least 1 and power finite and not negative.
func NewPolynomialLR(opt Optimizer, totalIters int, power float64) (*Schedule, error) {
	const op = "PolynomialLR"
	if totalIters < 1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: total iterations must be at least 1, got %d", op, totalIters)
	}
	if err := checkFactor(op, "power", power); err != nil {
		return nil, err
	}
	n := float64(totalIters)
	return newSchedule(op, opt, func(base float64, step int) float64 {
		return base * math.Pow(1-float64(min(step, totalIters))/n, power)
	}, func(lr, _ float64, step int) float64 {
		if step == 0 || step > totalIters {
			return lr
		}
		return lr * math.Pow((1-float64(step)/n)/(1-float64(step-1)/n), power)
	})
}

// NewMultiplicativeLR returns a Schedule that multiplies the rate by
// factor(step) at each Step (torch.optim.lr_scheduler.MultiplicativeLR):
// base·factor(1)·factor(2)···factor(step). A factor that makes a rate
// negative, NaN or infinite makes Step panic with an *vram.Error of kind
// vram.ErrArgument, as SetLR does. factor should depend on the step only:
// it may be called more than once for a step (for every step up to the
// one restored, when a state is loaded).
func NewMultiplicativeLR(opt Optimizer, factor func(step int) float64) (*Schedule, error) {
	const op = "MultiplicativeLR"
	if factor == nil {
		return nil, errorf(vram.ErrArgument, "optim: %s: nil factor function", op)
	}
	// The product of the factors of steps 1 to step, kept for the last
	// step, so that stepping calls factor once.
	type memo struct {
		step int
		prod float64
	}
	var last *memo
	f := func(step int) float64 {
		x := factor(step)
		if math.IsInf(x, 0) {
			return math.NaN() // refused by SetLR rather than held at the largest float64
		}
		return x
	}
	s, err := newSchedule(op, opt, func(base float64, step int) float64 {
		switch {
		case last != nil && last.step == step:
		case last != nil && last.step == step-1:
			last = &memo{step, last.prod * f(step)}
		default:
			last = &memo{0, 1}
			for e := 1; e <= step; e++ {
				last = &memo{e, last.prod * f(e)}
			}
		}
		return base * last.prod
	}, func(lr, _ float64, step int) float64 {
		if step == 0 {
			return lr
		}
		return lr * f(step)
	})
	if err != nil {
		return nil, err
	}
	s.replays = true
	return s, nil
}

// checkParts returns an error unless the schedules parts, at least one,
// are of one optimizer (of opt, when it is not nil), none of them stepped
// yet, and returns their optimizer.
func checkParts(op string, opt Optimizer, parts []*Schedule) (Optimizer, error) {
	if len(parts) == 0 {
		return nil, errorf(vram.ErrArgument, "optim: %s: no schedules", op)
	}
	for i, p := range parts {
		switch {
		case p == nil:
			return nil, errorf(vram.ErrArgument, "optim: %s: schedule %d is nil", op, i)
		case opt == nil:
			opt = p.opt
		case p.opt != opt:
			return nil, errorf(vram.ErrArgument, "optim: %s: schedule %d (%s) is of another optimizer", op, i, p.op)
		}
		if p.step != 0 {
			return nil, errorf(vram.ErrArgument, "optim: %s: schedule %d (%s) was already stepped %d times", op, i, p.op, p.step)
		}
	}
	return opt, nil
}

// NewSequentialLR returns a Schedule that runs the schedules parts one
// after the other (torch.optim.lr_scheduler.SequentialLR): parts[0] up to
// step milestones[0], where parts[1] takes over from its own step 0, and
// so on; at step s, the part that runs gives its rate of step s − m, m
// being the last milestone reached (0 before the first). Every part
// computes from the same base rates, the optimizer's rates when its first
// Schedule was made, as in PyTorch.
//
// The parts must be Schedules of opt that were never stepped; the new
// Schedule drives them, and they must not be stepped on their own. There
// must be one milestone fewer than parts, each positive and larger than
// the one before. Otherwise it returns an error of kind vram.ErrArgument,
// changing no rate.
func NewSequentialLR(opt Optimizer, parts []*Schedule, milestones []int) (*Schedule, error) {
	const op = "SequentialLR"
	if isNil(opt) {
		return nil, errorf(vram.ErrArgument, "optim: %s: nil optimizer", op)
	}
	if _, err := checkParts(op, opt, parts); err != nil {
		return nil, err
	}
	if len(milestones) != len(parts)-1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: %d milestones for %d schedules; want one fewer than schedules", op, len(milestones), len(parts))
	}
	for i, m := range milestones {
		if m < 1 || i > 0 && m <= milestones[i-1] {
			return nil, errorf(vram.ErrArgument, "optim: %s: milestones must be positive and increasing, got %v", op, milestones)
		}
	}
	ms := slices.Clone(milestones)
	ps := slices.Clone(parts)
	limit := 0 // a last part with a fixed number of steps ends the schedule
	if last := ps[len(ps)-1]; last.limit > 0 {
		limit = last.limit
		if len(ms) > 0 {
			limit += ms[len(ms)-1]
		}
	}
	// part returns the part that runs at step and the step it starts at.
	part := func(step int) (*Schedule, int) {
		k, _ := slices.BinarySearch(ms, step+1) // milestones <= step
		if k == 0 {
			return ps[0], 0
		}
		return ps[k], ms[k-1]
	}
	s, err := newGroupSchedule(op, opt, func(g int, base float64, step int) float64 {
		p, from := part(step)
		return p.rate(g, base, step-from)
	}, func(g int, lr, base float64, step int) float64 {
		// PyTorch starts the first part from the base rates, and each
		// later one at its milestone from its closed form (step(0)); in
		// between, the part's own step goes on from the rate it finds.
		p, from := part(step)
		if step == from || p.chain == nil {
			return p.rate(g, base, step-from)
		}
		return p.chain(g, lr, base, step-from)
	})
	if err != nil {
		return nil, err
	}
	s.limit = limit
	s.replays = slices.ContainsFunc(ps, func(p *Schedule) bool { return p.replays })
	if slices.ContainsFunc(ps, func(p *Schedule) bool { return p.momentum != nil }) {
		// The part of the step cycles the momentum, when it does.
		s.momentum = func(g, step int) (float64, bool) {
			p, from := part(step)
			if p.momentum == nil {
				return 0, false
			}
			return p.momentum(g, step-from)
		}
		s.setMomentum()
	}
	return s, nil
}

// NewChainedScheduler returns a Schedule that steps the schedules parts
// together, in order, each changing the rate the ones before it set
// (torch.optim.lr_scheduler.ChainedScheduler): chaining
// NewConstantLR(opt, 0.1, 3) and NewExponentialLR(opt, 0.9) gives
// base·0.1·0.9^s for the first three steps s and base·0.9^s after. Each
// part applies PyTorch's chainable rule (its get_lr) to the rate before
// it; LambdaLR and OneCycleLR, whose rules ignore it, set their own rate,
// overriding the parts before them.
//
// The parts must be Schedules of one optimizer that were never stepped;
// the new Schedule drives them, and they must not be stepped on their
// own. Otherwise it returns an error of kind vram.ErrArgument, changing
// no rate. A part with a fixed number of steps (OneCycleLR) limits the
// chain to that number.
func NewChainedScheduler(parts []*Schedule) (*Schedule, error) {
	const op = "ChainedScheduler"
	opt, err := checkParts(op, nil, parts)
	if err != nil {
		return nil, err
	}
	ps := slices.Clone(parts)
	limit := 0
	for _, p := range ps {
		if p.limit > 0 && (limit == 0 || p.limit < limit) {
			limit = p.limit
		}
	}
	// apply applies the rules of step e of every part to lr.
	apply := func(g int, lr, base float64, e int) float64 {
		for _, p := range ps {
			if p.chain != nil {
				lr = p.chain(g, lr, base, e)
			} else {
				lr = p.rate(g, base, e)
			}
		}
		return lr
	}
	// The rate of a step depends on the rates before it; last keeps the
	// last one computed for each group and base, so that stepping costs
	// one application, and loading a state replays the steps.
	type key struct {
		g    int
		base float64
	}
	type memo struct {
		step int
		lr   float64
	}
	last := map[key]memo{}
	s, err := newGroupSchedule(op, opt, func(g int, base float64, step int) float64 {
		m, ok := last[key{g, base}]
		switch {
		case ok && m.step == step:
			return m.lr
		case ok && m.step == step-1:
			m = memo{step, apply(g, m.lr, base, step)}
		default:
			m = memo{0, apply(g, base, base, 0)}
			for e := 1; e <= step; e++ {
				m = memo{e, apply(g, m.lr, base, e)}
			}
		}
		last[key{g, base}] = m
		return m.lr
	}, func(g int, lr, base float64, step int) float64 {
		if step == 0 { // the parts' rules of step 0 ran when they were made
			return apply(g, base, base, 0)
		}
		return apply(g, lr, base, step)
	})
	if err != nil {
		return nil, err
	}
	s.limit = limit
	s.replays = true // the rate of a step is that of the step before it, the parts' rules applied
	if slices.ContainsFunc(ps, func(p *Schedule) bool { return p.momentum != nil }) {
		// Each part that cycles the momentum sets it in turn, the last
		// one's holding, as the parts' steps do.
		s.momentum = func(g, step int) (m float64, ok bool) {
			for _, p := range ps {
				if p.momentum == nil {
					continue
				}
				if pm, pok := p.momentum(g, step); pok {
					m, ok = pm, true
				}
			}
			return m, ok
		}
		s.setMomentum()
	}
	return s, nil
}
