package vram

import (
	"errors"
	"slices"
	"testing"
)

// TestIndexSelect checks IndexSelect against hand-computed references,
// with PyTorch's index rules.
func TestIndexSelect(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	cases := []struct {
		name  string
		dim   int
		index *Tensor
		shape Shape
		want  []float64
	}{
		{"rows", 0, FromSlice([]int64{2, 0}, Shape{2}), Shape{2, 4}, []float64{8, 9, 10, 11, 0, 1, 2, 3}},
		{"columns repeated", 1, FromSlice([]int64{3, 3, 1}, Shape{3}), Shape{3, 3}, []float64{3, 3, 1, 7, 7, 5, 11, 11, 9}},
		{"dim -1 int32", -1, FromSlice([]int32{0}, Shape{1}), Shape{3, 1}, []float64{0, 4, 8}},
		{"0-d index", 0, FromSlice([]int64{1}, Shape{}), Shape{1, 4}, []float64{4, 5, 6, 7}},
		{"no positions", 1, FromSlice([]int64{}, Shape{0}), Shape{3, 0}, []float64{}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				y := FromSlice(x, Shape{3, 4}, dev).IndexSelect(c.dim, c.index.To(dev))
				if !slices.Equal(y.Shape(), c.shape) || !slices.Equal(y.Float64s(), c.want) {
					t.Errorf("got %v %v, want %v %v", y.Shape(), y.Float64s(), c.shape, c.want)
				}
			})
		}
	}
	if y := Scalar(7, Float64).IndexSelect(0, FromSlice([]int64{0}, Shape{1})); y.Dim() != 0 || y.Item() != 7 {
		t.Errorf("0-d: got %v, want 0-d 7", y)
	}
	m := Ones(Shape{3, 4})
	errs := []struct {
		name  string
		index *Tensor
		dim   int
		kind  error
	}{
		{"out of range", FromSlice([]int64{3}, Shape{1}), 0, ErrIndex},
		{"negative", FromSlice([]int64{-1}, Shape{1}), 0, ErrIndex},
		{"matrix index", FromSlice([]int64{0, 1}, Shape{1, 2}), 0, ErrShape},
		{"float index", FromSlice([]float32{0}, Shape{1}), 0, ErrDType},
		{"bad dim", FromSlice([]int64{0}, Shape{1}), 2, ErrIndex},
	}
	for _, e := range errs {
		err := Catch(func() { m.IndexSelect(e.dim, e.index) })
		var ve *Error
		if !errors.Is(err, e.kind) || !errors.As(err, &ve) || ve.Op != "index_select" {
			t.Errorf("%s: got %v, want an index_select error of kind %v", e.name, err, e.kind)
		}
	}
	if err := Catch(func() { Scalar(1).IndexSelect(0, FromSlice([]int64{0, 0}, Shape{2})) }); !errors.Is(err, ErrIndex) {
		t.Errorf("0-d with two positions: got %v, want ErrIndex", err)
	}
	// Repeated positions accumulate their gradients.
	v := FromSlice([]float64{1, 2, 3}, Shape{3}, WithGrad())
	Tidy(func() { v.IndexSelect(0, FromSlice([]int64{2, 0, 2}, Shape{3})).Sum().Backward() })
	if got := v.Grad().Float64s(); !slices.Equal(got, []float64{1, 0, 2}) {
		t.Errorf("gradient %v, want [1 0 2]", got)
	}
	idx := FromSlice([]int64{1, 1, 0}, Shape{3})
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].IndexSelect(1, idx) }, rnd(31, 2, 3))
}

// TestScatter checks Scatter, ScatterAdd and ScatterValue against the
// examples of PyTorch's documentation and its index rules.
func TestScatter(t *testing.T) {
	src := Arange(1, 11, 1, Float64).Reshape(2, 5)
	cases := []struct {
		name string
		f    func(dev Device) *Tensor
		want []float64
	}{
		{"scatter dim 0", func(dev Device) *Tensor {
			return Zeros(Shape{3, 5}, Float64, dev).Scatter(0, FromSlice([]int64{0, 1, 2, 0}, Shape{1, 4}, dev), src.To(dev))
		}, []float64{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}},
		{"scatter dim 1", func(dev Device) *Tensor {
			return Zeros(Shape{3, 5}, Float64, dev).Scatter(1, FromSlice([]int64{0, 1, 2, 0, 4, 3}, Shape{2, 3}, dev), src.To(dev))
		}, []float64{1, 2, 3, 0, 0, 6, 0, 0, 8, 7, 0, 0, 0, 0, 0}},
		{"scatter keeps the rest", func(dev Device) *Tensor {
			return Full(Shape{2, 2}, 9, Float64, dev).Scatter(-1, FromSlice([]int64{1, 0}, Shape{2, 1}, dev), src.To(dev))
		}, []float64{9, 1, 6, 9}},
		{"scatter value", func(dev Device) *Tensor {
			return Zeros(Shape{2, 4}, Float64, dev).ScatterValue(1, FromSlice([]int64{2, 3}, Shape{2, 1}, dev), 1.5)
		}, []float64{0, 0, 1.5, 0, 0, 0, 0, 1.5}},
		{"scatter value repeated positions", func(dev Device) *Tensor {
			return Zeros(Shape{2, 4}, Float64, dev).ScatterValue(1, FromSlice([]int64{1, 1, 3, 0, 0, 0}, Shape{2, 3}, dev), 1.5)
		}, []float64{0, 1.5, 0, 1.5, 1.5, 0, 0, 0}},
		{"scatter value repeated int", func(dev Device) *Tensor {
			return FromSlice([]int32{4, 4, 4}, Shape{3}, dev).ScatterValue(0, FromSlice([]int64{2, 2, 2}, Shape{3}, dev), 7)
		}, []float64{4, 4, 7}},
		{"scatter value repeated 0-d", func(dev Device) *Tensor {
			return Scalar(1, Float64, dev).ScatterValue(0, FromSlice([]int64{0}, Shape{}, dev), -2)
		}, []float64{-2}},
		{"scatter add", func(dev Device) *Tensor {
			return Zeros(Shape{3, 5}, Float64, dev).ScatterAdd(0, FromSlice([]int64{0, 1, 2, 0, 0, 0, 1, 2, 2, 2}, Shape{2, 5}, dev), Ones(Shape{2, 5}, Float64, dev))
		}, []float64{2, 0, 0, 1, 1, 0, 2, 0, 0, 0, 0, 0, 2, 1, 1}},
		{"scatter add int", func(dev Device) *Tensor {
			return FromSlice([]int32{1, 1}, Shape{2}, dev).ScatterAdd(0, FromSlice([]int64{1, 1, 0}, Shape{3}, dev), FromSlice([]int32{5, 6, 7}, Shape{3}, dev))
		}, []float64{8, 12}},
		{"empty index", func(dev Device) *Tensor {
			return Ones(Shape{2}, Float64, dev).Scatter(0, FromSlice([]int64{}, Shape{0}, dev), Zeros(Shape{1}, Float64, dev))
		}, []float64{1, 1}},
		{"0-d", func(dev Device) *Tensor {
			return Scalar(1, Float64, dev).Scatter(0, FromSlice([]int64{0}, Shape{}, dev), Scalar(4, Float64, dev))
		}, []float64{4}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				if got := c.f(dev).Float64s(); !slices.Equal(got, c.want) {
					t.Errorf("got %v, want %v", got, c.want)
				}
			})
		}
	}
	in := FromSlice([]float64{1, 2, 3}, Shape{3})
	errs := []struct {
		name string
		f    func()
		kind error
	}{
		{"duplicate position", func() { in.Scatter(0, FromSlice([]int64{1, 1}, Shape{2}), Ones(Shape{2}, Float64)) }, ErrIndex},
		{"out of range", func() { in.Scatter(0, FromSlice([]int64{3}, Shape{1}), Ones(Shape{1}, Float64)) }, ErrIndex},
		{"add out of range", func() { in.ScatterAdd(0, FromSlice([]int64{-1}, Shape{1}), Ones(Shape{1}, Float64)) }, ErrIndex},
		{"int32 index", func() { in.ScatterAdd(0, FromSlice([]int32{0}, Shape{1}), Ones(Shape{1}, Float64)) }, ErrDType},
		{"src dtype", func() { in.ScatterAdd(0, FromSlice([]int64{0}, Shape{1}), Ones(Shape{1})) }, ErrDType},
		{"index larger than src", func() { in.ScatterAdd(0, FromSlice([]int64{0, 1}, Shape{2}), Ones(Shape{1}, Float64)) }, ErrShape},
		{"index wider than input", func() { Zeros(Shape{2, 1}).ScatterAdd(0, Zeros(Shape{1, 2}, Int64), Ones(Shape{1, 2})) }, ErrShape},
		{"rank", func() { in.Scatter(0, FromSlice([]int64{0}, Shape{1, 1}), Ones(Shape{1, 1}, Float64)) }, ErrShape},
		{"value does not fit", func() { Zeros(Shape{2}, Int8).ScatterValue(0, FromSlice([]int64{0}, Shape{1}), 300) }, ErrArgument},
		{"bad dim", func() { in.Scatter(1, FromSlice([]int64{0}, Shape{1}), Ones(Shape{1}, Float64)) }, ErrIndex},
	}
	for _, e := range errs {
		err := Catch(e.f)
		if !errors.Is(err, e.kind) {
			t.Errorf("%s: got %v, want kind %v", e.name, err, e.kind)
		}
	}
	if got := in.Float64s(); !slices.Equal(got, []float64{1, 2, 3}) {
		t.Errorf("input changed to %v", got)
	}
}

// TestScatterGradient checks the gradients of the scatter ops by finite
// differences and the masking of the positions Scatter overwrites.
func TestScatterGradient(t *testing.T) {
	dup := FromSlice([]int64{0, 2, 0, 1, 1, 1}, Shape{2, 3})
	perm := FromSlice([]int64{2, 0, 1, 2}, Shape{2, 2})
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].ScatterAdd(1, dup, xs[1]) }, rnd(41, 2, 3), rnd(42, 2, 3))
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Scatter(1, perm, xs[1]) }, rnd(43, 2, 3), rnd(44, 3, 4))
	x := Zeros(Shape{3}, Float64, WithGrad())
	s := Zeros(Shape{3}, Float64, WithGrad())
	Tidy(func() {
		y := x.Scatter(0, FromSlice([]int64{2}, Shape{1}), s)
		y.Mul(FromSlice([]float64{1, 2, 3}, Shape{3})).Sum().Backward()
	})
	if got := x.Grad().Float64s(); !slices.Equal(got, []float64{1, 2, 0}) {
		t.Errorf("input gradient %v, want [1 2 0]", got)
	}
	if got := s.Grad().Float64s(); !slices.Equal(got, []float64{3, 0, 0}) {
		t.Errorf("src gradient %v, want [3 0 0]", got)
	}
}
