package optim_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// TestStepRefusesGradientOffItsParameter moves the gradient of the second
// of two parameters to another device on its own (g.MoveTo, which
// nothing keeps in step with the parameter): Step must panic with an
// *vram.Error of kind vram.ErrDevice that names the parameter, before it
// updates any parameter or state, so that with the gradient moved back
// the optimizer steps exactly as one that never saw the mistake.
func TestStepRefusesGradientOffItsParameter(t *testing.T) {
	dev, other := vram.Sim(1), vram.Sim(0)
	for name, mk := range map[string]func(ps []*vram.Tensor) (optim.Optimizer, error){
		"SGD": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1}) },
		"SGD momentum": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		},
		"Adam": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdam(ps, optim.AdamConfig{}) },
		"AdamW": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW(ps, optim.AdamConfig{AMSGrad: true})
		},
		"RMSprop": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewRMSprop(ps, optim.RMSpropConfig{}) },
		"Adagrad": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdagrad(ps, optim.AdagradConfig{}) },
		"Adamax":  func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdamax(ps, optim.AdamaxConfig{}) },
		"NAdam":   func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewNAdam(ps, optim.NAdamConfig{}) },
		"RAdam":   func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewRAdam(ps, optim.RAdamConfig{}) },
		"Adadelta": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdadelta(ps, optim.AdadeltaConfig{})
		},
		"ASGD":  func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewASGD(ps, optim.ASGDConfig{}) },
		"Rprop": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewRprop(ps, optim.RpropConfig{}) },
	} {
		t.Run(name, func(t *testing.T) {
			// ps is stepped with a misplaced gradient in between, ref not.
			newParams := func() []*vram.Tensor {
				a := vram.FromSlice([]float32{1, -2, 3}, vram.Shape{3}, dev, vram.WithGrad())
				b := vram.FromSlice([]float32{0.5, 4}, vram.Shape{2}, dev, vram.WithGrad())
				return []*vram.Tensor{vram.Keep(a), vram.Keep(b)}
			}
			ps, ref := newParams(), newParams()
			defer func() {
				for _, p := range append(ps, ref...) {
					p.Release()
				}
			}()
			opt, err := mk(ps)
			if err != nil {
				t.Fatal(err)
			}
			defer optim.Release(opt)
			refOpt, err := mk(ref)
			if err != nil {
				t.Fatal(err)
			}
			defer optim.Release(refOpt)
			setGrads := func(ps []*vram.Tensor, scale float64) {
				for i, p := range ps {
					vram.NoGrad(func() {
						p.SetGrad(vram.Keep(p.MulScalar(scale + float64(i))))
					})
				}
			}
			setGrads(ps, 1)
			setGrads(ref, 1)
			opt.Step()
			refOpt.Step()
			setGrads(ps, 0.5)
			setGrads(ref, 0.5)
			before := [][]float64{ps[0].Float64s(), ps[1].Float64s()}
			ps[1].Grad().MoveTo(other)
			err = vram.Catch(opt.Step)
			if !errors.Is(err, vram.ErrDevice) {
				t.Fatalf("Step with a gradient on %v for a parameter on %v: %v, want an error of kind ErrDevice", other, dev, err)
			}
			for i, p := range ps {
				if got := p.Float64s(); !slices.Equal(got, before[i]) {
					t.Errorf("the failed Step changed parameter %d from %v to %v", i, before[i], got)
				}
			}
			ps[1].Grad().MoveTo(dev)
			opt.Step()
			refOpt.Step()
			for i := range ps {
				checkValues(t, "parameter after the step", ps[i].Float64s(), ref[i].Float64s(), 0)
			}
		})
	}
}
