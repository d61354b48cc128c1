package optim

import (
	"fmt"
	"math"
	"slices"

	"github.com/vramgo/vram"
)

// LBFGSConfig holds the hyper-parameters of [LBFGS]. Zero values mean
// PyTorch's defaults: LR 1, MaxIter 20, MaxEval MaxIter·5/4,
// ToleranceGrad 1e-7, ToleranceChange 1e-9, HistorySize 100, and no line
// search.
type LBFGSConfig struct {
	LR              float64 // learning rate: the step length, or the line search's first try
	MaxIter         int     // most iterations per Step
	MaxEval         int     // most evaluations of the closure per Step
	ToleranceGrad   float64 // stop when the largest |gradient| is at most this
	ToleranceChange float64 // stop when the step or the loss changes by less than this
	HistorySize     int     // number of corrections kept
	LineSearch      string  // "" (a fixed step of LR) or "strong_wolfe" (line_search_fn)
}

// LBFGS is the L-BFGS optimizer (torch.optim.LBFGS), a quasi-Newton
// method that keeps the last HistorySize corrections of the gradient to
// approximate the inverse Hessian, following PyTorch's algorithm and its
// strong-Wolfe line search step for step. Its Step takes a closure that
// evaluates the model again, as PyTorch's does: it clears the gradients
// (ZeroGrad), computes the loss, calls Backward and returns the loss as a
// number. L-BFGS works on all parameters as one flat vector, so they must
// share one device and one dtype, and it has one parameter group, as in
// PyTorch; its memory is that vector some 2·HistorySize + 3 times over.
//
// LBFGS is not an [Optimizer] (its Step needs a closure), so Schedules,
// Save and Load do not take it; its rate is set with SetLR, and its state
// is copied out and back in memory with [LBFGS.State] and
// [LBFGS.LoadState] (PyTorch's state_dict and load_state_dict). It is not
// safe for concurrent use.
type LBFGS struct {
	groups[LBFGSConfig]
	funcEvals, nIter int
	d, prevFlatGrad  *vram.Tensor   // the last direction and the gradient it was taken from
	oldDirs, oldStps []*vram.Tensor // y and s of the corrections kept, oldest first
	ro               []float64      // 1/(y·s) of each correction
	t, hDiag         float64        // the last step length and the Hessian's diagonal estimate
	prevLoss         float64
}

// NewLBFGS returns an LBFGS optimizer of params with the hyper-parameters
// cfg. It returns an error for an empty or invalid parameter list (nil,
// released, non-float, non-leaf or repeated tensors, or tensors of
// several devices or dtypes), a negative, NaN or infinite learning rate
// or tolerance, a negative MaxIter, MaxEval or HistorySize, and a
// LineSearch other than "" and "strong_wolfe". The errors match
// vram.ErrArgument under errors.Is (vram.ErrReleased for a released
// tensor, vram.ErrDType for a non-float one).
func NewLBFGS(params []*vram.Tensor, cfg LBFGSConfig) (*LBFGS, error) {
	if cfg.LR == 0 {
		cfg.LR = 1
	}
	if cfg.MaxIter == 0 {
		cfg.MaxIter = 20
	}
	if cfg.MaxEval == 0 && cfg.MaxIter > 0 {
		cfg.MaxEval = cfg.MaxIter * 5 / 4
	}
	fillDefaults(defaulted{&cfg.ToleranceGrad, 1e-7}, defaulted{&cfg.ToleranceChange, 1e-9})
	if cfg.HistorySize == 0 {
		cfg.HistorySize = 100
	}
	gs, err := newGroups("LBFGS", []ParamGroup{{Params: params}}, cfg, checkLBFGS, func(c LBFGSConfig, opts []Option) (LBFGSConfig, error) {
		for _, o := range opts {
			return c, errNoOption("LBFGS", o.key)
		}
		return c, checkLBFGS(c)
	})
	if err != nil {
		return nil, err
	}
	for i, p := range params[1:] {
		if p.Device() != params[0].Device() || p.DType() != params[0].DType() {
			return nil, errorf(vram.ErrArgument, "optim: LBFGS: parameter %d is %s on %v, parameter 0 %s on %v; L-BFGS needs one device and dtype",
				i+1, p.DType(), p.Device(), params[0].DType(), params[0].Device())
		}
	}
	return &LBFGS{groups: *gs}, nil
}

// checkLBFGS returns an error for invalid hyper-parameters.
func checkLBFGS(c LBFGSConfig) error {
	if err := checkAll(c.LR, named{"gradient tolerance", c.ToleranceGrad}, named{"change tolerance", c.ToleranceChange}); err != nil {
		return err
	}
	switch {
	case c.MaxIter < 0 || c.MaxEval < 0:
		return errorf(vram.ErrArgument, "invalid max_iter %d or max_eval %d, want at least 0", c.MaxIter, c.MaxEval)
	case c.HistorySize < 0:
		return errorf(vram.ErrArgument, "invalid history size %d, want at least 0", c.HistorySize)
	case c.LineSearch != "" && c.LineSearch != "strong_wolfe":
		return errorf(vram.ErrArgument, "unknown line search %q; only \"strong_wolfe\" is supported", c.LineSearch)
	}
	return nil
}

func (c LBFGSConfig) lr() float64                   { return c.LR }
func (c LBFGSConfig) withLR(lr float64) LBFGSConfig { c.LR = lr; return c }

// Config returns the hyper-parameters, with defaults filled in and the
// current learning rate.
func (l *LBFGS) Config() LBFGSConfig { return l.cfgs[0] }

// FuncEvals returns the number of closure evaluations over all Steps
// (PyTorch's state func_evals).
func (l *LBFGS) FuncEvals() int { return l.funcEvals }

// Iterations returns the number of iterations over all Steps (n_iter).
func (l *LBFGS) Iterations() int { return l.nIter }

// ZeroGrad releases the gradients of the parameters.
func (l *LBFGS) ZeroGrad() { zeroGrad(l.params) }

// Release frees the optimizer's state and resets its counts; the
// optimizer stays usable and starts afresh at the next Step.
func (l *LBFGS) Release() {
	for _, t := range append(append([]*vram.Tensor{l.d, l.prevFlatGrad}, l.oldDirs...), l.oldStps...) {
		t.Release()
	}
	*l = LBFGS{groups: l.groups}
}

// follow moves the state to the parameters' device and dtype when they
// moved or were converted since it was made (nn.Module.To, Double), as
// the other optimizers' state follows its parameter. It panics with an
// *vram.Error of kind vram.ErrDevice (vram.ErrDType), before anything
// changes, when the parameters no longer share one device (dtype), as
// NewLBFGS made sure they did.
func (l *LBFGS) follow() {
	d, dt := l.params[0].Device(), l.params[0].DType()
	for i, p := range l.params[1:] {
		switch {
		case p.Device() != d:
			panic(&vram.Error{Op: "lbfgs step", Kind: vram.ErrDevice, Detail: fmt.Sprintf(
				"parameter %d is on %v, parameter 0 on %v; L-BFGS needs its parameters on one device", i+1, p.Device(), d)})
		case p.DType() != dt:
			panic(&vram.Error{Op: "lbfgs step", Kind: vram.ErrDType, Detail: fmt.Sprintf(
				"parameter %d is %s, parameter 0 %s; L-BFGS needs its parameters in one dtype", i+1, p.DType(), dt)})
		}
	}
	for _, s := range slices.Concat([]*vram.Tensor{l.d, l.prevFlatGrad}, l.oldDirs, l.oldStps) {
		if s == nil {
			continue
		}
		if s.Device() != d {
			s.MoveTo(d)
		}
		if s.DType() != dt {
			s.CastInPlace(dt)
		}
	}
}

// lbfgsHistoryMin is the least curvature y·s a correction must have to be
// kept (PyTorch's 1e-10).
const lbfgsHistoryMin = 1e-10

// Step runs up to MaxIter iterations of L-BFGS, evaluating closure (run
// with gradients enabled) for the loss and the parameters' gradients,
// and returns the loss of its first evaluation, as PyTorch's step does.
// Parameters without a gradient count as having zero gradients. A
// closure that panics stops the Step there, the panic going on to the
// caller; the parameters may then be those of a trial point. A nil
// closure panics with an *vram.Error of kind vram.ErrArgument before
// anything changes. The optimizer's state follows parameters moved to
// another device or converted to another dtype since the last Step
// (nn.Module.To); parameters no longer on one device, or of one dtype,
// panic with an *vram.Error of kind vram.ErrDevice (vram.ErrDType)
// before the closure runs.
func (l *LBFGS) Step(closure func() float64) float64 {
	if closure == nil {
		panic(&vram.Error{Op: "lbfgs step", Kind: vram.ErrArgument, Detail: "nil closure; L-BFGS evaluates the loss and the gradients through it"})
	}
	l.follow()
	c := l.cfgs[0]
	var origLoss float64
	var flatGrad *vram.Tensor // kept across iterations, each run in a Tidy of its own
	defer func() { flatGrad.Release() }()
	optimal := false
	vram.Tidy(func() {
		origLoss = l.evaluate(closure)
		flatGrad = vram.Keep(l.flatGrad())
		optimal = absMax(flatGrad) <= c.ToleranceGrad
	})
	loss := origLoss
	currentEvals := 1
	l.funcEvals++
	if optimal {
		return origLoss
	}
	for nIter := 1; nIter <= c.MaxIter; nIter++ {
		stop := false
		vram.Tidy(func() {
			stop = l.iterate(closure, c, nIter, &loss, &flatGrad, &currentEvals)
		})
		if stop {
			break
		}
	}
	return origLoss
}

// iterate runs iteration nIter of a Step, updating the loss, the flat
// gradient (kept, the one it replaces released) and the count of
// evaluations, and reports whether the Step is done.
func (l *LBFGS) iterate(closure func() float64, c LBFGSConfig, nIter int, loss *float64, fg **vram.Tensor, currentEvals *int) bool {
	flatGrad := *fg
	l.nIter++
	if l.nIter == 1 {
		l.setD(flatGrad.Neg())
		l.dropHistory()
		l.hDiag = 1
	} else {
		l.update(flatGrad, c.HistorySize)
	}
	l.prevFlatGrad.Release()
	l.prevFlatGrad = vram.Keep(flatGrad.Clone())
	l.prevLoss = *loss
	if l.nIter == 1 {
		l.t = math.Min(1, 1/flatGrad.Abs().Sum().Item()) * c.LR
	} else {
		l.t = c.LR
	}
	gtd := flatGrad.Dot(l.d).Item()
	if gtd > -c.ToleranceChange {
		return true
	}
	lsEvals := 0
	optCond := false
	newGrad := flatGrad
	if c.LineSearch == "strong_wolfe" {
		x := l.cloneParams()
		eval := func(t float64) (float64, *vram.Tensor) {
			l.addDir(t, l.d)
			f := l.evaluate(closure)
			g := l.flatGrad()
			l.setParams(x)
			return f, g
		}
		*loss, newGrad, l.t, lsEvals = strongWolfe(eval, l.t, l.d, *loss, flatGrad, gtd)
		l.addDir(l.t, l.d)
		optCond = absMax(newGrad) <= c.ToleranceGrad
	} else {
		l.addDir(l.t, l.d)
		if nIter != c.MaxIter {
			*loss = l.evaluate(closure)
			newGrad = l.flatGrad()
			optCond = absMax(newGrad) <= c.ToleranceGrad
			lsEvals = 1
		}
	}
	if newGrad != flatGrad {
		vram.Keep(newGrad)
		flatGrad.Release()
		*fg = newGrad
	}
	*currentEvals += lsEvals
	l.funcEvals += lsEvals
	return nIter == c.MaxIter || *currentEvals >= c.MaxEval || optCond ||
		absMax(l.d.MulScalar(l.t)) <= c.ToleranceChange || math.Abs(*loss-l.prevLoss) < c.ToleranceChange
}

// update takes the new correction from flatGrad, if its curvature is
// enough, and sets the direction by the two-loop recursion.
func (l *LBFGS) update(flatGrad *vram.Tensor, historySize int) {
	y := flatGrad.Sub(l.prevFlatGrad)
	s := l.d.MulScalar(l.t)
	if ys := y.Dot(s).Item(); ys > lbfgsHistoryMin {
		if len(l.oldDirs) == historySize && historySize > 0 {
			l.oldDirs[0].Release()
			l.oldStps[0].Release()
			l.oldDirs, l.oldStps, l.ro = l.oldDirs[1:], l.oldStps[1:], l.ro[1:]
		}
		if historySize > 0 {
			l.oldDirs = append(l.oldDirs, vram.Keep(y))
			l.oldStps = append(l.oldStps, vram.Keep(s))
			l.ro = append(l.ro, 1/ys)
		}
		l.hDiag = ys / y.Dot(y).Item()
	}
	al := make([]float64, len(l.oldDirs))
	q := flatGrad.Neg()
	for i := len(l.oldDirs) - 1; i >= 0; i-- {
		al[i] = l.oldStps[i].Dot(q).Item() * l.ro[i]
		q.AddScaledInPlace(l.oldDirs[i], -al[i])
	}
	r := q.MulScalar(l.hDiag)
	for i := range l.oldDirs {
		be := l.oldDirs[i].Dot(r).Item() * l.ro[i]
		r.AddScaledInPlace(l.oldStps[i], al[i]-be)
	}
	l.setD(r)
}

// setD makes d the direction, kept, releasing the one before.
func (l *LBFGS) setD(d *vram.Tensor) {
	if l.d != nil && l.d != d {
		l.d.Release()
	}
	l.d = vram.Keep(d)
}

// dropHistory releases the corrections kept.
func (l *LBFGS) dropHistory() {
	for i := range l.oldDirs {
		l.oldDirs[i].Release()
		l.oldStps[i].Release()
	}
	l.oldDirs, l.oldStps, l.ro = nil, nil, nil
}

// evaluate runs closure with gradients enabled.
func (l *LBFGS) evaluate(closure func() float64) (loss float64) {
	vram.EnableGrad(func() { loss = closure() })
	return loss
}

// flatGrad returns the gradients of the parameters as one new vector,
// zeros for a parameter without one.
func (l *LBFGS) flatGrad() *vram.Tensor {
	var out *vram.Tensor
	vram.NoGrad(func() {
		views := make([]*vram.Tensor, len(l.params))
		for i, p := range l.params {
			if g := p.Grad(); g != nil {
				views[i] = g.Reshape(-1)
			} else {
				views[i] = p.NewZeros(vram.Shape{p.NumElements()})
			}
		}
		out = vram.Cat(views, 0)
	})
	return out
}

// addDir adds t·d to the parameters, d being flat.
func (l *LBFGS) addDir(t float64, d *vram.Tensor) {
	vram.NoGrad(func() {
		off := 0
		for _, p := range l.params {
			n := p.NumElements()
			p.AddScaledInPlace(d.Narrow(0, off, n).Reshape(p.Shape()...), t)
			off += n
		}
	})
}

// cloneParams returns copies of the parameters.
func (l *LBFGS) cloneParams() []*vram.Tensor {
	out := make([]*vram.Tensor, len(l.params))
	vram.NoGrad(func() {
		for i, p := range l.params {
			out[i] = p.Clone()
		}
	})
	return out
}

// setParams copies x into the parameters.
func (l *LBFGS) setParams(x []*vram.Tensor) {
	vram.NoGrad(func() {
		for i, p := range l.params {
			p.CopyFrom(x[i])
		}
	})
}

// absMax returns the largest absolute element of t.
func absMax(t *vram.Tensor) float64 { return t.Abs().Max().Item() }

// cubicInterpolate returns the minimizer of the cubic through the points
// (x1, f1) and (x2, f2) with slopes g1 and g2, held in [lo, hi] (PyTorch's
// _cubic_interpolate).
func cubicInterpolate(x1, f1, g1, x2, f2, g2, lo, hi float64) float64 {
	d1 := g1 + g2 - 3*(f1-f2)/(x1-x2)
	d2sq := d1*d1 - g1*g2
	if d2sq < 0 {
		return (lo + hi) / 2
	}
	d2 := math.Sqrt(d2sq)
	var pos float64
	if x1 <= x2 {
		pos = x2 - (x2-x1)*((g2+d2-d1)/(g2-g1+2*d2))
	} else {
		pos = x1 - (x1-x2)*((g1+d2-d1)/(g1-g2+2*d2))
	}
	return math.Min(math.Max(pos, lo), hi)
}

// The strong-Wolfe line search's constants, PyTorch's defaults: the
// sufficient decrease and curvature factors, the change below which the
// bracket is too small, and the most evaluations.
const (
	wolfeC1              = 1e-4
	wolfeC2              = 0.9
	wolfeToleranceChange = 1e-9
	wolfeMaxLS           = 25
)

// strongWolfe is PyTorch's _strong_wolfe: a line search along d from the
// loss f and gradient g (gtd = g·d) with first step t, eval giving the
// loss and gradient at a step. It returns the loss, the gradient and the
// step it settles on, and the number of evaluations.
func strongWolfe(eval func(t float64) (float64, *vram.Tensor), t float64, d *vram.Tensor, f float64, g *vram.Tensor, gtd float64) (float64, *vram.Tensor, float64, int) {
	dNorm := absMax(d)
	fNew, gNew := eval(t)
	evals := 1
	gtdNew := gNew.Dot(d).Item()
	tPrev, fPrev, gPrev, gtdPrev := 0.0, f, g, gtd
	done := false
	lsIter := 0
	var bracket, bracketF, bracketGtd []float64
	var bracketG []*vram.Tensor
	for lsIter < wolfeMaxLS {
		if fNew > f+wolfeC1*t*gtd || lsIter > 1 && fNew >= fPrev {
			bracket, bracketF, bracketG, bracketGtd = []float64{tPrev, t}, []float64{fPrev, fNew}, []*vram.Tensor{gPrev, gNew}, []float64{gtdPrev, gtdNew}
			break
		}
		if math.Abs(gtdNew) <= -wolfeC2*gtd {
			bracket, bracketF, bracketG = []float64{t}, []float64{fNew}, []*vram.Tensor{gNew}
			done = true
			break
		}
		if gtdNew >= 0 {
			bracket, bracketF, bracketG, bracketGtd = []float64{tPrev, t}, []float64{fPrev, fNew}, []*vram.Tensor{gPrev, gNew}, []float64{gtdPrev, gtdNew}
			break
		}
		minStep := t + 0.01*(t-tPrev)
		maxStep := t * 10
		tmp := t
		t = cubicInterpolate(tPrev, fPrev, gtdPrev, t, fNew, gtdNew, minStep, maxStep)
		tPrev, fPrev, gPrev, gtdPrev = tmp, fNew, gNew, gtdNew
		fNew, gNew = eval(t)
		evals++
		gtdNew = gNew.Dot(d).Item()
		lsIter++
	}
	if lsIter == wolfeMaxLS {
		bracket, bracketF, bracketG = []float64{0, t}, []float64{f, fNew}, []*vram.Tensor{g, gNew}
	}
	insufProgress := false
	lowPos, highPos := 0, 1
	if bracketF[0] > bracketF[len(bracketF)-1] {
		lowPos, highPos = 1, 0
	}
	for !done && lsIter < wolfeMaxLS {
		if math.Abs(bracket[1]-bracket[0])*dNorm < wolfeToleranceChange {
			break
		}
		lo, hi := math.Min(bracket[0], bracket[1]), math.Max(bracket[0], bracket[1])
		t = cubicInterpolate(bracket[0], bracketF[0], bracketGtd[0], bracket[1], bracketF[1], bracketGtd[1], lo, hi)
		eps := 0.1 * (hi - lo)
		if math.Min(hi-t, t-lo) < eps {
			if insufProgress || t >= hi || t <= lo {
				if math.Abs(t-hi) < math.Abs(t-lo) {
					t = hi - eps
				} else {
					t = lo + eps
				}
				insufProgress = false
			} else {
				insufProgress = true
			}
		} else {
			insufProgress = false
		}
		fNew, gNew = eval(t)
		evals++
		gtdNew = gNew.Dot(d).Item()
		lsIter++
		if fNew > f+wolfeC1*t*gtd || fNew >= bracketF[lowPos] {
			bracket[highPos], bracketF[highPos], bracketG[highPos], bracketGtd[highPos] = t, fNew, gNew, gtdNew
			lowPos, highPos = 0, 1
			if bracketF[0] > bracketF[1] {
				lowPos, highPos = 1, 0
			}
		} else {
			if math.Abs(gtdNew) <= -wolfeC2*gtd {
				done = true
			} else if gtdNew*(bracket[highPos]-bracket[lowPos]) >= 0 {
				bracket[highPos], bracketF[highPos], bracketG[highPos], bracketGtd[highPos] = bracket[lowPos], bracketF[lowPos], bracketG[lowPos], bracketGtd[lowPos]
			}
			bracket[lowPos], bracketF[lowPos], bracketG[lowPos], bracketGtd[lowPos] = t, fNew, gNew, gtdNew
		}
	}
	return bracketF[lowPos], bracketG[lowPos], bracket[lowPos], evals
}
