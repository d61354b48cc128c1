package vram

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestPostAccumulateGradHook: a leaf's hook runs once per Backward, after
// every contribution to its gradient has been added, also for a leaf
// reached along several paths, and not once removed.
func TestPostAccumulateGradHook(t *testing.T) {
	w := FromSlice([]float64{1, 2}, nil, WithGrad())
	b := FromSlice([]float64{3}, nil, WithGrad())
	unused := FromSlice([]float64{5}, nil, WithGrad())
	defer w.Release()
	defer b.Release()
	var seen []float64
	calls := map[string]int{}
	removeW := w.RegisterPostAccumulateGradHook(func(t *Tensor) {
		calls["w"]++
		seen = append(seen, t.Grad().Float64s()...)
	})
	b.RegisterPostAccumulateGradHook(func(*Tensor) { calls["b"]++ })
	unused.RegisterPostAccumulateGradHook(func(*Tensor) { calls["unused"]++ })
	// w is used twice: its hook must see the sum of both paths.
	loss := w.Mul(w).Sum().Add(w.Sum()).Add(b.Sum())
	loss.Backward()
	if calls["w"] != 1 || calls["b"] != 1 || calls["unused"] != 0 {
		t.Fatalf("hook calls %v, want w and b once, unused never", calls)
	}
	if len(seen) != 2 || seen[0] != 3 || seen[1] != 5 {
		t.Errorf("w's hook saw gradient %v, want the complete [3 5]", seen)
	}
	removeW()
	loss2 := w.Sum()
	loss2.Backward()
	if calls["w"] != 1 {
		t.Errorf("a removed hook ran")
	}
	// A leaf backward itself.
	b.Backward(Gradient(FromSlice([]float64{1}, nil)))
	if calls["b"] != 2 {
		t.Errorf("b's hook after backward of the leaf itself: %d calls", calls["b"])
	}
	err := Catch(func() { w.MulScalar(2).RegisterPostAccumulateGradHook(func(*Tensor) {}) })
	if !errors.Is(err, ErrAutograd) {
		t.Errorf("a hook on a computed tensor: %v, want ErrAutograd", err)
	}
	err = Catch(func() { Zeros(Shape{2}).RegisterPostAccumulateGradHook(func(*Tensor) {}) })
	if !errors.Is(err, ErrAutograd) || !strings.Contains(err.Error(), "does not require grad") {
		t.Errorf("a hook on a tensor that does not require grad: %v, want ErrAutograd", err)
	}
}

// TestFrozenLeafGetsNoGradient: a leaf whose requires_grad is turned off
// after the forward pass recorded it gets no gradient and runs no hook,
// while the other leaves of the graph get theirs, as in PyTorch.
func TestFrozenLeafGetsNoGradient(t *testing.T) {
	tests := []struct {
		name string
		loss func(w, b *Tensor) *Tensor
	}{
		{"mul", func(w, b *Tensor) *Tensor { return w.Mul(b).Sum() }},
		{"used twice", func(w, b *Tensor) *Tensor { return w.Mul(w).Add(b).Sum() }},
		{"across devices", func(w, b *Tensor) *Tensor { return w.To(Sim(0)).Mul(b.To(Sim(0))).Sum() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2}, nil, WithGrad())
				b := FromSlice([]float64{3, 4}, nil, WithGrad())
				hooks := 0
				w.RegisterPostAccumulateGradHook(func(*Tensor) { hooks++ })
				loss := tc.loss(w, b)
				w.SetRequiresGrad(false)
				loss.Backward()
				if w.Grad() != nil || hooks != 0 {
					t.Errorf("frozen leaf: gradient %v, %d hook calls; want none", w.Grad(), hooks)
				}
				if b.Grad() == nil {
					t.Error("the other leaf got no gradient")
				}
			})
		})
	}
}

// TestGradientFollowsMovedLeaf: a leaf moved or converted in place between
// the forward and the backward pass (as Module.To and Module.Half do) gets
// its gradient on its new device, in its new dtype and layout, whether it
// had a gradient before or not, with or without a hook.
func TestGradientFollowsMovedLeaf(t *testing.T) {
	tests := []struct {
		name   string
		change func(w *Tensor)
		dev    Device
		dt     DType
		before bool // w has a gradient before the change
		hooked bool
	}{
		{"to sim:1", func(w *Tensor) { w.MoveTo(Sim(1)) }, Sim(1), Float32, false, false},
		{"to sim:1 with a gradient", func(w *Tensor) { w.MoveTo(Sim(1)) }, Sim(1), Float32, true, false},
		{"to sim:1 with a hook", func(w *Tensor) { w.MoveTo(Sim(1)) }, Sim(1), Float32, false, true},
		{"to cpu", func(w *Tensor) { w.MoveTo(CPU) }, CPU, Float32, false, false},
		{"to cpu with a gradient", func(w *Tensor) { w.MoveTo(CPU) }, CPU, Float32, true, false},
		{"to float64", func(w *Tensor) { w.CastInPlace(Float64) }, Sim(0), Float64, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float32{1, 2}, nil, Sim(0), WithGrad())
				want := []float64{2, 4}
				if tc.before {
					w.Mul(w).Sum().Backward()
					want = []float64{4, 8}
				}
				if tc.hooked {
					w.RegisterHook(func(g *Tensor) *Tensor { return nil })
				}
				loss := w.Mul(w).Sum()
				tc.change(w)
				loss.Backward()
				g := w.Grad()
				if g.Device() != tc.dev || g.DType() != tc.dt {
					t.Fatalf("gradient on %s as %s, want %s as %s", g.Device(), g.DType(), tc.dev, tc.dt)
				}
				if got := g.Float64s(); !slices.Equal(got, want) {
					t.Errorf("gradient %v, want %v", got, want)
				}
			})
		})
	}
}

// TestFreezeRacesBackward freezes and unfreezes leaves on one goroutine
// while others run forward and backward passes through them (run it with
// -race): the flag is safe to change concurrently, and each leaf's
// gradient is a whole number of passes' contributions.
func TestFreezeRacesBackward(t *testing.T) {
	for _, d := range []Device{CPU, Sim(0)} {
		t.Run(d.String(), func(t *testing.T) {
			const workers, steps = 3, 40
			a := FromSlice([]float64{1, 2}, nil, d, WithGrad())
			b := FromSlice([]float64{3, 4}, nil, d, WithGrad())
			defer a.Release()
			defer b.Release()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range steps * workers {
					b.SetRequiresGrad(i%2 == 1)
					_ = b.RequiresGrad()
				}
				b.SetRequiresGrad(true)
			}()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range steps {
						Tidy(func() { a.Mul(b).Sum().Backward() }) // da = b, db = a
					}
				}()
			}
			wg.Wait()
			if g := a.Grad().Float64s(); g[0] != 3*workers*steps || g[1] != 4*workers*steps {
				t.Errorf("a's gradient %v, want [%d %d]", g, 3*workers*steps, 4*workers*steps)
			}
			if g := b.Grad(); g != nil {
				if v := g.Float64s(); v[1] != 2*v[0] || v[0] != float64(int(v[0])) {
					t.Errorf("b's gradient %v is not a whole number of passes' [1 2]", v)
				}
			}
		})
	}
}
