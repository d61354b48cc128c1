package optim_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/optim"
)

// rosen returns the Rosenbrock function of v and its gradient.
func rosen(v []float64) (float64, []float64) {
	f := 0.0
	g := make([]float64, len(v))
	for i := 0; i+1 < len(v); i++ {
		a, b := v[i], v[i+1]
		f += 100*(b-a*a)*(b-a*a) + (1-a)*(1-a)
		g[i] += -400*a*(b-a*a) - 2*(1-a)
		g[i+1] += 200 * (b - a*a)
	}
	return f, g
}

// refLBFGS transcribes torch.optim.LBFGS in float64 on a flat vector;
// step runs one of its steps on x in place.
type refLBFGS struct {
	c                  optim.LBFGSConfig
	funcEvals, nIter   int
	d, prevFlatGrad    []float64
	oldDirs, oldStps   [][]float64
	ro                 []float64
	t, hDiag, prevLoss float64
	f                  func([]float64) (float64, []float64)
	x                  []float64
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func axpy(y []float64, alpha float64, x []float64) {
	for i := range y {
		y[i] += alpha * x[i]
	}
}

func scaled(x []float64, a float64) []float64 {
	out := make([]float64, len(x))
	for i := range x {
		out[i] = a * x[i]
	}
	return out
}

func absMaxOf(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

func (r *refLBFGS) step() float64 {
	c := r.c
	orig, flatGrad := r.f(r.x)
	loss := orig
	currentEvals := 1
	r.funcEvals++
	if absMaxOf(flatGrad) <= c.ToleranceGrad {
		return orig
	}
	for nIter := 1; nIter <= c.MaxIter; nIter++ {
		r.nIter++
		if r.nIter == 1 {
			r.d = scaled(flatGrad, -1)
			r.oldDirs, r.oldStps, r.ro = nil, nil, nil
			r.hDiag = 1
		} else {
			y := append([]float64(nil), flatGrad...)
			axpy(y, -1, r.prevFlatGrad)
			s := scaled(r.d, r.t)
			if ys := dot(y, s); ys > 1e-10 {
				if len(r.oldDirs) == c.HistorySize {
					r.oldDirs, r.oldStps, r.ro = r.oldDirs[1:], r.oldStps[1:], r.ro[1:]
				}
				r.oldDirs, r.oldStps, r.ro = append(r.oldDirs, y), append(r.oldStps, s), append(r.ro, 1/ys)
				r.hDiag = ys / dot(y, y)
			}
			al := make([]float64, len(r.oldDirs))
			q := scaled(flatGrad, -1)
			for i := len(r.oldDirs) - 1; i >= 0; i-- {
				al[i] = dot(r.oldStps[i], q) * r.ro[i]
				axpy(q, -al[i], r.oldDirs[i])
			}
			rr := scaled(q, r.hDiag)
			for i := range r.oldDirs {
				be := dot(r.oldDirs[i], rr) * r.ro[i]
				axpy(rr, al[i]-be, r.oldStps[i])
			}
			r.d = rr
		}
		r.prevFlatGrad = append([]float64(nil), flatGrad...)
		r.prevLoss = loss
		if r.nIter == 1 {
			sum := 0.0
			for _, v := range flatGrad {
				sum += math.Abs(v)
			}
			r.t = math.Min(1, 1/sum) * c.LR
		} else {
			r.t = c.LR
		}
		gtd := dot(flatGrad, r.d)
		if gtd > -c.ToleranceChange {
			break
		}
		lsEvals := 0
		optCond := false
		if c.LineSearch == "strong_wolfe" {
			x0 := append([]float64(nil), r.x...)
			eval := func(t float64) (float64, []float64) {
				xt := append([]float64(nil), x0...)
				axpy(xt, t, r.d)
				return r.f(xt)
			}
			loss, flatGrad, r.t, lsEvals = refStrongWolfe(eval, r.t, r.d, loss, flatGrad, gtd)
			axpy(r.x, r.t, r.d)
			optCond = absMaxOf(flatGrad) <= c.ToleranceGrad
		} else {
			axpy(r.x, r.t, r.d)
			if nIter != c.MaxIter {
				loss, flatGrad = r.f(r.x)
				optCond = absMaxOf(flatGrad) <= c.ToleranceGrad
				lsEvals = 1
			}
		}
		currentEvals += lsEvals
		r.funcEvals += lsEvals
		if nIter == c.MaxIter || currentEvals >= c.MaxEval || optCond ||
			absMaxOf(scaled(r.d, r.t)) <= c.ToleranceChange || math.Abs(loss-r.prevLoss) < c.ToleranceChange {
			break
		}
	}
	return orig
}

func refCubic(x1, f1, g1, x2, f2, g2, lo, hi float64) float64 {
	d1 := g1 + g2 - 3*(f1-f2)/(x1-x2)
	d2sq := d1*d1 - g1*g2
	if d2sq < 0 {
		return (lo + hi) / 2
	}
	d2 := math.Sqrt(d2sq)
	var pos float64
	if x1 <= x2 {
		pos = x2 - (x2-x1)*((g2+d2-d1)/(g2-g1+2*d2))
	} else {
		pos = x1 - (x1-x2)*((g1+d2-d1)/(g1-g2+2*d2))
	}
	return math.Min(math.Max(pos, lo), hi)
}

// refStrongWolfe transcribes torch.optim.lbfgs._strong_wolfe.
func refStrongWolfe(eval func(float64) (float64, []float64), t float64, d []float64, f float64, g []float64, gtd float64) (float64, []float64, float64, int) {
	const c1, c2, tolChange, maxLS = 1e-4, 0.9, 1e-9, 25
	dNorm := absMaxOf(d)
	fNew, gNew := eval(t)
	evals := 1
	gtdNew := dot(gNew, d)
	tPrev, fPrev, gPrev, gtdPrev := 0.0, f, g, gtd
	done := false
	ls := 0
	var br, bf, bgtd []float64
	var bg [][]float64
	for ls < maxLS {
		if fNew > f+c1*t*gtd || (ls > 1 && fNew >= fPrev) {
			br, bf, bg, bgtd = []float64{tPrev, t}, []float64{fPrev, fNew}, [][]float64{gPrev, gNew}, []float64{gtdPrev, gtdNew}
			break
		}
		if math.Abs(gtdNew) <= -c2*gtd {
			br, bf, bg = []float64{t}, []float64{fNew}, [][]float64{gNew}
			done = true
			break
		}
		if gtdNew >= 0 {
			br, bf, bg, bgtd = []float64{tPrev, t}, []float64{fPrev, fNew}, [][]float64{gPrev, gNew}, []float64{gtdPrev, gtdNew}
			break
		}
		minStep, maxStep, tmp := t+0.01*(t-tPrev), t*10, t
		t = refCubic(tPrev, fPrev, gtdPrev, t, fNew, gtdNew, minStep, maxStep)
		tPrev, fPrev, gPrev, gtdPrev = tmp, fNew, gNew, gtdNew
		fNew, gNew = eval(t)
		evals++
		gtdNew = dot(gNew, d)
		ls++
	}
	if ls == maxLS {
		br, bf, bg = []float64{0, t}, []float64{f, fNew}, [][]float64{g, gNew}
	}
	insuf := false
	low, high := 0, 1
	if !(bf[0] <= bf[len(bf)-1]) {
		low, high = 1, 0
	}
	for !done && ls < maxLS {
		if math.Abs(br[1]-br[0])*dNorm < tolChange {
			break
		}
		mx, mn := math.Max(br[0], br[1]), math.Min(br[0], br[1])
		t = refCubic(br[0], bf[0], bgtd[0], br[1], bf[1], bgtd[1], mn, mx)
		eps := 0.1 * (mx - mn)
		if math.Min(mx-t, t-mn) < eps {
			if insuf || t >= mx || t <= mn {
				if math.Abs(t-mx) < math.Abs(t-mn) {
					t = mx - eps
				} else {
					t = mn + eps
				}
				insuf = false
			} else {
				insuf = true
			}
		} else {
			insuf = false
		}
		fNew, gNew = eval(t)
		evals++
		gtdNew = dot(gNew, d)
		ls++
		if fNew > f+c1*t*gtd || fNew >= bf[low] {
			br[high], bf[high], bg[high], bgtd[high] = t, fNew, gNew, gtdNew
			low, high = 0, 1
			if !(bf[0] <= bf[1]) {
				low, high = 1, 0
			}
		} else {
			if math.Abs(gtdNew) <= -c2*gtd {
				done = true
			} else if gtdNew*(br[high]-br[low]) >= 0 {
				br[high], bf[high], bg[high], bgtd[high] = br[low], bf[low], bg[low], bgtd[low]
			}
			br[low], bf[low], bg[low], bgtd[low] = t, fNew, gNew, gtdNew
		}
	}
	return bf[low], bg[low], br[low], evals
}

// rosenClosure returns a closure for LBFGS.Step that evaluates the
// Rosenbrock function of the parameters a and b taken as one vector.
func rosenClosure(opt *optim.LBFGS, a, b *vram.Tensor) func() float64 {
	return func() float64 {
		opt.ZeroGrad()
		var loss float64
		vram.Tidy(func() {
			v := vram.Cat([]*vram.Tensor{a, b.Reshape(-1)}, 0)
			n := v.Shape()[0]
			x, y := v.Narrow(0, 0, n-1), v.Narrow(0, 1, n-1)
			l := y.Sub(x.Square()).Square().Sum().MulScalar(100).Add(x.MulScalar(-1).AddScalar(1).Square().Sum())
			l.Backward()
			loss = l.Item()
		})
		return loss
	}
}

func TestLBFGSMatchesReference(t *testing.T) {
	start := []float64{-1.2, 1, -0.5, 0.8}
	tests := []optim.LBFGSConfig{
		{LR: 1, MaxIter: 5, HistorySize: 3},
		{LR: 0.5, MaxIter: 7},
		{LineSearch: "strong_wolfe", MaxIter: 6, HistorySize: 2},
		{LineSearch: "strong_wolfe"},
		{LR: 0.1, MaxIter: 4, MaxEval: 3},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for i, c := range tests {
			t.Run(fmt.Sprintf("%v/%d", dev, i), func(t *testing.T) {
				a := vram.FromSlice(start[:2], nil, vram.Float64, dev, vram.WithGrad())
				b := vram.FromSlice(start[2:], vram.Shape{1, 2}, vram.Float64, dev, vram.WithGrad())
				defer a.Release()
				defer b.Release()
				opt, err := optim.NewLBFGS([]*vram.Tensor{a, b}, c)
				if err != nil {
					t.Fatal(err)
				}
				defer opt.Release()
				ref := &refLBFGS{c: opt.Config(), f: rosen, x: append([]float64(nil), start...)}
				closure := rosenClosure(opt, a, b)
				for s := 1; s <= 4; s++ {
					got := opt.Step(closure)
					want := ref.step()
					checkValues(t, fmt.Sprintf("loss of step %d", s), []float64{got}, []float64{want}, 1e-9)
					checkValues(t, fmt.Sprintf("parameters after step %d", s), append(a.Float64s(), b.Float64s()...), ref.x, 1e-6)
					if opt.FuncEvals() != ref.funcEvals || opt.Iterations() != ref.nIter {
						t.Fatalf("step %d: %d evaluations, %d iterations; want %d, %d", s, opt.FuncEvals(), opt.Iterations(), ref.funcEvals, ref.nIter)
					}
				}
			})
		}
	}
}

// TestLBFGSConverges checks that L-BFGS with the strong-Wolfe line search
// finds the minimum of the Rosenbrock function.
func TestLBFGSConverges(t *testing.T) {
	a := vram.FromSlice([]float64{-1.2, 1}, nil, vram.Float64, vram.WithGrad())
	b := vram.FromSlice([]float64{-0.5, 0.8}, vram.Shape{1, 2}, vram.Float64, vram.WithGrad())
	opt, err := optim.NewLBFGS([]*vram.Tensor{a, b}, optim.LBFGSConfig{LineSearch: "strong_wolfe", MaxIter: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Release()
	closure := rosenClosure(opt, a, b)
	for range 5 {
		opt.Step(closure)
	}
	checkValues(t, "minimum", append(a.Float64s(), b.Float64s()...), []float64{1, 1, 1, 1}, 1e-5)
}

func TestLBFGSRefusesBadConfigs(t *testing.T) {
	p := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	q := vram.Zeros(vram.Shape{2}, vram.Float64, vram.WithGrad())
	r := vram.Zeros(vram.Shape{2}, vram.Sim(0), vram.WithGrad())
	ps := []*vram.Tensor{p}
	tests := []struct {
		name   string
		params []*vram.Tensor
		c      optim.LBFGSConfig
	}{
		{"negative lr", ps, optim.LBFGSConfig{LR: -1}},
		{"NaN tolerance", ps, optim.LBFGSConfig{ToleranceGrad: math.NaN()}},
		{"negative change tolerance", ps, optim.LBFGSConfig{ToleranceChange: -1}},
		{"negative max_iter", ps, optim.LBFGSConfig{MaxIter: -1}},
		{"negative max_eval", ps, optim.LBFGSConfig{MaxEval: -1}},
		{"negative history", ps, optim.LBFGSConfig{HistorySize: -1}},
		{"unknown line search", ps, optim.LBFGSConfig{LineSearch: "backtracking"}},
		{"two dtypes", []*vram.Tensor{p, q}, optim.LBFGSConfig{}},
		{"two devices", []*vram.Tensor{p, r}, optim.LBFGSConfig{}},
		{"empty", nil, optim.LBFGSConfig{}},
		{"repeated", []*vram.Tensor{p, p}, optim.LBFGSConfig{}},
	}
	for _, tc := range tests {
		if _, err := optim.NewLBFGS(tc.params, tc.c); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("%s: got %v, want vram.ErrArgument", tc.name, err)
		}
	}
	o, err := optim.NewLBFGS(ps, optim.LBFGSConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.Config(), (optim.LBFGSConfig{LR: 1, MaxIter: 20, MaxEval: 25, ToleranceGrad: 1e-7, ToleranceChange: 1e-9, HistorySize: 100}); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	var ve *vram.Error
	if err := vram.Catch(func() { o.Step(nil) }); !errors.As(err, &ve) || !errors.Is(err, vram.ErrArgument) {
		t.Errorf("Step(nil): %v, want a *vram.Error of kind ErrArgument", err)
	}
	if o.FuncEvals() != 0 {
		t.Errorf("Step(nil) counted %d evaluations", o.FuncEvals())
	}
}

// TestLBFGSReleasesWhatItMakes checks that Steps keep only the
// optimizer's state, which Release frees.
func TestLBFGSReleasesWhatItMakes(t *testing.T) {
	for _, d := range []vram.Device{vram.CPU, vram.Sim(1)} {
		for _, ls := range []string{"", "strong_wolfe"} {
			memtest.Settle(d)
			before, allocated := vram.Storage(d), vram.MemoryAllocated(d)
			a := vram.FromSlice([]float64{-1.2, 1}, nil, vram.Float64, d, vram.WithGrad())
			b := vram.FromSlice([]float64{-0.5, 0.8}, vram.Shape{1, 2}, vram.Float64, d, vram.WithGrad())
			opt, err := optim.NewLBFGS([]*vram.Tensor{a, b}, optim.LBFGSConfig{LineSearch: ls, MaxIter: 6, HistorySize: 2})
			if err != nil {
				t.Fatal(err)
			}
			closure := rosenClosure(opt, a, b)
			for range 3 {
				opt.Step(closure)
			}
			opt.ZeroGrad()
			opt.Release()
			a.Release()
			b.Release()
			after := vram.Storage(d)
			if after.LiveBytes != before.LiveBytes || after.Leaked != before.Leaked || vram.MemoryAllocated(d) != allocated {
				t.Errorf("%s %q: %d storages made, %d freed, %d left to the collector", d, ls, after.Allocs-before.Allocs, after.Frees-before.Frees, after.Leaked-before.Leaked)
			}
		}
	}
}
