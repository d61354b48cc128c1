package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
)

// roundTo rounds x to dtype dt, as a store does.
func roundTo(dt backend.DType, x float64) float64 {
	return backendtest.Decode(dt, backendtest.Encode(dt, []float64{x}))[0]
}

func TestFusedAdam(t *testing.T) {
	d := gpu(t, 0)
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.BFloat16, backend.Float16} {
		for _, decoupled := range []bool{false, true} {
			const n = 100_003 // odd: a tail
			rng := rand.New(rand.NewSource(int64(dt)))
			host := make([][]float64, 4) // p, g, m, v
			views := make([]backend.View, 4)
			for k := range host {
				host[k] = make([]float64, n)
				for i := range host[k] {
					x := rng.NormFloat64()
					if k == 3 {
						x = 0 // v starts at zero; it stays non-negative
					}
					if k == 2 {
						x = 0
					}
					host[k][i] = roundTo(dt, x)
				}
				buf, err := d.Alloc(int64(n*dt.Size()), d.DefaultStream(), "test")
				if err != nil {
					t.Fatal(err)
				}
				defer d.Free(buf, d.DefaultStream())
				views[k] = backend.View{Buf: buf, DType: dt, Shape: []int{n}, Strides: []int{1}}
				if err := d.CopyFromHost(d.DefaultStream(), views[k], backendtest.Encode(dt, host[k])); err != nil {
					t.Fatal(err)
				}
			}
			cfg := backend.AdamStepConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.05, Decoupled: decoupled}
			for step := 1; step <= 3; step++ {
				cfg.Step = step
				if err := d.AdamStep(d.DefaultStream(), views[0], views[1], views[2], views[3], cfg); err != nil {
					t.Fatal(err)
				}
				backendtest.AdamStepRef(dt, host[0], host[1], host[2], host[3], cfg)
			}
			if err := d.Synchronize(); err != nil {
				t.Fatal(err)
			}
			rtol := map[backend.DType]float64{backend.Float32: 1e-5, backend.Float64: 1e-12, backend.BFloat16: 2e-2, backend.Float16: 4e-3}[dt]
			for k, name := range []string{"p", "g", "m", "v"} {
				got := read(t, d, views[k])
				bad := 0
				for i := range got {
					want := host[k][i]
					if diff := math.Abs(got[i] - want); !(diff <= rtol*math.Abs(want)+rtol*1e-2) {
						if bad < 5 {
							t.Errorf("%s decoupled=%v %s[%d] = %v, want %v", dt, decoupled, name, i, got[i], want)
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%s decoupled=%v %s: %d of %d elements differ", dt, decoupled, name, bad, n)
				}
			}
		}
	}
}

func TestFusedAdamRefusals(t *testing.T) {
	d := gpu(t, 0)
	buf, err := d.Alloc(64, d.DefaultStream(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(buf, d.DefaultStream())
	c := backend.View{Buf: buf, DType: backend.Float32, Shape: []int{4}, Strides: []int{1}}
	s := backend.View{Buf: buf, DType: backend.Float32, Shape: []int{4}, Strides: []int{2}}
	i := backend.View{Buf: buf, DType: backend.Int32, Shape: []int{4}, Strides: []int{1}}
	cfg := backend.AdamStepConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Step: 1}
	for name, vs := range map[string][4]backend.View{"strided": {c, s, c, c}, "int": {i, i, i, i}} {
		if err := d.AdamStep(d.DefaultStream(), vs[0], vs[1], vs[2], vs[3], cfg); !errors.Is(err, backend.ErrNotImplemented) {
			t.Errorf("%s: err = %v, want ErrNotImplemented", name, err)
		}
	}
}

func TestFusedSGD(t *testing.T) {
	d := gpu(t, 0)
	configs := map[string]backend.SGDStepConfig{
		"plain":    {LR: 0.1},
		"momentum": {LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01},
		"nesterov": {LR: 0.05, Momentum: 0.9, WeightDecay: 0.02, Nesterov: true},
	}
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.BFloat16, backend.Float16} {
		for name, cfg := range configs {
			const n = 70_001
			rng := rand.New(rand.NewSource(int64(dt) + 7))
			host := make([][]float64, 3) // p, g, buf
			views := make([]backend.View, 3)
			for k := range host {
				host[k] = make([]float64, n)
				for i := range host[k] {
					host[k][i] = roundTo(dt, rng.NormFloat64())
				}
				buf, err := d.Alloc(int64(n*dt.Size()), d.DefaultStream(), "test")
				if err != nil {
					t.Fatal(err)
				}
				defer d.Free(buf, d.DefaultStream())
				views[k] = backend.View{Buf: buf, DType: dt, Shape: []int{n}, Strides: []int{1}}
				if err := d.CopyFromHost(d.DefaultStream(), views[k], backendtest.Encode(dt, host[k])); err != nil {
					t.Fatal(err)
				}
			}
			for step := 1; step <= 3; step++ {
				cfg.First = step == 1
				bv := views[2]
				if cfg.Momentum == 0 {
					bv = backend.View{}
				}
				if err := d.SGDStep(d.DefaultStream(), views[0], views[1], bv, cfg); err != nil {
					t.Fatal(err)
				}
				backendtest.SGDStepRef(dt, host[0], host[1], host[2], cfg)
			}
			if err := d.Synchronize(); err != nil {
				t.Fatal(err)
			}
			rtol := map[backend.DType]float64{backend.Float32: 1e-6, backend.Float64: 1e-14, backend.BFloat16: 1e-2, backend.Float16: 2e-3}[dt]
			for k, what := range []string{"p", "g", "buf"} {
				got := read(t, d, views[k])
				bad := 0
				for i := range got {
					want := host[k][i]
					if diff := math.Abs(got[i] - want); !(diff <= rtol*math.Abs(want)+rtol*1e-3) {
						if bad < 5 {
							t.Errorf("%s %s %s[%d] = %v, want %v", dt, name, what, i, got[i], want)
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%s %s %s: %d of %d elements differ", dt, name, what, bad, n)
				}
			}
		}
	}
}

// TestFusedStepsMatchCPU runs the fused Adam, AdamW and SGD steps on the
// GPU and on the CPU backend (whose fused steps a sim device runs) for the
// 16-bit dtypes and float32, with gradients so small that their squares
// vanish in float16, and checks that the two agree within a last place:
// both compute in float32 and round the state to its dtype.
func TestFusedStepsMatchCPU(t *testing.T) {
	p := newPair(t)
	const n = 50_001
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16, backend.Float32} {
		for _, scale := range []float64{1, 1e-4} {
			pv, gv := p.random(dt, n, -2, 2), p.random(dt, n, -2*scale, 2*scale)
			zeros := make([]float64, n)
			for _, decoupled := range []bool{false, true} {
				ops := []twin{p.place(dt, []int{n}, layContig, pv, 0), p.place(dt, []int{n}, layContig, gv, 0),
					p.place(dt, []int{n}, layContig, zeros, 0), p.place(dt, []int{n}, layContig, zeros, 0)}
				cfg := backend.AdamStepConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: decoupled}
				name := fmt.Sprintf("adam/%s/grad scale %g/decoupled=%v", dt, scale, decoupled)
				for step := 1; step <= 3; step++ {
					cfg.Step = step
					p.run(name, func(dev backend.Device, s int) error {
						return dev.(backend.FusedAdam).AdamStep(dev.DefaultStream(), pick(ops[0], s), pick(ops[1], s), pick(ops[2], s), pick(ops[3], s), cfg)
					})
				}
				r, a := tol(dt)
				for k, what := range []string{"p", "g", "m", "v"} {
					p.compare(name+" "+what, ops[k], r, a, nil)
				}
			}
			ops := []twin{p.place(dt, []int{n}, layContig, pv, 0), p.place(dt, []int{n}, layContig, gv, 0),
				p.place(dt, []int{n}, layContig, zeros, 0)}
			cfg := backend.SGDStepConfig{LR: 0.1, Momentum: 0.9, Dampening: 0.1, WeightDecay: 1e-4}
			name := fmt.Sprintf("sgd/%s/grad scale %g", dt, scale)
			for step := 1; step <= 3; step++ {
				cfg.First = step == 1
				p.run(name, func(dev backend.Device, s int) error {
					return dev.(backend.FusedSGD).SGDStep(dev.DefaultStream(), pick(ops[0], s), pick(ops[1], s), pick(ops[2], s), cfg)
				})
			}
			r, a := tol(dt)
			for k, what := range []string{"p", "g", "buf"} {
				p.compare(name+" "+what, ops[k], r, a, nil)
			}
		}
	}
}

// TestSGDStepsManyParameters runs SGDSteps over more parameters than one
// launch of sgd_multi takes (three launches, the last part-filled), of 1 to
// 9,000 elements, some on their first step (parameters 0-63, so the mask's
// high bits count), and checks every element bit for bit against
// SGDStep on each parameter alone.
func TestSGDStepsManyParameters(t *testing.T) {
	d := gpu(t, 0)
	s := d.DefaultStream()
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		for _, nesterov := range []bool{false, true} {
			const np = 2*sgdMax + 22
			rng := rand.New(rand.NewSource(int64(dt)*31 + 5))
			cfg := backend.SGDStepConfig{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.01, Nesterov: nesterov}
			alloc := func(host []float64) backend.View {
				buf, err := d.Alloc(int64(len(host)*dt.Size()), s, "test")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Free(buf, s) })
				v := backend.View{Buf: buf, DType: dt, Shape: []int{len(host)}, Strides: []int{1}}
				if err := d.CopyFromHost(s, v, backendtest.Encode(dt, host)); err != nil {
					t.Fatal(err)
				}
				return v
			}
			// Two copies of each parameter and buffer: one for SGDSteps,
			// one for SGDStep alone; the gradient is shared.
			var ps, gs, bs, ps1, bs1 []backend.View
			first := make([]bool, np)
			for i := range np {
				n := 1 + rng.Intn(9000)
				if i%7 == 0 {
					n = 1 + i%3
				}
				host := make([][]float64, 3)
				for k := range host {
					host[k] = make([]float64, n)
					for j := range host[k] {
						host[k][j] = roundTo(dt, rng.NormFloat64())
					}
				}
				ps, gs, bs = append(ps, alloc(host[0])), append(gs, alloc(host[1])), append(bs, alloc(host[2]))
				ps1, bs1 = append(ps1, alloc(host[0])), append(bs1, alloc(host[2]))
				first[i] = i < sgdMax && rng.Intn(2) == 0
			}
			for step := range 2 {
				f := first
				if step > 0 {
					f = make([]bool, np)
				}
				if err := d.SGDSteps(s, ps, gs, bs, f, cfg); err != nil {
					t.Fatal(err)
				}
				for i := range np {
					c := cfg
					c.First = f[i]
					if err := d.SGDStep(s, ps1[i], gs[i], bs1[i], c); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := range np {
				for k, pair := range [][2]backend.View{{ps[i], ps1[i]}, {bs[i], bs1[i]}} {
					got, want := read(t, d, pair[0]), read(t, d, pair[1])
					if !slices.Equal(got, want) {
						t.Fatalf("%s nesterov=%v: parameter %d (%d elements) %s differs from SGDStep's", dt, nesterov, i, len(got), []string{"value", "buffer"}[k])
					}
				}
			}
		}
	}
}
