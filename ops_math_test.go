package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// closeAll reports whether got and want agree to a relative tolerance tol,
// NaN matching NaN and infinities (and zeros) matching exactly in sign.
func closeAll(got, want []float64, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		g := got[i]
		switch {
		case math.IsNaN(w):
			if !math.IsNaN(g) {
				return false
			}
		case math.IsInf(w, 0) || w == 0:
			if g != w || math.Signbit(g) != math.Signbit(w) {
				return false
			}
		case math.Abs(g-w) > tol*math.Abs(w):
			return false
		}
	}
	return true
}

// TestMathUnary checks the composed unary ops against Go's math package in
// float64 and float32, on the CPU and a simulated device, with their
// special values and dtype rules.
func TestMathUnary(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	ops := []struct {
		name string
		f    func(*Tensor) *Tensor
		ref  func(float64) float64
		xs   []float64
	}{
		{"log10", (*Tensor).Log10, math.Log10, []float64{1, 10, 100, 1000, 1e-5, 0.3, 0, -1, inf, nan}},
		{"log2", (*Tensor).Log2, math.Log2, []float64{1, 2, 8, 1024, 0.125, 3, 0, -1, inf, nan}},
		{"sinh", (*Tensor).Sinh, math.Sinh, []float64{0, 1e-9, -1e-9, 0.5, -2, 20, -20, 700, inf, -inf, nan}},
		{"cosh", (*Tensor).Cosh, math.Cosh, []float64{0, 1e-9, 0.5, -2, 20, 700, inf, -inf, nan}},
		{"tan", (*Tensor).Tan, math.Tan, []float64{0, 0.5, -1, 1.5, 3, -100, inf, nan}},
		{"atan", (*Tensor).Atan, math.Atan, []float64{0, 1e-9, 0.3, -0.66, 0.7, 1, -2.4, 2.5, 1e10, -1e300, math.Copysign(0, -1), inf, -inf, nan}},
		// Go's math.Asin and math.Acos lose digits near ±1; C's (and
		// PyTorch's) agree with these forms.
		{"asin", (*Tensor).Asin, func(x float64) float64 { return math.Atan2(x, math.Sqrt((1-x)*(1+x))) }, []float64{0, 1e-9, 0.3, -0.5, 0.99, 0.9999999, 1, -1, 1.5, -2, nan}},
		{"acos", (*Tensor).Acos, func(x float64) float64 { return 2 * math.Atan(math.Sqrt((1-x)/(1+x))) }, []float64{0, 1e-9, 0.3, -0.5, 0.99, -0.9999999, 1, -1, 1.5, -2, nan}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, o := range ops {
			want := make([]float64, len(o.xs))
			want32 := make([]float64, len(o.xs))
			x32 := make([]float32, len(o.xs))
			for i, x := range o.xs {
				want[i] = o.ref(x)
				x32[i] = float32(x)
				want32[i] = float64(float32(o.ref(float64(x32[i]))))
			}
			y := o.f(FromSlice(o.xs, nil, dev))
			if y.DType() != Float64 || !closeAll(y.Float64s(), want, 4e-16) {
				t.Errorf("%s %s float64: got %s %v, want %v", dev, o.name, y.DType(), y.Float64s(), want)
			}
			// Computed in float64 and rounded once: the correctly rounded
			// float32 (for these inputs).
			y = o.f(FromSlice(x32, nil, dev))
			if y.DType() != Float32 || !closeAll(y.Float64s(), want32, 0) {
				t.Errorf("%s %s float32: got %s %v, want %v", dev, o.name, y.DType(), y.Float64s(), want32)
			}
			if y = o.f(FromSlice([]int64{1, 2}, nil, dev)); y.DType() != Float32 {
				t.Errorf("%s %s int64: got %s, want float32", dev, o.name, y.DType())
			}
			if y = o.f(Scalar(0.5, Float16, dev)); y.DType() != Float16 || len(y.Shape()) != 0 {
				t.Errorf("%s %s float16: got %s %v, want a float16 scalar", dev, o.name, y.DType(), y.Shape())
			}
		}
	}
}

// TestMathUnaryGradients checks the composed unary ops' gradients by
// finite differences.
func TestMathUnaryGradients(t *testing.T) {
	in := func() *Tensor { return FromSlice([]float64{0.1, -0.4, 0.75, 0.9, -0.95, 0.3}, Shape{2, 3}) }
	for _, f := range []func(*Tensor) *Tensor{(*Tensor).Log10, (*Tensor).Log2} {
		gradCheck(t, func(xs []*Tensor) *Tensor { return f(xs[0]) }, pos(31, 2, 3))
	}
	for _, f := range []func(*Tensor) *Tensor{(*Tensor).Sinh, (*Tensor).Cosh, (*Tensor).Tan, (*Tensor).Atan, (*Tensor).Asin, (*Tensor).Acos} {
		gradCheck(t, func(xs []*Tensor) *Tensor { return f(xs[0]) }, in())
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Atan() }, rnd(32, 4).MulScalar(5))
	// A float32 leaf gets a float32 gradient.
	x := FromSlice([]float32{0.5}, nil, WithGrad())
	x.Asin().Sum().Backward()
	if g := x.Grad(); g.DType() != Float32 || !closeAll(g.Float64s(), []float64{1 / math.Sqrt(0.75)}, 1e-6) {
		t.Errorf("asin float32 gradient: %s %v", g.DType(), g.Float64s())
	}
}

// TestAtan2 checks Atan2 against math.Atan2 over signed zeros, infinities
// and all four quadrants, its broadcasting and dtypes, and its gradient.
func TestAtan2(t *testing.T) {
	inf, nan, nz := math.Inf(1), math.NaN(), math.Copysign(0, -1)
	vals := []float64{0, nz, 1, -1, 0.5, -3, inf, -inf, nan, 1e-300}
	var ys, xs, want []float64
	for _, y := range vals {
		for _, x := range vals {
			ys, xs, want = append(ys, y), append(xs, x), append(want, math.Atan2(y, x))
		}
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		got := FromSlice(ys, nil, dev).Atan2(FromSlice(xs, nil, dev))
		if !closeAll(got.Float64s(), want, 4e-16) {
			g := got.Float64s()
			for i := range want {
				if !closeAll(g[i:i+1], want[i:i+1], 4e-16) {
					t.Errorf("%s atan2(%v, %v) = %v, want %v", dev, ys[i], xs[i], g[i], want[i])
				}
			}
		}
		b := FromSlice([]float32{1, -1}, Shape{2, 1}, dev).Atan2(FromSlice([]int64{1, 0, -1}, Shape{3}, dev))
		if b.DType() != Float32 || !slices.Equal(b.Shape(), Shape{2, 3}) {
			t.Errorf("%s broadcast: %s %v", dev, b.DType(), b.Shape())
		}
		if i := FromSlice([]int32{1}, nil, dev).Atan2(FromSlice([]int32{1}, nil, dev)); i.DType() != Float32 || !closeAll(i.Float64s(), []float64{float64(float32(math.Pi / 4))}, 0) {
			t.Errorf("%s int32: %s %v", dev, i.DType(), i.Float64s())
		}
	}
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].Atan2(v[1]) }, rnd(33, 2, 3), rnd(34, 3))
	// Autocast: the fp32 list gives float32, the promote list promotes
	// mixed operands and leaves a single 16-bit dtype alone.
	Autocast(BFloat16, func() {
		h := Ones(Shape{2}, Float16)
		for name, y := range map[string]*Tensor{"log10": h.Log10(), "asin": h.Asin(), "cosh": h.Cosh(), "atan2 mixed": h.Atan2(Ones(Shape{2}))} {
			if y.DType() != Float32 {
				t.Errorf("autocast %s: got %s, want float32", name, y.DType())
			}
		}
		if y := h.Atan2(h); y.DType() != Float16 {
			t.Errorf("autocast atan2 float16: got %s", y.DType())
		}
	})
}

// TestLogsumexp checks Logsumexp against a float64 reference, its
// stability at large values and for rows of -Inf, its dtypes, shapes and
// gradient.
func TestLogsumexp(t *testing.T) {
	inf := math.Inf(1)
	lse := func(v ...float64) float64 {
		m := math.Inf(-1)
		for _, x := range v {
			m = math.Max(m, x)
		}
		if math.IsInf(m, 0) {
			return m
		}
		s := 0.0
		for _, x := range v {
			s += math.Exp(x - m)
		}
		return m + math.Log(s)
	}
	x := []float64{1, 2, 3, 1000, 1000, -1000, -inf, -inf, -inf, -inf, 0, inf, math.NaN(), 0, 1, 0.5, -0.5, 2}
	for _, dev := range []Device{CPU, Sim(0)} {
		cases := []struct {
			name  string
			y     *Tensor
			dtype DType
			shape Shape
			want  []float64
		}{
			{"rows", FromSlice(x, Shape{6, 3}, dev).Logsumexp([]int{1}, false), Float64, Shape{6},
				[]float64{lse(1, 2, 3), lse(1000, 1000, -1000), math.Inf(-1), lse(-inf, 0, inf), math.NaN(), lse(0.5, -0.5, 2)}},
			{"keepdim", FromSlice(x[:6], Shape{2, 3}, dev).Logsumexp([]int{-1}, true), Float64, Shape{2, 1},
				[]float64{lse(1, 2, 3), lse(1000, 1000, -1000)}},
			{"columns", FromSlice(x[:6], Shape{2, 3}, dev).Logsumexp([]int{0}, false), Float64, Shape{3},
				[]float64{lse(1, 1000), lse(2, 1000), lse(3, -1000)}},
			{"all", FromSlice(x[:3], Shape{3}, dev).Logsumexp(nil, false), Float64, Shape{}, []float64{lse(1, 2, 3)}},
			{"empty", Zeros(Shape{2, 0}, Float64, dev).Logsumexp([]int{1}, false), Float64, Shape{2}, []float64{math.Inf(-1), math.Inf(-1)}},
			{"int", FromSlice([]int64{1, 2, 3}, nil, dev).Logsumexp([]int{0}, false), Float32, Shape{}, []float64{float64(float32(lse(1, 2, 3)))}},
			{"float16 large", FromSlice([]float32{60000, 60000}, nil, Float16, dev).Logsumexp([]int{0}, false), Float16, Shape{}, []float64{60000}},
		}
		for _, c := range cases {
			if c.y.DType() != c.dtype || !slices.Equal(c.y.Shape(), c.shape) || !closeAll(c.y.Float64s(), c.want, 1e-7) {
				t.Errorf("%s %s: got %s %v %v, want %s %v %v", dev, c.name, c.y.DType(), c.y.Shape(), c.y.Float64s(), c.dtype, c.shape, c.want)
			}
		}
	}
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].Logsumexp([]int{1}, false) }, rnd(35, 2, 4))
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].Logsumexp([]int{0, 2}, true) }, rnd(36, 2, 2, 3))
	var y *Tensor
	Autocast(Float16, func() { y = Ones(Shape{3}, Float16).Logsumexp(nil, false) })
	if y.DType() != Float32 {
		t.Errorf("autocast: got %s, want float32", y.DType())
	}
	if err := Catch(func() { Ones(Shape{2}).Logsumexp([]int{1}, false) }); !errors.Is(err, ErrIndex) {
		t.Errorf("bad dim: got %v, want ErrIndex", err)
	}
}

// TestAddcAndProducts checks Addcmul, Addcdiv, Dot, Cross and Cdist
// against float64 references on the CPU and a simulated device, with their
// broadcasting, dtypes and errors.
func TestAddcAndProducts(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		f := func(v []float64, s ...int) *Tensor { return FromSlice(v, Shape(s), dev) }
		cases := []struct {
			name  string
			y     func() *Tensor
			dtype DType
			shape Shape
			want  []float64
		}{
			{"addcmul", func() *Tensor { return f([]float64{1, 2}, 2).Addcmul(f([]float64{3, 4}, 2), f([]float64{5}, 1), 0.5) }, Float64, Shape{2}, []float64{8.5, 12}},
			{"addcmul broadcast", func() *Tensor {
				return f([]float64{1}, 1).Addcmul(f([]float64{1, 2}, 2, 1), f([]float64{1, 2, 3}, 3), 1)
			}, Float64, Shape{2, 3}, []float64{2, 3, 4, 3, 5, 7}},
			{"addcmul int", func() *Tensor {
				return FromSlice([]int64{1}, nil, dev).Addcmul(FromSlice([]int32{2}, nil, dev), FromSlice([]int32{3}, nil, dev), 2)
			}, Int64, Shape{1}, []float64{13}},
			{"addcdiv", func() *Tensor { return f([]float64{1, 2}, 2).Addcdiv(f([]float64{3, 4}, 2), f([]float64{2, 8}, 2), -2) }, Float64, Shape{2}, []float64{-2, 1}},
			{"addcdiv int over float", func() *Tensor {
				return FromSlice([]int64{1}, nil, dev).Addcdiv(FromSlice([]int64{3}, nil, dev), FromSlice([]float32{2}, nil, dev), 1)
			}, Float32, Shape{1}, []float64{2.5}},
			{"dot", func() *Tensor { return f([]float64{1, 2, 3}, 3).Dot(f([]float64{4, -5, 6}, 3)) }, Float64, Shape{}, []float64{12}},
			{"dot int", func() *Tensor { return FromSlice([]int64{1, 2}, nil, dev).Dot(FromSlice([]int64{3, 4}, nil, dev)) }, Int64, Shape{}, []float64{11}},
			{"dot int32 keeps its dtype and wraps", func() *Tensor {
				return FromSlice([]int32{1 << 30, 1 << 30, 3}, nil, dev).Dot(FromSlice([]int32{2, 2, 5}, nil, dev))
			}, Int32, Shape{}, []float64{15}},
			{"dot int8 keeps its dtype and wraps", func() *Tensor {
				return FromSlice([]int64{-3, 7, -128, 127}, nil, Int8, dev).Dot(FromSlice([]int64{-3, 7, -128, 127}, nil, Int8, dev))
			}, Int8, Shape{}, []float64{59}},
			{"dot empty int32", func() *Tensor { return FromSlice([]int32{}, nil, dev).Dot(FromSlice([]int32{}, nil, dev)) }, Int32, Shape{}, []float64{0}},
			{"dot empty", func() *Tensor { return f(nil, 0).Dot(f(nil, 0)) }, Float64, Shape{}, []float64{0}},
			{"cross", func() *Tensor {
				return f([]float64{1, 0, 0, 1, 2, 3}, 2, 3).Cross(f([]float64{0, 1, 0, 4, 5, 6}, 2, 3), -1)
			}, Float64, Shape{2, 3}, []float64{0, 0, 1, -3, 6, -3}},
			{"cross dim 0 broadcast", func() *Tensor { return f([]float64{1, 0, 0}, 3, 1).Cross(f([]float64{0, 0, 1, 1, 1, 0}, 3, 2), 0) }, Float64, Shape{3, 2}, []float64{0, 0, -1, 0, 1, 1}},
			{"cdist", func() *Tensor { return Cdist(f([]float64{0, 0, 3, 4}, 2, 2), f([]float64{0, 0, 1, 1, 3, 0}, 3, 2), 2) }, Float64, Shape{2, 3}, []float64{0, math.Sqrt2, 3, 5, math.Sqrt(13), 4}},
			{"cdist p1 batch", func() *Tensor { return Cdist(f([]float64{0, 0, 3, 4}, 2, 1, 2), f([]float64{1, 1}, 1, 2), 1) }, Float64, Shape{2, 1, 1}, []float64{2, 5}},
			{"cdist inf", func() *Tensor { return Cdist(f([]float64{0, 0}, 1, 2), f([]float64{1, -3}, 1, 2), math.Inf(1)) }, Float64, Shape{1, 1}, []float64{3}},
		}
		for _, c := range cases {
			y := c.y()
			if y.DType() != c.dtype || !slices.Equal(y.Shape(), c.shape) || !closeAll(y.Float64s(), c.want, 1e-12) {
				t.Errorf("%s %s: got %s %v %v, want %s %v %v", dev, c.name, y.DType(), y.Shape(), y.Float64s(), c.dtype, c.shape, c.want)
			}
		}
		errs := []struct {
			name string
			f    func()
			kind error
		}{
			{"addcdiv ints", func() { Ones(Shape{1}).Addcdiv(Ones(Shape{1}, Int64), Ones(Shape{1}, Int64), 1) }, ErrDType},
			{"addcmul fraction", func() { Ones(Shape{1}, Int64).Addcmul(Ones(Shape{1}, Int64), Ones(Shape{1}, Int64), 0.5) }, ErrArgument},
			{"addcmul shape", func() { Ones(Shape{2}).Addcmul(Ones(Shape{3}), Ones(Shape{2}), 1) }, ErrShape},
			{"addcmul nil", func() { Ones(Shape{2}).Addcmul(nil, Ones(Shape{2}), 1) }, ErrArgument},
			{"addcmul device", func() { Ones(Shape{2}).Addcmul(Ones(Shape{2}, Sim(0)), Ones(Shape{2}), 1) }, ErrDevice},
			{"dot lengths", func() { Ones(Shape{2}).Dot(Ones(Shape{3})) }, ErrShape},
			{"dot matrix", func() { Ones(Shape{2, 2}).Dot(Ones(Shape{2, 2})) }, ErrShape},
			{"dot dtypes", func() { Ones(Shape{2}).Dot(Ones(Shape{2}, Float64)) }, ErrDType},
			{"dot bools", func() { Ones(Shape{2}, Bool).Dot(Ones(Shape{2}, Bool)) }, ErrDType},
			{"cross size", func() { Ones(Shape{2, 4}).Cross(Ones(Shape{2, 4}), 1) }, ErrShape},
			{"cross dim", func() { Ones(Shape{3}).Cross(Ones(Shape{3}), 1) }, ErrIndex},
			{"cross ranks", func() { Ones(Shape{3}).Cross(Ones(Shape{2, 3}), -1) }, ErrShape},
			{"cdist rows", func() { Cdist(Ones(Shape{2, 3}), Ones(Shape{2, 2}), 2) }, ErrShape},
			{"cdist vector", func() { Cdist(Ones(Shape{3}), Ones(Shape{2, 3}), 2) }, ErrShape},
			{"cdist p", func() { Cdist(Ones(Shape{2, 3}), Ones(Shape{2, 3}), -1) }, ErrArgument},
			{"cdist int", func() { Cdist(Ones(Shape{2, 3}, Int64), Ones(Shape{2, 3}, Int64), 2) }, ErrDType},
		}
		for _, e := range errs {
			if err := Catch(e.f); !errors.Is(err, e.kind) {
				t.Errorf("%s: got %v, want %v", e.name, err, e.kind)
			}
		}
	}
	two := func(f func(a, b *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(v []*Tensor) *Tensor { return f(v[0], v[1]) }
	}
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].Addcmul(v[1], v[2], 0.7) }, rnd(41, 2, 3), rnd(42, 3), rnd(43, 2, 1))
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].Addcdiv(v[1], v[2], -1.5) }, rnd(44, 3), rnd(45, 2, 3), pos(46, 3))
	gradCheck(t, two((*Tensor).Dot), rnd(47, 4), rnd(48, 4))
	gradCheck(t, two(func(a, b *Tensor) *Tensor { return a.Cross(b, 1) }), rnd(49, 2, 3), rnd(50, 2, 3))
	gradCheck(t, two(func(a, b *Tensor) *Tensor { return Cdist(a, b, 2) }), rnd(51, 3, 2), rnd(52, 2, 2))
	gradCheck(t, two(func(a, b *Tensor) *Tensor { return Cdist(a, b, 3) }), rnd(53, 2, 3, 2), rnd(54, 1, 2, 2))
	// A zero distance passes no gradient (not NaN), as in PyTorch.
	a := FromSlice([]float64{1, 2}, Shape{1, 2}, WithGrad())
	Cdist(a, FromSlice([]float64{1, 2}, Shape{1, 2}), 2).Sum().Backward()
	if g := a.Grad().Float64s(); g[0] != 0 || g[1] != 0 {
		t.Errorf("cdist gradient at zero distance: %v", g)
	}
	// Autocast: addcmul and dot promote mixed 16-bit operands, cdist runs in float32.
	Autocast(Float16, func() {
		h, f32 := Ones(Shape{3}, Float16), Ones(Shape{3})
		if y := h.Addcmul(f32, h, 1); y.DType() != Float32 {
			t.Errorf("autocast addcmul: %s", y.DType())
		}
		if y := h.Dot(f32); y.DType() != Float32 {
			t.Errorf("autocast dot: %s", y.DType())
		}
		if y := Cdist(Ones(Shape{2, 3}, Float16), Ones(Shape{2, 3}, Float16), 2); y.DType() != Float32 {
			t.Errorf("autocast cdist: %s", y.DType())
		}
	})
}
