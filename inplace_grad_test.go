package vram

import (
	"slices"
	"sync"
	"testing"
)

// TestInPlaceGradients checks, by finite differences, the gradients of
// chains that mix recorded in-place operations on computed tensors with
// out-of-place ones.
func TestInPlaceGradients(t *testing.T) {
	tests := []struct {
		name string
		f    func(xs []*Tensor) *Tensor
		ins  []*Tensor
	}{
		{"mul_ by a scalar", func(xs []*Tensor) *Tensor {
			h := xs[0].MulScalar(3)
			return h.MulScalarInPlace(2).AddScalarInPlace(1).Mul(xs[0])
		}, []*Tensor{rnd(1, 2, 3)}},
		{"add_ and mul_ of operands that require grad", func(xs []*Tensor) *Tensor {
			h := xs[0].Sin() // saves its input, not h
			h.AddInPlace(xs[1]).MulInPlace(xs[1])
			return h.Mul(xs[0])
		}, []*Tensor{rnd(2, 2, 3), rnd(3, 2, 3)}},
		{"sub_ and div_ broadcast", func(xs []*Tensor) *Tensor {
			h := xs[0].MulScalar(2)
			h.SubInPlace(xs[1]).DivInPlace(xs[2])
			return h.Sin()
		}, []*Tensor{rnd(4, 2, 3), rnd(5, 3), pos(6, 1, 3)}},
		{"add_ with alpha", func(xs []*Tensor) *Tensor {
			h := xs[0].Mul(xs[1])
			return h.AddScaledInPlace(xs[1], 0.5)
		}, []*Tensor{rnd(7, 2, 3), rnd(8, 3)}},
		{"a tensor that required no grad takes the operand's graph", func(xs []*Tensor) *Tensor {
			z := Zeros(Shape{2, 3}, Float64)
			z.AddInPlace(xs[0]).MulInPlace(xs[1])
			return z.Exp()
		}, []*Tensor{rnd(9, 2, 3), rnd(10, 3)}},
		{"copy_ broadcast over a computed tensor", func(xs []*Tensor) *Tensor {
			h := xs[0].MulScalar(1)
			h.CopyFrom(xs[1])
			return h.Mul(xs[0])
		}, []*Tensor{rnd(11, 2, 3), rnd(12, 3)}},
		{"fill_ after a use of the old values", func(xs []*Tensor) *Tensor {
			a := xs[0].MulScalar(2)
			s := a.Add(xs[1])
			a.FillInPlace(1)
			return s.Add(a.Mul(xs[1]))
		}, []*Tensor{rnd(13, 2, 3), rnd(14, 2, 3)}},
		{"in-place on the result of an in-place chain, twice used", func(xs []*Tensor) *Tensor {
			h := xs[0].Sin()
			u := h.Add(xs[1]) // saves nothing
			h2 := h.Clone()
			h.MulScalarInPlace(3)
			return u.Add(h2.Mul(h))
		}, []*Tensor{rnd(15, 4), rnd(16, 4)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() { gradCheck(t, tc.f, tc.ins...) })
		})
	}
}

// TestInPlaceRecordedReleasesWhatItMakes checks that recorded in-place
// operations, their backward pass and the release of their results leave
// no storage behind.
func TestInPlaceRecordedReleasesWhatItMakes(t *testing.T) {
	for _, d := range []Device{CPU, quiet} {
		settle(d)
		for _, tidy := range []bool{false, true} {
			base := countsOf(d)
			e := &leakEnv{d: d, grad: true}
			runLeakCase(e, tidy, func(e *leakEnv) []*Tensor {
				x, b := e.randn(2, 3), e.randn(3)
				h := x.MulScalar(2)
				h.AddInPlace(b).SubInPlace(b).MulInPlace(b).DivInPlace(e.pos(3)).AddScalarInPlace(1).MulScalarInPlace(2).
					AddScaledInPlace(b, 0.5)
				z := ZerosLike(x)
				z.CopyFrom(b)
				z.MulInPlace(h)
				f := x.Sin()
				f.FillInPlace(1)
				return []*Tensor{h, z, f}
			})
			checkBalanced(t, d, base, false)
		}
	}
}

// TestInPlaceRecordedConcurrently runs recorded in-place operations on
// separate computed tensors from several goroutines, all reading the same
// leaves, and checks the leaves' accumulated gradients.
func TestInPlaceRecordedConcurrently(t *testing.T) {
	for _, d := range []Device{CPU, Sim(0)} {
		t.Run(d.String(), func(t *testing.T) {
			x := FromSlice([]float64{1, 2, 3}, nil, d, WithGrad())
			w := FromSlice([]float64{4, 5, 6}, nil, d, WithGrad())
			defer x.Release()
			defer w.Release()
			const workers, rounds = 4, 20
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						Tidy(func() {
							h := x.MulScalar(3)
							h.MulInPlace(w).AddInPlace(w).MulScalarInPlace(2)
							h.Sum().Backward()
						})
					}
				}()
			}
			wg.Wait()
			// h = 2(3xw + w): dx = 6w, dw = 6x + 2.
			n := float64(workers * rounds)
			wantX := []float64{6 * 4 * n, 6 * 5 * n, 6 * 6 * n}
			wantW := []float64{8 * n, 14 * n, 20 * n}
			for i, g := range x.Grad().Float64s() {
				if g != wantX[i] {
					t.Errorf("x gradient %v, want %v", x.Grad().Float64s(), wantX)
					break
				}
			}
			for i, g := range w.Grad().Float64s() {
				if g != wantW[i] {
					t.Errorf("w gradient %v, want %v", w.Grad().Float64s(), wantW)
					break
				}
			}
		})
	}
}

// TestInPlaceIntoNonFloatIsNotRecorded checks that a write into an
// integer or bool tensor from a tensor that requires grad leaves the
// tensor outside the graph, as PyTorch's copy_ does (such dtypes are not
// differentiable), and that the write still happens.
func TestInPlaceIntoNonFloatIsNotRecorded(t *testing.T) {
	tests := []struct {
		name string
		dst  func() *Tensor
		want []float64
	}{
		{"int32", func() *Tensor { return FromSlice([]int32{7, 7}, Shape{2}) }, []float64{2, -3}},
		{"int64", func() *Tensor { return FromSlice([]int64{7, 7}, Shape{2}) }, []float64{2, -3}},
		{"bool", func() *Tensor { return FromSlice([]bool{false, false}, Shape{2}) }, []float64{1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{2.5, -3.5}, Shape{2}, WithGrad())
				dst := tc.dst()
				dst.CopyFrom(w)
				if dst.RequiresGrad() || dst.GradFn() != "" {
					t.Errorf("after copy_ from a tensor that requires grad: RequiresGrad %v, GradFn %q; want false, none",
						dst.RequiresGrad(), dst.GradFn())
				}
				if got := dst.Float64s(); !slices.Equal(got, tc.want) {
					t.Errorf("values %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestDetachedViewCountsConcurrent checks, under -race, that goroutines
// making and releasing views of one Detach view and of its views keep the
// storage's counts of apart and detached references balanced.
func TestDetachedViewCountsConcurrent(t *testing.T) {
	tests := []struct {
		name string
		view func(d *Tensor) *Tensor
	}{
		{"Narrow", func(d *Tensor) *Tensor { return d.Narrow(0, 1, 2) }},
		{"view of a view", func(d *Tensor) *Tensor {
			v := d.Reshape(2, 2)
			defer v.Release()
			return v.Transpose(0, 1)
		}},
		{"Detach of a view", func(d *Tensor) *Tensor {
			v := d.Narrow(0, 0, 3)
			defer v.Release()
			return v.Detach()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := FromSlice([]float64{1, 2, 3, 4}, Shape{4})
			defer x.Release()
			d := x.Detach()
			defer d.Release()
			st := x.ref.st
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 50 {
						tc.view(d).Release()
					}
				}()
			}
			wg.Wait()
			if a, det := st.apart.Load(), st.detached.Load(); a != 1 || det != 0 {
				t.Errorf("apart %d, detached %d; want 1 (d) and 0", a, det)
			}
		})
	}
}
