package backendtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vramgo/vram/backend"
)

// opRound returns the rounding of a fused optimizer step's compute type
// for dt: float32 (float64 for float64). An operation on two values of the
// compute type done in float64 and rounded so is the correctly rounded
// operation of the compute type.
func opRound(dt backend.DType) func(float64) float64 {
	if dt == backend.Float64 {
		return func(x float64) float64 { return x }
	}
	return func(x float64) float64 { return float64(float32(x)) }
}

// AdamStepRef applies one [backend.FusedAdam] step to the host values p, g,
// m and v of dtype dt, in place, as the interface specifies it: every
// operation rounded to the compute type (float32 for float32, float16 and
// bfloat16; float64 for float64), in the order of the CUDA kernel, and
// every stored value (p after decoupled decay, m, v, p) rounded to dt and
// read back. A plain float64 reference is not enough for the 16-bit
// dtypes: v is then often a float16 subnormal, whose last bit depends on
// the compute type and moves p by a visible fraction of the learning rate.
func AdamStepRef(dt backend.DType, p, g, m, v []float64, c backend.AdamStepConfig) {
	r := opRound(dt)
	bc1 := 1 - math.Pow(c.Beta1, float64(c.Step))
	bc2 := 1 - math.Pow(c.Beta2, float64(c.Step))
	b1, ob1, b2, ob2 := r(c.Beta1), r(1-c.Beta1), r(c.Beta2), r(1-c.Beta2)
	eps, wd, decay := r(c.Eps), r(c.WeightDecay), r(1-c.LR*c.WeightDecay)
	negStep, sqrtBC2 := r(-c.LR/bc1), r(math.Sqrt(bc2))
	for i := range p {
		pi, gi := p[i], g[i]
		if c.Decoupled {
			if c.WeightDecay != 0 {
				pi = Quantize(dt, r(pi*decay))
			}
		} else if c.WeightDecay != 0 {
			gi = r(gi + r(pi*wd))
		}
		m[i] = Quantize(dt, r(r(m[i]*b1)+r(gi*ob1)))
		v[i] = Quantize(dt, r(r(v[i]*b2)+r(r(gi*gi)*ob2)))
		denom := r(r(r(math.Sqrt(v[i]))/sqrtBC2) + eps)
		p[i] = Quantize(dt, r(pi+r(negStep*r(m[i]/denom))))
	}
}

// SGDStepRef applies one [backend.FusedSGD] step to the host values p, g
// and buf of dtype dt, in place, with the rounding of [AdamStepRef]: buf
// and p rounded to dt when stored.
func SGDStepRef(dt backend.DType, p, g, buf []float64, c backend.SGDStepConfig) {
	r := opRound(dt)
	mom, damp1, wd, negLR := r(c.Momentum), r(1-c.Dampening), r(c.WeightDecay), r(-c.LR)
	for i := range p {
		d := g[i]
		if c.WeightDecay != 0 {
			d = r(d + r(p[i]*wd))
		}
		if c.Momentum != 0 {
			b := d
			if !c.First {
				b = r(r(buf[i]*mom) + r(d*damp1))
			}
			buf[i] = Quantize(dt, b)
			if c.Nesterov {
				d = r(d + r(buf[i]*mom))
			} else {
				d = buf[i]
			}
		}
		p[i] = Quantize(dt, r(p[i]+r(negLR*d)))
	}
}

// stepTolerance is the error allowed in a fused step's results of dtype
// dt, relative to the reference (one rounding of dt, with room for a
// difference of one in the last place of an intermediate).
func stepTolerance(dt backend.DType) float64 {
	switch dt {
	case backend.Float64:
		return 1e-12
	case backend.Float32:
		return 1e-5
	case backend.Float16:
		return 4e-3
	}
	return 2e-2
}

// stepState is the host and device copies of an optimizer's operands.
type stepState struct {
	host  [][]float64
	views []backend.View
}

func (h *harness) stepState(t *testing.T, dt backend.DType, vals ...[]float64) stepState {
	t.Helper()
	var s stepState
	for _, v := range vals {
		q := quantizeAll(dt, v)
		s.host = append(s.host, q)
		s.views = append(s.views, NewView(t, h.dev, dt, []int{len(q)}, q))
	}
	return s
}

// check compares the device's operands with the reference's.
func (s stepState) check(t *testing.T, h *harness, what string, dt backend.DType, names ...string) {
	t.Helper()
	tol := stepTolerance(dt)
	for k, name := range names {
		got := ReadView(t, h.dev, s.views[k])
		bad := 0
		for i, want := range s.host[k] {
			if math.IsNaN(got[i]) || math.Abs(got[i]-want) > tol*math.Abs(want)+tol*1e-3 {
				if bad < 3 {
					t.Errorf("%s: %s[%d] = %v, want %v", what, name, i, got[i], want)
				}
				bad++
			}
		}
		if bad > 3 {
			t.Errorf("%s: %s: %d of %d elements differ", what, name, bad, len(got))
		}
	}
}

// normals returns n standard normal values scaled by scale.
func normals(rng *rand.Rand, n int, scale float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = scale * rng.NormFloat64()
	}
	return out
}

// testFusedSteps checks the optional fused optimizer steps against
// [AdamStepRef] and [SGDStepRef], for three steps over every float dtype,
// with ordinary gradients and with gradients so small that their squares
// vanish in float16 (where composing the step from float16 ops gives
// infinities and NaN: eps itself rounds to 0 there).
func (h *harness) testFusedSteps(t *testing.T) {
	fa, okA := h.dev.(backend.FusedAdam)
	fs, okS := h.dev.(backend.FusedSGD)
	if !okA && !okS {
		t.Skip("the device has no fused optimizer steps")
	}
	const n = 10_007 // odd: a tail
	grads := []struct {
		name  string
		scale float64
	}{{"ordinary", 1}, {"tiny", 1e-4}}
	for _, dt := range floatDTypes {
		for _, gr := range grads {
			for _, decoupled := range []bool{false, true} {
				if !okA {
					break
				}
				name := fmt.Sprintf("adam/%s/%s/decoupled=%v", dt, gr.name, decoupled)
				t.Run(name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(dt), 1))
					s := h.stepState(t, dt, normals(rng, n, 1), normals(rng, n, gr.scale), make([]float64, n), make([]float64, n))
					cfg := backend.AdamStepConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.05, Decoupled: decoupled}
					for step := 1; step <= 3; step++ {
						cfg.Step = step
						h.ok(t, "AdamStep", h.call(func() error {
							return fa.AdamStep(h.dev.DefaultStream(), s.views[0], s.views[1], s.views[2], s.views[3], cfg)
						}))
						AdamStepRef(dt, s.host[0], s.host[1], s.host[2], s.host[3], cfg)
					}
					s.check(t, h, name, dt, "p", "g", "m", "v")
				})
			}
			sgd := map[string]backend.SGDStepConfig{
				"plain":    {LR: 0.1},
				"momentum": {LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01},
				"nesterov": {LR: 0.05, Momentum: 0.9, WeightDecay: 0.02, Nesterov: true},
			}
			for _, cn := range []string{"plain", "momentum", "nesterov"} {
				if !okS {
					break
				}
				cfg := sgd[cn]
				name := fmt.Sprintf("sgd/%s/%s/%s", dt, gr.name, cn)
				t.Run(name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(dt), 2))
					s := h.stepState(t, dt, normals(rng, n, 1), normals(rng, n, gr.scale), normals(rng, n, 1))
					for step := 1; step <= 3; step++ {
						cfg.First = step == 1
						bv := s.views[2]
						if cfg.Momentum == 0 {
							bv = backend.View{}
						}
						h.ok(t, "SGDStep", h.call(func() error { return fs.SGDStep(h.dev.DefaultStream(), s.views[0], s.views[1], bv, cfg) }))
						SGDStepRef(dt, s.host[0], s.host[1], s.host[2], cfg)
					}
					names := []string{"p", "g"}
					if cfg.Momentum != 0 {
						names = append(names, "buf")
					}
					s.check(t, h, name, dt, names...)
				})
			}
		}
	}
	if fm, ok := h.dev.(backend.FusedSGDMulti); ok {
		h.testSGDSteps(t, fm)
	}
	// Views the fused steps decline, so that callers compose the step.
	t.Run("declines", func(t *testing.T) {
		c := NewView(t, h.dev, backend.Float32, []int{4}, filled(4, 1))
		st := c
		st.Shape, st.Strides = []int{2}, []int{2}
		i := NewView(t, h.dev, backend.Int32, []int{4}, filled(4, 1))
		for name, vs := range map[string][4]backend.View{"strided": {st, st, st, st}, "int": {i, i, i, i}} {
			if okA {
				cfg := backend.AdamStepConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Step: 1}
				if err := fa.AdamStep(h.dev.DefaultStream(), vs[0], vs[1], vs[2], vs[3], cfg); !errors.Is(err, backend.ErrNotImplemented) {
					t.Errorf("AdamStep of %s views: err = %v, want ErrNotImplemented", name, err)
				}
			}
			if okS {
				cfg := backend.SGDStepConfig{LR: 0.1, Momentum: 0.9}
				if err := fs.SGDStep(h.dev.DefaultStream(), vs[0], vs[1], vs[2], cfg); !errors.Is(err, backend.ErrNotImplemented) {
					t.Errorf("SGDStep of %s views: err = %v, want ErrNotImplemented", name, err)
				}
			}
		}
	})
}

// testSGDSteps checks [backend.FusedSGDMulti.SGDSteps] against
// [SGDStepRef] on 29 parameters (more than one launch's worth) of sizes
// from 1 to 20,011 elements in two dtypes, whose momentum buffers start at
// different steps, and that a wrong argument list queues nothing.
func (h *harness) testSGDSteps(t *testing.T, fm backend.FusedSGDMulti) {
	for _, cfg := range []backend.SGDStepConfig{
		{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01},
		{LR: 0.05, Momentum: 0.9, WeightDecay: 0.02, Nesterov: true},
		{LR: 0.1},
	} {
		t.Run(fmt.Sprintf("sgd steps/momentum=%v nesterov=%v", cfg.Momentum, cfg.Nesterov), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 3))
			sizes := []int{1, 64, 1000, 20_011, 3, 2048, 7, 512}
			var states []stepState
			var dts []backend.DType
			for i := range 29 {
				dt := floatDTypes[0]
				if i%3 == 1 {
					dt = backend.BFloat16
				}
				n := sizes[i%len(sizes)]
				states = append(states, h.stepState(t, dt, normals(rng, n, 1), normals(rng, n, 1), normals(rng, n, 1)))
				dts = append(dts, dt)
			}
			for step := range 3 {
				ps, gs, bufs := make([]backend.View, len(states)), make([]backend.View, len(states)), make([]backend.View, len(states))
				first := make([]bool, len(states))
				for i, s := range states {
					ps[i], gs[i], bufs[i] = s.views[0], s.views[1], s.views[2]
					// Parameter i's buffer starts at step i%2: some
					// parameters get their first gradient a step late.
					first[i] = step == i%2
					c := cfg
					c.First = first[i]
					if step >= i%2 {
						SGDStepRef(dts[i], s.host[0], s.host[1], s.host[2], c)
					}
				}
				// Parameters whose buffer has not started are left out.
				var ps2, gs2, bufs2 []backend.View
				var first2 []bool
				for i := range states {
					if step >= i%2 {
						ps2, gs2, bufs2, first2 = append(ps2, ps[i]), append(gs2, gs[i]), append(bufs2, bufs[i]), append(first2, first[i])
					}
				}
				h.ok(t, "SGDSteps", h.call(func() error { return fm.SGDSteps(h.dev.DefaultStream(), ps2, gs2, bufs2, first2, cfg) }))
			}
			names := []string{"p", "g"}
			if cfg.Momentum != 0 {
				names = append(names, "buf")
			}
			for i, s := range states {
				s.check(t, h, fmt.Sprintf("parameter %d (%s)", i, dts[i]), dts[i], names...)
			}
			if err := fm.SGDSteps(h.dev.DefaultStream(), []backend.View{states[0].views[0]}, nil, nil, []bool{true}, cfg); err == nil {
				t.Error("SGDSteps with a missing gradient: no error")
			}
		})
	}
}
