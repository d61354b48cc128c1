package vram_test

import (
	"errors"
	"math"
	"sync"
	"testing"

	. "github.com/vramgo/vram"
)

// TestConcurrentBackwardGradients runs Backward from several goroutines at
// once and checks the gradients, not only the absence of races: graphs
// that share a leaf all add to its gradient (as PyTorch's engine does),
// and of the goroutines that race through one graph without RetainGraph
// exactly one runs it, the others failing with ErrAutograd before any of
// its nodes runs a second time.
func TestConcurrentBackwardGradients(t *testing.T) {
	const workers = 8
	forward := func(w *Tensor) (h, loss *Tensor) {
		h = w.Exp().Mul(w).Tanh().MulScalar(3)
		return h, h.Mul(h).Sum()
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		leaf := func() *Tensor { return FromSlice([]float32{0.1, 0.2, -0.3, 0.4}, Shape{4}, dev, WithGrad()) }
		ref := leaf()
		_, l := forward(ref)
		l.Backward()
		one := ref.Grad().Float64s()
		cases := []struct {
			name  string
			run   func(w *Tensor, i int, loss, h *Tensor) error // h and loss: the forward pass of w
			times float64                                       // the gradient in units of one Backward
			ok    int                                           // goroutines that must succeed; -1 for all
		}{
			{"own graphs, shared leaf", func(w *Tensor, _ int, _, _ *Tensor) error {
				return Catch(func() { _, l := forward(w); l.Backward() })
			}, workers, -1},
			{"one graph, no retain", func(_ *Tensor, _ int, l, _ *Tensor) error {
				return Catch(func() { l.Backward() })
			}, 1, 1},
			{"one graph, retained, with Grad", func(w *Tensor, i int, l, h *Tensor) error {
				return Catch(func() {
					if i%2 == 0 {
						l.Backward(RetainGraph())
						return
					}
					for _, g := range Grad([]*Tensor{l}, []*Tensor{w, h}, RetainGraph()) {
						g.Release()
					}
				})
			}, workers / 2, -1},
		}
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				for round := 0; round < 10; round++ {
					w := leaf()
					h, l := forward(w)
					errs := make([]error, workers)
					var wg sync.WaitGroup
					for i := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							errs[i] = c.run(w, i, l, h)
						}()
					}
					wg.Wait()
					ok := 0
					for _, err := range errs {
						switch {
						case err == nil:
							ok++
						case !errors.Is(err, ErrAutograd):
							t.Fatalf("round %d: %v", round, err)
						}
					}
					if want := c.ok; want >= 0 && ok != want || want < 0 && ok != workers {
						t.Fatalf("round %d: %d of %d Backward calls succeeded (%v)", round, ok, workers, errs)
					}
					got := w.Grad().Float64s()
					for i := range got {
						if want := c.times * one[i]; math.Abs(got[i]-want) > 1e-5*math.Max(1, math.Abs(want)) {
							t.Fatalf("round %d: gradient %v, want %v times %v", round, got, c.times, one)
						}
					}
				}
			})
		}
	}
}
