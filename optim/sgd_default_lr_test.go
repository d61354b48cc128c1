package optim_test

import (
	"fmt"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// TestSGDDefaultLR checks PyTorch's default rate of SGD, 1e-3 since
// PyTorch 2.2 (before, lr was required): a zero LR in the config takes
// it, as the other configs' zero fields take theirs, for NewSGD, for a
// group without WithLR and for a group added later, and the steps are
// those of refSGD at that rate. A group may still ask for 0 with WithLR.
func TestSGDDefaultLR(t *testing.T) {
	const n = 4
	c := optim.SGDConfig{Momentum: 0.9, WeightDecay: 0.01}
	want := c
	want.LR = 1e-3
	tests := []struct {
		name string
		make func(p *vram.Tensor) (*optim.SGD, error)
	}{
		{"NewSGD", func(p *vram.Tensor) (*optim.SGD, error) { return optim.NewSGD([]*vram.Tensor{p}, c) }},
		{"group", func(p *vram.Tensor) (*optim.SGD, error) {
			return optim.NewSGDGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p})}, c)
		}},
		{"added group", func(p *vram.Tensor) (*optim.SGD, error) {
			o, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad())}, optim.WithLR(0))}, c)
			if err != nil {
				return nil, err
			}
			return o, o.AddParamGroup(optim.Group([]*vram.Tensor{p}))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opt *optim.SGD
			got := runRef(t, vram.CPU, vram.Float64, n, func(p *vram.Tensor) (optim.Optimizer, func()) {
				o, err := tc.make(p)
				if err != nil {
					t.Fatal(err)
				}
				opt = o
				return o, o.Release
			})
			if g := opt.GroupConfig(opt.NumGroups() - 1); g != want {
				t.Fatalf("config %+v, want %+v", g, want)
			}
			ref := refSGD(want, n)
			for s := range ref {
				checkValues(t, fmt.Sprintf("step %d", s+1), got[s], ref[s], 1e-12)
			}
		})
	}
	zero, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{vram.Zeros(vram.Shape{1}, vram.WithGrad())}, optim.WithLR(0))}, c)
	if err != nil || zero.GroupLR(0) != 0 {
		t.Fatalf("a group of rate 0: %v", err)
	}
}
