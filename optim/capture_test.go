package optim_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// TestCaptureStep captures the step of every optimizer into a graph on a
// sim device. A step that replays as it ran (no state made in it, no step
// count of the host) trains by replays exactly as eagerly; the others are
// refused with vram.ErrCapturing, and the failed capture changes nothing:
// the optimizer then steps eagerly exactly as one never captured.
func TestCaptureStep(t *testing.T) {
	d := vram.Sim(0)
	type mk func(ps []*vram.Tensor) (optim.Optimizer, error)
	tests := []struct {
		name    string
		new     mk
		warm    bool // a step before the capture
		refused bool
	}{
		{"SGD", func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05}) }, false, false},
		{"SGD momentum", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9})
		}, true, false},
		{"SGD momentum unwarmed", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9})
		}, false, true},
		{"RMSprop", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRMSprop(ps, optim.RMSpropConfig{LR: 0.01, Momentum: 0.5, Centered: true})
		}, true, false},
		{"RMSprop unwarmed", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRMSprop(ps, optim.RMSpropConfig{LR: 0.01})
		}, false, true},
		{"Adadelta", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdadelta(ps, optim.AdadeltaConfig{LR: 1})
		}, true, false},
		{"Rprop", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRprop(ps, optim.RpropConfig{LR: 0.01})
		}, true, false},
		{"Adagrad", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdagrad(ps, optim.AdagradConfig{LR: 0.01})
		}, true, false},
		{"Adagrad LRDecay", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdagrad(ps, optim.AdagradConfig{LR: 0.01, LRDecay: 0.1})
		}, true, true},
		{"Adam", func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdam(ps, optim.AdamConfig{LR: 0.01}) }, true, true},
		{"Adam unwarmed", func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdam(ps, optim.AdamConfig{LR: 0.01}) }, false, true},
		{"AdamW", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW(ps, optim.AdamConfig{LR: 0.01})
		}, true, true},
		{"Adam AMSGrad", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdam(ps, optim.AdamConfig{LR: 0.01, AMSGrad: true})
		}, true, true},
		{"Adamax", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamax(ps, optim.AdamaxConfig{LR: 0.01})
		}, true, true},
		{"NAdam", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewNAdam(ps, optim.NAdamConfig{LR: 0.01})
		}, true, true},
		{"RAdam", func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRAdam(ps, optim.RAdamConfig{LR: 0.01})
		}, true, true},
		{"ASGD", func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewASGD(ps, optim.ASGDConfig{LR: 0.01}) }, true, true},
	}
	type run struct {
		m    *nn.Sequential
		o    optim.Optimizer
		x, y *vram.Tensor
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			newRun := func() *run {
				gen := vram.NewGenerator(7)
				m := nn.NewSequential(nn.NewLinear(4, 3, vram.WithGenerator(gen)))
				m.To(d)
				o, err := tc.new(m.Parameters())
				if err != nil {
					t.Fatal(err)
				}
				x := vram.Randn(vram.Shape{8, 4}, vram.WithGenerator(gen)).To(d)
				y := vram.Randn(vram.Shape{8, 3}, vram.WithGenerator(gen)).To(d)
				return &run{m, o, x, y}
			}
			step := func(r *run) {
				vram.Tidy(func() {
					r.o.ZeroGrad()
					nn.MSELoss(r.m.Forward(r.x), r.y).Backward()
					r.o.Step()
				})
			}
			params := func(r *run) [][]float32 {
				var out [][]float32
				for _, p := range r.m.Parameters() {
					out = append(out, p.Float32s())
				}
				return out
			}
			eager, graphed := newRun(), newRun()
			if tc.warm {
				step(eager)
				step(graphed)
			}
			g, err := vram.CaptureGraph(d, func() { step(graphed) })
			if tc.refused {
				if g != nil || !errors.Is(err, vram.ErrCapturing) {
					t.Fatalf("capture: %v; want an error wrapping ErrCapturing", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				step(eager)
				if g != nil {
					if err := g.Replay(); err != nil {
						t.Fatal(err)
					}
				} else {
					step(graphed)
				}
			}
			if g != nil {
				g.Release()
			}
			if a, b := params(eager), params(graphed); !slices.EqualFunc(a, b, slices.Equal) {
				t.Fatalf("parameters after 3 steps: eager %v, captured %v", a, b)
			}
		})
	}
}

// TestCaptureKeepsLR checks what vram.CaptureGraph documents: a captured
// step replays with the learning rate of the capture, whatever SetLR or a
// schedule makes of it after; the eager step sees the new rate.
func TestCaptureKeepsLR(t *testing.T) {
	d := vram.Sim(0)
	tests := []struct {
		name  string
		after func(o optim.Optimizer)
	}{
		{"SetLR", func(o optim.Optimizer) { o.SetLR(0) }},
		{"StepLR", func(o optim.Optimizer) {
			s, err := optim.NewStepLR(o, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			s.Step()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := vram.Zeros(vram.Shape{2}, d)
			defer w.Release()
			w.SetRequiresGrad(true)
			o, err := optim.NewSGD([]*vram.Tensor{w}, optim.SGDConfig{LR: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			vram.Tidy(func() { w.Sum().Backward() }) // gradient 1, kept
			g, err := vram.CaptureGraph(d, o.Step)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			tc.after(o)
			if o.LR() != 0 {
				t.Fatalf("rate %v after the change, want 0", o.LR())
			}
			if err := g.Replay(); err != nil {
				t.Fatal(err)
			}
			if v := w.Float32s(); v[0] != -0.5 {
				t.Fatalf("after a replay: %v, want -0.5 (the rate of the capture)", v[0])
			}
			o.Step()
			if v := w.Float32s(); v[0] != -0.5 {
				t.Fatalf("after an eager step at rate 0: %v, want -0.5", v[0])
			}
		})
	}
}
