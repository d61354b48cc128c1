package vram

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// The tests of this file follow a tensor through its life: made, moved,
// given a gradient, released, tidied, and check that every byte comes
// back.

func TestSetGradOnReleasedTensor(t *testing.T) {
	tests := []struct {
		name    string
		grad    func(w *Tensor) *Tensor // nil: SetGrad(nil)
		tidy    bool                    // make the gradient and call SetGrad inside a Tidy
		wantErr error
	}{
		{name: "fresh gradient", grad: func(w *Tensor) *Tensor { return Ones(w.Shape(), w.Device()) }, wantErr: ErrReleased},
		{name: "gradient made inside Tidy", grad: func(w *Tensor) *Tensor { return Ones(w.Shape(), w.Device()) }, tidy: true, wantErr: ErrReleased},
		{name: "no gradient", grad: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := quiet
			settle(d)
			base := countsOf(d)
			w := Ones(Shape{64}, d, WithGrad())
			w.Release()
			var g *Tensor
			var err error
			run := func() {
				if tc.grad != nil {
					g = tc.grad(w)
				}
				err = Catch(func() { w.SetGrad(g) })
			}
			if tc.tidy {
				Tidy(run)
			} else {
				run()
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("SetGrad on a released tensor: %v, want %v", err, tc.wantErr)
			}
			if g != nil {
				if g.Released() != tc.tidy {
					t.Errorf("gradient released: %v, want %v (it stays the caller's)", g.Released(), tc.tidy)
				}
				g.Release()
			}
			if w.Grad() != nil {
				t.Errorf("a released tensor holds a gradient")
			}
			checkBalanced(t, d, base, false)
		})
	}
}

func TestSetGradRacesRelease(t *testing.T) {
	// Whichever comes first, the gradient is released exactly once: by
	// the tensor's Release when SetGrad won, by its caller when SetGrad
	// failed with ErrReleased.
	for _, d := range raceDevices(t) {
		t.Run(d.String(), func(t *testing.T) {
			settle(d)
			base := countsOf(d)
			for range 200 {
				w := Ones(Shape{16}, d, WithGrad())
				g := Ones(Shape{16}, d)
				var wg sync.WaitGroup
				wg.Go(w.Release)
				if err := Catch(func() { w.SetGrad(g) }); err != nil {
					if !errors.Is(err, ErrReleased) {
						t.Fatalf("SetGrad: %v", err)
					}
					g.Release()
				}
				wg.Wait()
			}
			checkBalanced(t, d, base, false)
		})
	}
}

func TestLeakReportAfterInPlaceChanges(t *testing.T) {
	// A tensor changed in place and then forgotten is reported as what it
	// is when the garbage collector finds it.
	d := needSim(t, 2)
	tests := []struct {
		name   string
		change func(x *Tensor)
		want   string
	}{
		{"cast to float16", func(x *Tensor) { x.CastInPlace(Float16) }, "a tensor [8] float16 on " + d.String()},
		{"cast to bfloat16", func(x *Tensor) { x.CastInPlace(BFloat16) }, "a tensor [8] bfloat16 on " + d.String()},
		{"moved", func(x *Tensor) { x.MoveTo(CPU) }, "a tensor [8] float64 on cpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := collectWarnings(t, func() { forgetChanged(d, tc.change) }, tc.want)
			found := false
			for _, w := range ws {
				found = found || strings.HasPrefix(w.Message, tc.want)
			}
			if !found {
				t.Errorf("no report begins with %q; got %d: %v", tc.want, len(ws), ws)
			}
		})
	}
}

// forgetChanged makes a float64 tensor on d, changes it and drops it
// without releasing it.
//
//go:noinline
func forgetChanged(d Device, change func(*Tensor)) {
	x := Ones(Shape{8}, d, Float64)
	change(x)
}
