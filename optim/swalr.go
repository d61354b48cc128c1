package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// NewSWALR returns a Schedule that anneals each group's rate to a constant
// rate for stochastic weight averaging
// (torch.optim.swa_utils.SWALR): at step s the rate is
// swa_lr·a + base·(1 - a), a = f(min(1, s/annealEpochs)), where f is
// (1 - cos(π·x))/2, or x itself when linear is set (anneal_strategy
// 'cos' or 'linear'; PyTorch's default is 'cos' with 10 epochs). With
// annealEpochs 0 the rate is swa_lr from step 0. As PyTorch's, its rule
// goes on from the rate it finds, so a rate changed by other code is
// annealed from there.
//
// swaLRs holds one rate for every group, or one per group of a
// [GroupedOptimizer] (PyTorch's list of swa_lr); each must be finite and
// not negative, and annealEpochs at least 0. Otherwise it returns an
// error of kind vram.ErrArgument, changing no rate. A group added after
// the Schedule was made is given the one rate of a single swaLRs; with a
// rate per group, such a group has none, and Step panics with an
// *vram.Error of kind vram.ErrArgument.
func NewSWALR(opt Optimizer, swaLRs []float64, annealEpochs int, linear bool) (*Schedule, error) {
	const op = "SWALR"
	if isNil(opt) {
		return nil, errorf(vram.ErrArgument, "optim: %s: nil optimizer", op)
	}
	n := len(groupRates(opt))
	switch {
	case len(swaLRs) == 0:
		return nil, errorf(vram.ErrArgument, "optim: %s: no swa_lr", op)
	case len(swaLRs) != 1 && len(swaLRs) != n:
		return nil, errorf(vram.ErrArgument, "optim: %s: %d values of swa_lr for %d parameter groups; want 1 or one per group", op, len(swaLRs), n)
	case annealEpochs < 0:
		return nil, errorf(vram.ErrArgument, "optim: %s: anneal_epochs must be at least 0, got %d", op, annealEpochs)
	}
	for _, v := range swaLRs {
		if err := checkFactor(op, "swa_lr", v); err != nil {
			return nil, err
		}
	}
	swa := append([]float64(nil), swaLRs...)
	swaOf := func(g int) float64 {
		switch {
		case len(swa) == 1:
			return swa[0]
		case g < len(swa):
			return swa[g]
		}
		return math.NaN() // a group added since, which PyTorch has no swa_lr for
	}
	// weight is PyTorch's anneal_func of the fraction of the annealing
	// done at step, PyTorch's step count held at 1 or more without
	// annealing epochs.
	weight := func(step int) float64 {
		x := min(1, max(0, float64(step)/float64(max(1, annealEpochs))))
		if linear {
			return x
		}
		return (1 - math.Cos(math.Pi*x)) / 2
	}
	first := func(step int) int {
		if annealEpochs == 0 {
			return max(1, step)
		}
		return step
	}
	return newGroupSchedule(op, opt, func(g int, base float64, step int) float64 {
		a := weight(first(step))
		return swaOf(g)*a + base*(1-a)
	}, func(g int, lr, _ float64, step int) float64 {
		s, step := swaOf(g), first(step)
		// PyTorch recovers the rate it annealed from out of the rate it
		// finds, then anneals that by the step's weight.
		if pa := weight(step - 1); pa == 1 {
			lr = s
		} else {
			lr = (lr - pa*s) / (1 - pa)
		}
		a := weight(step)
		return s*a + lr*(1-a)
	})
}
