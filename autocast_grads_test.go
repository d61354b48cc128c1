package vram

import (
	"fmt"
	"math"
	"slices"
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
	if Sim(0).Available() {
		devices = append(devices, Sim(0))
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
					return grads, batchedConverts.Load() - before
				}
				want, _ := step(true)
				got, batches := step(false)
				for i := range want {
					if !slices.EqualFunc(got[i], want[i], func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
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
