package amp

import (
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/optim"
)

// GradScalerConfig configures a [GradScaler]; zero fields take PyTorch's
// defaults.
type GradScalerConfig struct {
	// InitScale is the first loss scale (default 2^16), rounded to
	// float32 as every scale is (see [GradScaler]).
	InitScale float64
	// GrowthFactor multiplies the scale after GrowthInterval steps in a
	// row without inf or NaN gradients (default 2).
	GrowthFactor float64
	// BackoffFactor multiplies the scale after a step with inf or NaN
	// gradients (default 0.5).
	BackoffFactor float64
	// GrowthInterval is the number of clean steps before growing (default
	// 2000).
	GrowthInterval int
	// Disabled makes the scaler a pass-through (PyTorch's enabled=False),
	// so that one training loop serves float32 and mixed precision: Scale
	// multiplies by 1, Unscale and Update do nothing, Step always steps
	// and CurrentScale is 1.
	Disabled bool
}

// GradScalerState is a [GradScaler]'s state, for checkpoints (PyTorch's
// scaler.state_dict()). It encodes to JSON with the field names of PyTorch.
type GradScalerState struct {
	Scale          float64 `json:"scale"`
	GrowthFactor   float64 `json:"growth_factor"`
	BackoffFactor  float64 `json:"backoff_factor"`
	GrowthInterval int     `json:"growth_interval"`
	GrowthTracker  int     `json:"_growth_tracker"`
}

// GradScaler scales the loss before Backward so that small float16
// gradients do not flush to zero, unscales the gradients before the
// optimizer step, skips the step when any gradient is inf or NaN, and
// adapts the scale (torch.amp.GradScaler). Per step: [GradScaler.Scale],
// Backward, optionally [GradScaler.Unscale] (before gradient clipping),
// [GradScaler.Step], [GradScaler.Update]. One scaler serves several
// optimizers, as PyTorch's does: Unscale and Step once per optimizer and
// step, then one Update; an optimizer whose own gradients hold inf or NaN
// skips its step while the others step, and Update backs off when any of
// them did. Its scale is a number of the host and its verdict on inf and
// NaN is read from the device, so it cannot be recorded in a graph
// (vram.CaptureGraph): Scale, Unscale and Step refuse during a capture
// with an error wrapping vram.ErrCapturing, changing nothing. The zero
// GradScaler is ready to use, with PyTorch's defaults, as
// NewGradScaler(GradScalerConfig{}) returns. A GradScaler is not safe for
// concurrent use.
//
// Its scale is always a float32 value, as PyTorch keeps the scale in a
// float32 tensor: a scale given (InitScale, UpdateTo, LoadState) is
// rounded to float32, and growing or backing off rounds the product, so
// that CurrentScale and State give PyTorch's get_scale() and state_dict()
// after the same steps, factors that are not powers of two included.
type GradScaler struct {
	st       GradScalerState
	disabled bool
	// per step: the verdict of the Unscale that unscaled each parameter,
	// the optimizers that stepped, whether any gradient was inf or NaN and
	// whether a loss was scaled
	unscaled map[*vram.Tensor]unscaled
	stepped  map[optim.Optimizer]bool
	foundInf bool
	scaled   bool // Scale ran
}

// unscaled is the record of one parameter's unscaling in a step.
type unscaled struct {
	foundInf bool // the verdict of the call that unscaled it
	byStep   bool // Step unscaled it
	checked  bool // it had a gradient, which was unscaled and checked
}

// toFloat32 returns x rounded to float32, the dtype of PyTorch's scale.
func toFloat32(x float64) float64 { return float64(float32(x)) }

// maxScale is the largest loss scale: PyTorch keeps the scale in a float32
// tensor, and a scale beyond float32's range would turn every float32 loss
// into inf, so that every step would be skipped and backing off would
// never bring the scale back.
const maxScale = math.MaxFloat32

// minScale is the smallest loss scale, 2^-127: Unscale multiplies the
// gradients by the inverse of the scale, which the kernels take in
// float32, and the inverse of a smaller scale is beyond float32's range,
// so that every finite gradient would become inf, every step would be
// skipped and backing off would only take the scale further down.
const minScale = 0x1p-127

// validScale reports whether x is a scale the scaler can work with: a
// positive number within float32's range that rounds there to at least
// minScale.
func validScale(x float64) bool { return x > 0 && x <= maxScale && toFloat32(x) >= minScale }

// ErrUnscaledTwice is returned by [GradScaler.Unscale] when one of the
// parameters was already unscaled since the last [GradScaler.Update], by
// Unscale or by [GradScaler.Step]. It wraps vram.ErrArgument.
var ErrUnscaledTwice = fmt.Errorf("amp: Unscale was already called since the last Update; call it once per step: %w", vram.ErrArgument)

// NewGradScaler returns a scaler with cfg, zero fields taking PyTorch's
// defaults. It returns an error wrapping vram.ErrArgument for a scale that
// is not within [2^-127, float32's largest value] once rounded to float32
// (below 2^-127 its inverse, by which Unscale multiplies, is beyond
// float32's range), a growth factor not above 1, a backoff factor outside
// (0, 1) or a negative growth interval.
func NewGradScaler(cfg GradScalerConfig) (*GradScaler, error) {
	st := withDefaults(GradScalerState{Scale: cfg.InitScale, GrowthFactor: cfg.GrowthFactor, BackoffFactor: cfg.BackoffFactor, GrowthInterval: cfg.GrowthInterval})
	if err := st.check(); err != nil {
		return nil, err
	}
	st.Scale = toFloat32(st.Scale)
	s := &GradScaler{st: st, disabled: cfg.Disabled}
	s.reset()
	return s, nil
}

// withDefaults returns st with its zero fields set to PyTorch's defaults.
func withDefaults(st GradScalerState) GradScalerState {
	if st.Scale == 0 {
		st.Scale = 65536
	}
	if st.GrowthFactor == 0 {
		st.GrowthFactor = 2
	}
	if st.BackoffFactor == 0 {
		st.BackoffFactor = 0.5
	}
	if st.GrowthInterval == 0 {
		st.GrowthInterval = 2000
	}
	return st
}

// ready makes a zero GradScaler one with PyTorch's defaults. A scaler made
// by NewGradScaler or LoadState always has a positive scale, so a scale of
// 0 is the zero value's.
func (s *GradScaler) ready() {
	if s.st.Scale == 0 {
		s.st = withDefaults(GradScalerState{})
		s.reset()
	}
}

func (st GradScalerState) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("amp: GradScaler: %s: %w", fmt.Sprintf(format, args...), vram.ErrArgument)
	}
	switch {
	case !validScale(st.Scale):
		return bad("scale must be in [2^-127, %g] in float32, the dtype of the scale (below, its inverse is beyond float32's range), got %v", float64(maxScale), st.Scale)
	case !(st.GrowthFactor > 1) || math.IsInf(st.GrowthFactor, 1):
		return bad("growth factor must be finite and above 1, got %v", st.GrowthFactor)
	case !(st.BackoffFactor > 0 && st.BackoffFactor < 1):
		return bad("backoff factor must be in (0, 1), got %v", st.BackoffFactor)
	case st.GrowthInterval < 1:
		return bad("growth interval must be at least 1, got %d", st.GrowthInterval)
	case st.GrowthTracker < 0 || st.GrowthTracker >= st.GrowthInterval:
		return bad("growth tracker %d must be in [0, %d)", st.GrowthTracker, st.GrowthInterval)
	}
	return nil
}

// CurrentScale returns the loss scale (PyTorch's get_scale()).
// It is 1 for a disabled scaler.
func (s *GradScaler) CurrentScale() float64 {
	s.ready()
	if s.disabled {
		return 1
	}
	return s.st.Scale
}

// Scale returns loss multiplied by the current scale, a new tensor the
// caller owns; call Backward on it. A float16 or bfloat16 loss is cast to
// float32 first, as PyTorch's float32 scale promotes it, so that the
// scaled loss itself does not overflow (float16 ends at 65504, below the
// default scale). So is a loss of an integer or bool dtype, as PyTorch's
// float32 scale promotes it: scaled in its own dtype it would wrap around
// (an int32 loss of 40000 times 2^16). It panics with an *vram.Error of
// kind vram.ErrArgument for a nil loss or a zero Tensor (made without a
// factory), and of kind vram.ErrReleased for a released one.
func (s *GradScaler) Scale(loss *vram.Tensor) *vram.Tensor {
	switch {
	case loss == nil:
		panic(&vram.Error{Op: "grad scaler scale", Kind: vram.ErrArgument, Detail: "nil loss"})
	case zeroTensor(loss):
		panic(&vram.Error{Op: "grad scaler scale", Kind: vram.ErrArgument, Detail: "the loss is a zero Tensor, made without a factory"})
	case loss.Released():
		panic(&vram.Error{Op: "grad scaler scale", Kind: vram.ErrReleased, Detail: "the loss was released; scale it before releasing it"})
	}
	s.ready()
	if s.disabled {
		return loss.MulScalar(1)
	}
	if err := refuseCapture("grad scaler scale", loss); err != nil {
		panic(err)
	}
	var out *vram.Tensor
	if dt := loss.DType(); dt == vram.Float16 || dt == vram.BFloat16 || !dt.IsFloat() {
		l := loss.Cast(vram.Float32)
		defer l.Release()
		out = l.MulScalar(s.st.Scale)
	} else {
		out = loss.MulScalar(s.st.Scale)
	}
	s.scaled = true
	return out
}

// Unscale divides the gradient of every parameter in params by the scale,
// in place, and reports whether any gradient holds inf or NaN (or
// overflows when unscaled); parameters without a gradient are skipped, and
// a parameter listed twice (a weight tied between modules) is unscaled once.
// Call it before clipping gradients; Step then does not unscale again.
// Per device, the contiguous floating-point gradients are unscaled and
// checked by one fused kernel ([backend.FusedUnscale]: one CUDA launch for
// up to 28 gradients of a dtype, the verdict left on the device), the
// others by composed elementwise and sum ops; the host then reads one flag
// per device, its only synchronisation. With several optimizers, call it
// once per optimizer with that optimizer's parameters. It returns
// ErrUnscaledTwice when one of params was already unscaled before Update
// (also by Step, as PyTorch refuses unscale_ after step), an error
// wrapping vram.ErrArgument for a nil parameter or a zero Tensor (made
// without a factory) and one wrapping
// vram.ErrReleased for a released one, all changing nothing, and the
// device's error when a kernel fails.
func (s *GradScaler) Unscale(params []*vram.Tensor) (foundInf bool, err error) {
	s.ready()
	if s.disabled {
		return false, nil
	}
	for i, p := range params {
		if p == nil {
			return false, fmt.Errorf("amp: GradScaler.Unscale: parameter %d is nil: %w", i, vram.ErrArgument)
		}
		if zeroTensor(p) {
			return false, fmt.Errorf("amp: GradScaler.Unscale: parameter %d is a zero Tensor, made without a factory: %w", i, vram.ErrArgument)
		}
		if p.Released() {
			return false, fmt.Errorf("amp: GradScaler.Unscale: parameter %d was released, and its gradient with it: %w", i, vram.ErrReleased)
		}
		if u, ok := s.unscaled[p]; ok {
			if u.byStep {
				return s.foundInf, fmt.Errorf("%w (parameter %d was unscaled by Step; Unscale goes before Step)", ErrUnscaledTwice, i)
			}
			return s.foundInf, ErrUnscaledTwice
		}
	}
	if err := refuseCapture("grad scaler unscale", params...); err != nil {
		return false, err
	}
	inv := 1 / s.st.Scale
	bad := false
	vram.NoGrad(func() {
		vram.Tidy(func() {
			var devs []vram.Device
			byDev := map[vram.Device][]*vram.Tensor{}
			seen := map[*vram.Tensor]bool{} // a gradient listed twice (a tied weight) is unscaled once
			for _, p := range params {
				g := p.Grad()
				if g == nil || seen[g] {
					continue
				}
				seen[g] = true
				if _, ok := byDev[g.Device()]; !ok {
					devs = append(devs, g.Device())
				}
				byDev[g.Device()] = append(byDev[g.Device()], g)
			}
			for _, d := range devs {
				var b bool
				if b, err = unscaleOn(d, byDev[d], inv); err != nil {
					return
				}
				bad = bad || b
			}
		})
	})
	if err != nil {
		return false, err
	}
	for _, p := range params {
		s.unscaled[p] = unscaled{foundInf: bad, checked: p.Grad() != nil}
	}
	s.foundInf = s.foundInf || bad
	return bad, nil
}

// unscaleOn unscales grads, all on device d, by inv and reports whether
// one held inf or NaN, reading one flag from d. It runs inside Tidy.
func unscaleOn(d vram.Device, grads []*vram.Tensor, inv float64) (bool, error) {
	found := vram.Zeros(vram.Shape{1}, vram.Float32, d)
	var rest []*vram.Tensor
	fused := grads[:0:0]
	for _, g := range grads {
		if g.IsContiguous() && g.DType().IsFloat() {
			fused = append(fused, g)
		} else {
			rest = append(rest, g)
		}
	}
	if len(fused) > 0 {
		err := rawViews(append(fused, found), func(r vram.RawTensor, vs []backend.View) error {
			fu, ok := r.Device.(backend.FusedUnscale)
			if !ok {
				return backend.ErrNotImplemented
			}
			return fu.UnscaleCheck(r.Stream, vs[:len(vs)-1], inv, vs[len(vs)-1])
		})
		if errors.Is(err, backend.ErrNotImplemented) {
			rest = append(rest, fused...)
		} else if err != nil {
			return false, fmt.Errorf("amp: GradScaler.Unscale on %s: %w", d, err)
		} else {
			// The kernel wrote them through vram.Raw, which autograd does
			// not see: count the writes, as the composed path's in-place
			// multiplication does.
			for _, g := range fused {
				g.IncrementVersion()
			}
		}
	}
	// The composed path: the sum of g·0 is 0 when every element of g is
	// finite and NaN as soon as one is inf or NaN; the flag adds them up.
	flag := found
	for _, g := range rest {
		g.MulScalarInPlace(inv)
		flag = flag.Add(g.MulScalar(0).Sum().Cast(vram.Float32))
	}
	return flag.Item() != 0, nil // NaN != 0 as well
}

// rawViews calls fn with the backend views of ts, all on one device, in
// order, holding every tensor while fn runs; r is the last tensor's raw
// access (its device and the calling goroutine's stream there). fn's error
// is returned as it is.
func rawViews(ts []*vram.Tensor, fn func(r vram.RawTensor, vs []backend.View) error) error {
	vs := make([]backend.View, 0, len(ts))
	var ferr error
	var next func(i int) error
	next = func(i int) error {
		return vram.Raw(ts[i], func(r vram.RawTensor) error {
			vs = append(vs, r.View)
			if i+1 < len(ts) {
				return next(i + 1)
			}
			ferr = fn(r, vs)
			return nil
		})
	}
	if err := next(0); err != nil {
		return err
	}
	return ferr
}

// Step unscales the gradients of params unless Unscale already did this
// step, then runs opt.Step unless one of their gradients is inf or NaN. It
// reports whether the optimizer stepped. params are the parameters opt
// updates; with several optimizers, each has its own Step. An optimizer
// that lists its parameters (those of package optim, by their groups, and
// any with a Parameters() []*vram.Tensor method, as parallel's
// ReplicaOptimizer) would step one left out of params with its gradient
// still scaled: Step panics with an *vram.Error of kind vram.ErrArgument
// naming it, stepping nothing, when one of them with a gradient is missing
// (PyTorch's step takes the optimizer's own); a disabled scaler, which
// scales nothing, does not check. A
// device that fails while unscaling makes it panic with that error, as a
// failing op does, the optimizer not stepped. A second Step before
// [GradScaler.Update] for the same optimizer panics with an *vram.Error of
// kind vram.ErrArgument, stepping nothing, as PyTorch's raises: it would
// apply the same gradients twice. So do a nil optimizer (a nil pointer
// too), one whose value cannot be compared (a struct with a slice field
// and value receivers, or a map: pass a pointer), empty params (the
// optimizer would step with gradients still scaled), a nil parameter or a
// zero Tensor, a released one (with kind vram.ErrReleased), and params
// none of which has a gradient, or had one when Unscale unscaled it
// (Backward forgotten), as PyTorch's step raises "No inf checks were
// recorded for this optimizer"; a disabled scaler steps then. An
// optimizer whose own Step panics (the panic passes on) has not stepped,
// as in PyTorch, and may Step again before Update, its gradients unscaled
// once.
func (s *GradScaler) Step(opt optim.Optimizer, params []*vram.Tensor) bool {
	s.ready()
	if opt == nil || isNilPointer(opt) {
		panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrArgument, Detail: "nil optimizer"})
	}
	if !reflect.ValueOf(opt).Comparable() {
		panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("an optimizer of type %T cannot be compared with another, so Step cannot tell whether it already stepped; "+
				"pass a pointer to it, as optim's constructors return", opt)})
	}
	if s.stepped[opt] {
		panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrArgument,
			Detail: "Step was already called since the last Update; call Update after each Step"})
	}
	if len(params) == 0 {
		panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrArgument,
			Detail: "no parameters: pass the ones the optimizer updates, so that their gradients are unscaled and checked"})
	}
	for i, p := range params {
		if p == nil {
			panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrArgument, Detail: fmt.Sprintf("parameter %d is nil", i)})
		}
		if zeroTensor(p) {
			panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrArgument, Detail: fmt.Sprintf("parameter %d is a zero Tensor, made without a factory", i)})
		}
		if p.Released() {
			panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrReleased, Detail: fmt.Sprintf("parameter %d was released, and its gradient with it", i)})
		}
	}
	if s.disabled {
		opt.Step()
		return true
	}
	if err := refuseCapture("grad scaler step", params...); err != nil {
		panic(err)
	}
	s.checkCovered(opt, params)
	checked := false
	for _, p := range params {
		if u, ok := s.unscaled[p]; ok {
			checked = checked || u.checked
		} else {
			checked = checked || p.Grad() != nil
		}
	}
	if !checked {
		panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("none of the %d parameters has a gradient to unscale and check for inf or NaN "+
				"(or had one when Unscale ran): call Backward on the scaled loss before Step", len(params))})
	}
	var todo []*vram.Tensor
	for _, p := range params {
		if _, ok := s.unscaled[p]; !ok {
			todo = append(todo, p)
		}
	}
	if len(todo) > 0 {
		if _, err := s.Unscale(todo); err != nil {
			panic(err) // not ErrUnscaledTwice: not unscaled yet
		}
		for _, p := range todo {
			u := s.unscaled[p]
			u.byStep = true
			s.unscaled[p] = u
		}
	}
	for _, p := range params {
		if s.unscaled[p].foundInf {
			s.stepped[opt] = true
			return false
		}
	}
	opt.Step()
	// Only once it returns: an optimizer whose Step panicked has not
	// stepped, and may Step again (its gradients stay unscaled once).
	s.stepped[opt] = true
	return true
}

// Update adapts the scale after a step: times the backoff factor when the
// step found inf or NaN gradients, times the growth factor after
// GrowthInterval clean steps in a row, unless that would take it past
// float32's largest value (PyTorch grows only to a finite float32 scale);
// each product is rounded to float32, and a backoff that would take the
// scale below 2^-127 (whose inverse float32 cannot hold, so that every
// gradient would unscale to inf and every later step be skipped) leaves it
// as it is. It starts the next step.
//
// A step whose gradients were never unscaled counts as clean, unless a
// loss was scaled in it: Update after [GradScaler.Scale] with neither
// Unscale nor Step since the last Update panics with an *vram.Error of
// kind vram.ErrArgument, changing nothing, as PyTorch's update raises "No
// inf checks were recorded prior to update". That is an Update per
// micro-batch of an accumulated step, which would change the scale while
// the gradients summed so far are still multiplied by the old one, so
// that Step would unscale their sum by the wrong scale: Step and Update
// once per optimizer step, after the last micro-batch.
func (s *GradScaler) Update() {
	s.ready()
	if s.disabled {
		return
	}
	if s.scaled && len(s.unscaled) == 0 && len(s.stepped) == 0 {
		panic(&vram.Error{Op: "grad scaler update", Kind: vram.ErrArgument,
			Detail: "a loss was scaled since the last Update, but no gradient was unscaled and checked for inf or NaN (neither Unscale nor Step ran): " +
				"the gradients are still multiplied by the scale, which Update would change under them; " +
				"with gradient accumulation, call Step and Update once per optimizer step, after the last micro-batch"})
	}
	if s.foundInf {
		// Kept at or above minScale, so that Unscale's inverse stays
		// finite and LoadState accepts what State returns, even after a
		// long run of overflowing steps.
		if backed := toFloat32(s.st.Scale * s.st.BackoffFactor); backed >= minScale {
			s.st.Scale = backed
		}
		s.st.GrowthTracker = 0
	} else {
		s.st.GrowthTracker++
		if s.st.GrowthTracker == s.st.GrowthInterval {
			if grown := toFloat32(s.st.Scale * s.st.GrowthFactor); grown <= maxScale {
				s.st.Scale = grown
			}
			s.st.GrowthTracker = 0
		}
	}
	s.reset()
}

// UpdateTo ends a step as [GradScaler.Update] does, but sets the scale to
// scale instead of adapting it (PyTorch's update(new_scale)): whether the
// step found inf or NaN gradients does not matter, and the count of clean
// steps toward growth is left as it was. It returns an error wrapping
// vram.ErrArgument, changing nothing, unless scale, rounded to float32, is
// within [2^-127, float32's largest value], as for NewGradScaler; the scale
// set is scale rounded to float32. A disabled scaler ignores it.
func (s *GradScaler) UpdateTo(scale float64) error {
	s.ready()
	if s.disabled {
		return nil
	}
	if !validScale(scale) {
		return fmt.Errorf("amp: GradScaler.UpdateTo: scale must be in [2^-127, %g] in float32, the dtype of the scale (below, its inverse is beyond float32's range), got %v: %w", float64(maxScale), scale, vram.ErrArgument)
	}
	s.st.Scale = toFloat32(scale)
	s.reset()
	return nil
}

// reset starts a step.
func (s *GradScaler) reset() {
	s.unscaled = map[*vram.Tensor]unscaled{}
	s.stepped = map[optim.Optimizer]bool{}
	s.foundInf = false
	s.scaled = false
}

// State returns the scaler's state for a checkpoint.
func (s *GradScaler) State() GradScalerState {
	s.ready()
	return s.st
}

// LoadState restores a state from [GradScaler.State]. It returns an error
// wrapping vram.ErrArgument, changing nothing, for a state NewGradScaler would reject or whose growth
// tracker is outside [0, GrowthInterval). The scale is rounded to float32,
// as PyTorch's load_state_dict fills its float32 scale. A step under way
// stays as it was, as PyTorch's per-optimizer records do: gradients that
// Unscale or Step unscaled are not unscaled again, an optimizer that
// stepped may not Step again before Update, and Update backs off when the
// step found inf or NaN.
func (s *GradScaler) LoadState(st GradScalerState) error {
	if err := st.check(); err != nil {
		return err
	}
	st.Scale = toFloat32(st.Scale)
	s.st = st
	if s.unscaled == nil { // the zero GradScaler: no step under way
		s.reset()
	}
	return nil
}

// refuseCapture returns an *vram.Error wrapping vram.ErrCapturing when the
// current stream of the device of one of ts is being captured into a graph
// (vram.CaptureGraph): the scale is a number of the host, which replays
// would repeat while Update changes it, and the verdict on inf and NaN is
// read on the host, which a capture cannot do.
func refuseCapture(op string, ts ...*vram.Tensor) error {
	for _, t := range ts {
		if t != nil && vram.IsCurrentStreamCapturing(t.Device()) {
			return &vram.Error{Op: op, Kind: vram.ErrCapturing,
				Detail: "a GradScaler cannot be recorded in a graph: its scale lives on the host and its check for inf and NaN reads the device; " +
					"capture the step without it (bfloat16 autocast needs no scaling) or run the scaled step eagerly"}
		}
	}
	return nil
}

// zeroTensor reports whether t is a zero Tensor (&vram.Tensor{}, made
// without a factory), whose methods panic rather than answer; the scaler
// checks for one before asking a tensor anything, so that it refuses it
// as its own misuse.
func zeroTensor(t *vram.Tensor) bool {
	return t != nil && vram.Catch(func() { t.Released() }) != nil
}

// ownParam is a parameter that an optimizer lists as its own: the index-th
// of its group (-1 when the optimizer has no groups).
type ownParam struct {
	p            *vram.Tensor
	group, index int
}

// ownParams returns the parameters opt updates when it lists them: those
// of every group of an optimizer of package optim (GroupParams), or
// Parameters() of one that has that method (parallel's
// ReplicaOptimizer). It returns nil for an optimizer that lists none.
func ownParams(opt optim.Optimizer) []ownParam {
	var own []ownParam
	switch o := opt.(type) {
	case interface{ Parameters() []*vram.Tensor }:
		for i, p := range o.Parameters() {
			own = append(own, ownParam{p, -1, i})
		}
	case interface {
		NumGroups() int
		GroupParams(i int) []*vram.Tensor
	}:
		for g := range o.NumGroups() {
			for i, p := range o.GroupParams(g) {
				own = append(own, ownParam{p, g, i})
			}
		}
	}
	return own
}

// checkCovered panics with an *vram.Error of kind vram.ErrArgument when
// opt lists a parameter of its own with a gradient that is not among
// params: opt would step it with its gradient still multiplied by the
// scale.
func (s *GradScaler) checkCovered(opt optim.Optimizer, params []*vram.Tensor) {
	own := ownParams(opt)
	if len(own) == 0 {
		return
	}
	listed := make(map[*vram.Tensor]bool, len(params))
	for _, p := range params {
		listed[p] = true
	}
	for _, o := range own {
		if o.p == nil || listed[o.p] || zeroTensor(o.p) || o.p.Released() || o.p.Grad() == nil {
			continue
		}
		where := fmt.Sprintf("parameter %d of the optimizer", o.index)
		if o.group >= 0 {
			where = fmt.Sprintf("parameter %d of group %d of the optimizer", o.index, o.group)
		}
		panic(&vram.Error{Op: "grad scaler step", Kind: vram.ErrArgument,
			Detail: fmt.Sprintf("%s (shape %v) has a gradient but is not among the %d params: the optimizer would step it with its gradient "+
				"still multiplied by the scale %g; pass every parameter the optimizer updates", where, o.p.Shape(), len(params), s.st.Scale)})
	}
}

// isNilPointer reports whether opt holds a nil pointer (a "var opt
// *optim.SGD" left unset).
func isNilPointer(opt optim.Optimizer) bool {
	v := reflect.ValueOf(opt)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
