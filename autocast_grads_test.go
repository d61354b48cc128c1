package vram

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
)

// TestAutocastWeightGradsConvertedTogether checks the gradients of float32
// weights used under autocast, which Backward converts from the low dtype
// together at its end: the same values, bit for bit, as casting each
// weight explicitly (whose gradient is converted at once), for a
// channels-last weight, one used twice, one with a gradient already there
// (accumulation), one with a RegisterHook and a bias with a
// post-accumulate hook; and one CopyMany for the two row-major
// convolution weights, whose gradients come in their layout (the CPU's
// composed convolution gives the channels-last weight a row-major
// gradient, which is converted on its own).
func TestAutocastWeightGradsConvertedTogether(t *testing.T) {
	devices := []Device{CPU}
	for _, d := range []Device{Sim(0), CUDA(0)} {
		if d.Available() {
			devices = append(devices, d)
		}
	}
	for _, d := range devices {
		for _, dt := range []DType{BFloat16, Float16} {
			t.Run(fmt.Sprint(d, " ", dt), func(t *testing.T) {
				gen := NewGenerator(3)
				mk := func(shape ...int) *Tensor { return Randn(Shape(shape), d, WithGenerator(gen)) }
				x := mk(2, 4, 5, 5)
				w1, w2, w3 := mk(6, 4, 3, 3), mk(8, 6), mk(6, 6, 1, 1)
				wh, wp, w4 := mk(8, 8), mk(8), mk(6, 6, 3, 3)
				acc := mk(8, 6) // w2's gradient before this Backward
				defer func() {
					for _, v := range []*Tensor{x, w1, w2, w3, wh, wp, w4, acc} {
						v.Release()
					}
				}()
				step := func(explicit bool) ([][]float64, int64) {
					ws := []*Tensor{w1.Clone(), w2.Clone(), w3.Clone(), wh.Clone(), wp.Clone(), w4.Clone()}
					ws[0] = ws[0].Contiguous(ChannelsLast)
					for _, w := range ws {
						w.SetRequiresGrad(true)
					}
					ws[1].SetGrad(acc.Clone())
					hooked := 0
					ws[3].RegisterHook(func(g *Tensor) *Tensor { hooked++; return nil })
					posted := 0
					ws[4].RegisterPostAccumulateGradHook(func(*Tensor) { posted++ })
					low := func(w *Tensor) *Tensor {
						if explicit {
							return w.Cast(dt)
						}
						return w
					}
					before := batchedConverts.Load()
					Autocast(dt, func() {
						h := Conv2d(x, low(ws[0]), nil, Conv2dParams{Padding: [2]int{1, 1}})
						h = Conv2d(h, low(ws[2]), nil, Conv2dParams{}).Add(Conv2d(h, low(ws[2]), nil, Conv2dParams{})) // w3 twice
						h = Conv2d(h, low(ws[5]), nil, Conv2dParams{Padding: [2]int{1, 1}})
						h = h.Mean(2, 3)                      // [2, 6]
						h = Linear(h, low(ws[1]), nil)        // [2, 8]
						h = Linear(h, low(ws[3]), low(ws[4])) // hooked weight and bias
						h.Float().Square().Sum().Backward()
					})
					if hooked != 1 || posted != 1 {
						t.Errorf("hooks ran %d and %d times, want once each", hooked, posted)
					}
					var grads [][]float64
					for i, w := range ws {
						g := w.Grad()
						if g == nil || g.DType() != Float32 {
							t.Fatalf("weight %d: gradient %v, want float32", i, g)
						}
						if i == 0 && !g.IsContiguous(ChannelsLast) {
							t.Errorf("the channels-last weight's gradient has strides %v", g.Strides())
						}
						grads = append(grads, g.Float64s())
					}
					for _, w := range ws {
						w.ZeroGrad()
						w.Release()
					}
					return grads, batchedConverts.Load() - before
				}
				want, _ := step(true)
				got, batches := step(false)
				// cuDNN's filter gradients may sum in another order from
				// one call to the next.
				tol := 0.0
				if d.IsCUDA() {
					tol = 1e-2
				}
				for i := range want {
					if !slices.EqualFunc(got[i], want[i], func(a, b float64) bool {
						return a == b || math.Abs(a-b) <= tol*(1+math.Abs(b)) || math.IsNaN(a) && math.IsNaN(b)
					}) {
						t.Errorf("weight %d: gradient %v, want %v", i, got[i][:4], want[i][:4])
					}
				}
				if batches != 1 {
					t.Errorf("%d batched conversions, want 1", batches)
				}
			})
		}
	}
}

// TestAutocastCastsAhead checks the weight casts of a region that repeats
// the previous one's: its first cast makes the copies of every weight the
// previous region used (one CopyMany), with the values and layouts of
// single casts; a weight changed in place since, or released, or unused
// this time, is handled as without the plan, and nothing stays allocated.
func TestAutocastCastsAhead(t *testing.T) {
	for _, d := range []Device{CPU, Sim(0), CUDA(0)} {
		if !d.Available() {
			continue
		}
		t.Run(d.String(), func(t *testing.T) {
			gen := NewGenerator(4)
			mk := func(shape ...int) *Tensor {
				return Randn(Shape(shape), d, WithGenerator(gen)).SetRequiresGrad(true)
			}
			x := Randn(Shape{2, 4, 5, 5}, d, WithGenerator(gen))
			w1 := mk(6, 4, 3, 3)
			w1.ConvertMemoryFormat(ChannelsLast)
			w2, w3, w4 := mk(8, 6), mk(8, 8), mk(3, 8)
			defer func() {
				for _, w := range []*Tensor{x, w1, w2, w3, w4} {
					w.ZeroGrad()
					w.Release()
				}
			}()
			settle(d)
			base := MemoryAllocated(d)
			forward := func(useW4 bool) (cachedAfterFirst int, out []float64) {
				Autocast(BFloat16, func() {
					Tidy(func() {
						h := Conv2d(x, w1, nil, Conv2dParams{})
						cachedAfterFirst = len(current().autocast.cache)
						h = Linear(h.Mean(2, 3), w2, nil)
						h = Linear(h, w3, nil)
						if useW4 {
							h = Linear(h, w4, nil)
						}
						out = h.Float().Float64s()
					})
				})
				return cachedAfterFirst, out
			}
			_, want := forward(true)
			n, got := forward(true)
			if n != 4 {
				t.Errorf("%d weights cast after the first product, want 4", n)
			}
			if !slices.Equal(got, want) {
				t.Errorf("outputs %v, want %v", got, want)
			}
			// Changed in place: the copy is made from the new values.
			NoGrad(func() { w3.MulScalarInPlace(2) })
			_, want2 := forward(false) // plans w1, w2, w3 from here
			_, got2 := forward(false)
			if !slices.Equal(got2, want2) || slices.Equal(want2[:2], want[:2]) {
				t.Errorf("after w3 changed: %v, want %v (and not %v)", got2, want2, want)
			}
			// Released: skipped.
			w2b := w2
			w2 = mk(8, 6)
			w2b.Release()
			forward(false)
			// w2's replacement takes the place of the one released.
			if got := MemoryAllocated(d); got != base {
				t.Errorf("%d bytes allocated after the regions, want %d", got, base)
			}
		})
	}
}

// TestAutocastPlansConcurrent runs regions on several goroutines at once,
// some sharing weights and plans, with gradients: run with -race.
func TestAutocastPlansConcurrent(t *testing.T) {
	shared := []*Tensor{Randn(Shape{8, 8}).SetRequiresGrad(true), Randn(Shape{8, 8}).SetRequiresGrad(true)}
	defer func() {
		for _, w := range shared {
			w.ZeroGrad()
			w.Release()
		}
	}()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := Randn(Shape{8, 8}).SetRequiresGrad(true)
			defer func() {
				own.ZeroGrad()
				own.Release()
			}()
			x := Randn(Shape{3, 8})
			defer x.Release()
			for range 20 {
				Autocast(BFloat16, func() {
					Tidy(func() {
						h := x
						if g%2 == 0 {
							h = Linear(h, own, nil)
						}
						for _, w := range shared {
							h = Linear(h, w, nil)
						}
						Linear(h, own, nil).Float().Sum().Backward()
					})
				})
			}
			if own.Grad() == nil || own.Grad().DType() != Float32 {
				t.Errorf("goroutine %d: gradient %v", g, own.Grad())
			}
		}()
	}
	wg.Wait()
}
