package optim

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/vramgo/vram"
)

// TestFusedStepsMatchComposed checks that SGD and Adam give the same
// parameters through their fused steps (a contiguous parameter) and their
// composed ones (a transposed one), with dampening, Nesterov momentum,
// maximize, L2 and decoupled weight decay and amsgrad.
func TestFusedStepsMatchComposed(t *testing.T) {
	cfgsS := []SGDConfig{
		{LR: 0.1, Momentum: 0.9, Dampening: 0.3, WeightDecay: 0.05, Maximize: true},
		{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.05},
		{LR: 0.1},
	}
	cfgsA := []AdamConfig{
		{LR: 0.01, WeightDecay: 0.1, Maximize: true},
		{LR: 0.01, WeightDecay: 0.1, DecoupledWeightDecay: true, Maximize: true},
		{LR: 0.01, WeightDecay: 0.1, AMSGrad: true},
	}
	for _, dt := range []vram.DType{vram.Float32, vram.Float64} {
		for ci := range len(cfgsS) + len(cfgsA) {
			t.Run(fmt.Sprint(dt, ci), func(t *testing.T) {
				vram.Tidy(func() {
					gen := vram.NewGenerator(5)
					base := vram.Randn(vram.Shape{3, 4}, vram.CPU, vram.WithGenerator(gen)).Cast(dt)
					c := vram.Randn(vram.Shape{3, 4}, vram.CPU, vram.WithGenerator(gen)).Cast(dt)
					pc := base.Clone().Detach().SetRequiresGrad(true)
					pn := base.T().Contiguous().T().Detach().SetRequiresGrad(true)
					if pn.IsContiguous() {
						t.Fatal("the transposed copy is contiguous; the composed step would not run")
					}
					var oc, on Optimizer
					var err1, err2 error
					if ci < len(cfgsS) {
						oc, err1 = NewSGD([]*vram.Tensor{pc}, cfgsS[ci])
						on, err2 = NewSGD([]*vram.Tensor{pn}, cfgsS[ci])
					} else {
						oc, err1 = NewAdam([]*vram.Tensor{pc}, cfgsA[ci-len(cfgsS)])
						on, err2 = NewAdam([]*vram.Tensor{pn}, cfgsA[ci-len(cfgsS)])
					}
					if err1 != nil || err2 != nil {
						t.Fatal(err1, err2)
					}
					for range 5 {
						for _, w := range []*vram.Tensor{pc, pn} {
							w.Mul(c).Square().Sum().Backward()
						}
						oc.Step()
						on.Step()
						oc.ZeroGrad()
						on.ZeroGrad()
					}
					a, b := pc.Float64s(), pn.Float64s()
					for i := range a {
						if math.Abs(a[i]-b[i]) > 1e-6*math.Abs(a[i]) {
							t.Errorf("elem %d: fused %v composed %v", i, a[i], b[i])
						}
					}
				})
			})
		}
	}
}

// TestReduceLROnPlateauMatchesRecurrence runs ReduceLROnPlateau on random
// metrics (NaN among them) in every mode, with random patience, cooldown
// and threshold, beside PyTorch's step written out by hand.
func TestReduceLROnPlateauMatchesRecurrence(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := range 200 {
		cfg := PlateauConfig{Max: trial%2 == 0, AbsThreshold: trial%4 < 2, Factor: 0.5, Patience: rng.Intn(3), Cooldown: rng.Intn(3), Threshold: rng.Float64() * 0.1, Eps: 1e-8, MinLRs: []float64{0.01}}
		p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
		o, err := NewSGD([]*vram.Tensor{p}, SGDConfig{LR: 1})
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReduceLROnPlateau(o, cfg)
		if err != nil {
			t.Fatal(err)
		}
		lr := 1.0
		best := math.Inf(1)
		if cfg.Max {
			best = math.Inf(-1)
		}
		bad, cool := 0, 0
		for i := range 60 {
			m := rng.Float64()*2 - 1 + float64(i%7)*0.01
			if rng.Intn(10) == 0 {
				m = math.NaN()
			}
			var better bool
			switch {
			case !cfg.Max && !cfg.AbsThreshold:
				better = m < best*(1-cfg.Threshold)
			case !cfg.Max:
				better = m < best-cfg.Threshold
			case !cfg.AbsThreshold:
				better = m > best*(cfg.Threshold+1)
			default:
				better = m > best+cfg.Threshold
			}
			if better {
				best, bad = m, 0
			} else {
				bad++
			}
			if cool > 0 {
				cool--
				bad = 0
			}
			if bad > cfg.Patience {
				nl := math.Max(lr*cfg.Factor, 0.01)
				if lr-nl > cfg.Eps {
					lr = nl
				}
				cool, bad = cfg.Cooldown, 0
			}
			r.Step(m)
			if got := o.LR(); got != lr {
				t.Fatalf("trial %d step %d: lr %v want %v", trial, i, got, lr)
			}
		}
	}
}

// TestCyclicSchedulesMatchHandWritten compares, step by step,
// CosineAnnealingWarmRestarts with T_mult 3 against PyTorch's T_cur
// recurrence, CyclicLR in exp_range mode against its closed form (rate
// and momentum), and a three-phase OneCycleLR against its phases (rate
// and beta1).
func TestCyclicSchedulesMatchHandWritten(t *testing.T) {
	p := vram.Zeros(vram.Shape{1}, vram.WithGrad())
	// warm restarts, T_0=3, T_mult=3, eta_min=0.01
	o, err := NewSGD([]*vram.Tensor{p}, SGDConfig{LR: 0.5, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewCosineAnnealingWarmRestarts(o, 3, 3, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	tcur, ti := 0, 3
	for i := 1; i < 200; i++ {
		s.Step()
		tcur++
		if tcur >= ti {
			tcur -= ti
			ti *= 3
		}
		want := 0.01 + (0.5-0.01)*(1+math.Cos(math.Pi*float64(tcur)/float64(ti)))/2
		if math.Abs(o.LR()-want) > 1e-14 {
			t.Fatalf("wr step %d: %v want %v", i, o.LR(), want)
		}
	}
	// cyclic exp_range
	o2, err := NewSGD([]*vram.Tensor{p}, SGDConfig{LR: 0.5, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCyclicLR(o2, 0.1, 1, CyclicOptions{StepSizeUp: 3, StepSizeDown: 5, Mode: ExpRange, Gamma: 0.97})
	if err != nil {
		t.Fatal(err)
	}
	for e := 0; e < 100; e++ {
		if e > 0 {
			c.Step()
		}
		total := 8.0
		cycle := math.Floor(1 + float64(e)/total)
		x := 1 + float64(e)/total - cycle
		var sf float64
		if x <= 3.0/8 {
			sf = x / (3.0 / 8)
		} else {
			sf = (x - 1) / (3.0/8 - 1)
		}
		want := 0.1 + 0.9*sf*math.Pow(0.97, float64(e))
		wm := 0.9 - (0.9-0.8)*sf*math.Pow(0.97, float64(e))
		if math.Abs(o2.LR()-want) > 1e-12 || math.Abs(o2.Config().Momentum-wm) > 1e-12 {
			t.Fatalf("cyc step %d: %v want %v; m %v want %v", e, o2.LR(), want, o2.Config().Momentum, wm)
		}
	}
	// OneCycle three-phase cos
	o3, err := NewAdam([]*vram.Tensor{p}, AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	oc, err := NewOneCycleLR(o3, 0.1, 37, OneCycleOptions{PctStart: 0.25, ThreePhase: true})
	if err != nil {
		t.Fatal(err)
	}
	cosA := func(a, b, pct float64) float64 { return b + (a-b)/2*(1+math.Cos(math.Pi*pct)) }
	ini, fin := 0.1/25, 0.1/25/1e4
	ends := []float64{0.25*37 - 1, 2*0.25*37 - 2, 36}
	lrs := [][2]float64{{ini, 0.1}, {0.1, ini}, {ini, fin}}
	ms := [][2]float64{{0.95, 0.85}, {0.85, 0.95}, {0.95, 0.95}}
	for e := 0; e <= 37; e++ {
		if e > 0 {
			oc.Step()
		}
		start := 0.0
		for i, end := range ends {
			if float64(e) <= end || i == 2 {
				pct := (float64(e) - start) / (end - start)
				w, wm := cosA(lrs[i][0], lrs[i][1], pct), cosA(ms[i][0], ms[i][1], pct)
				if math.Abs(o3.LR()-w) > 1e-14 || math.Abs(o3.Config().Beta1-wm) > 1e-14 {
					t.Fatalf("oc step %d: %v want %v, b1 %v want %v", e, o3.LR(), w, o3.Config().Beta1, wm)
				}
				break
			}
			start = end
		}
	}
}
