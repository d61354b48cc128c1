package optim

import (
	"math"

	"github.com/vramgo/vram"
)

// Cycled momentum: OneCycleLR and CyclicLR move the momentum inversely to
// the rate (PyTorch's cycle_momentum=True, their default), that of the
// optimizers whose PyTorch defaults have a "momentum" (SGD, RMSprop) or
// "betas" (Adam, AdamW, Adamax, NAdam, RAdam), whose beta1 cycles.

// momentumConfig is a config type with a momentum, or a beta1, that a
// cyclic schedule drives.
type momentumConfig[C any] interface {
	withCycledMomentum(m float64) C
}

func (c SGDConfig) withCycledMomentum(m float64) SGDConfig         { c.Momentum = m; return c }
func (c RMSpropConfig) withCycledMomentum(m float64) RMSpropConfig { c.Momentum = m; return c }
func (c AdamConfig) withCycledMomentum(m float64) AdamConfig       { c.Beta1 = m; return c }
func (c AdamaxConfig) withCycledMomentum(m float64) AdamaxConfig   { c.Beta1 = m; return c }
func (c NAdamConfig) withCycledMomentum(m float64) NAdamConfig     { c.Beta1 = m; return c }
func (c RAdamConfig) withCycledMomentum(m float64) RAdamConfig     { c.Beta1 = m; return c }

// momentumCycler is an optimizer whose groups' momentum a cyclic
// schedule may set: this package's optimizers, of which those whose
// config has a momentum or beta1 can have it cycled.
type momentumCycler interface {
	GroupedOptimizer
	cyclesMomentum() bool
	setGroupMomentum(i int, m float64)
}

// cyclesMomentum reports whether the groups have a momentum or a beta1
// that OneCycleLR and CyclicLR cycle.
func (gs *groups[C]) cyclesMomentum() bool {
	_, ok := any(gs.defaults).(momentumConfig[C])
	return ok
}

// setGroupMomentum sets the momentum (or beta1) of group i to m, which
// the caller has checked to be in [0, 1).
func (gs *groups[C]) setGroupMomentum(i int, m float64) {
	if c, ok := any(gs.cfgs[i]).(momentumConfig[C]); ok {
		gs.cfgs[i] = c.withCycledMomentum(m)
	}
}

// cycleMomentum checks what a cyclic schedule op needs to cycle opt's
// momentum between base and max (0 meaning defBase and defMax) and
// returns the bounds, or an error of kind vram.ErrArgument: for an
// optimizer without a momentum or beta1 ("optimizer must support
// momentum or beta1", PyTorch says), and for bounds outside [0, 1).
func cycleMomentum(op string, opt Optimizer, base, max, defBase, defMax float64) (float64, float64, error) {
	if base == 0 {
		base = defBase
	}
	if max == 0 {
		max = defMax
	}
	if mc, ok := opt.(momentumCycler); !ok || !mc.cyclesMomentum() {
		return 0, 0, errorf(vram.ErrArgument, "optim: %s: %T has no momentum or beta1 to cycle (SGD, RMSprop, Adam, AdamW, Adamax, NAdam and RAdam have); "+
			"set NoCycleMomentum to leave the momentum alone", op, opt)
	}
	for _, m := range []struct {
		name string
		v    float64
	}{{"base momentum", base}, {"max momentum", max}} {
		if !(m.v >= 0 && m.v < 1) {
			return 0, 0, errorf(vram.ErrArgument, "optim: %s: %s must be in [0, 1), got %v", op, m.name, m.v)
		}
	}
	return base, max, nil
}

// setMomentum gives every group of the optimizer the momentum of s's
// step, when s cycles it.
func (s *Schedule) setMomentum() {
	if s.momentum == nil {
		return
	}
	mc, ok := s.opt.(momentumCycler)
	if !ok {
		return
	}
	for i := range mc.NumGroups() {
		if m, ok := s.momentum(i, s.step); ok && !math.IsNaN(m) {
			mc.setGroupMomentum(i, min(max(m, 0), math.Nextafter(1, 0)))
		}
	}
}
