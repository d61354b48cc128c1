package optim_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/optim"
)

// refRMSprop runs n steps of torch.optim.RMSprop's update rule in float64.
func refRMSprop(c optim.RMSpropConfig, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	sq, avg, buf := make([]float64, len(p)), make([]float64, len(p)), make([]float64, len(p))
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			d += c.WeightDecay * p[i]
			sq[i] = c.Alpha*sq[i] + (1-c.Alpha)*d*d
			var den float64
			if c.Centered {
				avg[i] = c.Alpha*avg[i] + (1-c.Alpha)*d
				den = math.Sqrt(sq[i]-avg[i]*avg[i]) + c.Eps
			} else {
				den = math.Sqrt(sq[i]) + c.Eps
			}
			if c.Momentum > 0 {
				buf[i] = c.Momentum*buf[i] + d/den
				p[i] -= c.LR * buf[i]
			} else {
				p[i] -= c.LR * d / den
			}
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

// refAdagrad runs n steps of torch.optim.Adagrad's update rule in float64.
func refAdagrad(c optim.AdagradConfig, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	sum := make([]float64, len(p))
	for i := range sum {
		sum[i] = c.InitialAccumulatorValue
	}
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		clr := c.LR / (1 + float64(t-1)*c.LRDecay)
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			d += c.WeightDecay * p[i]
			sum[i] += d * d
			p[i] -= clr * d / (math.Sqrt(sum[i]) + c.Eps)
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

func TestRMSpropAdagradMatchReference(t *testing.T) {
	const n = 8
	rms := []optim.RMSpropConfig{
		{LR: 0.01, Alpha: 0.99, Eps: 1e-8},
		{LR: 0.02, Alpha: 0.9, Eps: 1e-6, WeightDecay: 0.1},
		{LR: 0.01, Alpha: 0.95, Eps: 1e-8, Momentum: 0.9},
		{LR: 0.01, Alpha: 0.9, Eps: 1e-8, Centered: true},
		{LR: 0.01, Alpha: 0.8, Eps: 1e-3, Centered: true, Momentum: 0.5, WeightDecay: 0.05, Maximize: true},
	}
	ada := []optim.AdagradConfig{
		{LR: 0.1, Eps: 1e-10},
		{LR: 0.1, Eps: 1e-10, LRDecay: 0.3},
		{LR: 0.1, Eps: 1e-10, WeightDecay: 0.2, InitialAccumulatorValue: 0.5},
		{LR: 0.2, Eps: 1e-3, LRDecay: 0.1, WeightDecay: 0.05, InitialAccumulatorValue: 0.1, Maximize: true},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32} {
			tol := 1e-12
			if dt == vram.Float32 {
				tol = 1e-5
			}
			for i, c := range rms {
				t.Run(fmt.Sprintf("%v/%v/RMSprop%d", dev, dt, i), func(t *testing.T) {
					got := runRef(t, dev, dt, n, func(p *vram.Tensor) (optim.Optimizer, func()) {
						o, err := optim.NewRMSprop([]*vram.Tensor{p}, c)
						if err != nil {
							t.Fatal(err)
						}
						return o, o.Release
					})
					want := refRMSprop(c, n)
					for s := range want {
						checkValues(t, fmt.Sprintf("step %d", s+1), got[s], want[s], tol)
					}
				})
			}
			for i, c := range ada {
				t.Run(fmt.Sprintf("%v/%v/Adagrad%d", dev, dt, i), func(t *testing.T) {
					got := runRef(t, dev, dt, n, func(p *vram.Tensor) (optim.Optimizer, func()) {
						o, err := optim.NewAdagrad([]*vram.Tensor{p}, c)
						if err != nil {
							t.Fatal(err)
						}
						return o, o.Release
					})
					want := refAdagrad(c, n)
					for s := range want {
						checkValues(t, fmt.Sprintf("step %d", s+1), got[s], want[s], tol)
					}
				})
			}
		}
	}
}

// TestRMSpropAdagradDefaults checks that zero fields take PyTorch's
// defaults and that Options set zeros the config cannot ask for.
func TestRMSpropAdagradDefaults(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	q := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	r, err := optim.NewRMSpropGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{q}, optim.WithAlpha(0), optim.WithCentered(true))}, optim.RMSpropConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Config(), (optim.RMSpropConfig{LR: 1e-2, Alpha: 0.99, Eps: 1e-8}); got != want {
		t.Errorf("RMSprop config %+v, want %+v", got, want)
	}
	if got := r.GroupConfig(1); got.Alpha != 0 || !got.Centered {
		t.Errorf("group 1 config %+v, want alpha 0, centered", got)
	}
	a, err := optim.NewAdagradGroups([]optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{q}, optim.WithLRDecay(0.5), optim.WithInitialAccumulatorValue(2))}, optim.AdagradConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Config(), (optim.AdagradConfig{LR: 1e-2, Eps: 1e-10}); got != want {
		t.Errorf("Adagrad config %+v, want %+v", got, want)
	}
	if got := a.GroupConfig(1); got.LRDecay != 0.5 || got.InitialAccumulatorValue != 2 {
		t.Errorf("group 1 config %+v", got)
	}
}

func TestRMSpropAdagradRefuseBadConfigs(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	ps := []*vram.Tensor{p}
	tests := []struct {
		name string
		make func() error
	}{
		{"RMSprop negative lr", func() error { _, err := optim.NewRMSprop(ps, optim.RMSpropConfig{LR: -1}); return err }},
		{"RMSprop NaN alpha", func() error { _, err := optim.NewRMSprop(ps, optim.RMSpropConfig{Alpha: math.NaN()}); return err }},
		{"RMSprop negative eps", func() error { _, err := optim.NewRMSprop(ps, optim.RMSpropConfig{Eps: -1}); return err }},
		{"RMSprop negative momentum", func() error { _, err := optim.NewRMSprop(ps, optim.RMSpropConfig{Momentum: -0.1}); return err }},
		{"RMSprop infinite weight decay", func() error {
			_, err := optim.NewRMSprop(ps, optim.RMSpropConfig{WeightDecay: math.Inf(1)})
			return err
		}},
		{"RMSprop betas option", func() error {
			_, err := optim.NewRMSpropGroups([]optim.ParamGroup{optim.Group(ps, optim.WithBetas(0.9, 0.9))}, optim.RMSpropConfig{})
			return err
		}},
		{"RMSprop empty", func() error { _, err := optim.NewRMSprop(nil, optim.RMSpropConfig{}); return err }},
		{"Adagrad negative lr decay", func() error { _, err := optim.NewAdagrad(ps, optim.AdagradConfig{LRDecay: -1}); return err }},
		{"Adagrad negative initial value", func() error {
			_, err := optim.NewAdagrad(ps, optim.AdagradConfig{InitialAccumulatorValue: -1})
			return err
		}},
		{"Adagrad NaN eps", func() error { _, err := optim.NewAdagrad(ps, optim.AdagradConfig{Eps: math.NaN()}); return err }},
		{"Adagrad momentum option", func() error {
			_, err := optim.NewAdagradGroups([]optim.ParamGroup{optim.Group(ps, optim.WithMomentum(0.9))}, optim.AdagradConfig{})
			return err
		}},
		{"Adagrad repeated parameter", func() error { _, err := optim.NewAdagrad([]*vram.Tensor{p, p}, optim.AdagradConfig{}); return err }},
	}
	for _, tc := range tests {
		if err := tc.make(); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: got %v, want an error matching vram.ErrArgument", tc.name, err)
		}
	}
}

// TestRMSpropAdagradSaveLoad checks that a run stopped, saved, loaded into
// new optimizers and resumed ends where an unbroken run does.
func TestRMSpropAdagradSaveLoad(t *testing.T) {
	tests := []struct {
		name string
		make func(p *vram.Tensor) (optim.Optimizer, func())
	}{
		{"RMSprop centered momentum", func(p *vram.Tensor) (optim.Optimizer, func()) {
			o, err := optim.NewRMSprop([]*vram.Tensor{p}, optim.RMSpropConfig{LR: 0.01, Momentum: 0.9, Centered: true})
			if err != nil {
				t.Fatal(err)
			}
			return o, o.Release
		}},
		{"RMSprop plain", func(p *vram.Tensor) (optim.Optimizer, func()) {
			o, err := optim.NewRMSprop([]*vram.Tensor{p}, optim.RMSpropConfig{LR: 0.01})
			if err != nil {
				t.Fatal(err)
			}
			return o, o.Release
		}},
		{"Adagrad", func(p *vram.Tensor) (optim.Optimizer, func()) {
			o, err := optim.NewAdagrad([]*vram.Tensor{p}, optim.AdagradConfig{LR: 0.1, LRDecay: 0.2, InitialAccumulatorValue: 0.3})
			if err != nil {
				t.Fatal(err)
			}
			return o, o.Release
		}},
	}
	run := func(p *vram.Tensor, o optim.Optimizer, from, to int) {
		for s := from; s <= to; s++ {
			p.SetGrad(vram.FromSlice(refGrad(p.Float64s(), s), p.Shape(), vram.Float64))
			o.Step()
			o.ZeroGrad()
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "opt.safetensors")
			p := vram.FromSlice(refInit, nil, vram.Float64, vram.WithGrad())
			o, rel := tc.make(p)
			defer rel()
			run(p, o, 1, 6)
			want := p.Float64s()

			q := vram.FromSlice(refInit, nil, vram.Float64, vram.WithGrad())
			o1, rel1 := tc.make(q)
			defer rel1()
			run(q, o1, 1, 3)
			if err := optim.Save(o1, path); err != nil {
				t.Fatal(err)
			}
			o2, rel2 := tc.make(q)
			defer rel2()
			if err := optim.Load(o2, path); err != nil {
				t.Fatal(err)
			}
			run(q, o2, 4, 6)
			checkValues(t, "resumed", q.Float64s(), want, 1e-12)

			// Another optimizer's file is refused, changing nothing.
			other, err := optim.NewAdam([]*vram.Tensor{q}, optim.AdamConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if err := optim.Load(other, path); !errors.Is(err, vram.ErrArgument) {
				t.Errorf("Adam loading %s state: got %v, want vram.ErrArgument", tc.name, err)
			}
		})
	}
}

// TestGradScalerStepsNewOptimizers checks that a GradScaler steps RMSprop
// and Adagrad with unscaled gradients and skips them on an overflow.
func TestGradScalerStepsNewOptimizers(t *testing.T) {
	for _, name := range []string{"RMSprop", "Adagrad"} {
		t.Run(name, func(t *testing.T) {
			mk := func(p *vram.Tensor) optim.Optimizer {
				var o optim.Optimizer
				var err error
				if name == "RMSprop" {
					o, err = optim.NewRMSprop([]*vram.Tensor{p}, optim.RMSpropConfig{LR: 0.1})
				} else {
					o, err = optim.NewAdagrad([]*vram.Tensor{p}, optim.AdagradConfig{LR: 0.1})
				}
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			ref := vram.FromSlice([]float32{1, 2}, nil, vram.WithGrad())
			refOpt := mk(ref)
			ref.SetGrad(vram.FromSlice([]float32{0.5, -0.25}, nil))
			refOpt.Step()

			p := vram.FromSlice([]float32{1, 2}, nil, vram.WithGrad())
			opt := mk(p)
			sc, err := amp.NewGradScaler(amp.GradScalerConfig{InitScale: 1024})
			if err != nil {
				t.Fatal(err)
			}
			p.SetGrad(vram.FromSlice([]float32{float32(math.Inf(1)), 1}, nil))
			if sc.Step(opt, []*vram.Tensor{p}) {
				t.Fatal("stepped on an infinite gradient")
			}
			sc.Update()
			checkValues(t, "after skipped step", p.Float64s(), []float64{1, 2}, 0)
			p.SetGrad(vram.FromSlice([]float32{0.5 * 512, -0.25 * 512}, nil)) // the scale is halved
			if !sc.Step(opt, []*vram.Tensor{p}) {
				t.Fatal("did not step on finite gradients")
			}
			sc.Update()
			checkValues(t, "after step", p.Float64s(), ref.Float64s(), 1e-6)
		})
	}
}
