package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// scanRef is the float64 reference of an inclusive scan along axis a of a
// row-major tensor of the given shape.
func scanRef(x []float64, shape []int, a int, mul bool) []float64 {
	out := slices.Clone(x)
	inner := 1
	for _, d := range shape[a+1:] {
		inner *= d
	}
	n := shape[a]
	for i := range out {
		if (i/inner)%n == 0 {
			continue
		}
		if mul {
			out[i] *= out[i-inner]
		} else {
			out[i] += out[i-inner]
		}
	}
	return out
}

// TestScan checks CumSum and CumProd against float64 references along
// every dimension, negative ones included, with PyTorch's dtype rules.
func TestScan(t *testing.T) {
	x := []float64{1, -2, 3, 0.5, 2, -1, 4, 0, 1.5, -3, 2, 2, 1, 1, -0.5, 3, 0.25, 2, -1, 1, 3, 2, 1, -2}
	shape := []int{2, 3, 4}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, mul := range []bool{false, true} {
			for dim := -3; dim < 3; dim++ {
				in := FromSlice(x, shape, dev)
				var y *Tensor
				if mul {
					y = in.CumProd(dim)
				} else {
					y = in.CumSum(dim)
				}
				want := scanRef(x, shape, (dim+3)%3, mul)
				if !slices.Equal(y.Shape(), Shape(shape)) || !nearAll(y.Float64s(), want) {
					t.Errorf("%s mul=%v dim %d: got %v %v, want %v", dev, mul, dim, y.Shape(), y.Float64s(), want)
				}
			}
		}
	}
	// Lengths that are and are not powers of two.
	for n := 0; n <= 17; n++ {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i%5) - 1.5
		}
		if got, want := FromSlice(v, Shape{n}).CumSum(0).Float64s(), scanRef(v, []int{n}, 0, false); !nearAll(got, want) {
			t.Errorf("cumsum of %d: got %v, want %v", n, got, want)
		}
	}
	cases := []struct {
		name  string
		y     *Tensor
		dtype DType
		shape Shape
		want  []float64
	}{
		{"int32 cumsum", FromSlice([]int32{1, 2, 3}, Shape{3}).CumSum(0), Int64, Shape{3}, []float64{1, 3, 6}},
		{"bool cumsum", FromSlice([]bool{true, false, true}, Shape{3}).CumSum(0), Int64, Shape{3}, []float64{1, 1, 2}},
		{"int64 cumprod", FromSlice([]int64{2, 3, 4}, Shape{3}).CumProd(-1), Int64, Shape{3}, []float64{2, 6, 24}},
		{"0-d", Scalar(4, Float64).CumSum(-1), Float64, Shape{}, []float64{4}},
		{"empty dim", Zeros(Shape{2, 0}).CumProd(1), Float32, Shape{2, 0}, []float64{}},
		{"nan propagates", FromSlice([]float64{1, math.NaN(), 2}, Shape{3}).CumSum(0), Float64, Shape{3}, []float64{1, math.NaN(), math.NaN()}},
		// 2048 + 1 is not a float16; summed in float32, 2048+1+1 is.
		{"float16 in float32", FromSlice([]float32{2048, 1, 1}, Shape{3}, Float16).CumSum(0), Float16, Shape{3}, []float64{2048, 2048, 2050}},
	}
	for _, c := range cases {
		if c.y.DType() != c.dtype || !slices.Equal(c.y.Shape(), c.shape) || !nearAll(c.y.Float64s(), c.want) {
			t.Errorf("%s: got %s %v %v, want %s %v %v", c.name, c.y.DType(), c.y.Shape(), c.y.Float64s(), c.dtype, c.shape, c.want)
		}
	}
	// The input is left alone.
	in := FromSlice([]float64{1, 2, 3}, Shape{3})
	in.CumSum(0)
	if got := in.Float64s(); !slices.Equal(got, []float64{1, 2, 3}) {
		t.Errorf("input changed to %v", got)
	}
	for _, f := range []func(){
		func() { Ones(Shape{2}).CumSum(1) },
		func() { Scalar(1).CumProd(1) },
	} {
		if err := Catch(f); !errors.Is(err, ErrIndex) {
			t.Errorf("bad dim: got %v, want ErrIndex", err)
		}
	}
}

// TestScanGradient checks the gradients of CumSum and CumProd by finite
// differences, and CumProd's against the exact products where the input
// holds one and several zeros.
func TestScanGradient(t *testing.T) {
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].CumSum(1) }, rnd(21, 2, 5))
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].CumProd(-1) }, rnd(22, 2, 5))
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].CumProd(0) }, rnd(23, 3, 2))
	for _, x := range [][]float64{{2, 0, 3, 4}, {0, 2, 0, 3}, {0, 0, 0, 0}, {1, 2, 3, 0}} {
		v := FromSlice(x, Shape{len(x)}, WithGrad())
		Tidy(func() { v.CumProd(0).Sum().Backward() })
		// d/dx_j of sum_i prod_{k<=i} x_k.
		want := make([]float64, len(x))
		for j := range x {
			for i := j; i < len(x); i++ {
				p := 1.0
				for k := 0; k <= i; k++ {
					if k != j {
						p *= x[k]
					}
				}
				want[j] += p
			}
		}
		if got := v.Grad().Float64s(); !nearAll(got, want) {
			t.Errorf("cumprod of %v: gradient %v, want %v", x, got, want)
		}
	}
}
