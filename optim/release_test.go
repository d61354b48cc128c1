package optim_test

import (
	"fmt"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// stateless is an Optimizer of a caller's own without a Release method.
type stateless struct{}

func (stateless) Step()         {}
func (stateless) ZeroGrad()     {}
func (stateless) LR() float64   { return 0 }
func (stateless) SetLR(float64) {}

func TestRelease(t *testing.T) {
	newOpt := map[string]func(ps []*vram.Tensor) (optim.Optimizer, error){
		"SGD momentum": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		},
		"Adam": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdam(ps, optim.AdamConfig{}) },
		"AdamW AMSGrad": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW(ps, optim.AdamConfig{AMSGrad: true})
		},
		"RMSprop centered": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewRMSprop(ps, optim.RMSpropConfig{LR: 0.01, Centered: true})
		},
		"Adagrad": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdagrad(ps, optim.AdagradConfig{}) },
		"Adamax":  func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdamax(ps, optim.AdamaxConfig{}) },
		"NAdam":   func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewNAdam(ps, optim.NAdamConfig{}) },
		"RAdam":   func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewRAdam(ps, optim.RAdamConfig{}) },
		"Adadelta": func(ps []*vram.Tensor) (optim.Optimizer, error) {
			return optim.NewAdadelta(ps, optim.AdadeltaConfig{})
		},
		"ASGD":  func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewASGD(ps, optim.ASGDConfig{}) },
		"Rprop": func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewRprop(ps, optim.RpropConfig{}) },
	}
	dev := vram.Sim(1)
	for name, mk := range newOpt {
		t.Run(name, func(t *testing.T) {
			w := vram.Ones(vram.Shape{64}, dev, vram.WithGrad())
			defer w.Release()
			opt, err := mk([]*vram.Tensor{w})
			if err != nil {
				t.Fatal(err)
			}
			step := func() {
				vram.Tidy(func() {
					w.Square().Sum().Backward()
					opt.Step()
					opt.ZeroGrad()
				})
			}
			base := vram.MemoryAllocated(dev)
			step()
			if vram.MemoryAllocated(dev) <= base {
				t.Fatalf("Step kept no state: %d bytes allocated, %d before", vram.MemoryAllocated(dev), base)
			}
			optim.Release(opt)
			if got := vram.MemoryAllocated(dev); got != base {
				t.Fatalf("after optim.Release %d bytes allocated, want %d", got, base)
			}
			step() // still usable: the state starts over
			optim.Release(opt)
			if got := vram.MemoryAllocated(dev); got != base {
				t.Fatalf("after a second Step and Release %d bytes allocated, want %d", got, base)
			}
		})
	}
	t.Run("nil and stateless", func(t *testing.T) {
		optim.Release(nil)
		optim.Release(stateless{})
	})
}

func ExampleRelease() {
	dev := vram.Sim(1)
	w := vram.Ones(vram.Shape{1024}, dev, vram.WithGrad())
	defer w.Release()
	base := vram.MemoryAllocated(dev)
	var opt optim.Optimizer
	opt, err := optim.NewAdam([]*vram.Tensor{w}, optim.AdamConfig{})
	if err != nil {
		panic(err)
	}
	vram.Tidy(func() {
		w.Square().Sum().Backward()
		opt.Step()
		opt.ZeroGrad()
	})
	fmt.Println("Adam's moments:", vram.MemoryAllocated(dev)-base, "bytes")
	optim.Release(opt) // Python's del on the optimizer's state
	fmt.Println("after Release:", vram.MemoryAllocated(dev)-base, "bytes")
	// Output:
	// Adam's moments: 8192 bytes
	// after Release: 0 bytes
}
