package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/optim"
)

// refGrad is the gradient of the small problem of the reference tests at
// step t (from 1) for the parameters p: that of a quadratic with a shifting
// target, so that signs change and the moments differ by element.
func refGrad(p []float64, t int) []float64 {
	g := make([]float64, len(p))
	for i := range p {
		g[i] = 2*(p[i]-0.3*float64(i)) + 0.25*math.Sin(float64(3*t+i))
	}
	return g
}

var refInit = []float64{1, -2, 0.5, 3, -0.25}

// refSGD runs n steps of torch.optim.SGD's update rule in float64.
func refSGD(c optim.SGDConfig, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	var buf []float64
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			d += c.WeightDecay * p[i]
			if c.Momentum != 0 {
				if buf == nil {
					buf = make([]float64, len(p))
				}
				if t == 1 {
					buf[i] = d
				} else {
					buf[i] = c.Momentum*buf[i] + (1-c.Dampening)*d
				}
				if c.Nesterov {
					d += c.Momentum * buf[i]
				} else {
					d = buf[i]
				}
			}
			p[i] -= c.LR * d
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

// refAdam runs n steps of torch.optim.Adam's (decoupled: AdamW's) update
// rule in float64.
func refAdam(c optim.AdamConfig, decoupled bool, n int) [][]float64 {
	p := append([]float64(nil), refInit...)
	m, v, vmax := make([]float64, len(p)), make([]float64, len(p)), make([]float64, len(p))
	var out [][]float64
	for t := 1; t <= n; t++ {
		g := refGrad(p, t)
		bc1 := 1 - math.Pow(c.Beta1, float64(t))
		bc2 := 1 - math.Pow(c.Beta2, float64(t))
		for i := range p {
			d := g[i]
			if c.Maximize {
				d = -d
			}
			if decoupled {
				p[i] *= 1 - c.LR*c.WeightDecay
			} else {
				d += c.WeightDecay * p[i]
			}
			m[i] = c.Beta1*m[i] + (1-c.Beta1)*d
			v[i] = c.Beta2*v[i] + (1-c.Beta2)*d*d
			vv := v[i]
			if c.AMSGrad {
				vmax[i] = math.Max(vmax[i], v[i])
				vv = vmax[i]
			}
			denom := math.Sqrt(vv)/math.Sqrt(bc2) + c.Eps
			p[i] -= c.LR / bc1 * m[i] / denom
		}
		out = append(out, append([]float64(nil), p...))
	}
	return out
}

// runRef steps opt on a parameter made from refInit n times, the
// gradient of each step computed by refGrad from the parameter's values,
// and returns the parameter after each step.
func runRef(t *testing.T, dev vram.Device, dt vram.DType, n int, mk func(p *vram.Tensor) (optim.Optimizer, func())) [][]float64 {
	t.Helper()
	p := vram.FromSlice(refInit, nil, dt, dev, vram.WithGrad())
	defer p.Release()
	opt, release := mk(p)
	defer release()
	var out [][]float64
	for s := 1; s <= n; s++ {
		cur := p.Float64s()
		p.SetGrad(vram.FromSlice(refGrad(cur, s), p.Shape(), dt, dev))
		opt.Step()
		opt.ZeroGrad()
		out = append(out, p.Float64s())
	}
	return out
}

func TestOptimizersMatchReference(t *testing.T) {
	const n = 8
	sgd := []optim.SGDConfig{
		{LR: 0.05},
		{LR: 0.05, WeightDecay: 0.1},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, Dampening: 0.3},
		{LR: 0.05, Momentum: 0.9, Nesterov: true},
		{LR: 0.05, Momentum: 0.8, Nesterov: true, WeightDecay: 0.01},
		{LR: 0.05, Momentum: 0.7, Dampening: 0.5, WeightDecay: 0.2, Maximize: true},
	}
	adam := []optim.AdamConfig{
		{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{LR: 0.1, Beta1: 0.5, Beta2: 0.9, Eps: 1e-3},
		{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1},
		{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1, AMSGrad: true},
		{LR: 0.1, Beta1: 0.8, Beta2: 0.95, Eps: 0.5, AMSGrad: true, Maximize: true},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, dt := range []vram.DType{vram.Float64, vram.Float32} {
			tol := 1e-12
			if dt == vram.Float32 {
				tol = 1e-5
			}
			for i, c := range sgd {
				t.Run(fmt.Sprintf("%v/%v/SGD%d", dev, dt, i), func(t *testing.T) {
					got := runRef(t, dev, dt, n, func(p *vram.Tensor) (optim.Optimizer, func()) {
						o, err := optim.NewSGD([]*vram.Tensor{p}, c)
						if err != nil {
							t.Fatal(err)
						}
						return o, o.Release
					})
					want := refSGD(c, n)
					for s := range want {
						checkValues(t, fmt.Sprintf("step %d", s+1), got[s], want[s], tol)
					}
				})
			}
			for i, c := range adam {
				for _, decoupled := range []bool{false, true} {
					t.Run(fmt.Sprintf("%v/%v/Adam%d/decoupled=%v", dev, dt, i, decoupled), func(t *testing.T) {
						got := runRef(t, dev, dt, n, func(p *vram.Tensor) (optim.Optimizer, func()) {
							mk := optim.NewAdam
							if decoupled {
								mk = optim.NewAdamW
							}
							o, err := mk([]*vram.Tensor{p}, c)
							if err != nil {
								t.Fatal(err)
							}
							return o, o.Release
						})
						rc := c
						if decoupled && rc.WeightDecay == 0 {
							rc.WeightDecay = 0.01 // AdamW's default
						}
						want := refAdam(rc, decoupled, n)
						for s := range want {
							checkValues(t, fmt.Sprintf("step %d", s+1), got[s], want[s], tol)
						}
					})
				}
			}
		}
	}
}
