package optim_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// TestAdamDecoupledWeightDecay checks PyTorch's
// Adam(decoupled_weight_decay=True), which steps as AdamW does (p is
// multiplied by 1 - lr·weight_decay before the update, the decay kept out
// of the moments), against refAdam, for the config field and for a
// group's Option, and AdamW with the Option turned off in a group, which
// steps as Adam does, as PyTorch's AdamW does for a group whose
// decoupled_weight_decay is False.
func TestAdamDecoupledWeightDecay(t *testing.T) {
	const n = 6
	c := optim.AdamConfig{LR: 0.1, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.2}
	ams := c
	ams.AMSGrad = true
	field := c
	field.DecoupledWeightDecay = true
	tests := []struct {
		name      string
		make      func(p *vram.Tensor) (*optim.Adam, error)
		cfg       optim.AdamConfig // of refAdam
		decoupled bool
	}{
		{"Adam config", func(p *vram.Tensor) (*optim.Adam, error) { return optim.NewAdam([]*vram.Tensor{p}, field) }, c, true},
		{"Adam option", func(p *vram.Tensor) (*optim.Adam, error) {
			return optim.NewAdamGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithDecoupledWeightDecay(true))}, c)
		}, c, true},
		{"Adam option amsgrad", func(p *vram.Tensor) (*optim.Adam, error) {
			return optim.NewAdamGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithDecoupledWeightDecay(true))}, ams)
		}, ams, true},
		{"AdamW option off", func(p *vram.Tensor) (*optim.Adam, error) {
			return optim.NewAdamWGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p}, optim.WithDecoupledWeightDecay(false))}, c)
		}, c, false},
		{"AdamW", func(p *vram.Tensor) (*optim.Adam, error) { return optim.NewAdamW([]*vram.Tensor{p}, c) }, c, true},
		{"Adam", func(p *vram.Tensor) (*optim.Adam, error) { return optim.NewAdam([]*vram.Tensor{p}, c) }, c, false},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32} {
			tol := 1e-12
			if dt == vram.Float32 {
				tol = 1e-5
			}
			for _, tc := range tests {
				t.Run(fmt.Sprintf("%v/%v/%s", dev, dt, tc.name), func(t *testing.T) {
					var opt *optim.Adam
					got := runRef(t, dev, dt, n, func(p *vram.Tensor) (optim.Optimizer, func()) {
						o, err := tc.make(p)
						if err != nil {
							t.Fatal(err)
						}
						opt = o
						return o, o.Release
					})
					if d := opt.GroupConfig(0).DecoupledWeightDecay; d != tc.decoupled {
						t.Errorf("GroupConfig(0).DecoupledWeightDecay = %v, want %v", d, tc.decoupled)
					}
					want := refAdam(tc.cfg, tc.decoupled, n)
					for s := range want {
						checkValues(t, fmt.Sprintf("step %d", s+1), got[s], want[s], tol)
					}
				})
			}
		}
	}
}

// TestAdamDecoupledWeightDecayCheckpoint checks that Save and Load keep
// each group's decoupled_weight_decay, as PyTorch's param_groups do: an
// Adam whose second group decouples its decay resumes as the run that did
// not stop.
func TestAdamDecoupledWeightDecayCheckpoint(t *testing.T) {
	c := optim.AdamConfig{LR: 0.1, WeightDecay: 0.3}
	mk := func() (*optim.Adam, []*vram.Tensor) {
		ps := []*vram.Tensor{
			vram.FromSlice([]float64{1, -2}, nil, vram.WithGrad()),
			vram.FromSlice([]float64{0.5, 3}, nil, vram.WithGrad()),
		}
		o, err := optim.NewAdamGroups([]optim.ParamGroup{
			optim.Group(ps[:1]),
			optim.Group(ps[1:], optim.WithDecoupledWeightDecay(true)),
		}, c)
		if err != nil {
			t.Fatal(err)
		}
		return o, ps
	}
	step := func(o *optim.Adam, ps []*vram.Tensor, s int) {
		for _, p := range ps {
			p.SetGrad(vram.FromSlice(refGrad(p.Float64s(), s), nil))
		}
		o.Step()
		o.ZeroGrad()
	}
	whole, wps := mk()
	for s := 1; s <= 6; s++ {
		step(whole, wps, s)
	}
	first, fps := mk()
	for s := 1; s <= 3; s++ {
		step(first, fps, s)
	}
	path := filepath.Join(t.TempDir(), "adam.safetensors")
	if err := optim.Save(first, path); err != nil {
		t.Fatal(err)
	}
	// The resumed optimizer is made without the Option: Load restores it.
	ps := []*vram.Tensor{vram.FromSlice(fps[0].Float64s(), nil, vram.WithGrad()), vram.FromSlice(fps[1].Float64s(), nil, vram.WithGrad())}
	resumed, err := optim.NewAdamGroups([]optim.ParamGroup{optim.Group(ps[:1]), optim.Group(ps[1:])}, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := optim.Load(resumed, path); err != nil {
		t.Fatal(err)
	}
	if !resumed.GroupConfig(1).DecoupledWeightDecay || resumed.GroupConfig(0).DecoupledWeightDecay {
		t.Fatalf("loaded groups: %+v and %+v, want only the second decoupled", resumed.GroupConfig(0), resumed.GroupConfig(1))
	}
	for s := 4; s <= 6; s++ {
		step(resumed, ps, s)
	}
	for i := range ps {
		checkValues(t, fmt.Sprintf("parameter %d", i), ps[i].Float64s(), wps[i].Float64s(), 0)
	}
	// An Option other than a boolean's is refused by the optimizers that
	// have no such hyper-parameter still.
	if _, err := optim.NewSGDGroups([]optim.ParamGroup{optim.Group(ps, optim.WithDecoupledWeightDecay(true))}, optim.SGDConfig{LR: 1}); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("SGD with WithDecoupledWeightDecay: err = %v, want vram.ErrArgument", err)
	}
}
