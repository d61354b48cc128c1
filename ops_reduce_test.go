package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// near reports whether got and want agree to a float64 tolerance, NaN
// matching NaN and infinities matching exactly.
func near(got, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	if math.IsInf(want, 0) {
		return got == want
	}
	return math.Abs(got-want) <= 1e-9+1e-9*math.Abs(want)
}

func nearAll(got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !near(got[i], want[i]) {
			return false
		}
	}
	return true
}

// TestProd checks values, shapes and dtypes of Prod against float64
// references, on the CPU and a simulated device.
func TestProd(t *testing.T) {
	cases := []struct {
		name   string
		in     *Tensor
		f      func(x *Tensor) *Tensor
		shape  Shape
		dtype  DType
		values []float64
	}{
		{"all", FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}), func(x *Tensor) *Tensor { return x.Prod() }, Shape{}, Float64, []float64{24}},
		{"dim 0", FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}), func(x *Tensor) *Tensor { return x.Prod(0) }, Shape{2}, Float64, []float64{3, 8}},
		{"dim -1 keepdim", FromSlice([]float64{1, 2, 3, 4}, Shape{2, 2}), func(x *Tensor) *Tensor { return x.ProdKeepDim(-1) }, Shape{2, 1}, Float64, []float64{2, 12}},
		{"int32 to int64", FromSlice([]int32{2, 3, 4}, Shape{3}), func(x *Tensor) *Tensor { return x.Prod() }, Shape{}, Int64, []float64{24}},
		{"bool to int64", FromSlice([]bool{true, false}, Shape{2}), func(x *Tensor) *Tensor { return x.Prod() }, Shape{}, Int64, []float64{0}},
		{"empty is 1", Zeros(Shape{0, 3}), func(x *Tensor) *Tensor { return x.Prod(0) }, Shape{3}, Float32, []float64{1, 1, 1}},
		{"0-d", Scalar(5, Float64), func(x *Tensor) *Tensor { return x.Prod(0) }, Shape{}, Float64, []float64{5}},
		{"nan", FromSlice([]float64{math.NaN(), 0}, Shape{2}), func(x *Tensor) *Tensor { return x.Prod() }, Shape{}, Float64, []float64{math.NaN()}},
		{"float16", FromSlice([]float32{300, 300, 1.0 / 300}, Shape{3}, Float16), func(x *Tensor) *Tensor { return x.Prod() }, Shape{}, Float16, []float64{300}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				x := c.in.To(dev)
				y := c.f(x)
				if !slices.Equal(y.Shape(), c.shape) || y.DType() != c.dtype {
					t.Fatalf("got %v %s, want %v %s", y.Shape(), y.DType(), c.shape, c.dtype)
				}
				got := y.Float64s()
				for i := range got {
					if !near(got[i], c.values[i]) && math.Abs(got[i]-c.values[i]) > 0.5 {
						t.Errorf("got %v, want %v", got, c.values)
					}
				}
			})
		}
	}
}

// TestProdGradientWithZeros pins the gradient of Prod where the input
// holds no zero, one zero and several zeros, against the product of the
// other elements.
func TestProdGradientWithZeros(t *testing.T) {
	cases := []struct {
		name string
		x    []float64
		want []float64
	}{
		{"no zero", []float64{2, 3, 4}, []float64{12, 8, 6}},
		{"one zero", []float64{2, 0, 4}, []float64{0, 8, 0}},
		{"two zeros", []float64{0, 3, 0}, []float64{0, 0, 0}},
		{"only zero", []float64{0}, []float64{1}},
		{"all zeros", []float64{0, 0, 0}, []float64{0, 0, 0}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				x := FromSlice(c.x, Shape{len(c.x)}, dev, WithGrad())
				Tidy(func() { x.Prod().Backward() })
				if got := x.Grad().Float64s(); !nearAll(got, c.want) {
					t.Errorf("gradient %v, want %v", got, c.want)
				}
			})
		}
	}
	// Per slice: rows with no zero, one zero and two zeros at once.
	x := FromSlice([]float64{2, 3, 4, 2, 0, 4, 0, 3, 0}, Shape{3, 3}, WithGrad())
	Tidy(func() { x.Prod(1).Sum().Backward() })
	want := []float64{12, 8, 6, 0, 8, 0, 0, 0, 0}
	if got := x.Grad().Float64s(); !nearAll(got, want) {
		t.Errorf("per-row gradient %v, want %v", got, want)
	}
	// Finite differences away from zero, over a dimension and all.
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Prod(1) }, rnd(3, 2, 3))
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].ProdKeepDim(-2) }, rnd(4, 3, 2))
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Prod() }, rnd(5, 2, 2))
}

// TestArgExtremumAll checks ArgMaxAll and ArgMinAll index into the
// flattened tensor, as torch.argmax with no dim.
func TestArgExtremumAll(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name     string
		in       *Tensor
		max, min int64
	}{
		{"matrix", FromSlice([]float64{3, 9, 1, 9, 0, 5}, Shape{2, 3}), 1, 4},
		{"transposed view", FromSlice([]float64{3, 9, 1, 7, 0, 5}, Shape{2, 3}).T(), 2, 3},
		{"nan is largest and smallest", FromSlice([]float64{1, nan, 3}, Shape{3}), 1, 1},
		{"int", FromSlice([]int32{-4, 8, 8}, Shape{3}), 1, 0},
		{"0-d", Scalar(2), 0, 0},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				x := c.in.To(dev)
				for _, r := range []struct {
					got  *Tensor
					want int64
				}{{x.ArgMaxAll(), c.max}, {x.ArgMinAll(), c.min}} {
					if r.got.Dim() != 0 || r.got.DType() != Int64 || r.got.Int64s()[0] != r.want {
						t.Errorf("got %v, want 0-d int64 %d", r.got, r.want)
					}
				}
			})
		}
	}
	err := Catch(func() { Zeros(Shape{2, 0}).ArgMaxAll() })
	var ve *Error
	if !errors.Is(err, ErrShape) || !errors.As(err, &ve) || ve.Op != "argmax" {
		t.Errorf("empty: got %v, want an argmax ErrShape", err)
	}
}

// TestNorm checks Norm against float64 references for every kind of p,
// with and without dims, keepdim and negative dims.
func TestNorm(t *testing.T) {
	inf := math.Inf(1)
	x := []float64{3, -4, 0, 1, -2, 2}
	cases := []struct {
		name  string
		p     float64
		dims  []int
		keep  bool
		shape Shape
		want  []float64
	}{
		{"2 all", 2, nil, false, Shape{}, []float64{math.Sqrt(34)}},
		{"1 all", 1, nil, false, Shape{}, []float64{12}},
		{"inf all", inf, nil, false, Shape{}, []float64{4}},
		{"-inf all", -inf, nil, false, Shape{}, []float64{0}},
		{"0 all", 0, nil, false, Shape{}, []float64{5}},
		{"3 all", 3, nil, false, Shape{}, []float64{math.Cbrt(27 + 64 + 1 + 8 + 8)}},
		{"0.5 all", 0.5, nil, false, Shape{}, []float64{math.Pow(math.Sqrt(3)+2+1+2*math.Sqrt(2), 2)}},
		{"2 dim 1", 2, []int{1}, false, Shape{2}, []float64{5, 3}},
		{"2 dim -1 keepdim", 2, []int{-1}, true, Shape{2, 1}, []float64{5, 3}},
		{"inf dim 0", inf, []int{0}, false, Shape{3}, []float64{3, 4, 2}},
		{"-inf dim 1", -inf, []int{1}, false, Shape{2}, []float64{0, 1}},
		{"1 dims 0,1 keepdim", 1, []int{0, 1}, true, Shape{1, 1}, []float64{12}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				in := FromSlice(x, Shape{2, 3}, dev)
				y := in.Norm(c.p, c.dims, c.keep)
				if !slices.Equal(y.Shape(), c.shape) || y.DType() != Float64 {
					t.Fatalf("got %v %s, want %v float64", y.Shape(), y.DType(), c.shape)
				}
				if got := y.Float64s(); !nearAll(got, c.want) {
					t.Errorf("got %v, want %v", got, c.want)
				}
			})
		}
	}
	t.Run("empty", func(t *testing.T) {
		if got := Zeros(Shape{0}).Norm(2, nil, false).Item(); got != 0 {
			t.Errorf("2-norm of empty = %v, want 0", got)
		}
	})
	t.Run("float16 in float32", func(t *testing.T) {
		// 300² overflows float16; the norm does not.
		y := FromSlice([]float32{300, 400}, Shape{2}, Float16).Norm(2, nil, false)
		if y.DType() != Float16 || y.Item() != 500 {
			t.Errorf("got %v, want float16 500", y)
		}
	})
	errs := []struct {
		name string
		f    func()
		kind error
	}{
		{"int", func() { FromSlice([]int64{3, 4}, Shape{2}).Norm(2, nil, false) }, ErrDType},
		{"nan p", func() { Ones(Shape{2}).Norm(math.NaN(), nil, false) }, ErrArgument},
		{"inf over empty", func() { Zeros(Shape{0}).Norm(inf, nil, false) }, ErrShape},
		{"bad dim", func() { Ones(Shape{2}).Norm(2, []int{1}, false) }, ErrIndex},
	}
	for _, e := range errs {
		err := Catch(e.f)
		var ve *Error
		if !errors.Is(err, e.kind) || !errors.As(err, &ve) || ve.Op != "norm" {
			t.Errorf("%s: got %v, want a norm error of kind %v", e.name, err, e.kind)
		}
	}
}

// TestNormGradient checks Norm's gradient by finite differences for each
// kind of p and against PyTorch's rules where it is not differentiable.
func TestNormGradient(t *testing.T) {
	for _, p := range []float64{1, 2, 3, 0.5, -1, math.Inf(1), math.Inf(-1)} {
		gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Norm(p, []int{1}, false) }, rnd(11, 2, 3))
		gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Norm(p, nil, true) }, rnd(12, 4))
	}
	inf := math.Inf(1)
	cases := []struct {
		name string
		p    float64
		x    []float64
		want []float64
	}{
		{"2 at zero", 2, []float64{0, 0}, []float64{0, 0}},
		{"3 at zero", 3, []float64{0, 0}, []float64{0, 0}},
		{"0.5 with a zero", 0.5, []float64{0, 4}, []float64{0, 1}},
		{"1 at zero", 1, []float64{0, -2}, []float64{0, -1}},
		{"0", 0, []float64{0, 3}, []float64{0, 0}},
		{"inf ties", inf, []float64{-3, 3, 1}, []float64{-0.5, 0.5, 0}},
		{"-inf ties", -inf, []float64{-1, 1, 3}, []float64{-0.5, 0.5, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := FromSlice(c.x, Shape{len(c.x)}, WithGrad())
			Tidy(func() { x.Norm(c.p, nil, false).Backward() })
			if got := x.Grad().Float64s(); !nearAll(got, c.want) {
				t.Errorf("gradient %v, want %v", got, c.want)
			}
		})
	}
}
