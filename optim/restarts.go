package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// NewCosineAnnealingWarmRestarts returns a Schedule of SGDR, cosine
// annealing with warm restarts
// (torch.optim.lr_scheduler.CosineAnnealingWarmRestarts): the rate
// follows half a cosine from the base rate down to etaMin over a period
// of t0 steps, then starts again at the base rate, each period tMult
// times as long as the one before: etaMin + (base − etaMin)·(1 +
// cos(π·Tcur/Ti))/2, where Ti is the length of the current period and
// Tcur the steps taken in it. It is stepped after every epoch, or after
// every batch for restarts within an epoch. As PyTorch's, its rule
// ignores the rate it finds, so that another Schedule's changes do not
// carry over. t0 must be at least 1, tMult at least 1 (1 for periods of
// equal length) and etaMin finite and not negative; otherwise it returns
// an error of kind vram.ErrArgument, changing no rate.
func NewCosineAnnealingWarmRestarts(opt Optimizer, t0, tMult int, etaMin float64) (*Schedule, error) {
	const op = "CosineAnnealingWarmRestarts"
	if t0 < 1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: T_0 must be at least 1, got %d", op, t0)
	}
	if tMult < 1 {
		return nil, errorf(vram.ErrArgument, "optim: %s: T_mult must be at least 1, got %d", op, tMult)
	}
	if err := checkFactor(op, "eta_min", etaMin); err != nil {
		return nil, err
	}
	return newSchedule(op, opt, func(base float64, step int) float64 {
		cur, period := restartPosition(step, t0, tMult)
		return etaMin + (base-etaMin)*(1+math.Cos(math.Pi*float64(cur)/float64(period)))/2
	}, nil)
}

// restartPosition returns how many steps into its period step is, and
// the length of that period, for periods of t0 steps growing by the
// factor tMult: PyTorch's T_cur and T_i after step steps.
func restartPosition(step, t0, tMult int) (cur, period int) {
	if tMult == 1 {
		return step % t0, t0
	}
	cur, period = step, t0
	for cur >= period {
		cur -= period
		if period > math.MaxInt/tMult {
			// No step count reaches the end of this period.
			return cur, math.MaxInt
		}
		period *= tMult
	}
	return cur, period
}
