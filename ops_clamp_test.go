package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// TestClampTensor checks ClampTensor's values, broadcasting, dtype
// promotion and gradients against PyTorch's rules.
func TestClampTensor(t *testing.T) {
	nan := math.NaN()
	x := []float64{-3, -1, 0, 1, 2, 5, nan}
	lo := []float64{-2, -2, 0, 2, 3, 0, 0}
	hi := []float64{2, 2, 1, 3, 1, 4, 1}
	cases := []struct {
		name   string
		lo, hi *Tensor
		want   []float64
	}{
		{"both", FromSlice(lo, Shape{7}), FromSlice(hi, Shape{7}), []float64{-2, -1, 0, 2, 1, 4, nan}},
		{"lo only", FromSlice(lo, Shape{7}), nil, []float64{-2, -1, 0, 2, 3, 5, nan}},
		{"hi only", nil, FromSlice(hi, Shape{7}), []float64{-3, -1, 0, 1, 1, 4, nan}},
		{"scalar bounds", Scalar(-1, Float64), Scalar(1, Float64), []float64{-1, -1, 0, 1, 1, 1, nan}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				var l, h *Tensor
				if c.lo != nil {
					l = c.lo
					if l.Dim() > 0 {
						l = l.To(dev)
					}
				}
				if c.hi != nil {
					h = c.hi
					if h.Dim() > 0 {
						h = h.To(dev)
					}
				}
				y := FromSlice(x, Shape{7}, dev).ClampTensor(l, h)
				if got := y.Float64s(); !nearAll(got, c.want) {
					t.Errorf("got %v, want %v", got, c.want)
				}
			})
		}
	}
	// Broadcasting and promotion: int32 values, float32 column bounds.
	y := FromSlice([]int32{0, 5, 10}, Shape{3}).ClampTensor(FromSlice([]float32{1, 6}, Shape{2, 1}), nil)
	if y.DType() != Float32 || !slices.Equal(y.Shape(), Shape{2, 3}) || !slices.Equal(y.Float64s(), []float64{1, 5, 10, 6, 6, 10}) {
		t.Errorf("broadcast: got %s %v %v", y.DType(), y.Shape(), y.Float64s())
	}
	// Gradients: each element goes to exactly one of x, lo and hi.
	xv := FromSlice([]float64{-3, -1, 0, 1, 2, 5}, Shape{6}, WithGrad())
	lv := FromSlice([]float64{-2, -2, 0, 2, 3, 0}, Shape{6}, WithGrad())
	hv := FromSlice([]float64{2, 2, 1, 3, 1, 4}, Shape{6}, WithGrad())
	Tidy(func() { xv.ClampTensor(lv, hv).Sum().Backward() })
	for _, g := range []struct {
		name string
		t    *Tensor
		want []float64
	}{
		{"x", xv, []float64{0, 1, 1, 0, 0, 0}},
		{"lo", lv, []float64{1, 0, 0, 1, 0, 0}},
		{"hi", hv, []float64{0, 0, 0, 0, 1, 1}},
	} {
		if got := g.t.Grad().Float64s(); !slices.Equal(got, g.want) {
			t.Errorf("gradient of %s: %v, want %v", g.name, got, g.want)
		}
	}
	// A scalar bound gets the sum of the gradients it takes.
	b := Scalar(0, Float64, WithGrad())
	v := FromSlice([]float64{-1, -2, 3}, Shape{3}, Sim(0), WithGrad())
	Tidy(func() { v.ClampTensor(b, nil).Sum().Backward() })
	if b.Grad().Item() != 2 || !slices.Equal(v.Grad().Float64s(), []float64{0, 0, 1}) {
		t.Errorf("scalar bound gradient %v, input %v", b.Grad(), v.Grad())
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].ClampTensor(xs[1], xs[2]) }, rnd(51, 2, 3), rnd(52, 3).SubScalar(1), rnd(53, 2, 1).AddScalar(1))
	errs := []struct {
		name string
		f    func()
		kind error
	}{
		{"no bounds", func() { Ones(Shape{2}).ClampTensor(nil, nil) }, ErrArgument},
		{"shapes", func() { Ones(Shape{2}).ClampTensor(Ones(Shape{3}), nil) }, ErrShape},
		{"devices", func() { Ones(Shape{2}).ClampTensor(nil, Ones(Shape{2}, Sim(0))) }, ErrDevice},
	}
	for _, e := range errs {
		if err := Catch(e.f); !errors.Is(err, e.kind) {
			t.Errorf("%s: got %v, want kind %v", e.name, err, e.kind)
		}
	}
}
