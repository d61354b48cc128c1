package vram

import (
	"errors"
	"strings"
	"testing"
)

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

// TestAutocastLeavesFloat64 follows PyTorch's autocast: only float32
// operands of a product are cast to the region's dtype; float64 ones are
// not eligible, so a float64 product stays float64 (with its gradients) and
// one mixing float64 with float32 fails with ErrDType as outside the region.
func TestAutocastLeavesFloat64(t *testing.T) {
	f64 := func(s Shape) *Tensor { return Ones(s, Float64) }
	f32 := func(s Shape) *Tensor { return Ones(s) }
	tests := []struct {
		name string
		run  func() *Tensor
		want DType // 0: the call must fail with ErrDType
	}{
		{"matmul float64", func() *Tensor { return f64(Shape{2, 3}).MatMul(f64(Shape{3, 2})) }, Float64},
		{"bmm float64", func() *Tensor { return f64(Shape{2, 2, 3}).BMM(f64(Shape{2, 3, 2})) }, Float64},
		{"linear float64", func() *Tensor { return Linear(f64(Shape{2, 3}), f64(Shape{4, 3}), f64(Shape{4})) }, Float64},
		{"linear act float64", func() *Tensor { return LinearAct(f64(Shape{2, 3}), f64(Shape{4, 3}), nil, ActReLU) }, Float64},
		{"conv2d float64", func() *Tensor {
			return Conv2d(f64(Shape{1, 2, 4, 4}), f64(Shape{3, 2, 3, 3}), nil, Conv2dParams{})
		}, Float64},
		{"conv transpose float64", func() *Tensor {
			return ConvTranspose2d(f64(Shape{1, 2, 4, 4}), f64(Shape{2, 3, 3, 3}), nil, Conv2dParams{})
		}, Float64},
		{"matmul float32", func() *Tensor { return f32(Shape{2, 3}).MatMul(f32(Shape{3, 2})) }, BFloat16},
		{"matmul float64 by float32", func() *Tensor { return f64(Shape{2, 3}).MatMul(f32(Shape{3, 2})) }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				var got *Tensor
				var err error
				Autocast(BFloat16, func() { err = Catch(func() { got = tc.run() }) })
				if tc.want == 0 {
					if !errors.Is(err, ErrDType) {
						t.Fatalf("got %v, want ErrDType", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got.DType() != tc.want {
					t.Fatalf("result %s, want %s", got.DType(), tc.want)
				}
			})
		})
	}
	// A float64 weight keeps a float64 gradient and is not cached.
	Tidy(func() {
		w := Ones(Shape{3, 3}, Float64, WithGrad())
		x := Ones(Shape{2, 3}, Float64)
		Autocast(Float16, func() {
			Linear(x, w, nil).Sum().Backward()
			if n := len(current().autocast.cache); n != 0 {
				t.Errorf("%d cached casts of a float64 weight, want 0", n)
			}
		})
		if g := w.Grad(); g == nil || g.DType() != Float64 || g.Float64s()[0] != 2 {
			t.Errorf("float64 weight gradient %v, want float64 twos", g)
		}
	})
}

// TestAutocastMixedFloat64NamesGivenDTypes: a product mixing a float64
// operand with one autocast would cast fails with ErrDType naming the op
// and the dtypes the caller gave, not the dtype of autocast's own copy,
// and says that autocast is why they differ.
func TestAutocastMixedFloat64NamesGivenDTypes(t *testing.T) {
	f64 := func(s Shape) *Tensor { return Ones(s, Float64) }
	f32 := func(s Shape) *Tensor { return Ones(s) }
	f16 := func(s Shape) *Tensor { return Ones(s, Float16) }
	tests := []struct {
		name   string
		region DType
		op     string
		other  DType // the dtype given beside float64
		run    func()
	}{
		{"matmul float64 by float32", BFloat16, "matmul", Float32, func() { f64(Shape{2, 3}).MatMul(f32(Shape{3, 2})) }},
		{"matmul float32 by float64", Float16, "matmul", Float32, func() { f32(Shape{2, 3}).MatMul(f64(Shape{3, 2})) }},
		{"bmm float16 by float64 in bfloat16", BFloat16, "bmm", Float16, func() { f16(Shape{1, 2, 3}).BMM(f64(Shape{1, 3, 2})) }},
		{"linear float32 weight", Float16, "linear", Float32, func() { Linear(f64(Shape{2, 3}), f32(Shape{4, 3}), nil) }},
		{"linear float32 bias", BFloat16, "linear", Float32, func() { Linear(f64(Shape{2, 3}), f64(Shape{4, 3}), f32(Shape{4})) }},
		{"conv2d float32 weight", Float16, "conv2d", Float32, func() {
			Conv2d(f64(Shape{1, 2, 4, 4}), f32(Shape{3, 2, 3, 3}), nil, Conv2dParams{})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				var err error
				Autocast(tc.region, func() { err = Catch(tc.run) })
				var e *Error
				if !errors.As(err, &e) || e.Kind != ErrDType {
					t.Fatalf("got %v, want an *Error of kind ErrDType", err)
				}
				if e.Op != tc.op {
					t.Errorf("op %q, want %q", e.Op, tc.op)
				}
				for _, w := range []string{"float64", tc.other.String(), "autocast"} {
					if !strings.Contains(e.Detail, w) {
						t.Errorf("%q does not name %s", e.Detail, w)
					}
				}
			})
		})
	}
}

// TestAutocastRecastsUpdatedWeights: a weight written in place inside a
// region is cast again at its next use, however the write was made, rather
// than served from a stale copy; the replaced copy is freed with the region.
func TestAutocastRecastsUpdatedWeights(t *testing.T) {
	d := Sim(0)
	tests := []struct {
		name   string
		update func(w *Tensor)
	}{
		{"in-place op", func(w *Tensor) { NoGrad(func() { w.MulScalarInPlace(2) }) }},
		{"copy", func(w *Tensor) {
			NoGrad(func() {
				two := Full(Shape{2, 2}, 2, d)
				w.CopyFrom(two)
				two.Release()
			})
		}},
		{"raw write", func(w *Tensor) {
			_ = Raw(w, func(r RawTensor) error { return r.Device.Fill(r.Stream, r.View, 2) })
			w.IncrementVersion()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := Ones(Shape{2, 2}, d, WithGrad())
			defer w.Release()
			x := Ones(Shape{2, 2}, d)
			defer x.Release()
			settle(d)
			base := MemoryAllocated(d)
			Autocast(BFloat16, func() {
				Tidy(func() {
					before := x.MatMul(w)
					tc.update(w)
					after := x.MatMul(w)
					if got := after.Float32s(); got[0] != 4 {
						t.Errorf("product after the update %v, want 4s (a stale cast gives 2s)", got)
					}
					before.Add(after).Sum().Backward()
				})
			})
			if g := w.Grad().Float32s(); g[0] != 4 {
				t.Errorf("weight gradient %v, want 4s", g)
			}
			w.ZeroGrad()
			if got := MemoryAllocated(d); got != base {
				t.Errorf("%d bytes allocated after the region, want %d", got, base)
			}
		})
	}
}

// TestAutocastNestedRegionsShareCasts: a region inside one of the same
// dtype reuses the outer region's weight copies, as PyTorch keeps one cache
// until the outermost region ends; one of another dtype, or one opened
// inside NoAutocast, makes and frees its own.
func TestAutocastNestedRegionsShareCasts(t *testing.T) {
	d := Sim(0)
	w := Randn(Shape{8, 8}, d).SetRequiresGrad(true)
	defer w.Release()
	x := Randn(Shape{4, 8}, d)
	defer x.Release()
	use := func() { Linear(x, w, nil).Release() }
	tests := []struct {
		name       string
		inner      func(fn func())
		outerAfter int // cached casts in the outer region after the inner
	}{
		{"same dtype", func(fn func()) { Autocast(Float16, fn) }, 1},
		{"other dtype", func(fn func()) { Autocast(BFloat16, fn) }, 0},
		{"inside NoAutocast", func(fn func()) { NoAutocast(func() { Autocast(Float16, fn) }) }, 0},
	}
	for _, tc := range tests {
		settle(d)
		base := MemoryAllocated(d)
		Autocast(Float16, func() {
			tc.inner(use)
			if n := len(current().autocast.cache); n != tc.outerAfter {
				t.Errorf("%s: %d cached casts in the outer region after the inner one, want %d", tc.name, n, tc.outerAfter)
			}
		})
		if got := MemoryAllocated(d); got != base {
			t.Errorf("%s: %d bytes allocated after the regions, want %d", tc.name, got, base)
		}
	}
}

// TestAutocastRecastsReplacedWeights: a weight given a new storage inside
// the region (moved with MoveTo, converted with CastInPlace) is not served
// the copy of its old storage, whose version may even match.
func TestAutocastRecastsReplacedWeights(t *testing.T) {
	tests := []struct {
		name   string
		update func(w, x *Tensor) (*Tensor, Device, DType) // the new x, w's device and dtype
	}{
		{"moved", func(w, x *Tensor) (*Tensor, Device, DType) {
			w.MoveTo(Sim(0))
			return x.To(Sim(0)), Sim(0), Float32
		}},
		{"cast in place and scaled", func(w, x *Tensor) (*Tensor, Device, DType) {
			NoGrad(func() {
				w.CastInPlace(BFloat16)
				w.MulScalarInPlace(2)
			})
			return x.Clone(), CPU, BFloat16
		}},
	}
	for _, tc := range tests {
		w := Ones(Shape{2, 2}, WithGrad())
		x := Ones(Shape{2, 2})
		var err error
		Autocast(Float16, func() {
			err = Catch(func() {
				Tidy(func() {
					x.MatMul(w).Sum().Backward()
					w.ZeroGrad()
					x2, dev, dt := tc.update(w, x)
					want := float32(2)
					if tc.name != "moved" {
						want = 4
					}
					y := x2.MatMul(w)
					if y.Device() != dev || y.Float32s()[0] != want {
						t.Errorf("%s: product on %v = %v, want %v on %v", tc.name, y.Device(), y.Float32s(), want, dev)
					}
					y.Sum().Backward()
					if g := w.Grad(); g == nil || g.Device() != dev || g.DType() != dt {
						t.Errorf("%s: weight gradient %v, want %v on %v", tc.name, g, dt, dev)
					}
				})
			})
		})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		w.Release()
		x.Release()
	}
}

// TestAutocastCachedWeightInSeveralBackwards: graphs that share a weight's
// cached copy, each with its own Backward inside the region (gradient
// accumulation over micro-batches, as PyTorch allows), all reach the
// weight, in nested regions of one dtype too.
func TestAutocastCachedWeightInSeveralBackwards(t *testing.T) {
	tests := []struct {
		name   string
		region func(fn func())
	}{
		{"one region", func(fn func()) { Autocast(Float16, fn) }},
		{"nested regions", func(fn func()) { Autocast(Float16, func() { Autocast(Float16, fn) }) }},
		{"bfloat16", func(fn func()) { Autocast(BFloat16, fn) }},
	}
	for _, tc := range tests {
		for _, d := range []Device{CPU, Sim(0)} {
			w := Ones(Shape{2, 2}, d, WithGrad())
			x := Ones(Shape{3, 2}, d)
			err := Catch(func() {
				tc.region(func() {
					for range 3 {
						Tidy(func() { Linear(x, w, nil).Sum().Backward() })
					}
				})
			})
			if err != nil {
				t.Errorf("%s on %v: %v", tc.name, d, err)
			} else if g := w.Grad(); g == nil || g.DType() != Float32 || g.Float32s()[0] != 9 {
				t.Errorf("%s on %v: weight gradient %v, want float32 9s", tc.name, d, g)
			}
			w.Release()
			x.Release()
		}
	}
}
