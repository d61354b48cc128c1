package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// CyclicMode is the shape of the cycles of [NewCyclicLR] (PyTorch's
// mode).
type CyclicMode int

const (
	// Triangular cycles between the base and the maximum rate, the same
	// every cycle ('triangular').
	Triangular CyclicMode = iota
	// Triangular2 halves the height of each cycle ('triangular2').
	Triangular2
	// ExpRange scales the height by gamma^step ('exp_range').
	ExpRange
)

// CyclicOptions holds the settings of [NewCyclicLR] besides the base and
// maximum rates, with PyTorch's names. The zero value means PyTorch's
// defaults.
type CyclicOptions struct {
	// StepSizeUp is the number of steps from the base rate to the
	// maximum; 0 means 2000.
	StepSizeUp int
	// StepSizeDown is the number of steps back down; 0 means StepSizeUp.
	StepSizeDown int
	// Mode is the shape of the cycles, ignored when ScaleFn is set.
	Mode CyclicMode
	// Gamma is ExpRange's factor; 0 means 1.
	Gamma float64
	// ScaleFn, when set, scales the height of the cycles instead of
	// Mode: it is given the number of the cycle (from 1), or the step
	// count with ScaleByIterations (scale_fn and scale_mode).
	ScaleFn func(x float64) float64
	// ScaleByIterations gives ScaleFn the step count rather than the
	// cycle (scale_mode='iterations').
	ScaleByIterations bool
	// BaseMomentum and MaxMomentum bound the momentum, which cycles
	// inversely to the rate: MaxMomentum at the base rate, BaseMomentum
	// at the top of a full cycle (base_momentum, max_momentum). Each is
	// in [0, 1); 0 means 0.8 and 0.9.
	BaseMomentum, MaxMomentum float64
	// NoCycleMomentum leaves the momentum alone (cycle_momentum=False),
	// as an optimizer without a momentum or beta1 needs.
	NoCycleMomentum bool
}

// NewCyclicLR returns a Schedule that cycles every group's rate between
// baseLR and maxLR (torch.optim.lr_scheduler.CyclicLR), going up
// linearly over StepSizeUp steps and down over StepSizeDown, the height
// of each cycle scaled as o's Mode or ScaleFn says. Making it sets every
// group's rate to baseLR, as PyTorch does, and its base rates are baseLR.
// It is meant to be stepped after every batch.
//
// As PyTorch's does by default, it cycles the momentum inversely to the
// rate (cycle_momentum=True): MaxMomentum − (MaxMomentum −
// BaseMomentum)·(the rate's fraction of its height)·(its scale), the
// momentum of SGD and RMSprop, the beta1 of Adam, AdamW, Adamax, NAdam
// and RAdam, in every group, set at each Step (so that [Save] keeps it)
// and when the Schedule is made. Other optimizers are refused unless
// o.NoCycleMomentum is set.
//
// baseLR and maxLR must be finite and not negative, step sizes not
// negative, Gamma finite and positive, Mode one of the three, and o's
// momentum bounds as documented; otherwise it returns an error of kind
// vram.ErrArgument, changing no rate. A ScaleFn that returns a
// value that makes a rate negative or NaN makes Step panic, as with
// [NewLambdaLR].
func NewCyclicLR(opt Optimizer, baseLR, maxLR float64, o CyclicOptions) (*Schedule, error) {
	const op = "CyclicLR"
	if isNil(opt) {
		return nil, errorf(vram.ErrArgument, "optim: %s: nil optimizer", op)
	}
	if o.StepSizeUp == 0 {
		o.StepSizeUp = 2000
	}
	if o.StepSizeDown == 0 {
		o.StepSizeDown = o.StepSizeUp
	}
	if o.Gamma == 0 {
		o.Gamma = 1
	}
	if err := checkFactor(op, "base_lr", baseLR); err != nil {
		return nil, err
	}
	if err := checkFactor(op, "max_lr", maxLR); err != nil {
		return nil, err
	}
	switch {
	case o.StepSizeUp < 0 || o.StepSizeDown < 0:
		return nil, errorf(vram.ErrArgument, "optim: %s: step sizes must be positive, got %d up and %d down", op, o.StepSizeUp, o.StepSizeDown)
	case !(o.Gamma > 0) || math.IsInf(o.Gamma, 1):
		return nil, errorf(vram.ErrArgument, "optim: %s: gamma must be finite and positive, got %v", op, o.Gamma)
	case o.ScaleFn == nil && (o.Mode < Triangular || o.Mode > ExpRange):
		return nil, errorf(vram.ErrArgument, "optim: %s: unknown mode %d", op, o.Mode)
	}
	var mBase, mMax float64
	if !o.NoCycleMomentum {
		var err error
		if mBase, mMax, err = cycleMomentum(op, opt, o.BaseMomentum, o.MaxMomentum, 0.8, 0.9); err != nil {
			return nil, err
		}
	}
	scale, byIter := o.ScaleFn, o.ScaleByIterations
	if scale == nil {
		switch o.Mode {
		case Triangular:
			scale = func(float64) float64 { return 1 }
		case Triangular2:
			scale = func(x float64) float64 { return 1 / math.Pow(2, x-1) }
		case ExpRange:
			scale, byIter = func(x float64) float64 { return math.Pow(o.Gamma, x) }, true
		}
	}
	total := float64(o.StepSizeUp) + float64(o.StepSizeDown) // no int overflow for huge sizes
	ratio := float64(o.StepSizeUp) / total
	// height returns the fraction of the full height of a cycle that step
	// is at: the rise or fall times the scale.
	height := func(step int) float64 {
		e := float64(step)
		cycle := math.Floor(1 + e/total)
		x := 1 + e/total - cycle
		var f float64
		if x <= ratio {
			f = x / ratio
		} else {
			f = (x - 1) / (ratio - 1)
		}
		arg := cycle
		if byIter {
			arg = e
		}
		return f * scale(arg)
	}
	rate := func(_ float64, step int) float64 { return baseLR + (maxLR-baseLR)*height(step) }
	// Check the first rate before changing any.
	if lr := rate(baseLR, 0); !(lr >= 0) || math.IsInf(lr, 1) {
		return nil, errorf(vram.ErrArgument, "optim: %s: the rate of step 0 is %v; it must be finite and not negative", op, lr)
	}
	n := numGroups(opt)
	if g, ok := opt.(GroupedOptimizer); ok {
		for i := range n {
			g.SetGroupLR(i, baseLR)
		}
	} else {
		opt.SetLR(baseLR)
	}
	s, err := newSchedule(op, opt, rate, nil)
	if err != nil {
		return nil, err
	}
	for i := range s.bases {
		s.bases[i] = baseLR
	}
	if !o.NoCycleMomentum {
		s.momentum = func(_, step int) (float64, bool) { return mMax - (mMax-mBase)*height(step), true }
		s.setMomentum()
	}
	return s, nil
}
