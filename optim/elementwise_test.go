package optim_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/amp"
	"github.com/vramgo/vram/internal/safetensors"
	"github.com/vramgo/vram/optim"
)

// refAdamax runs n steps of torch.optim.Adamax's update rule in float64.
func refAdamax(c optim.AdamaxConfig, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	m, u := make([]float64, len(p)), make([]float64, len(p))
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		clr := c.LR / (1 - math.Pow(c.Beta1, float64(t)))
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			d += c.WeightDecay * p[i]
			m[i] = c.Beta1*m[i] + (1-c.Beta1)*d
			u[i] = math.Max(c.Beta2*u[i], math.Abs(d)+c.Eps)
			p[i] -= clr * m[i] / u[i]
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

// refNAdam runs n steps of torch.optim.NAdam's update rule in float64,
// its mu_product in float32 as PyTorch keeps it.
func refNAdam(c optim.NAdamConfig, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	m, v := make([]float64, len(p)), make([]float64, len(p))
	muProduct := float32(1)
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		tf := float64(t)
		bc2 := 1 - math.Pow(c.Beta2, tf)
		mu := c.Beta1 * (1 - 0.5*math.Pow(0.96, tf*c.MomentumDecay))
		muNext := c.Beta1 * (1 - 0.5*math.Pow(0.96, (tf+1)*c.MomentumDecay))
		muProduct *= float32(mu)
		mp := float64(muProduct)
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			if c.DecoupledWeightDecay {
				p[i] *= 1 - c.LR*c.WeightDecay
			} else {
				d += c.WeightDecay * p[i]
			}
			m[i] = c.Beta1*m[i] + (1-c.Beta1)*d
			v[i] = c.Beta2*v[i] + (1-c.Beta2)*d*d
			den := math.Sqrt(v[i]/bc2) + c.Eps
			p[i] -= c.LR * (1 - mu) / (1 - mp) * d / den
			p[i] -= c.LR * muNext / (1 - mp*muNext) * m[i] / den
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

// refRAdam runs n steps of torch.optim.RAdam's update rule in float64.
func refRAdam(c optim.RAdamConfig, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	m, v := make([]float64, len(p)), make([]float64, len(p))
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		tf := float64(t)
		bc1 := 1 - math.Pow(c.Beta1, tf)
		bc2 := 1 - math.Pow(c.Beta2, tf)
		rhoInf := 2/(1-c.Beta2) - 1
		rhoT := rhoInf - 2*tf*math.Pow(c.Beta2, tf)/bc2
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			if c.DecoupledWeightDecay {
				p[i] *= 1 - c.LR*c.WeightDecay
			} else {
				d += c.WeightDecay * p[i]
			}
			m[i] = c.Beta1*m[i] + (1-c.Beta1)*d
			v[i] = c.Beta2*v[i] + (1-c.Beta2)*d*d
			mhat := m[i] / bc1
			if rhoT > 5 {
				rect := math.Sqrt((rhoT - 4) * (rhoT - 2) * rhoInf / ((rhoInf - 4) * (rhoInf - 2) * rhoT))
				p[i] -= mhat * c.LR * math.Sqrt(bc2) / (math.Sqrt(v[i]) + c.Eps) * rect
			} else {
				p[i] -= mhat * c.LR
			}
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

// refAdadelta runs n steps of torch.optim.Adadelta's update rule in
// float64.
func refAdadelta(c optim.AdadeltaConfig, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	v, u := make([]float64, len(p)), make([]float64, len(p))
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			d += c.WeightDecay * p[i]
			v[i] = c.Rho*v[i] + (1-c.Rho)*d*d
			delta := math.Sqrt(u[i]+c.Eps) / math.Sqrt(v[i]+c.Eps) * d
			u[i] = c.Rho*u[i] + (1-c.Rho)*delta*delta
			p[i] -= c.LR * delta
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

// refASGD runs n steps of torch.optim.ASGD's update rule in float64, its
// eta and mu in float32 as PyTorch keeps them, and returns the parameters
// and their averages after each step.
func refASGD(c optim.ASGDConfig, n int) (ps, axs [][]float64) {
	p := append([]float64(nil), refInit...)
	ax := make([]float64, len(p))
	eta, mu := float64(float32(c.LR)), 1.0
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			d += c.WeightDecay * p[i]
			p[i] *= 1 - c.Lambd*eta
			p[i] -= eta * d
			if mu != 1 {
				ax[i] += (p[i] - ax[i]) * mu
			} else {
				ax[i] = p[i]
			}
		}
		tf := float64(t)
		eta = float64(float32(c.LR / math.Pow(1+c.Lambd*c.LR*tf, c.Alpha)))
		mu = float64(float32(1 / math.Max(1, tf-c.T0)))
		ps = append(ps, append([]float64(nil), p...))
		axs = append(axs, append([]float64(nil), ax...))
	}
	return ps, axs
}

// refCase is one optimizer configuration checked against its float64
// transcription.
type refCase struct {
	name string
	make func(ps []*vram.Tensor) (optim.Optimizer, error)
	want func(n int) [][]float64
}

func newOptimizerCases() []refCase {
	var cases []refCase
	for i, c := range []optim.AdamaxConfig{
		{LR: 2e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{LR: 0.05, Beta1: 0.8, Beta2: 0.9, Eps: 1e-3, WeightDecay: 0.1},
		{LR: 0.05, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.05, Maximize: true},
	} {
		cases = append(cases, refCase{fmt.Sprintf("Adamax%d", i),
			func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdamax(ps, c) },
			func(n int) [][]float64 { return refAdamax(c, n) }})
	}
	for i, c := range []optim.NAdamConfig{
		{LR: 2e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MomentumDecay: 4e-3},
		{LR: 0.05, Beta1: 0.8, Beta2: 0.9, Eps: 1e-6, MomentumDecay: 0.05, WeightDecay: 0.1},
		{LR: 0.05, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, MomentumDecay: 4e-3, WeightDecay: 0.1, DecoupledWeightDecay: true},
		{LR: 0.02, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MomentumDecay: 4e-3, WeightDecay: 0.01, Maximize: true},
	} {
		cases = append(cases, refCase{fmt.Sprintf("NAdam%d", i),
			func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewNAdam(ps, c) },
			func(n int) [][]float64 { return refNAdam(c, n) }})
	}
	for i, c := range []optim.RAdamConfig{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{LR: 0.05, Beta1: 0.8, Beta2: 0.9, Eps: 1e-6, WeightDecay: 0.1},
		{LR: 0.05, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, DecoupledWeightDecay: true},
		{LR: 0.02, Beta1: 0.9, Beta2: 0.9, Eps: 1e-8, WeightDecay: 0.01, Maximize: true},
	} {
		cases = append(cases, refCase{fmt.Sprintf("RAdam%d", i),
			func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewRAdam(ps, c) },
			func(n int) [][]float64 { return refRAdam(c, n) }})
	}
	for i, c := range []optim.AdadeltaConfig{
		{LR: 1, Rho: 0.9, Eps: 1e-6},
		{LR: 0.5, Rho: 0.8, Eps: 1e-3, WeightDecay: 0.1},
		{LR: 2, Rho: 0.95, Eps: 1e-6, WeightDecay: 0.05, Maximize: true},
	} {
		cases = append(cases, refCase{fmt.Sprintf("Adadelta%d", i),
			func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewAdadelta(ps, c) },
			func(n int) [][]float64 { return refAdadelta(c, n) }})
	}
	for i, c := range []optim.ASGDConfig{
		{LR: 1e-2, Lambd: 1e-4, Alpha: 0.75, T0: 1e6},
		{LR: 0.05, Lambd: 0.1, Alpha: 0.5, T0: 3, WeightDecay: 0.1},
		{LR: 0.05, Lambd: 0.01, Alpha: 0.75, T0: 2, WeightDecay: 0.05, Maximize: true},
	} {
		cases = append(cases, refCase{fmt.Sprintf("ASGD%d", i),
			func(ps []*vram.Tensor) (optim.Optimizer, error) { return optim.NewASGD(ps, c) },
			func(n int) [][]float64 { p, _ := refASGD(c, n); return p }})
	}
	return append(cases, rpropCases()...)
}

// TestNewOptimizersMatchReference checks Adamax, NAdam, RAdam, Adadelta,
// ASGD and Rprop against float64 transcriptions of PyTorch's update rules.
func TestNewOptimizersMatchReference(t *testing.T) {
	const n = 16
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32} {
			tol := 1e-12
			if dt == vram.Float32 {
				tol = 1e-5
			}
			for _, tc := range newOptimizerCases() {
				t.Run(fmt.Sprintf("%v/%v/%s", dev, dt, tc.name), func(t *testing.T) {
					got := runRef(t, dev, dt, n, func(p *vram.Tensor) (optim.Optimizer, func()) {
						o, err := tc.make([]*vram.Tensor{p})
						if err != nil {
							t.Fatal(err)
						}
						return o, o.(interface{ Release() }).Release
					})
					want := tc.want(n)
					for s := range want {
						checkValues(t, fmt.Sprintf("step %d", s+1), got[s], want[s], tol)
					}
				})
			}
		}
	}
}

// TestASGDAverage checks ASGD's running average against the reference.
func TestASGDAverage(t *testing.T) {
	c := optim.ASGDConfig{LR: 0.05, Lambd: 0.1, Alpha: 0.5, T0: 3}
	p := vram.FromSlice(refInit, nil, vram.Float64, vram.WithGrad())
	o, err := optim.NewASGD([]*vram.Tensor{p}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	if o.Average(0) != nil {
		t.Error("an average before the first step")
	}
	const n = 10
	_, want := refASGD(c, n)
	for s := 1; s <= n; s++ {
		p.SetGrad(vram.FromSlice(refGrad(p.Float64s(), s), nil, vram.Float64))
		o.Step()
		o.ZeroGrad()
		checkValues(t, fmt.Sprintf("ax after step %d", s), o.Average(0).Float64s(), want[s-1], 1e-12)
	}
	if err := vram.Catch(func() { o.Average(1) }); !errors.Is(err, vram.ErrIndex) {
		t.Errorf("Average(1) of one parameter: got %v, want vram.ErrIndex", err)
	}
}

// TestNewOptimizersDefaults checks that zero fields take PyTorch's
// defaults and that Options set zeros the configs cannot ask for.
func TestNewOptimizersDefaults(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	q := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	two := func(opts ...optim.Option) []optim.ParamGroup {
		return []optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{q}, opts...)}
	}
	ax, err := optim.NewAdamaxGroups(two(optim.WithBetas(0, 0.5)), optim.AdamaxConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ax.Config(), (optim.AdamaxConfig{LR: 2e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); got != want {
		t.Errorf("Adamax config %+v, want %+v", got, want)
	}
	if got := ax.GroupConfig(1); got.Beta1 != 0 || got.Beta2 != 0.5 {
		t.Errorf("Adamax group 1 %+v", got)
	}
	na, err := optim.NewNAdamGroups(two(optim.WithMomentumDecay(0), optim.WithDecoupledWeightDecay(true)), optim.NAdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := na.Config(), (optim.NAdamConfig{LR: 2e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MomentumDecay: 4e-3}); got != want {
		t.Errorf("NAdam config %+v, want %+v", got, want)
	}
	if got := na.GroupConfig(1); got.MomentumDecay != 0 || !got.DecoupledWeightDecay {
		t.Errorf("NAdam group 1 %+v", got)
	}
	ra, err := optim.NewRAdamGroups(two(optim.WithDecoupledWeightDecay(true)), optim.RAdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ra.Config(), (optim.RAdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); got != want {
		t.Errorf("RAdam config %+v, want %+v", got, want)
	}
	ad, err := optim.NewAdadeltaGroups(two(optim.WithRho(0)), optim.AdadeltaConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ad.Config(), (optim.AdadeltaConfig{LR: 1, Rho: 0.9, Eps: 1e-6}); got != want {
		t.Errorf("Adadelta config %+v, want %+v", got, want)
	}
	if got := ad.GroupConfig(1); got.Rho != 0 {
		t.Errorf("Adadelta group 1 %+v", got)
	}
	as, err := optim.NewASGDGroups(two(optim.WithT0(0), optim.WithLambd(0), optim.WithAlpha(0)), optim.ASGDConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := as.Config(), (optim.ASGDConfig{LR: 1e-2, Lambd: 1e-4, Alpha: 0.75, T0: 1e6}); got != want {
		t.Errorf("ASGD config %+v, want %+v", got, want)
	}
	if got := as.GroupConfig(1); got.T0 != 0 || got.Lambd != 0 || got.Alpha != 0 {
		t.Errorf("ASGD group 1 %+v", got)
	}
}

func TestNewOptimizersRefuseBadConfigs(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	ps := []*vram.Tensor{p}
	group := func(opts ...optim.Option) []optim.ParamGroup { return []optim.ParamGroup{optim.Group(ps, opts...)} }
	tests := []struct {
		name string
		make func() error
	}{
		{"Adamax negative lr", func() error { _, err := optim.NewAdamax(ps, optim.AdamaxConfig{LR: -1}); return err }},
		{"Adamax beta1 1", func() error { _, err := optim.NewAdamax(ps, optim.AdamaxConfig{Beta1: 1}); return err }},
		{"Adamax negative beta2", func() error { _, err := optim.NewAdamax(ps, optim.AdamaxConfig{Beta2: -0.1}); return err }},
		{"Adamax NaN eps", func() error { _, err := optim.NewAdamax(ps, optim.AdamaxConfig{Eps: math.NaN()}); return err }},
		{"Adamax momentum option", func() error {
			_, err := optim.NewAdamaxGroups(group(optim.WithMomentum(0.9)), optim.AdamaxConfig{})
			return err
		}},
		{"NAdam negative momentum decay", func() error {
			_, err := optim.NewNAdam(ps, optim.NAdamConfig{MomentumDecay: -1})
			return err
		}},
		{"NAdam infinite weight decay", func() error {
			_, err := optim.NewNAdam(ps, optim.NAdamConfig{WeightDecay: math.Inf(1)})
			return err
		}},
		{"NAdam beta2 in a group", func() error {
			_, err := optim.NewNAdamGroups(group(optim.WithBetas(0.9, 1)), optim.NAdamConfig{})
			return err
		}},
		{"NAdam amsgrad option", func() error {
			_, err := optim.NewNAdamGroups(group(optim.WithAMSGrad(true)), optim.NAdamConfig{})
			return err
		}},
		{"RAdam NaN lr", func() error { _, err := optim.NewRAdam(ps, optim.RAdamConfig{LR: math.NaN()}); return err }},
		{"RAdam beta1 above 1", func() error { _, err := optim.NewRAdam(ps, optim.RAdamConfig{Beta1: 1.5}); return err }},
		{"RAdam momentum decay option", func() error {
			_, err := optim.NewRAdamGroups(group(optim.WithMomentumDecay(0.1)), optim.RAdamConfig{})
			return err
		}},
		{"Adadelta rho above 1", func() error { _, err := optim.NewAdadelta(ps, optim.AdadeltaConfig{Rho: 1.1}); return err }},
		{"Adadelta negative eps", func() error { _, err := optim.NewAdadelta(ps, optim.AdadeltaConfig{Eps: -1}); return err }},
		{"Adadelta negative lr in a group", func() error {
			_, err := optim.NewAdadeltaGroups(group(optim.WithLR(-1)), optim.AdadeltaConfig{})
			return err
		}},
		{"ASGD negative lambd", func() error { _, err := optim.NewASGD(ps, optim.ASGDConfig{Lambd: -1}); return err }},
		{"ASGD infinite t0", func() error { _, err := optim.NewASGD(ps, optim.ASGDConfig{T0: math.Inf(1)}); return err }},
		{"ASGD NaN alpha", func() error { _, err := optim.NewASGD(ps, optim.ASGDConfig{Alpha: math.NaN()}); return err }},
		{"ASGD negative weight decay", func() error { _, err := optim.NewASGD(ps, optim.ASGDConfig{WeightDecay: -1}); return err }},
		{"ASGD rho option", func() error { _, err := optim.NewASGDGroups(group(optim.WithRho(0.5)), optim.ASGDConfig{}); return err }},
		{"ASGD empty", func() error { _, err := optim.NewASGD(nil, optim.ASGDConfig{}); return err }},
		{"RAdam repeated parameter", func() error { _, err := optim.NewRAdam([]*vram.Tensor{p, p}, optim.RAdamConfig{}); return err }},
	}
	for _, tc := range tests {
		if err := tc.make(); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: got %v, want an error matching vram.ErrArgument", tc.name, err)
		}
	}
}

// TestNewOptimizersSaveLoad checks that a run stopped, saved, loaded into
// a new optimizer and resumed ends bit for bit where an unbroken run
// does, and that another optimizer's file is refused.
func TestNewOptimizersSaveLoad(t *testing.T) {
	run := func(p *vram.Tensor, o optim.Optimizer, from, to int) {
		for s := from; s <= to; s++ {
			p.SetGrad(vram.FromSlice(refGrad(p.Float64s(), s), p.Shape(), p.DType()))
			o.Step()
			o.ZeroGrad()
		}
	}
	for _, dt := range []vram.DType{vram.Float64, vram.Float32} {
		for _, tc := range newOptimizerCases() {
			t.Run(fmt.Sprintf("%v/%s", dt, tc.name), func(t *testing.T) {
				mk := func(p *vram.Tensor) optim.Optimizer {
					o, err := tc.make([]*vram.Tensor{p})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(o.(interface{ Release() }).Release)
					return o
				}
				path := filepath.Join(t.TempDir(), "opt.safetensors")
				p := vram.FromSlice(refInit, nil, dt, vram.WithGrad())
				run(p, mk(p), 1, 8)

				q := vram.FromSlice(refInit, nil, dt, vram.WithGrad())
				o1 := mk(q)
				run(q, o1, 1, 5)
				if err := optim.Save(o1, path); err != nil {
					t.Fatal(err)
				}
				o2 := mk(q)
				if err := optim.Load(o2, path); err != nil {
					t.Fatal(err)
				}
				run(q, o2, 6, 8)
				checkValues(t, "resumed", q.Float64s(), p.Float64s(), 0)

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
}

// TestGradScalerStepsMoreOptimizers checks that a GradScaler steps the
// newer optimizers with unscaled gradients and skips them on an overflow.
func TestGradScalerStepsMoreOptimizers(t *testing.T) {
	for _, tc := range newOptimizerCases() {
		t.Run(tc.name, func(t *testing.T) {
			mk := func(p *vram.Tensor) optim.Optimizer {
				o, err := tc.make([]*vram.Tensor{p})
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
			p.SetGrad(vram.FromSlice([]float32{0.5 * 512, -0.25 * 512}, nil))
			if !sc.Step(opt, []*vram.Tensor{p}) {
				t.Fatal("did not step on finite gradients")
			}
			sc.Update()
			checkValues(t, "after step", p.Float64s(), ref.Float64s(), 1e-6)
		})
	}
}

// TestNewOptimizersCheckpointGroupsAndScalars checks that Load restores
// the groups' new hyper-parameters, and refuses a scalar state that is
// missing, misshapen or not finite, changing nothing.
func TestNewOptimizersCheckpointGroupsAndScalars(t *testing.T) {
	dir := t.TempDir()
	p := vram.FromSlice(refInit, nil, vram.Float64, vram.WithGrad())
	q := vram.FromSlice(refInit, nil, vram.Float64, vram.WithGrad())
	groups := func(opts ...optim.Option) []optim.ParamGroup {
		return []optim.ParamGroup{optim.Group([]*vram.Tensor{p}), optim.Group([]*vram.Tensor{q}, opts...)}
	}
	o, err := optim.NewNAdamGroups(groups(optim.WithDecoupledWeightDecay(true), optim.WithMomentumDecay(0), optim.WithWeightDecay(0.1)), optim.NAdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	for s := 1; s <= 3; s++ {
		p.SetGrad(vram.FromSlice(refGrad(p.Float64s(), s), nil, vram.Float64))
		q.SetGrad(vram.FromSlice(refGrad(q.Float64s(), s), nil, vram.Float64))
		o.Step()
	}
	good := filepath.Join(dir, "nadam.safetensors")
	if err := optim.Save(o, good); err != nil {
		t.Fatal(err)
	}
	fresh, err := optim.NewNAdamGroups(groups(), optim.NAdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Release()
	if err := optim.Load(fresh, good); err != nil {
		t.Fatal(err)
	}
	if got, want := fresh.GroupConfig(1), o.GroupConfig(1); got != want {
		t.Errorf("group 1 loaded as %+v, want %+v", got, want)
	}

	edit := func(name string, change func(map[string]safetensors.Tensor)) string {
		ts, md := readCheckpoint(t, good)
		change(ts)
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := safetensors.Write(f, ts, md); err != nil {
			t.Fatal(err)
		}
		return path
	}
	nan := make([]byte, 4)
	binary.LittleEndian.PutUint32(nan, math.Float32bits(float32(math.NaN())))
	tests := []struct {
		name, path string
	}{
		{"missing mu_product", edit("missing.st", func(ts map[string]safetensors.Tensor) { delete(ts, "state.1.mu_product") })},
		{"NaN mu_product", edit("nan.st", func(ts map[string]safetensors.Tensor) {
			ts["state.0.mu_product"] = safetensors.Tensor{DType: "F32", Shape: []int{}, Data: nan}
		})},
		{"mu_product of the parameter's shape", edit("shape.st", func(ts map[string]safetensors.Tensor) {
			ts["state.0.mu_product"] = ts["state.0.exp_avg"]
		})},
	}
	for _, tc := range tests {
		target, err := optim.NewNAdamGroups(groups(), optim.NAdamConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := optim.Load(target, tc.path); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: got %v, want vram.ErrArgument", tc.name, err)
		}
		if target.GroupConfig(1).DecoupledWeightDecay {
			t.Errorf("%s: the refused file changed the groups", tc.name)
		}
		target.Release()
	}
}
