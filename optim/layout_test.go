package optim

import (
	"fmt"
	"testing"

	"github.com/vramgo/vram"
)

// stepper is an optimizer with its state tensors, for layout checks.
type stepper struct {
	opt   Optimizer
	state func() []*vram.Tensor
}

// newSteppers returns an SGD with momentum and an Adam over params.
func newSteppers(t *testing.T, params []*vram.Tensor) []stepper {
	s, err := NewSGD(params, SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAdam(params, AdamConfig{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	return []stepper{
		{s, func() []*vram.Tensor { return s.bufs }},
		{a, func() []*vram.Tensor {
			var ts []*vram.Tensor
			for _, st := range a.state {
				ts = append(ts, st.m, st.v)
			}
			return ts
		}},
	}
}

// TestStateKeepsParameterLayout checks that the optimizers lay their state
// out in a channels-last parameter's format, so that the fused steps take
// it, that a parameter converted between steps takes its state with it,
// and that the updates equal those of a row-major parameter.
func TestStateKeepsParameterLayout(t *testing.T) {
	shape := vram.Shape{4, 3, 3, 3}
	for k := range 2 {
		for _, convertLater := range []bool{false, true} {
			t.Run(fmt.Sprintf("optimizer %d/converted after one step=%v", k, convertLater), func(t *testing.T) {
				vram.Tidy(func() {
					gen := vram.NewGenerator(3)
					w0 := vram.Randn(shape, vram.CPU, vram.WithGenerator(gen))
					c := vram.Randn(shape, vram.CPU, vram.WithGenerator(gen))
					cl := w0.Clone().Detach().SetRequiresGrad(true)
					if !convertLater {
						cl.ConvertMemoryFormat(vram.ChannelsLast)
					}
					rm := w0.Clone().Detach().SetRequiresGrad(true)
					sc, sr := newSteppers(t, []*vram.Tensor{cl})[k], newSteppers(t, []*vram.Tensor{rm})[k]
					for step := range 3 {
						for _, w := range []*vram.Tensor{cl, rm} {
							w.Mul(c).Square().Sum().Backward()
						}
						sc.opt.Step()
						sr.opt.Step()
						sc.opt.ZeroGrad()
						sr.opt.ZeroGrad()
						if convertLater && step == 0 {
							cl.ConvertMemoryFormat(vram.ChannelsLast)
							continue
						}
						for i, s := range sc.state() {
							if s.SuggestMemoryFormat() != vram.ChannelsLast || !s.IsContiguous(vram.ChannelsLast) {
								t.Fatalf("step %d: state %d of a channels-last parameter has strides %v", step, i, s.Strides())
							}
						}
					}
					a, b := cl.Float64s(), rm.Float64s()
					for i := range a {
						if a[i] != b[i] {
							t.Fatalf("element %d: %v channels-last, %v row-major", i, a[i], b[i])
						}
					}
				})
			})
		}
	}
}
