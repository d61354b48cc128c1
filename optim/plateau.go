package optim

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// PlateauConfig holds the settings of [ReduceLROnPlateau], with
// PyTorch's names. Every field is taken as given, zero included;
// [DefaultPlateauConfig] returns PyTorch's defaults.
type PlateauConfig struct {
	// Max makes a larger metric the better one (mode='max'), for an
	// accuracy; by default a smaller one is (mode='min'), for a loss.
	Max bool
	// Factor multiplies the rate at each reduction, in [0, 1).
	Factor float64
	// Patience is the number of steps without improvement that are
	// tolerated: the rate is reduced at the next one. At least 0.
	Patience int
	// Threshold is the least change that counts as an improvement,
	// relative to the best metric (or absolute, with AbsThreshold). At
	// least 0.
	Threshold float64
	// AbsThreshold makes Threshold an absolute change
	// (threshold_mode='abs'); by default it is relative ('rel').
	AbsThreshold bool
	// Cooldown is the number of steps after a reduction during which no
	// step counts as one without improvement. At least 0.
	Cooldown int
	// MinLRs are the lowest rates a reduction goes to: none (0 for every
	// group), one for every group, groups added later included, or one
	// per group (min_lr).
	MinLRs []float64
	// Eps is the least change of a rate: a reduction smaller than Eps
	// is skipped. At least 0.
	Eps float64
}

// DefaultPlateauConfig returns PyTorch's defaults of ReduceLROnPlateau:
// mode 'min', factor 0.1, patience 10, threshold 1e-4 relative, no
// cooldown, minimum rate 0, eps 1e-8.
func DefaultPlateauConfig() PlateauConfig {
	return PlateauConfig{Factor: 0.1, Patience: 10, Threshold: 1e-4, Eps: 1e-8}
}

// ReduceLROnPlateau reduces an optimizer's rates when a metric stops
// improving (torch.optim.lr_scheduler.ReduceLROnPlateau): after each
// epoch, Step is given the metric (a validation loss, say); when the
// metric has not improved on the best so far for more than Patience
// steps in a row, every group's rate is multiplied by Factor, down to its
// minimum, and Cooldown steps follow in which none counts as one without
// improvement. Its decisions and rates are PyTorch's at every step.
//
// It changes the rates the optimizer has, whatever set them, so it may
// be stepped beside a [Schedule] (a warm-up), which goes on from the
// reduced rates, as in PyTorch. It is not safe for concurrent use.
type ReduceLROnPlateau struct {
	opt  Optimizer
	cfg  PlateauConfig
	mins []float64 // by group
	st   PlateauState
}

// PlateauState is a [ReduceLROnPlateau]'s state, for checkpoints (the
// part of PyTorch's state_dict that is not its settings). It encodes to
// JSON with PyTorch's field names, an infinite Best as the string "inf"
// or "-inf".
type PlateauState struct {
	Best         float64 // the best metric so far; +Inf (mode min) or -Inf (max) before any
	NumBadEpochs int     // steps in a row without improvement
	CooldownLeft int     // steps of cooldown left
	Steps        int     // how many times Step was called
}

// plateauJSON is PlateauState's JSON form.
type plateauJSON struct {
	Best         any `json:"best"`
	NumBadEpochs int `json:"num_bad_epochs"`
	CooldownLeft int `json:"cooldown_counter"`
	Steps        int `json:"last_epoch"`
}

// MarshalJSON encodes st with PyTorch's field names.
func (st PlateauState) MarshalJSON() ([]byte, error) {
	j := plateauJSON{Best: st.Best, NumBadEpochs: st.NumBadEpochs, CooldownLeft: st.CooldownLeft, Steps: st.Steps}
	switch {
	case math.IsInf(st.Best, 1):
		j.Best = "inf"
	case math.IsInf(st.Best, -1):
		j.Best = "-inf"
	case math.IsNaN(st.Best):
		j.Best = "nan"
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (st *PlateauState) UnmarshalJSON(b []byte) error {
	var j plateauJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var best float64
	switch v := j.Best.(type) {
	case float64:
		best = v
	case string:
		switch v {
		case "inf":
			best = math.Inf(1)
		case "-inf":
			best = math.Inf(-1)
		case "nan":
			best = math.NaN()
		default:
			return errorf(vram.ErrArgument, "optim: plateau state: best %q is not a number", v)
		}
	default:
		return errorf(vram.ErrArgument, "optim: plateau state: best %v is not a number", j.Best)
	}
	*st = PlateauState{Best: best, NumBadEpochs: j.NumBadEpochs, CooldownLeft: j.CooldownLeft, Steps: j.Steps}
	return nil
}

// NewReduceLROnPlateau returns a ReduceLROnPlateau of opt with the
// settings cfg. It returns an error of kind vram.ErrArgument for a nil
// optimizer, a Factor outside [0, 1), a negative Patience or Cooldown, a
// negative, NaN or infinite Threshold, Eps or minimum rate, or a number
// of MinLRs that is neither 0, 1 nor the number of parameter groups.
func NewReduceLROnPlateau(opt Optimizer, cfg PlateauConfig) (*ReduceLROnPlateau, error) {
	const op = "ReduceLROnPlateau"
	if isNil(opt) {
		return nil, errorf(vram.ErrArgument, "optim: %s: nil optimizer", op)
	}
	switch {
	case !(cfg.Factor >= 0 && cfg.Factor < 1):
		return nil, errorf(vram.ErrArgument, "optim: %s: factor must be in [0, 1), got %v", op, cfg.Factor)
	case cfg.Patience < 0:
		return nil, errorf(vram.ErrArgument, "optim: %s: patience must be at least 0, got %d", op, cfg.Patience)
	case cfg.Cooldown < 0:
		return nil, errorf(vram.ErrArgument, "optim: %s: cooldown must be at least 0, got %d", op, cfg.Cooldown)
	}
	if err := checkFactor(op, "threshold", cfg.Threshold); err != nil {
		return nil, err
	}
	if err := checkFactor(op, "eps", cfg.Eps); err != nil {
		return nil, err
	}
	n := numGroups(opt)
	mins := make([]float64, n)
	switch len(cfg.MinLRs) {
	case 0:
	case 1:
		for i := range mins {
			mins[i] = cfg.MinLRs[0]
		}
	case n:
		copy(mins, cfg.MinLRs)
	default:
		return nil, errorf(vram.ErrArgument, "optim: %s: %d minimum rates for %d parameter groups", op, len(cfg.MinLRs), n)
	}
	for i, m := range mins {
		if err := checkFactor(op, fmt.Sprintf("minimum rate of group %d", i), m); err != nil {
			return nil, err
		}
	}
	r := &ReduceLROnPlateau{opt: opt, cfg: cfg, mins: mins}
	r.cfg.MinLRs = append([]float64(nil), cfg.MinLRs...)
	r.st.Best = r.worst()
	return r, nil
}

// numGroups returns the number of opt's parameter groups, 1 for an
// Optimizer that is not a GroupedOptimizer.
func numGroups(opt Optimizer) int {
	if g, ok := opt.(GroupedOptimizer); ok {
		return g.NumGroups()
	}
	return 1
}

// worst returns the best metric before any: +Inf for mode min.
func (r *ReduceLROnPlateau) worst() float64 {
	if r.cfg.Max {
		return math.Inf(-1)
	}
	return math.Inf(1)
}

// better reports whether the metric a improves on the best so far.
func (r *ReduceLROnPlateau) better(a float64) bool {
	best, th := r.st.Best, r.cfg.Threshold
	switch {
	case !r.cfg.Max && !r.cfg.AbsThreshold:
		return a < best*(1-th)
	case !r.cfg.Max:
		return a < best-th
	case !r.cfg.AbsThreshold:
		return a > best*(1+th)
	}
	return a > best+th
}

// Step takes the metric of one more epoch and reduces the rates when the
// metric has stopped improving (PyTorch's scheduler.step(metrics)). A
// NaN metric counts as no improvement, as in PyTorch. It reports whether
// it reduced a rate. A parameter group added to the optimizer since r was
// made takes the one minimum rate of MinLRs (0 without one); when MinLRs
// held a rate for each group, a Step that would reduce the rates panics
// with an *vram.Error of kind vram.ErrArgument instead, changing nothing,
// as PyTorch raises then (the Steps that reduce nothing go on as usual).
func (r *ReduceLROnPlateau) Step(metric float64) bool {
	st := r.st
	st.Steps++
	if r.better(metric) {
		st.Best = metric
		st.NumBadEpochs = 0
	} else {
		st.NumBadEpochs++
	}
	if st.CooldownLeft > 0 {
		st.CooldownLeft--
		st.NumBadEpochs = 0
	}
	if st.NumBadEpochs <= r.cfg.Patience {
		r.st = st
		return false
	}
	r.fitMins()
	st.CooldownLeft = r.cfg.Cooldown
	st.NumBadEpochs = 0
	r.st = st
	return r.reduce()
}

// fitMins gives groups added to the optimizer since r was made their
// minimum rate: the one minimum of every group, or 0 when none was set,
// as PyTorch's min_lr given as a number. It panics with an *vram.Error
// of kind vram.ErrArgument when MinLRs held one rate per group, which
// says nothing of the new groups (PyTorch raises then too).
func (r *ReduceLROnPlateau) fitMins() {
	n := numGroups(r.opt)
	if len(r.mins) == n {
		return
	}
	if len(r.cfg.MinLRs) > 1 {
		panic(&vram.Error{Op: "reduce_lr_on_plateau", Kind: vram.ErrArgument, Detail: fmt.Sprintf(
			"the optimizer has %d parameter groups, %d when the ReduceLROnPlateau was made with a minimum rate for each; "+
				"make it again with %d minimum rates, or with one for every group", n, len(r.mins), n)})
	}
	m := 0.0
	if len(r.cfg.MinLRs) == 1 {
		m = r.cfg.MinLRs[0]
	}
	for len(r.mins) < n {
		r.mins = append(r.mins, m)
	}
}

// reduce multiplies every group's rate by the factor, down to the
// group's minimum, skipping changes smaller than eps.
func (r *ReduceLROnPlateau) reduce() bool {
	g, grouped := r.opt.(GroupedOptimizer)
	reduced := false
	for i := range numGroups(r.opt) {
		old := r.opt.LR()
		if grouped {
			old = g.GroupLR(i)
		}
		lr := old * r.cfg.Factor
		lr = math.Max(lr, r.mins[i])
		if old-lr <= r.cfg.Eps {
			continue
		}
		reduced = true
		if grouped {
			g.SetGroupLR(i, lr)
		} else {
			r.opt.SetLR(lr)
		}
	}
	return reduced
}

// LRs returns the rates of the optimizer's groups (get_last_lr()).
func (r *ReduceLROnPlateau) LRs() []float64 { return groupRates(r.opt) }

// Best returns the best metric so far: +Inf (mode min) or -Inf (max)
// before the first Step.
func (r *ReduceLROnPlateau) Best() float64 { return r.st.Best }

// InCooldown reports whether the cooldown after a reduction is running.
func (r *ReduceLROnPlateau) InCooldown() bool { return r.st.CooldownLeft > 0 }

// State returns the state, for a checkpoint beside the optimizer's.
func (r *ReduceLROnPlateau) State() PlateauState { return r.st }

// LoadState restores a state from [ReduceLROnPlateau.State] (the
// optimizer's rates come with the optimizer, from [Load]). It returns an error of kind vram.ErrArgument, changing nothing,
// for negative counts or counts above 2^53, a cooldown longer than the
// setting, or a NaN best metric or one infinite the wrong way.
func (r *ReduceLROnPlateau) LoadState(st PlateauState) error {
	switch {
	case st.Steps < 0 || st.NumBadEpochs < 0 || st.CooldownLeft < 0:
		return errorf(vram.ErrArgument, "optim: ReduceLROnPlateau: load state: negative count in %+v", st)
	case st.Steps > maxSteps || st.NumBadEpochs > maxSteps:
		return errorf(vram.ErrArgument, "optim: ReduceLROnPlateau: load state: count above 2^53 in %+v", st)
	case st.CooldownLeft > r.cfg.Cooldown:
		return errorf(vram.ErrArgument, "optim: ReduceLROnPlateau: load state: cooldown counter %d exceeds the cooldown %d", st.CooldownLeft, r.cfg.Cooldown)
	case math.IsNaN(st.Best) || math.IsInf(st.Best, 0) && st.Best != r.worst():
		return errorf(vram.ErrArgument, "optim: ReduceLROnPlateau: load state: best metric %v", st.Best)
	}
	r.st = st
	return nil
}
