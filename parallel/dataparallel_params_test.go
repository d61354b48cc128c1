package parallel

import (
	"fmt"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestDataParallelForwardTakesModuleParameters: parameters of the module
// written outside the optimizer (a checkpoint loaded into it, a value
// set by hand) reach every replica at the next forward, as PyTorch's
// replication at each forward gives them, rather than leaving the other
// replicas to compute their share of the gradient, and then to step, from
// the old values for ever; a forward after the optimizer's step, or after
// optimizers of one's own stepped every replica, copies nothing.
func TestDataParallelForwardTakesModuleParameters(t *testing.T) {
	tests := []struct {
		name string
		mode string // "loss" (ForwardLoss) or "gather" (Forward)
		own  bool   // step optimizers of one's own on each replica
	}{
		{"loss", "loss", false},
		{"gather", "gather", false},
		{"own optimizers", "loss", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vram.ManualSeed(5)
			ref := newUserNet(3, 4, 2)
			defer nn.Release(ref)
			initial, err := nn.Replicate(ref, vram.CPU)
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(initial)
			dp, err := NewDataParallel(initial, []vram.Device{vram.Sim(0), vram.Sim(1), vram.CPU})
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Release()
			refOpt, _ := dpOptimizers["sgd"](ref.Parameters())
			opt, err := dp.Optimizer(dpOptimizers["sgd"])
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			step := func(x, y *vram.Tensor) {
				nn.MSELoss(ref.Forward(x), y).Backward()
				refOpt.Step()
				refOpt.ZeroGrad()
				if tt.mode == "loss" {
					dp.ForwardLoss(x, y, nn.MSELoss).Backward()
				} else {
					out := dp.Forward(x)
					nn.MSELoss(out, y.To(out.Device())).Backward()
				}
				if !tt.own {
					opt.Step()
					opt.ZeroGrad()
					return
				}
				if err := dp.SyncGradients(); err != nil {
					t.Fatal(err)
				}
				for _, o := range opt.Optimizers() {
					o.Step()
				}
				opt.ZeroGrad()
			}
			for k := range 3 {
				vram.Tidy(func() {
					// Set a weight of the module (and of the
					// reference) by hand, as loading a checkpoint does.
					vram.NoGrad(func() {
						v := vram.Full(vram.Shape{2, 4}, 0.1*float64(k+1))
						defer v.Release()
						w := initial.(*userNet).head.Weight
						w.CopyFrom(v.To(w.Device()))
						ref.head.Weight.CopyFrom(v)
					})
					step(vram.Randn(vram.Shape{7, 3}), vram.Randn(vram.Shape{7, 2}))
				})
				for r, rep := range dp.Replicas() {
					sameParams(t, fmt.Sprintf("step %d, replica %d", k, r), rep, ref)
				}
			}
			// Nothing changed since the step: a forward copies nothing.
			p := dp.Replicas()[1].Parameters()[0]
			before := p.Version()
			vram.Tidy(func() { dp.Forward(vram.Randn(vram.Shape{4, 3})) })
			if after := p.Version(); after != before {
				t.Errorf("a forward after the step wrote replica 1's parameter (version %d → %d)", before, after)
			}
		})
	}
}
