package optim

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// ParamGroup is a list of parameters with hyper-parameters of its own: one
// entry of the param_groups of a torch.optim optimizer. Options set the
// hyper-parameters that differ from the optimizer's defaults (the config
// given to its constructor); the others are the defaults. The usual use
// keeps weight decay off biases and normalisation weights:
//
//	opt, err := optim.NewAdamWGroups([]optim.ParamGroup{
//		optim.Group(weights),
//		optim.Group(biases, optim.WithWeightDecay(0)),
//	}, optim.AdamConfig{LR: 3e-4})
//
// The zero value is an empty group, which the constructors refuse.
type ParamGroup struct {
	Params  []*vram.Tensor // the parameters, leaf floating-point tensors, each in one group only
	Options []Option       // hyper-parameters of this group; the optimizer's defaults for the rest
}

// Group returns the ParamGroup of params with the hyper-parameters opts.
func Group(params []*vram.Tensor, opts ...Option) ParamGroup {
	return ParamGroup{Params: params, Options: opts}
}

// Option sets one hyper-parameter of a [ParamGroup], as a key of a
// PyTorch param_groups entry does. Unlike the zero values of [AdamConfig],
// an Option's value is taken as given: WithWeightDecay(0) turns AdamW's
// weight decay off for the group, WithBetas(0, 0.99) asks for beta1 0. An
// optimizer refuses an Option it has no use for (WithMomentum for Adam).
// When a group sets one hyper-parameter twice, the last setting holds.
type Option struct {
	key  string // PyTorch's name of the hyper-parameter
	x, y float64
	b    bool
}

// WithLR sets the learning rate ("lr"), which must be finite and not
// negative. A group whose rate is 0 is not updated.
func WithLR(lr float64) Option { return Option{key: "lr", x: lr} }

// WithMomentum sets the momentum factor of SGD and RMSprop ("momentum").
func WithMomentum(m float64) Option { return Option{key: "momentum", x: m} }

// WithDampening sets SGD's dampening ("dampening").
func WithDampening(d float64) Option { return Option{key: "dampening", x: d} }

// WithNesterov turns SGD's Nesterov momentum on or off ("nesterov").
func WithNesterov(on bool) Option { return Option{key: "nesterov", b: on} }

// WithWeightDecay sets the weight decay ("weight_decay"): the L2 penalty
// of SGD, RMSprop, Adagrad, Adamax, Adadelta and ASGD, the decoupled
// decay of AdamW, either of Adam, NAdam and RAdam
// ([WithDecoupledWeightDecay]).
func WithWeightDecay(wd float64) Option { return Option{key: "weight_decay", x: wd} }

// WithBetas sets the decay rates of Adam, Adamax, NAdam and RAdam of the first and second moment
// estimates ("betas"), each in [0, 1).
func WithBetas(beta1, beta2 float64) Option { return Option{key: "betas", x: beta1, y: beta2} }

// WithMaximize makes the group maximize the objective rather than
// minimize it ("maximize"): its parameters step along their gradients.
func WithMaximize(on bool) Option { return Option{key: "maximize", b: on} }

// WithAMSGrad turns Adam's AMSGrad variant on or off ("amsgrad"), which
// divides by the largest second moment estimate so far.
func WithAMSGrad(on bool) Option { return Option{key: "amsgrad", b: on} }

// WithEps sets the epsilon of Adam, RMSprop, Adagrad, Adamax, NAdam,
// RAdam and Adadelta ("eps"), added to the denominator.
func WithEps(eps float64) Option { return Option{key: "eps", x: eps} }

// WithAlpha sets RMSprop's smoothing constant, or the power of ASGD's
// rate decay ("alpha"), at least 0.
func WithAlpha(alpha float64) Option { return Option{key: "alpha", x: alpha} }

// WithCentered turns RMSprop's centered variant on or off ("centered"),
// which divides by an estimate of the gradient's variance.
func WithCentered(on bool) Option { return Option{key: "centered", b: on} }

// WithLRDecay sets Adagrad's learning-rate decay ("lr_decay").
func WithLRDecay(d float64) Option { return Option{key: "lr_decay", x: d} }

// WithMomentumDecay sets NAdam's momentum decay ("momentum_decay"), at
// least 0.
func WithMomentumDecay(d float64) Option { return Option{key: "momentum_decay", x: d} }

// WithDecoupledWeightDecay makes the weight decay of Adam, NAdam and
// RAdam decoupled, as AdamW's ("decoupled_weight_decay"): the parameters
// shrink by the factor 1 - lr·weight_decay instead of the decay being
// added to the gradient. WithDecoupledWeightDecay(false) makes an AdamW
// group's decay an L2 penalty, as Adam's.
func WithDecoupledWeightDecay(on bool) Option { return Option{key: "decoupled_weight_decay", b: on} }

// WithRho sets Adadelta's decay rate of its running averages ("rho"), in
// [0, 1].
func WithRho(rho float64) Option { return Option{key: "rho", x: rho} }

// WithLambd sets ASGD's decay term ("lambd"), at least 0.
func WithLambd(lambd float64) Option { return Option{key: "lambd", x: lambd} }

// WithT0 sets the step from which ASGD averages the parameters ("t0"), at
// least 0.
func WithT0(t0 float64) Option { return Option{key: "t0", x: t0} }

// WithInitialAccumulatorValue sets the starting value of Adagrad's sums
// of squared gradients ("initial_accumulator_value").
func WithInitialAccumulatorValue(v float64) Option {
	return Option{key: "initial_accumulator_value", x: v}
}

// groups is what SGD and Adam share about their parameter groups: the
// parameters of all groups in one list, in the order of the groups (the
// numbering of PyTorch's state_dict, which checkpoints use), and where
// each group starts in it. C is the optimizer's config type, a group's
// full set of hyper-parameters.
type groups[C config[C]] struct {
	params   []*vram.Tensor
	start    []int // group i holds params[start[i]:end(i)]
	cfgs     []C
	defaults C
	initial  []float64 // by group: the rate when the first Schedule was made (initial_lr); NaN: none yet
}

// initialLR returns the rate group i had when the first [Schedule] of the
// optimizer was made (PyTorch's initial_lr), and whether one was.
func (gs *groups[C]) initialLR(i int) (float64, bool) {
	if i < len(gs.initial) && !math.IsNaN(gs.initial[i]) {
		return gs.initial[i], true
	}
	return 0, false
}

// setInitialLR records lr as the initial rate of group i.
func (gs *groups[C]) setInitialLR(i int, lr float64) {
	for len(gs.initial) <= i {
		gs.initial = append(gs.initial, math.NaN())
	}
	gs.initial[i] = lr
}

// config is what groups needs of an optimizer's config type: its
// learning rate, read and replaced.
type config[C any] interface {
	lr() float64
	withLR(lr float64) C
}

func (c SGDConfig) lr() float64                 { return c.LR }
func (c SGDConfig) withLR(lr float64) SGDConfig { c.LR = lr; return c }

func (c AdamConfig) lr() float64                  { return c.LR }
func (c AdamConfig) withLR(lr float64) AdamConfig { c.LR = lr; return c }

// LR returns the learning rate of the first parameter group.
func (gs *groups[C]) LR() float64 { return gs.cfgs[0].lr() }

// SetLR sets the learning rate of every parameter group to lr. It panics
// with an *vram.Error of kind vram.ErrArgument for a negative, infinite
// or NaN rate.
func (gs *groups[C]) SetLR(lr float64) {
	checkLR(lr)
	for k := range gs.cfgs {
		gs.cfgs[k] = gs.cfgs[k].withLR(lr)
	}
}

// NumGroups returns the number of parameter groups.
func (gs *groups[C]) NumGroups() int { return len(gs.cfgs) }

// GroupLR returns the learning rate of parameter group i. It panics with
// an *vram.Error of kind vram.ErrIndex when there is no group i.
func (gs *groups[C]) GroupLR(i int) float64 {
	gs.checkGroup("group_lr", i)
	return gs.cfgs[i].lr()
}

// SetGroupLR sets the learning rate of parameter group i (PyTorch's
// param_groups[i]['lr'] = lr). It panics with an *vram.Error of kind
// vram.ErrIndex when there is no group i, of kind vram.ErrArgument for a
// negative, infinite or NaN rate.
func (gs *groups[C]) SetGroupLR(i int, lr float64) {
	gs.checkGroup("set_group_lr", i)
	checkLR(lr)
	gs.cfgs[i] = gs.cfgs[i].withLR(lr)
}

// GroupParams returns the parameters of group i. It panics with an
// *vram.Error of kind vram.ErrIndex when there is no group i.
func (gs *groups[C]) GroupParams(i int) []*vram.Tensor {
	gs.checkGroup("group_params", i)
	return gs.groupParams(i)
}

// end returns the end of group i in params.
func (gs *groups[C]) end(i int) int {
	if i+1 < len(gs.start) {
		return gs.start[i+1]
	}
	return len(gs.params)
}

// groupParams returns a copy of the parameters of group i.
func (gs *groups[C]) groupParams(i int) []*vram.Tensor {
	return append([]*vram.Tensor(nil), gs.params[gs.start[i]:gs.end(i)]...)
}

// checkGroup panics with an *vram.Error of kind vram.ErrIndex unless
// group i exists.
func (gs *groups[C]) checkGroup(op string, i int) {
	if i < 0 || i >= len(gs.cfgs) {
		panic(&vram.Error{Op: op, Kind: vram.ErrIndex, Detail: fmt.Sprintf("parameter group %d of %d", i, len(gs.cfgs))})
	}
}

// add validates g's parameters against each other and those of the
// groups before, resolves its options with resolve, and appends it.
func (gs *groups[C]) add(op string, g ParamGroup, resolve func(C, []Option) (C, error)) error {
	k := len(gs.cfgs)
	where := func(i int) string {
		if k == 0 && len(gs.params) == 0 {
			return fmt.Sprintf("parameter %d", i)
		}
		return fmt.Sprintf("parameter %d of group %d", i, k)
	}
	if len(g.Params) == 0 {
		if k == 0 {
			return errorf(vram.ErrArgument, "optim: %s: empty parameter list", op)
		}
		return errorf(vram.ErrArgument, "optim: %s: parameter group %d has no parameters", op, k)
	}
	seen := make(map[*vram.Tensor]int, len(gs.params)+len(g.Params))
	for j, p := range gs.params {
		seen[p] = j
	}
	for i, p := range g.Params {
		switch {
		case p == nil:
			return errorf(vram.ErrArgument, "optim: %s: %s is nil", op, where(i))
		case p.Released():
			return errorf(vram.ErrReleased, "optim: %s: %s was released", op, where(i))
		case !p.DType().IsFloat():
			return errorf(vram.ErrDType, "optim: %s: %s has dtype %s; only floating-point tensors can be optimized", op, where(i), p.DType())
		case !p.IsLeaf():
			return errorf(vram.ErrArgument, "optim: %s: %s is not a leaf tensor (it was computed by %s)", op, where(i), p.GradFn())
		}
		if j, dup := seen[p]; dup {
			if j >= len(gs.params) {
				j -= len(gs.params)
				if k == 0 {
					return errorf(vram.ErrArgument, "optim: %s: parameters %d and %d are the same tensor", op, j, i)
				}
				return errorf(vram.ErrArgument, "optim: %s: parameters %d and %d of group %d are the same tensor", op, j, i, k)
			}
			return errorf(vram.ErrArgument, "optim: %s: %s is already in group %d", op, where(i), gs.groupOf(j))
		}
		seen[p] = len(gs.params) + i
	}
	cfg, err := resolve(gs.defaults, g.Options)
	if err != nil {
		if k == 0 && len(g.Options) == 0 {
			return fmt.Errorf("optim: %s: %w", op, err)
		}
		return fmt.Errorf("optim: %s: parameter group %d: %w", op, k, err)
	}
	gs.start = append(gs.start, len(gs.params))
	gs.params = append(gs.params, g.Params...)
	gs.cfgs = append(gs.cfgs, cfg)
	return nil
}

// groupOf returns the group of params[j].
func (gs *groups[C]) groupOf(j int) int {
	k := 0
	for k+1 < len(gs.start) && gs.start[k+1] <= j {
		k++
	}
	return k
}

// groupRange returns where group i starts and ends in the parameter list.
func (gs *groups[C]) groupRange(i int) (start, end int) { return gs.start[i], gs.end(i) }

// restore resolves opts[k] against the hyper-parameters of group k, for
// every group, and returns a function that gives the groups the results;
// or an error, changing nothing.
func (gs *groups[C]) restore(opts [][]Option, resolve func(C, []Option) (C, error)) (func(), error) {
	cfgs := make([]C, len(gs.cfgs))
	for k := range gs.cfgs {
		c, err := resolve(gs.cfgs[k], opts[k])
		if err != nil {
			return nil, fmt.Errorf("parameter group %d: %w", k, err)
		}
		cfgs[k] = c
	}
	return func() { copy(gs.cfgs, cfgs) }, nil
}

// newGroups validates groups and defaults (with check) and returns them
// resolved.
func newGroups[C config[C]](op string, pgs []ParamGroup, defaults C, check func(C) error, resolve func(C, []Option) (C, error)) (*groups[C], error) {
	if len(pgs) == 0 {
		return nil, errorf(vram.ErrArgument, "optim: %s: empty parameter list", op)
	}
	if err := check(defaults); err != nil {
		return nil, fmt.Errorf("optim: %s: %w", op, err)
	}
	gs := &groups[C]{defaults: defaults}
	for _, g := range pgs {
		if err := gs.add(op, g, resolve); err != nil {
			return nil, err
		}
	}
	return gs, nil
}

// kindError is an error that matches a vram sentinel (vram.ErrArgument
// and the like) under errors.Is.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errorf returns an error of kind with the message format makes.
func errorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// errNoOption is the error for an Option an optimizer has no use for.
func errNoOption(op, key string) error {
	return errorf(vram.ErrArgument, "%s has no hyper-parameter %q", op, key)
}

// checkRate returns an error unless lr is finite and not negative.
func checkRate(lr float64) error {
	if !(lr >= 0) || math.IsInf(lr, 1) {
		return errorf(vram.ErrArgument, "invalid learning rate %v, want a finite rate of at least 0", lr)
	}
	return nil
}
