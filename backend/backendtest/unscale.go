package backendtest

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vramgo/vram/backend"
)

// UnscaleRef returns what [backend.FusedUnscale.UnscaleCheck] makes of the
// host values g stored as dtype dt: each value, rounded to dt, times
// invScale, both rounded to the
// compute type (float32, float64 for float64) and the product rounded to
// dt; and whether a value was inf or NaN before or after.
func UnscaleRef(dt backend.DType, g []float64, invScale float64) ([]float64, bool) {
	r := opRound(dt)
	inv := r(invScale)
	out := make([]float64, len(g))
	bad := false
	for i, x := range g {
		x = Quantize(dt, x)
		out[i] = Quantize(dt, r(x*inv))
		bad = bad || !isFinite(x) || !isFinite(out[i])
	}
	return out, bad
}

func isFinite(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }

// RunUnscale checks a device's [backend.FusedUnscale] against
// [UnscaleRef]: every float dtype, with finite gradients, with an inf, a
// -inf or a NaN (first, middle and last element), with a finite value that
// overflows when unscaled, with a flag already set, and with more
// gradients of mixed dtypes than one CUDA launch takes, the bad one in the
// last group; and the arguments it declines or rejects. It skips when dev
// lacks the interface.
func RunUnscale(t *testing.T, dev backend.Device) {
	fu, ok := dev.(backend.FusedUnscale)
	if !ok {
		t.Skip("the device has no fused unscale")
	}
	h := &harness{dev: dev}
	// big is a finite value of each dtype that overflows when multiplied
	// by 4.
	big := map[backend.DType]float64{
		backend.Float32: 3e38, backend.Float64: 1e308, backend.Float16: 30000, backend.BFloat16: 3e38,
	}
	type gradCase struct {
		dt   backend.DType
		vals []float64
	}
	const n = 10_007 // odd: a tail
	rng := rand.New(rand.NewPCG(13, 1))
	with := func(dt backend.DType, at int, v float64) gradCase {
		vals := normals(rng, n, 1000)
		if at >= 0 {
			vals[at] = v
		}
		return gradCase{dt, vals}
	}
	type tcase struct {
		name      string
		grads     []gradCase
		inv       float64
		preset    float64 // the flag's value before the call
		wantFound bool
	}
	var cases []tcase
	for _, dt := range floatDTypes {
		cases = append(cases,
			tcase{name: "finite", grads: []gradCase{with(dt, -1, 0)}, inv: 1.0 / 65536},
			tcase{name: "inf first", grads: []gradCase{with(dt, 0, math.Inf(1))}, inv: 1.0 / 65536, wantFound: true},
			tcase{name: "-inf middle", grads: []gradCase{with(dt, n/2, math.Inf(-1))}, inv: 1.0 / 1024, wantFound: true},
			tcase{name: "nan last", grads: []gradCase{with(dt, n-1, math.NaN())}, inv: 0.5, wantFound: true},
			tcase{name: "overflow when unscaled", grads: []gradCase{with(dt, 7, big[dt])}, inv: 4, wantFound: true},
			tcase{name: "flag already set", grads: []gradCase{with(dt, -1, 0)}, inv: 0.25, preset: 1, wantFound: true},
		)
		for i := range cases[len(cases)-6:] {
			c := &cases[len(cases)-6+i]
			c.name = dt.String() + "/" + c.name
		}
	}
	// 40 gradients of four dtypes, sizes from 0 up, the NaN in the 39th.
	var many []gradCase
	for i := range 40 {
		dt := floatDTypes[i%len(floatDTypes)]
		vals := normals(rng, i*37, 1)
		if i == 38 {
			vals[len(vals)-1] = math.NaN()
		}
		many = append(many, gradCase{dt, vals})
	}
	cases = append(cases,
		tcase{name: "many mixed/nan in the last group", grads: many, inv: 1.0 / 8, wantFound: true},
		tcase{name: "many mixed/finite", grads: many[:38], inv: 1.0 / 8},
		tcase{name: "no gradients", inv: 1},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			views := make([]backend.View, len(c.grads))
			for i, g := range c.grads {
				views[i] = NewView(t, dev, g.dt, []int{len(g.vals)}, g.vals)
			}
			found := NewView(t, dev, backend.Float32, []int{1}, []float64{c.preset})
			h.ok(t, "UnscaleCheck", h.call(func() error { return fu.UnscaleCheck(dev.DefaultStream(), views, c.inv, found) }))
			wantFound := c.preset != 0
			for i, g := range c.grads {
				want, bad := UnscaleRef(g.dt, g.vals, c.inv)
				wantFound = wantFound || bad
				got := ReadView(t, dev, views[i])
				for k := range want {
					if !(got[k] == want[k] || math.IsNaN(got[k]) && math.IsNaN(want[k])) {
						t.Fatalf("gradient %d (%s), element %d: %v·%v = %v, want %v", i, g.dt, k, g.vals[k], c.inv, got[k], want[k])
					}
				}
			}
			if wantFound != c.wantFound {
				t.Fatalf("the reference finds %v, the case says %v", wantFound, c.wantFound)
			}
			gotFound := ReadView(t, dev, found)[0]
			if want := map[bool]float64{false: 0, true: 1}[c.wantFound]; gotFound != want {
				t.Errorf("found flag %v, want %v", gotFound, want)
			}
		})
	}
	t.Run("declines", func(t *testing.T) {
		found := NewView(t, dev, backend.Float32, []int{1}, []float64{0})
		c := NewView(t, dev, backend.Float32, []int{4}, []float64{1, math.Inf(1), 3, 4})
		st := c
		st.Shape, st.Strides = []int{2}, []int{2}
		i := NewView(t, dev, backend.Int32, []int{4}, filled(4, 1))
		for name, gs := range map[string][]backend.View{"strided": {c, st}, "int32": {c, i}} {
			err := fu.UnscaleCheck(dev.DefaultStream(), gs, 0.5, found)
			if !errors.Is(err, backend.ErrNotImplemented) {
				t.Errorf("%s gradients: err = %v, want ErrNotImplemented", name, err)
			}
		}
		h.ok(t, "synchronize", dev.DefaultStream().Synchronize())
		if got := ReadView(t, dev, c); got[0] != 1 || got[2] != 3 {
			t.Errorf("a declined call changed a gradient: %v", got)
		}
		if got := ReadView(t, dev, found)[0]; got != 0 {
			t.Errorf("a declined call set the flag: %v", got)
		}
	})
	t.Run("rejects", func(t *testing.T) {
		g := NewView(t, dev, backend.Float32, []int{4}, filled(4, 1))
		f16 := NewView(t, dev, backend.Float16, []int{1}, []float64{0})
		two := NewView(t, dev, backend.Float32, []int{2}, []float64{0, 0})
		found := NewView(t, dev, backend.Float32, []int{1}, []float64{0})
		for _, c := range []struct {
			name  string
			found backend.View
			inv   float64
		}{
			{"float16 flag", f16, 1}, {"two-element flag", two, 1},
			{"zero inverse scale", found, 0}, {"negative inverse scale", found, -1},
			{"NaN inverse scale", found, math.NaN()}, {"infinite inverse scale", found, math.Inf(1)},
		} {
			err := fu.UnscaleCheck(dev.DefaultStream(), []backend.View{g}, c.inv, c.found)
			if err == nil || errors.Is(err, backend.ErrNotImplemented) {
				t.Errorf("%s: err = %v, want an argument error", c.name, err)
			}
		}
		if got := ReadView(t, dev, g); got[0] != 1 {
			t.Errorf("a rejected call changed the gradient: %v", got)
		}
	})
}
