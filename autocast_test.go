package vram

import "testing"

func TestAutocastCachesWeightCasts(t *testing.T) {
	d := Sim(0)
	w := Randn(Shape{8, 8}, d).SetRequiresGrad(true)
	defer w.Release()
	x := Randn(Shape{4, 8}, d)
	defer x.Release()
	settle(d)
	base := MemoryAllocated(d)
	var cached int
	var loss *Tensor
	Autocast(Float16, func() {
		Tidy(func() {
			h := Linear(x, w, nil)
			h = Linear(h.Float(), w, nil)
			h = h.MatMul(w)
			loss = Keep(h.Sum())
		})
		cached = len(current().autocast.cache)
		// A cached copy outlives the Tidy that first used it.
		r := Linear(x, w, nil)
		r.Release()
		if n := len(current().autocast.cache); n != 1 {
			t.Errorf("%d cached casts after another use, want 1", n)
		}
		loss.Backward() // backward inside the region runs in the forward's dtypes
	})
	if cached != 1 {
		t.Fatalf("%d cached casts of one weight used three times, want 1", cached)
	}
	if g := w.Grad(); g == nil || g.DType() != Float32 {
		t.Fatalf("weight gradient %v, want float32", g)
	}
	loss.Release()
	w.SetGrad(nil)
	if got := MemoryAllocated(d); got != base {
		t.Fatalf("%d bytes allocated after the region, want %d: a cast was kept", got, base)
	}
	// No grad: nothing is cached, each use casts and frees its copy.
	Autocast(BFloat16, func() {
		NoGrad(func() {
			r := Linear(x, w, nil)
			r.Release()
		})
		if n := len(current().autocast.cache); n != 0 {
			t.Errorf("%d cached casts under NoGrad, want 0", n)
		}
	})
}
