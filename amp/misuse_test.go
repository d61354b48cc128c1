package amp_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/optim"
)

// sliceOpt is an optimizer of a struct type with a slice field, written
// with value receivers: its values cannot be compared, nor be map keys.
type sliceOpt struct {
	params []*vram.Tensor
	steps  *int
}

func (o sliceOpt) Step()         { *o.steps++ }
func (o sliceOpt) ZeroGrad()     {}
func (o sliceOpt) LR() float64   { return 0 }
func (o sliceOpt) SetLR(float64) {}

// mapOpt is an optimizer of a map type.
type mapOpt map[string]int

func (o mapOpt) Step()         { o["steps"]++ }
func (o mapOpt) ZeroGrad()     {}
func (o mapOpt) LR() float64   { return 0 }
func (o mapOpt) SetLR(float64) {}

// boxOpt is of a comparable struct type whose field holds a value that
// is not: comparing two of them panics at run time.
type boxOpt struct{ inner any }

func (boxOpt) Step()         {}
func (boxOpt) ZeroGrad()     {}
func (boxOpt) LR() float64   { return 0 }
func (boxOpt) SetLR(float64) {}

// TestGradScalerStepUncomparableOptimizer: Step tells optimizers apart to
// refuse a second Step before Update, so an optimizer value that cannot be
// compared (a struct with a slice field and value receivers, a map type)
// makes it panic with an *vram.Error of kind vram.ErrArgument that says
// to pass a pointer, rather than with the runtime's "hash of unhashable
// type", changing nothing: the gradient stays scaled and a later Step
// with a pointer steps.
func TestGradScalerStepUncomparableOptimizer(t *testing.T) {
	steps := 0
	tests := []struct {
		name string
		opt  optim.Optimizer
	}{
		{"struct with a slice", sliceOpt{steps: &steps}},
		{"map", mapOpt{}},
		{"comparable type holding a slice", boxOpt{inner: []int{1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := vram.Ones(vram.Shape{4}, vram.WithGrad())
			defer p.Release()
			p.SetGrad(vram.Full(vram.Shape{4}, 8, vram.Float32))
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panicked with %v", r)
					}
				}()
				err = vram.Catch(func() { s.Step(tc.opt, []*vram.Tensor{p}) })
			}()
			var e *vram.Error
			if !errors.Is(err, vram.ErrArgument) || !errors.As(err, &e) {
				t.Fatalf("got %v, want an *vram.Error matching vram.ErrArgument", err)
			}
			if g := p.Grad().Float32s()[0]; g != 8 {
				t.Errorf("the gradient became %v; it must stay scaled", g)
			}
			if steps != 0 {
				t.Errorf("the optimizer stepped %d times", steps)
			}
			opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !s.Step(opt, []*vram.Tensor{p}) {
				t.Error("a Step with a pointer after the refusal did not step")
			}
			s.Update()
		})
	}
}

// TestAutocastConcurrentCastPlans runs regions on many goroutines at once
// that cast several weights each, some shared by every goroutine and some
// of each goroutine's own, with Backward, so that the plans of casts that
// regions remember and read (package-wide, shared by every goroutine) are
// written, read, cast ahead from and evicted concurrently; run it with
// -race. Every goroutine must get its products in its region's dtype and
// the float32 gradients of the same steps without autocast (the values are
// exact in every dtype).
func TestAutocastConcurrentCastPlans(t *testing.T) {
	d := vram.Sim(0)
	shared := []*vram.Tensor{
		vram.Full(vram.Shape{4, 4}, 0.5, vram.Float32, d).SetRequiresGrad(true),
		vram.Full(vram.Shape{4, 4}, 0.25, vram.Float32, d).SetRequiresGrad(true),
	}
	defer func() {
		for _, w := range shared {
			w.Release()
		}
	}()
	x := vram.Ones(vram.Shape{2, 4}, vram.Float32, d)
	defer x.Release()
	// step returns the gradient of the goroutine's own weight, placed
	// first or second among the weights.
	step := func(dt vram.DType, second bool) (vram.DType, []float32) {
		var out vram.DType
		var grad []float32
		vram.Tidy(func() {
			own := vram.Ones(vram.Shape{4, 4}, vram.Float32, d).SetRequiresGrad(true)
			ws := []*vram.Tensor{own, shared[0], shared[1]}
			if second {
				ws = []*vram.Tensor{shared[0], own, shared[1]}
			}
			var y *vram.Tensor
			forward := func() {
				y = x
				for _, w := range ws {
					y = vram.Linear(y, w, nil)
				}
				out = y.DType()
			}
			if dt == vram.Float32 {
				forward()
			} else {
				amp.Autocast(dt, forward)
			}
			y.Float().Sum().Backward()
			grad = own.Grad().Float32s()
		})
		return out, grad
	}
	var want [2][]float32
	for i := range want {
		_, want[i] = step(vram.Float32, i == 1)
	}
	dts := []vram.DType{vram.Float16, vram.BFloat16}
	var wg sync.WaitGroup
	errs := make(chan string, 256)
	for i := range 8 {
		dt := dts[i%len(dts)]
		wg.Go(func() {
			// more plans than the package keeps, so that old ones are
			// evicted while others are read
			for j := range 12 {
				got, grad := step(dt, j%2 == 1)
				if got != dt {
					errs <- fmt.Sprintf("got %v, want %v", got, dt)
				}
				if !slices.Equal(grad, want[j%2]) {
					errs <- fmt.Sprintf("%v: gradient %v, want %v", dt, grad, want[j%2])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestGradScalerZeroTensor: a zero Tensor (&vram.Tensor{}, made without a
// factory) among the parameters of Unscale or Step, or as the loss of
// Scale, is refused as a nil one is: Unscale returns an error wrapping
// vram.ErrArgument, Step and Scale panic with an *vram.Error of that kind
// for their own op, rather than with the error of the tensor method they
// happened to call first ("released", "device"), changing nothing. A
// released loss panics with vram.ErrReleased for Scale.
func TestGradScalerZeroTensor(t *testing.T) {
	tests := []struct {
		name string
		op   string // the *vram.Error's Op, "" for Unscale's returned error
		kind error
		call func(s *amp.GradScaler, opt optim.Optimizer, p *vram.Tensor) error
	}{
		{"Unscale", "", vram.ErrArgument, func(s *amp.GradScaler, _ optim.Optimizer, p *vram.Tensor) error {
			_, err := s.Unscale([]*vram.Tensor{p, {}})
			return err
		}},
		{"Step", "grad scaler step", vram.ErrArgument, func(s *amp.GradScaler, opt optim.Optimizer, p *vram.Tensor) error {
			return vram.Catch(func() { s.Step(opt, []*vram.Tensor{p, {}}) })
		}},
		{"Scale", "grad scaler scale", vram.ErrArgument, func(s *amp.GradScaler, _ optim.Optimizer, _ *vram.Tensor) error {
			return vram.Catch(func() { s.Scale(&vram.Tensor{}) })
		}},
		{"Scale released", "grad scaler scale", vram.ErrReleased, func(s *amp.GradScaler, _ optim.Optimizer, _ *vram.Tensor) error {
			l := vram.Ones(vram.Shape{})
			l.Release()
			return vram.Catch(func() { s.Scale(l) })
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := vram.Ones(vram.Shape{2}, vram.WithGrad())
			defer p.Release()
			p.SetGrad(vram.Full(vram.Shape{2}, 4, vram.Float32))
			opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 1})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
			err = tc.call(s, opt, p)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want an error matching %v", err, tc.kind)
			}
			if tc.op != "" {
				var e *vram.Error
				if !errors.As(err, &e) || e.Op != tc.op {
					t.Fatalf("got %v, want an *vram.Error for %q", err, tc.op)
				}
			} else if !strings.Contains(err.Error(), "parameter 1") {
				t.Errorf("got %q, want it to name parameter 1", err)
			}
			if g := p.Grad().Float32s()[0]; g != 4 || p.Float32s()[0] != 1 {
				t.Errorf("the gradient became %v and the parameter %v; both must stay", g, p.Float32s()[0])
			}
			if !s.Step(opt, []*vram.Tensor{p}) {
				t.Error("a Step after the refusal did not step")
			}
		})
	}
}

// flakyOpt is an optimizer whose first Step panics, as one whose device
// fails does.
type flakyOpt struct {
	p     *vram.Tensor
	steps int
}

func (o *flakyOpt) Step() {
	o.steps++
	if o.steps == 1 {
		panic(&vram.Error{Op: "flaky step", Kind: vram.ErrUnavailable, Detail: "the device went away"})
	}
	vram.NoGrad(func() { o.p.SubInPlace(o.p.Grad()) })
}
func (o *flakyOpt) ZeroGrad()     {}
func (o *flakyOpt) LR() float64   { return 1 }
func (o *flakyOpt) SetLR(float64) {}

// TestGradScalerStepAfterOptimizerPanic: an optimizer whose Step panics
// has not stepped, so GradScaler.Step, which passes the panic on, does not
// count it as stepped, as PyTorch marks an optimizer stepped only once its
// step returns: a second Step before Update steps, with the gradients
// unscaled once, rather than being refused as a Step twice.
func TestGradScalerStepAfterOptimizerPanic(t *testing.T) {
	p := vram.Ones(vram.Shape{2}, vram.WithGrad())
	defer p.Release()
	p.SetGrad(vram.Full(vram.Shape{2}, 8, vram.Float32))
	opt := &flakyOpt{p: p}
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
	if err := vram.Catch(func() { s.Step(opt, []*vram.Tensor{p}) }); !errors.Is(err, vram.ErrUnavailable) {
		t.Fatalf("first Step: %v, want the optimizer's panic", err)
	}
	var stepped bool
	if err := vram.Catch(func() { stepped = s.Step(opt, []*vram.Tensor{p}) }); err != nil || !stepped {
		t.Fatalf("second Step: stepped %v, %v; want a step", stepped, err)
	}
	if g, v := p.Grad().Float32s()[0], p.Float32s()[0]; g != 2 || v != -1 {
		t.Errorf("gradient %v and parameter %v, want 2 (unscaled once) and -1", g, v)
	}
	s.Update()
}

// TestGradScalerLoadStateRefusals: every state NewGradScaler would refuse
// (a scale that is not a positive finite float32, a growth factor not
// finite above 1, a backoff factor outside (0, 1), a growth interval below
// 1, a growth tracker outside [0, interval)) makes LoadState return an
// error wrapping vram.ErrArgument, the state as it was.
func TestGradScalerLoadStateRefusals(t *testing.T) {
	good := amp.GradScalerState{Scale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 4, GrowthTracker: 1}
	tests := []struct {
		name string
		edit func(st *amp.GradScalerState)
	}{
		{"zero scale", func(st *amp.GradScalerState) { st.Scale = 0 }},
		{"negative scale", func(st *amp.GradScalerState) { st.Scale = -1 }},
		{"NaN scale", func(st *amp.GradScalerState) { st.Scale = math.NaN() }},
		{"infinite scale", func(st *amp.GradScalerState) { st.Scale = math.Inf(1) }},
		{"scale beyond float32", func(st *amp.GradScalerState) { st.Scale = 1e39 }},
		{"scale rounding to 0 in float32", func(st *amp.GradScalerState) { st.Scale = 1e-50 }},
		{"growth factor 1", func(st *amp.GradScalerState) { st.GrowthFactor = 1 }},
		{"growth factor below 1", func(st *amp.GradScalerState) { st.GrowthFactor = 0.5 }},
		{"NaN growth factor", func(st *amp.GradScalerState) { st.GrowthFactor = math.NaN() }},
		{"infinite growth factor", func(st *amp.GradScalerState) { st.GrowthFactor = math.Inf(1) }},
		{"backoff factor 0", func(st *amp.GradScalerState) { st.BackoffFactor = 0 }},
		{"backoff factor 1", func(st *amp.GradScalerState) { st.BackoffFactor = 1 }},
		{"negative backoff factor", func(st *amp.GradScalerState) { st.BackoffFactor = -0.5 }},
		{"NaN backoff factor", func(st *amp.GradScalerState) { st.BackoffFactor = math.NaN() }},
		{"zero growth interval", func(st *amp.GradScalerState) { st.GrowthInterval = 0 }},
		{"negative growth interval", func(st *amp.GradScalerState) { st.GrowthInterval = -5 }},
		{"negative growth tracker", func(st *amp.GradScalerState) { st.GrowthTracker = -1 }},
		{"growth tracker at the interval", func(st *amp.GradScalerState) { st.GrowthTracker = 4 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{})
			if err := s.LoadState(good); err != nil {
				t.Fatal(err)
			}
			bad := good
			tc.edit(&bad)
			if err := s.LoadState(bad); !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("LoadState(%+v): %v, want an error matching vram.ErrArgument", bad, err)
			}
			if s.State() != good {
				t.Errorf("a refused LoadState left %+v, want %+v", s.State(), good)
			}
		})
	}
}

// TestGradScalerLoadStateMidStep: LoadState sets the scale and its
// factors but leaves the step under way as it was, as PyTorch's
// load_state_dict leaves the per-optimizer records: gradients unscaled
// before it are not unscaled again by Step, and an optimizer that stepped
// before it is still refused a second Step until Update.
func TestGradScalerLoadStateMidStep(t *testing.T) {
	st := amp.GradScalerState{Scale: 16, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000}
	tests := []struct {
		name   string
		before func(s *amp.GradScaler, opt optim.Optimizer, p *vram.Tensor)
		after  func(t *testing.T, s *amp.GradScaler, opt optim.Optimizer, p *vram.Tensor)
	}{
		{"after Unscale", func(s *amp.GradScaler, _ optim.Optimizer, p *vram.Tensor) {
			if _, err := s.Unscale([]*vram.Tensor{p}); err != nil {
				panic(err)
			}
		}, func(t *testing.T, s *amp.GradScaler, opt optim.Optimizer, p *vram.Tensor) {
			if !s.Step(opt, []*vram.Tensor{p}) {
				t.Fatal("Step did not step")
			}
			if g := p.Grad().Float32s()[0]; g != 2 {
				t.Errorf("gradient %v, want 2: unscaled once, by the scale before LoadState", g)
			}
		}},
		{"after Step", func(s *amp.GradScaler, opt optim.Optimizer, p *vram.Tensor) {
			s.Step(opt, []*vram.Tensor{p})
		}, func(t *testing.T, s *amp.GradScaler, opt optim.Optimizer, p *vram.Tensor) {
			if err := vram.Catch(func() { s.Step(opt, []*vram.Tensor{p}) }); !errors.Is(err, vram.ErrArgument) {
				t.Errorf("a second Step after LoadState: %v, want a refusal matching vram.ErrArgument", err)
			}
			if _, err := s.Unscale([]*vram.Tensor{p}); !errors.Is(err, amp.ErrUnscaledTwice) {
				t.Errorf("Unscale after Step and LoadState: %v, want ErrUnscaledTwice", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := vram.Ones(vram.Shape{2}, vram.WithGrad())
			defer p.Release()
			p.SetGrad(vram.Full(vram.Shape{2}, 8, vram.Float32))
			opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 1})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
			tc.before(s, opt, p)
			if err := s.LoadState(st); err != nil {
				t.Fatal(err)
			}
			tc.after(t, s, opt, p)
			s.Update()
			if s.CurrentScale() != 16 {
				t.Errorf("scale %v after Update, want the loaded 16", s.CurrentScale())
			}
		})
	}
}

// TestGradScalerSmallestScale: Unscale multiplies by the inverse of the
// scale, which the kernels take in float32, so a scale below 2^-127 (whose
// inverse float32 cannot hold) would turn every finite gradient into inf,
// skip every step and back off forever. NewGradScaler, UpdateTo and
// LoadState refuse such a scale with an error matching vram.ErrArgument,
// changing nothing, and Update's backoff stops above it, so that a step
// with finite gradients still steps.
func TestGradScalerSmallestScale(t *testing.T) {
	const smallest = 0x1p-127
	good := amp.GradScalerState{Scale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 4}
	set := []struct {
		name string
		set  func(s *amp.GradScaler, scale float64) error
	}{
		{"NewGradScaler", func(s *amp.GradScaler, scale float64) error {
			_, err := amp.NewGradScaler(amp.GradScalerConfig{InitScale: scale})
			return err
		}},
		{"UpdateTo", func(s *amp.GradScaler, scale float64) error { return s.UpdateTo(scale) }},
		{"LoadState", func(s *amp.GradScaler, scale float64) error {
			st := good
			st.Scale = scale
			return s.LoadState(st)
		}},
	}
	for _, tc := range set {
		for _, scale := range []float64{0x1p-128, 1e-40, 1e-45} {
			t.Run(fmt.Sprintf("%s %g", tc.name, scale), func(t *testing.T) {
				s, _ := amp.NewGradScaler(amp.GradScalerConfig{})
				if err := s.LoadState(good); err != nil {
					t.Fatal(err)
				}
				if err := tc.set(s, scale); !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("scale %g: %v, want an error matching vram.ErrArgument", scale, err)
				}
				if s.State() != good {
					t.Errorf("a refused scale left %+v, want %+v", s.State(), good)
				}
			})
		}
		t.Run(tc.name+" smallest", func(t *testing.T) {
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{})
			if err := tc.set(s, smallest); err != nil {
				t.Fatalf("scale 2^-127: %v", err)
			}
		})
	}
	t.Run("backoff", func(t *testing.T) {
		for _, d := range devices {
			p := vram.Ones(vram.Shape{2}, d, vram.WithGrad())
			opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 1})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 0x1p-126})
			for range 3 {
				p.SetGrad(vram.FromSlice([]float32{float32(math.Inf(1)), 0}, vram.Shape{2}, d))
				if s.Step(opt, []*vram.Tensor{p}) {
					t.Fatalf("%v: Step ran on an inf gradient", d)
				}
				s.Update()
			}
			if got := s.CurrentScale(); got != smallest {
				t.Fatalf("%v: scale %g after backing off, want 2^-127", d, got)
			}
			scaled := s.Scale(p.Sum())
			p.SetGrad(nil)
			scaled.Backward()
			if !s.Step(opt, []*vram.Tensor{p}) {
				t.Fatalf("%v: Step skipped finite gradients at the smallest scale; gradient %v", d, p.Grad().Float32s())
			}
			if g := p.Grad().Float32s(); g[0] != 1 || g[1] != 1 {
				t.Errorf("%v: unscaled gradient %v, want [1 1]", d, g)
			}
			s.Update()
			scaled.Release()
			p.Release()
		}
	})
}

// TestGradScalerStepMissingParameters: an optimizer steps every parameter
// of its own that has a gradient, so one left out of Step's params would
// be stepped with its gradient still multiplied by the scale (PyTorch's
// step cannot miss one: it takes the optimizer's own). For an optimizer
// that lists its parameters (optim's, by their groups), Step panics with
// an *vram.Error of kind vram.ErrArgument that names the one missing,
// changing nothing: no gradient unscaled, the optimizer not stepped, and
// a Step with every parameter afterwards steps. A parameter of the
// optimizer without a gradient may be left out.
func TestGradScalerStepMissingParameters(t *testing.T) {
	tests := []struct {
		name     string
		unscale  bool // Unscale every parameter first
		groups   bool // a and b in two groups
		withGrad bool // b has a gradient
		wantOK   bool
	}{
		{"missing", false, false, true, false},
		{"missing from the second group", false, true, true, false},
		{"missing, all unscaled first", true, false, true, false},
		{"missing without a gradient", false, false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := vram.Ones(vram.Shape{2}, vram.WithGrad())
			b := vram.Ones(vram.Shape{2}, vram.WithGrad())
			defer a.Release()
			defer b.Release()
			a.SetGrad(vram.Full(vram.Shape{2}, 8, vram.Float32))
			if tc.withGrad {
				b.SetGrad(vram.Full(vram.Shape{2}, 8, vram.Float32))
			}
			groups := []optim.ParamGroup{optim.Group([]*vram.Tensor{a, b})}
			if tc.groups {
				groups = []optim.ParamGroup{optim.Group([]*vram.Tensor{a}), optim.Group([]*vram.Tensor{b})}
			}
			opt, err := optim.NewSGDGroups(groups, optim.SGDConfig{LR: 1})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4})
			want := float32(8)
			if tc.unscale {
				if _, err := s.Unscale([]*vram.Tensor{a, b}); err != nil {
					t.Fatal(err)
				}
				want = 2
			}
			err = vram.Catch(func() { s.Step(opt, []*vram.Tensor{a}) })
			if tc.wantOK {
				if err != nil {
					t.Fatalf("Step: %v", err)
				}
				if v := a.Float32s()[0]; v != -1 {
					t.Errorf("a is %v after the step, want 1 - 8/4 = -1", v)
				}
				return
			}
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "not among") {
				t.Fatalf("Step without b: %v, want a refusal matching vram.ErrArgument naming the missing parameter", err)
			}
			if ga, gb := a.Grad().Float32s()[0], b.Grad().Float32s()[0]; ga != want || gb != want {
				t.Errorf("gradients %v and %v after the refusal, want both %v", ga, gb, want)
			}
			if va, vb := a.Float32s()[0], b.Float32s()[0]; va != 1 || vb != 1 {
				t.Errorf("parameters %v and %v after the refusal, want both 1 (not stepped)", va, vb)
			}
			if !s.Step(opt, []*vram.Tensor{a, b}) {
				t.Fatal("Step with every parameter did not step")
			}
			if va, vb := a.Float32s()[0], b.Float32s()[0]; va != -1 || vb != -1 {
				t.Errorf("parameters %v and %v after the step, want both 1 - 8/4 = -1", va, vb)
			}
		})
	}
}

// TestGradScalerUpdateWithoutCheck: Update after Scale with neither
// Unscale nor Step since the last Update (an Update per micro-batch of an
// accumulated step) would change the scale while the gradients already
// summed are still multiplied by the old one, so that the step unscales
// their sum by the wrong scale; it panics with an *vram.Error of kind
// vram.ErrArgument, as PyTorch's update raises "No inf checks were
// recorded prior to update", changing nothing. A step that scaled no loss
// still counts as clean, and UpdateTo is free to set a scale.
func TestGradScalerUpdateWithoutCheck(t *testing.T) {
	p := vram.Ones(vram.Shape{2}, vram.WithGrad())
	defer p.Release()
	opt, err := optim.NewSGD([]*vram.Tensor{p}, optim.SGDConfig{LR: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 4, GrowthInterval: 1})
	// Two micro-batches of loss sum(p): the accumulated gradient is 2.
	for mb := range 2 {
		scaled := s.Scale(p.Sum())
		scaled.Backward()
		scaled.Release()
		if mb == 0 {
			before := s.State()
			err := vram.Catch(s.Update)
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("Update between micro-batches: %v, want a refusal matching vram.ErrArgument", err)
			}
			if s.State() != before {
				t.Fatalf("a refused Update left %+v, want %+v", s.State(), before)
			}
		}
	}
	if !s.Step(opt, []*vram.Tensor{p}) {
		t.Fatal("Step skipped finite gradients")
	}
	if g := p.Grad().Float32s()[0]; g != 2 {
		t.Errorf("accumulated gradient %v after unscaling, want 2", g)
	}
	s.Update()
	if got := s.CurrentScale(); got != 8 {
		t.Errorf("scale %v after one clean step, want 8", got)
	}
	// No loss scaled: a clean step, as before.
	s.Update()
	if got := s.CurrentScale(); got != 16 {
		t.Errorf("scale %v after an Update with nothing scaled, want 16", got)
	}
	// UpdateTo sets the scale whatever the step did.
	s.Scale(p.Sum()).Release()
	if err := s.UpdateTo(2); err != nil || s.CurrentScale() != 2 {
		t.Errorf("UpdateTo(2) after Scale: %v, scale %v; want nil, 2", err, s.CurrentScale())
	}
}
