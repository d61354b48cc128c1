package parallel

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestDataParallelTiedWeights trains a model whose two layers share a
// weight, tied by assigning the field as PyTorch users do, on two devices
// and on one: each replica keeps the weight shared and lists it once, its
// gradients from both uses add up across the replicas, and the replicas
// step as the model does on one device.
func TestDataParallelTiedWeights(t *testing.T) {
	for _, name := range []string{"sgd", "adam"} {
		t.Run(name, func(t *testing.T) {
			vram.ManualSeed(3)
			newTied := func() *nn.Sequential {
				a, b := nn.NewLinear(4, 4), nn.NewLinear(4, 4)
				old := b.Weight
				b.Weight = a.Weight
				old.Release()
				return nn.NewSequential(a, nn.NewTanh(), b)
			}
			ref := newTied()
			defer nn.Release(ref)
			initial, err := nn.Replicate(ref, vram.CPU)
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(initial)
			dp, err := NewDataParallel(initial, simDevs(2))
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Release()
			for r, rep := range dp.Replicas() {
				s := rep.(*nn.Sequential)
				if n := len(rep.Parameters()); n != 3 || s.At(0).(*nn.Linear).Weight != s.At(2).(*nn.Linear).Weight {
					t.Fatalf("replica %d has %d parameters and tied weights %v; want 3, tied", r, n,
						s.At(0).(*nn.Linear).Weight == s.At(2).(*nn.Linear).Weight)
				}
			}
			refOpt, err := dpOptimizers[name](ref.Parameters())
			if err != nil {
				t.Fatal(err)
			}
			opt, err := dp.Optimizer(dpOptimizers[name])
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			for range 3 {
				vram.Tidy(func() {
					x, y := vram.Randn(vram.Shape{6, 4}), vram.Randn(vram.Shape{6, 4})
					nn.MSELoss(ref.Forward(x), y).Backward()
					refOpt.Step()
					refOpt.ZeroGrad()
					dp.ForwardLoss(x, y, nn.MSELoss).Backward()
					opt.Step()
					opt.ZeroGrad()
				})
			}
			for _, rep := range dp.Replicas() {
				sameParams(t, "replica", rep, ref)
			}
		})
	}
}
