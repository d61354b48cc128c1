package optim_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/optim"
)

// TestStepsReleaseWhatTheyMake runs optimizer steps, with schedules and
// gradient clipping, and checks that the library released everything it
// made on the way: once an optimizer and its parameters are released, no
// storage stays live, none is left for the garbage collector, and the
// allocator's count of a simulated device returns to where it was.
func TestStepsReleaseWhatTheyMake(t *testing.T) {
	must := func(o releaser, err error) releaser {
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	tests := []struct {
		name string
		make func(ps []*vram.Tensor) releaser
	}{
		{"SGD", func(ps []*vram.Tensor) releaser { return must(optim.NewSGD(ps, optim.SGDConfig{LR: 0.1})) }},
		{"SGD momentum", func(ps []*vram.Tensor) releaser {
			return must(optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1}))
		}},
		{"Adam", func(ps []*vram.Tensor) releaser { return must(optim.NewAdam(ps, optim.AdamConfig{WeightDecay: 0.1})) }},
		{"Adam AMSGrad", func(ps []*vram.Tensor) releaser {
			return must(optim.NewAdam(ps, optim.AdamConfig{AMSGrad: true, Maximize: true}))
		}},
		{"AdamW", func(ps []*vram.Tensor) releaser { return must(optim.NewAdamW(ps, optim.AdamConfig{})) }},
		{"RMSprop", func(ps []*vram.Tensor) releaser { return must(optim.NewRMSprop(ps, optim.RMSpropConfig{})) }},
		{"RMSprop centered momentum", func(ps []*vram.Tensor) releaser {
			return must(optim.NewRMSprop(ps, optim.RMSpropConfig{Centered: true, Momentum: 0.9, WeightDecay: 0.1}))
		}},
		{"Adagrad", func(ps []*vram.Tensor) releaser {
			return must(optim.NewAdagrad(ps, optim.AdagradConfig{LRDecay: 0.1, WeightDecay: 0.1}))
		}},
		{"Adamax", func(ps []*vram.Tensor) releaser {
			return must(optim.NewAdamax(ps, optim.AdamaxConfig{WeightDecay: 0.1}))
		}},
		{"NAdam", func(ps []*vram.Tensor) releaser {
			return must(optim.NewNAdam(ps, optim.NAdamConfig{WeightDecay: 0.1, DecoupledWeightDecay: true}))
		}},
		{"RAdam", func(ps []*vram.Tensor) releaser {
			return must(optim.NewRAdam(ps, optim.RAdamConfig{Beta2: 0.5, WeightDecay: 0.1, Maximize: true}))
		}},
		{"Adadelta", func(ps []*vram.Tensor) releaser {
			return must(optim.NewAdadelta(ps, optim.AdadeltaConfig{WeightDecay: 0.1}))
		}},
		{"ASGD", func(ps []*vram.Tensor) releaser {
			return must(optim.NewASGD(ps, optim.ASGDConfig{T0: 1, WeightDecay: 0.1}))
		}},
		{"Rprop", func(ps []*vram.Tensor) releaser { return must(optim.NewRprop(ps, optim.RpropConfig{Maximize: true})) }},
	}
	for _, d := range []vram.Device{vram.CPU, vram.Sim(1)} {
		memtest.Settle(d)
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				before, allocated := vram.Storage(d), vram.MemoryAllocated(d)
				ps := []*vram.Tensor{
					vram.Randn(vram.Shape{3, 4}, d, vram.WithGrad()),
					vram.Randn(vram.Shape{4}, d, vram.WithGrad()),
					vram.Randn(vram.Shape{2}, d, vram.Float64, vram.WithGrad()),
				}
				opt := tc.make(ps)
				sched, err := optim.NewCosineAnnealingLR(opt, 10, 0)
				if err != nil {
					t.Fatal(err)
				}
				x := vram.Randn(vram.Shape{2, 3}, d)
				for range 3 {
					h := x.MatMul(ps[0])
					y := h.Add(ps[1])
					s := y.Sum()
					sq := ps[2].Square()
					s2 := sq.Sum()
					s3 := s2.Cast(vram.Float32)
					loss := s.Add(s3)
					loss.Backward()
					for _, u := range []*vram.Tensor{h, y, sq, s, s2, s3, loss} {
						u.Release()
					}
					optim.ClipGradNorm(ps, 1)
					optim.ClipGradValue(ps, 0.5)
					opt.Step()
					sched.Step()
					opt.ZeroGrad()
				}
				opt.Release()
				x.Release()
				for _, p := range ps {
					p.Release()
				}
				after := vram.Storage(d)
				if after.LiveBytes != before.LiveBytes || after.Allocs-before.Allocs != after.Frees-before.Frees ||
					after.Leaked != before.Leaked || vram.MemoryAllocated(d) != allocated {
					t.Errorf("%s: %d storages made, %d freed, %d left to the collector; %d bytes live, %d before",
						d, after.Allocs-before.Allocs, after.Frees-before.Frees, after.Leaked-before.Leaked, after.LiveBytes, before.LiveBytes)
				}
			})
		}
	}
}
