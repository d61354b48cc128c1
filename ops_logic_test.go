package vram

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

var logicDevices = []Device{CPU, Sim(0)}

// TestAnyAllCountNonzero checks the logical reductions over every dtype,
// NaN, empty and 0-dimensional tensors, with and without dims.
func TestAnyAllCountNonzero(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name             string
		make             func(dev Device) *Tensor
		dims             []int
		any, all         []bool
		count            []int64
		shape, keptShape Shape
	}{
		{"float whole", func(d Device) *Tensor { return FromSlice([]float32{0, 1, 0, 2}, Shape{2, 2}, d) }, nil,
			[]bool{true}, []bool{false}, []int64{2}, Shape{}, Shape{1, 1}},
		{"float dim 1", func(d Device) *Tensor { return FromSlice([]float32{0, 0, 3, 2}, Shape{2, 2}, d) }, []int{1},
			[]bool{false, true}, []bool{false, true}, []int64{0, 2}, Shape{2}, Shape{2, 1}},
		{"negative dim", func(d Device) *Tensor { return FromSlice([]float64{0, 1, 5, 2}, Shape{2, 2}, d) }, []int{-2},
			[]bool{true, true}, []bool{false, true}, []int64{1, 2}, Shape{2}, Shape{1, 2}},
		{"NaN is nonzero", func(d Device) *Tensor { return FromSlice([]float64{nan, 0}, nil, d) }, nil,
			[]bool{true}, []bool{false}, []int64{1}, Shape{}, Shape{1}},
		{"all NaN", func(d Device) *Tensor { return FromSlice([]float64{nan, nan}, nil, d) }, nil,
			[]bool{true}, []bool{true}, []int64{2}, Shape{}, Shape{1}},
		{"int64", func(d Device) *Tensor { return FromSlice([]int64{-3, 7}, nil, d) }, nil,
			[]bool{true}, []bool{true}, []int64{2}, Shape{}, Shape{1}},
		{"int32 zeros", func(d Device) *Tensor { return FromSlice([]int32{0, 0}, nil, d) }, nil,
			[]bool{false}, []bool{false}, []int64{0}, Shape{}, Shape{1}},
		{"bool", func(d Device) *Tensor { return FromSlice([]bool{true, false, true, true}, Shape{2, 2}, d) }, []int{0},
			[]bool{true, true}, []bool{true, false}, []int64{2, 1}, Shape{2}, Shape{1, 2}},
		{"bfloat16", func(d Device) *Tensor { return FromSlice([]float32{0.5, -1e-3}, nil, d).BFloat16() }, nil,
			[]bool{true}, []bool{true}, []int64{2}, Shape{}, Shape{1}},
		{"empty", func(d Device) *Tensor { return Zeros(Shape{0, 3}, d) }, nil,
			[]bool{false}, []bool{true}, []int64{0}, Shape{}, Shape{1, 1}},
		{"empty dim", func(d Device) *Tensor { return Zeros(Shape{0, 3}, d) }, []int{0},
			[]bool{false, false, false}, []bool{true, true, true}, []int64{0, 0, 0}, Shape{3}, Shape{1, 3}},
		{"0-d", func(d Device) *Tensor { return Scalar(2, d) }, nil,
			[]bool{true}, []bool{true}, []int64{1}, Shape{}, Shape{}},
		{"0-d dim 0", func(d Device) *Tensor { return Scalar(0, d) }, []int{0},
			[]bool{false}, []bool{false}, []int64{0}, Shape{}, Shape{}},
		{"two dims", func(d Device) *Tensor { return FromSlice([]int64{0, 0, 0, 1, 0, 0, 0, 0}, Shape{2, 2, 2}, d) }, []int{0, 2},
			[]bool{false, true}, []bool{false, false}, []int64{0, 1}, Shape{2}, Shape{1, 2, 1}},
	}
	for _, dev := range logicDevices {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				x := c.make(dev)
				before := x.Float64s()
				for _, r := range []struct {
					name string
					got  *Tensor
					want []bool
					kept bool
				}{
					{"any", x.Any(c.dims...), c.any, false},
					{"all", x.All(c.dims...), c.all, false},
					{"any keepdim", x.AnyKeepDim(c.dims...), c.any, true},
					{"all keepdim", x.AllKeepDim(c.dims...), c.all, true},
				} {
					shape := c.shape
					if r.kept {
						shape = c.keptShape
					}
					if r.got.DType() != Bool || !slices.Equal(r.got.Shape(), shape) || !slices.Equal(r.got.Bools(), r.want) || r.got.Device() != dev {
						t.Errorf("%s: got %s %v %v on %s, want bool %v %v", r.name, r.got.DType(), r.got.Shape(), r.got.Bools(), r.got.Device(), shape, r.want)
					}
				}
				n := x.CountNonzero(c.dims...)
				if n.DType() != Int64 || !slices.Equal(n.Shape(), c.shape) || !slices.Equal(n.Int64s(), c.count) {
					t.Errorf("count_nonzero: got %s %v %v, want int64 %v %v", n.DType(), n.Shape(), n.Int64s(), c.shape, c.count)
				}
				if !closeAll(x.Float64s(), before, 0) {
					t.Errorf("input changed: %v, was %v", x.Float64s(), before)
				}
			})
		}
	}
}

// TestLogicErrors checks that the new ops refuse bad input with the
// package's sentinel errors and the op's name.
func TestLogicErrors(t *testing.T) {
	f := FromSlice([]float32{1, 2, 3, 4}, Shape{2, 2})
	i := FromSlice([]int64{0, 1}, nil)
	cases := []struct {
		name string
		fn   func()
		kind error
		op   string
	}{
		{"any dim out of range", func() { f.Any(2) }, ErrIndex, "any"},
		{"all dim twice", func() { f.All(1, -1) }, ErrArgument, "all"},
		{"count nonzero dim", func() { f.CountNonzero(-3) }, ErrIndex, "count_nonzero"},
		{"any nil", func() { (*Tensor)(nil).Any() }, ErrArgument, "any"},
		{"isclose dtypes", func() { f.IsClose(f.Cast(Float64), 1e-5, 1e-8, false) }, ErrDType, "isclose"},
		{"isclose negative rtol", func() { f.IsClose(f, -1, 0, false) }, ErrArgument, "isclose"},
		{"isclose NaN atol", func() { f.IsClose(f, 0, math.NaN(), false) }, ErrArgument, "isclose"},
		{"isclose shapes", func() { f.IsClose(Zeros(Shape{3}), 0, 0, false) }, ErrShape, "isclose"},
		{"allclose dtypes", func() { f.AllClose(i, 1e-5, 1e-8, false) }, ErrDType, "allclose"},
		{"isclose devices", func() { f.IsClose(Zeros(Shape{2, 2}, Sim(0)), 0, 0, false) }, ErrDevice, "isclose"},
		{"equal devices", func() { f.Equal(Zeros(Shape{2, 2}, Sim(0))) }, ErrDevice, "equal"},
		{"equal host scalar", func() { Scalar(1, Sim(0)).Equal(Scalar(1)) }, ErrDevice, "equal"},
		{"equal nil", func() { f.Equal(nil) }, ErrArgument, "equal"},
		{"trunc bool", func() { FromSlice([]bool{true}, nil).Trunc() }, ErrDType, "trunc"},
		{"frac int", func() { i.Frac() }, ErrDType, "frac"},
		{"lerp int", func() { i.Lerp(i, i) }, ErrDType, "lerp"},
		{"lerp dtypes", func() { f.LerpScalar(f.Cast(Float64), 0.5) }, ErrDType, "lerp"},
		{"lerp weight dtype", func() { f.Lerp(f, f.Cast(Float64)) }, ErrDType, "lerp"},
		{"lerp shapes", func() { f.Lerp(Zeros(Shape{3}), Zeros(Shape{1})) }, ErrShape, "lerp"},
		{"lerp devices", func() { f.LerpScalar(Zeros(Shape{2, 2}, Sim(0)), 0.5) }, ErrDevice, "lerp"},
		{"lerp nil weight", func() { f.Lerp(f, nil) }, ErrArgument, "lerp"},
		{"outer matrix", func() { f.Outer(i) }, ErrShape, "outer"},
		{"outer scalar", func() { Scalar(1).Outer(i) }, ErrShape, "outer"},
		{"one_hot float", func() { f.OneHot(3) }, ErrDType, "one_hot"},
		{"one_hot int32", func() { i.Cast(Int32).OneHot(3) }, ErrDType, "one_hot"},
		{"one_hot negative class", func() { FromSlice([]int64{1, -1}, nil).OneHot(3) }, ErrIndex, "one_hot"},
		{"one_hot too large", func() { FromSlice([]int64{1, 3}, nil).OneHot(3) }, ErrIndex, "one_hot"},
		{"one_hot zero classes", func() { i.OneHot(0) }, ErrIndex, "one_hot"},
		{"one_hot numClasses -2", func() { i.OneHot(-2) }, ErrArgument, "one_hot"},
		{"one_hot inferred count overflows", func() { FromSlice([]int64{0, math.MaxInt64}, nil).OneHot(-1) }, ErrArgument, "one_hot"},
		{"outer host scalar", func() { Ones(Shape{2}, Sim(0)).Outer(Scalar(1)) }, ErrShape, "outer"},
		{"one_hot infer empty", func() { Zeros(Shape{0}, Int64).OneHot(-1) }, ErrArgument, "one_hot"},
		{"one_hot numClasses past any tensor", func() { FromSlice([]int64{1}, nil).OneHot(math.MaxInt) }, ErrShape, "one_hot"},
		{"one_hot result past any tensor", func() { Zeros(Shape{1}, Int64).Expand(4).OneHot(1 << 62) }, ErrShape, "one_hot"},
		{"isinf released", func() { r := Zeros(Shape{2}); r.Release(); r.IsInf() }, ErrReleased, "isinf"},
		{"nonzero released", func() { r := Zeros(Shape{2}); r.Release(); r.Nonzero() }, ErrReleased, "nonzero"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Catch(c.fn)
			var ve *Error
			if !errors.Is(err, c.kind) {
				t.Fatalf("got %v, want %v", err, c.kind)
			}
			if errors.As(err, &ve) && ve.Op != c.op {
				t.Errorf("op %q, want %q (%v)", ve.Op, c.op, err)
			}
		})
	}
}

// TestEqualIsClose checks Equal, IsClose and AllClose against torch.equal,
// torch.isclose and torch.allclose.
func TestEqualIsClose(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, dev := range logicDevices {
		equal := []struct {
			name string
			a, b *Tensor
			want bool
		}{
			{"same", FromSlice([]float32{1, 2}, nil, dev), FromSlice([]float32{1, 2}, nil, dev), true},
			{"differ", FromSlice([]float32{1, 2}, nil, dev), FromSlice([]float32{1, 3}, nil, dev), false},
			{"dtypes promote", FromSlice([]int64{1, 2}, nil, dev), FromSlice([]float32{1, 2}, nil, dev), true},
			{"no broadcast", FromSlice([]float32{1, 1}, nil, dev), Scalar(1, dev), false},
			{"shapes", FromSlice([]float32{1, 2}, Shape{2, 1}, dev), FromSlice([]float32{1, 2}, nil, dev), false},
			{"NaN", FromSlice([]float64{nan}, nil, dev), FromSlice([]float64{nan}, nil, dev), false},
			{"inf", FromSlice([]float64{-inf, inf}, nil, dev), FromSlice([]float64{-inf, inf}, nil, dev), true},
			{"empty", Zeros(Shape{0, 2}, dev), Zeros(Shape{0, 2}, Int64, dev), true},
			{"empty shapes", Zeros(Shape{0, 2}, dev), Zeros(Shape{2, 0}, dev), false},
			{"0-d", Scalar(3, dev), Scalar(3, Float16, dev), true},
			{"bool", FromSlice([]bool{true, false}, nil, dev), FromSlice([]int64{1, 0}, nil, dev), true},
			{"signed zeros", FromSlice([]float64{0}, nil, dev), FromSlice([]float64{math.Copysign(0, -1)}, nil, dev), true},
		}
		for _, c := range equal {
			if got := c.a.Equal(c.b); got != c.want {
				t.Errorf("%s equal %s: got %v, want %v", dev, c.name, got, c.want)
			}
		}
		close := []struct {
			name       string
			a, b       *Tensor
			rtol, atol float64
			equalNaN   bool
			want       []bool
		}{
			{"defaults", FromSlice([]float64{1, 1, 1e-9, 0}, nil, dev), FromSlice([]float64{1 + 1e-6, 1.001, 0, 1e-7}, nil, dev),
				IsCloseRTol, IsCloseATol, false, []bool{true, false, true, false}},
			{"rtol uses b", FromSlice([]float64{100, 1}, nil, dev), FromSlice([]float64{1, 100}, nil, dev), 0.99, 0, false, []bool{false, true}},
			{"NaN", FromSlice([]float64{nan, nan, 1}, nil, dev), FromSlice([]float64{nan, 1, nan}, nil, dev), 1, 1, false, []bool{false, false, false}},
			{"equal NaN", FromSlice([]float64{nan, nan, 1}, nil, dev), FromSlice([]float64{nan, 1, nan}, nil, dev), 1, 1, true, []bool{true, false, false}},
			{"inf", FromSlice([]float64{inf, inf, -inf, 1e308}, nil, dev), FromSlice([]float64{inf, -inf, -inf, inf}, nil, dev), 1, inf, false, []bool{true, false, true, false}},
			{"exact tolerance", FromSlice([]float64{1, 2}, nil, dev), FromSlice([]float64{1, 2.5}, nil, dev), 0, 0, false, []bool{true, false}},
			{"int64", FromSlice([]int64{10, 10}, nil, dev), FromSlice([]int64{11, 12}, nil, dev), 0, 1, false, []bool{true, false}},
			{"int64 large", FromSlice([]int64{1 << 60}, nil, dev), FromSlice([]int64{1<<60 + 1}, nil, dev), 0, 0, false, []bool{false}},
			{"bool", FromSlice([]bool{true, false}, nil, dev), FromSlice([]bool{false, false}, nil, dev), 0, 1, false, []bool{true, true}},
			{"float16", FromSlice([]float32{1, 1}, nil, dev).Half(), FromSlice([]float32{1.001, 1.01}, nil, dev).Half(), 0.005, 0, false, []bool{true, false}},
			{"broadcast", FromSlice([]float32{1, 2}, Shape{2, 1}, dev), FromSlice([]float32{1, 2, 3}, nil, dev), 0, 0.5, false,
				[]bool{true, false, false, false, true, false}},
			{"host scalar", FromSlice([]float32{1, 2}, nil, dev), Scalar(1), 0, 0, false, []bool{true, false}},
		}
		for _, c := range close {
			got := c.a.IsClose(c.b, c.rtol, c.atol, c.equalNaN)
			if got.DType() != Bool || got.Device() != dev || !slices.Equal(got.Bools(), c.want) {
				t.Errorf("%s isclose %s: got %s %v on %s, want %v", dev, c.name, got.DType(), got.Bools(), got.Device(), c.want)
			}
			all := !slices.Contains(c.want, false)
			if a := c.a.AllClose(c.b, c.rtol, c.atol, c.equalNaN); a != all {
				t.Errorf("%s allclose %s: got %v, want %v", dev, c.name, a, all)
			}
		}
	}
}

// TestValueTests checks IsInf, IsPosInf, IsNegInf and IsFinite over the
// dtypes, NaN, signed zeros, 0-dimensional and empty tensors.
func TestValueTests(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	vals := []float64{0, math.Copysign(0, -1), 1, -2.5, inf, -inf, nan, math.MaxFloat64}
	ops := []struct {
		name string
		f    func(*Tensor) *Tensor
		ref  func(float64) bool
		ints bool
	}{
		{"isinf", (*Tensor).IsInf, func(v float64) bool { return math.IsInf(v, 0) }, false},
		{"isposinf", (*Tensor).IsPosInf, func(v float64) bool { return math.IsInf(v, 1) }, false},
		{"isneginf", (*Tensor).IsNegInf, func(v float64) bool { return math.IsInf(v, -1) }, false},
		{"isfinite", (*Tensor).IsFinite, func(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) }, true},
	}
	for _, dev := range logicDevices {
		for _, o := range ops {
			for _, dt := range []DType{Float64, Float32, Float16, BFloat16} {
				x := FromSlice(vals, nil, dev).Cast(dt) // MaxFloat64 rounds to inf below float64
				xs := x.Float64s()
				want := make([]bool, len(xs))
				for i, v := range xs {
					want[i] = o.ref(v)
				}
				got := o.f(x)
				if got.DType() != Bool || got.Device() != dev || !slices.Equal(got.Bools(), want) {
					t.Errorf("%s %s %s: got %s %v, want %v", dev, o.name, dt, got.DType(), got.Bools(), want)
				}
			}
			for _, x := range []*Tensor{FromSlice([]int64{0, math.MaxInt64}, nil, dev), FromSlice([]bool{true, false}, nil, dev), FromSlice([]int32{-1, 0}, nil, dev)} {
				got := o.f(x)
				if got.DType() != Bool || !slices.Equal(got.Bools(), []bool{o.ints, o.ints}) {
					t.Errorf("%s %s %s: got %s %v", dev, o.name, x.DType(), got.DType(), got.Bools())
				}
			}
			if got := o.f(Scalar(inf, dev)); len(got.Shape()) != 0 || got.Bools()[0] != o.ref(inf) {
				t.Errorf("%s %s 0-d: got %v %v", dev, o.name, got.Shape(), got.Bools())
			}
			if got := o.f(Zeros(Shape{2, 0}, dev)); !slices.Equal(got.Shape(), Shape{2, 0}) {
				t.Errorf("%s %s empty: got %v", dev, o.name, got.Shape())
			}
		}
	}
}

// TestNanToNum checks NanToNum's defaults per dtype, given replacements,
// integer inputs and its gradient.
func TestNanToNum(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	vals := []float64{nan, inf, -inf, 1.5, math.Copysign(0, -1)}
	cases := []struct {
		name                string
		dt                  DType
		nan, posinf, neginf float64
		want                []float64
	}{
		{"float64 defaults", Float64, 0, inf, -inf, []float64{0, math.MaxFloat64, -math.MaxFloat64, 1.5, math.Copysign(0, -1)}},
		{"float32 defaults", Float32, 0, inf, -inf, []float64{0, math.MaxFloat32, -math.MaxFloat32, 1.5, math.Copysign(0, -1)}},
		{"float16 defaults", Float16, 0, inf, -inf, []float64{0, 65504, -65504, 1.5, math.Copysign(0, -1)}},
		{"bfloat16 defaults", BFloat16, 0, inf, -inf, []float64{0, 0x1.fep127, -0x1.fep127, 1.5, math.Copysign(0, -1)}},
		{"given", Float32, -1, 7, -7, []float64{-1, 7, -7, 1.5, math.Copysign(0, -1)}},
		{"float16 overflow rounds", Float16, 1e6, inf, -inf, []float64{inf, 65504, -65504, 1.5, math.Copysign(0, -1)}},
		{"keep NaN", Float64, nan, 1, -1, []float64{nan, 1, -1, 1.5, math.Copysign(0, -1)}},
	}
	for _, dev := range logicDevices {
		for _, c := range cases {
			x := FromSlice(vals, nil, dev).Cast(c.dt)
			got := x.NanToNum(c.nan, c.posinf, c.neginf)
			if got.DType() != c.dt || got.Device() != dev || !closeAll(got.Float64s(), c.want, 0) {
				t.Errorf("%s %s: got %s %v, want %v", dev, c.name, got.DType(), got.Float64s(), c.want)
			}
			if xs := x.Float64s(); !math.IsNaN(xs[0]) || !math.IsInf(xs[1], 1) {
				t.Errorf("%s %s: input changed to %v", dev, c.name, xs)
			}
		}
		i := FromSlice([]int64{3, -4}, nil, dev)
		got := i.NanToNum(0, inf, -inf)
		if got.DType() != Int64 || !slices.Equal(got.Int64s(), []int64{3, -4}) {
			t.Errorf("%s int64: got %s %v", dev, got.DType(), got.Int64s())
		}
		got.FillInPlace(9)
		if i.Int64s()[0] != 3 {
			t.Errorf("%s int64: the result shares the input's storage", dev)
		}
		if s := Scalar(nan, dev).NanToNum(2, inf, -inf); len(s.Shape()) != 0 || s.Item() != 2 {
			t.Errorf("%s 0-d: got %v %v", dev, s.Shape(), s.Float64s())
		}
	}
	// The gradient is one where x is finite and zero where it was replaced.
	x := FromSlice([]float64{nan, 2, inf, -inf, -3}, nil, WithGrad())
	x.NanToNum(0, inf, -inf).Sum().Backward()
	if g := x.Grad().Float64s(); !closeAll(g, []float64{0, 1, 0, 0, 1}, 0) {
		t.Errorf("gradient: %v", g)
	}
}

// TestTruncFrac checks Trunc and Frac against math.Trunc over special
// values, the dtypes and their gradients.
func TestTruncFrac(t *testing.T) {
	inf, nan, nz := math.Inf(1), math.NaN(), math.Copysign(0, -1)
	vals := []float64{2.7, -2.7, 0.5, -0.5, 3, -3, 0, nz, 1e20, -1e20, inf, -inf, nan, 4503599627370497.5}
	for _, dev := range logicDevices {
		for _, dt := range []DType{Float64, Float32, Float16, BFloat16} {
			x := FromSlice(vals, nil, dev).Cast(dt)
			xs := x.Float64s()
			tr, fr := make([]float64, len(xs)), make([]float64, len(xs))
			for i, v := range xs {
				tr[i] = math.Trunc(v)
				fr[i] = v - math.Trunc(v)
			}
			if got := x.Trunc(); got.DType() != dt || !closeAll(got.Float64s(), tr, 0) {
				t.Errorf("%s trunc %s: got %s %v, want %v", dev, dt, got.DType(), got.Float64s(), tr)
			}
			if got := x.Frac(); got.DType() != dt || !closeAll(got.Float64s(), fr, 0) {
				t.Errorf("%s frac %s: got %s %v, want %v", dev, dt, got.DType(), got.Float64s(), fr)
			}
		}
		for _, x := range []*Tensor{FromSlice([]int64{-7, 7}, nil, dev), FromSlice([]int32{-7, 7}, nil, dev)} {
			got := x.Trunc()
			if got.DType() != x.DType() || !slices.Equal(got.Int64s(), []int64{-7, 7}) {
				t.Errorf("%s trunc %s: got %s %v", dev, x.DType(), got.DType(), got.Int64s())
			}
		}
		if got := Scalar(-1.25, dev).Frac(); len(got.Shape()) != 0 || got.Item() != -0.25 {
			t.Errorf("%s frac 0-d: got %v %v", dev, got.Shape(), got.Float64s())
		}
	}
	x := FromSlice([]float64{-1.5, 0.25, 3}, nil, WithGrad())
	x.Trunc().Sum().Backward()
	if g := x.Grad().Float64s(); !closeAll(g, []float64{0, 0, 0}, 0) {
		t.Errorf("trunc gradient: %v", g)
	}
	y := FromSlice([]float64{-1.5, 0.25, 3}, nil, WithGrad())
	y.Frac().Sum().Backward()
	if g := y.Grad().Float64s(); !closeAll(g, []float64{1, 1, 1}, 0) {
		t.Errorf("frac gradient: %v", g)
	}
}

// TestLerp checks Lerp and LerpScalar against PyTorch's two formulas,
// their broadcasting, dtypes and gradients.
func TestLerp(t *testing.T) {
	ref := func(s, e, w float64) float64 {
		if math.Abs(w) < 0.5 {
			return s + w*(e-s)
		}
		return e - (e-s)*(1-w)
	}
	ss := []float64{1, -2, 0.1, 5, 0, 1e300}
	es := []float64{3, 4, 0.3, 5, math.Inf(1), -1e300}
	ws := []float64{0, 0.25, 1, -0.5, 0.75, 2}
	for _, dev := range logicDevices {
		want := make([]float64, len(ss))
		for i := range ss {
			want[i] = ref(ss[i], es[i], ws[i])
		}
		s, e, w := FromSlice(ss, nil, dev), FromSlice(es, nil, dev), FromSlice(ws, nil, dev)
		if got := s.Lerp(e, w); got.DType() != Float64 || got.Device() != dev || !closeAll(got.Float64s(), want, 0) {
			t.Errorf("%s lerp: got %v, want %v", dev, got.Float64s(), want)
		}
		for _, wv := range []float64{0, 0.3, 0.5, 1, -1, math.NaN()} {
			want := make([]float64, len(ss))
			for i := range ss {
				want[i] = ref(ss[i], es[i], wv)
			}
			if got := s.LerpScalar(e, wv); !closeAll(got.Float64s(), want, 0) {
				t.Errorf("%s lerp scalar %v: got %v, want %v", dev, wv, got.Float64s(), want)
			}
		}
		// Weight 1 gives end exactly, in float16 too.
		h := FromSlice([]float32{0.1, 1000}, nil, dev).Half()
		he := FromSlice([]float32{0.3, -7}, nil, dev).Half()
		if got := h.LerpScalar(he, 1); got.DType() != Float16 || !slices.Equal(got.Float64s(), he.Float64s()) {
			t.Errorf("%s float16 weight 1: got %s %v, want %v", dev, got.DType(), got.Float64s(), he.Float64s())
		}
		b := Zeros(Shape{2, 1}, dev).Lerp(Ones(Shape{3}, dev), Scalar(0.25))
		if !slices.Equal(b.Shape(), Shape{2, 3}) || !closeAll(b.Float64s(), []float64{0.25, 0.25, 0.25, 0.25, 0.25, 0.25}, 0) {
			t.Errorf("%s broadcast: %v %v", dev, b.Shape(), b.Float64s())
		}
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Lerp(xs[1], xs[2]) },
		rnd(41, 2, 3), rnd(42, 3), FromSlice([]float64{0.1, 0.9, -0.3, 0.5, 1.7, 0.49}, Shape{2, 3}))
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Lerp(xs[1], xs[2]) }, rnd(43, 3), rnd(44, 3), rnd(45, 2, 1))
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].LerpScalar(xs[1], 0.7) }, rnd(46, 2, 3), rnd(47, 2, 3))
	// The weight's gradient is end - start even where the other formula
	// would overflow.
	s := FromSlice([]float64{0}, nil, WithGrad())
	w := FromSlice([]float64{0.2}, nil, WithGrad())
	s.Lerp(FromSlice([]float64{math.Inf(1)}, nil), w).Sum().Backward()
	if g := w.Grad().Item(); !math.IsInf(g, 1) {
		t.Errorf("weight gradient toward +Inf: %v", g)
	}
}

// TestOuterOneHotNonzero checks Outer, OneHot, Nonzero and Argwhere.
func TestOuterOneHotNonzero(t *testing.T) {
	for _, dev := range logicDevices {
		o := FromSlice([]float32{1, 2}, nil, dev).Outer(FromSlice([]int64{3, 4, 5}, nil, dev))
		if o.DType() != Float32 || !slices.Equal(o.Shape(), Shape{2, 3}) || !closeAll(o.Float64s(), []float64{3, 4, 5, 6, 8, 10}, 0) {
			t.Errorf("%s outer: %s %v %v", dev, o.DType(), o.Shape(), o.Float64s())
		}
		if e := Zeros(Shape{0}, dev).Outer(Zeros(Shape{2}, dev)); !slices.Equal(e.Shape(), Shape{0, 2}) {
			t.Errorf("%s outer empty: %v", dev, e.Shape())
		}
		bo := FromSlice([]bool{true, false}, nil, dev).Outer(FromSlice([]bool{true}, nil, dev))
		if bo.DType() != Bool || !slices.Equal(bo.Bools(), []bool{true, false}) {
			t.Errorf("%s outer bool: %s %v", dev, bo.DType(), bo.Bools())
		}

		hot := []struct {
			name  string
			x     *Tensor
			n     int
			shape Shape
			want  []int64
		}{
			{"given", FromSlice([]int64{0, 2}, nil, dev), 4, Shape{2, 4}, []int64{1, 0, 0, 0, 0, 0, 1, 0}},
			{"inferred", FromSlice([]int64{1, 0, 1, 2}, Shape{2, 2}, dev), -1, Shape{2, 2, 3},
				[]int64{0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1}},
			{"0-d", Scalar(1, Int64, dev), -1, Shape{2}, []int64{0, 1}},
			{"empty", Zeros(Shape{0, 2}, Int64, dev), 3, Shape{0, 2, 3}, []int64{}},
			{"empty zero classes", Zeros(Shape{0}, Int64, dev), 0, Shape{0, 0}, []int64{}},
			// Nothing to compare: no table of 2^40 classes is made.
			{"empty, 2^40 classes", Zeros(Shape{0, 2}, Int64, dev), 1 << 40, Shape{0, 2, 1 << 40}, []int64{}},
		}
		for _, c := range hot {
			got := c.x.OneHot(c.n)
			if got.DType() != Int64 || got.Device() != dev || !slices.Equal(got.Shape(), c.shape) || !slices.Equal(got.Int64s(), c.want) {
				t.Errorf("%s one_hot %s: got %s %v %v, want %v %v", dev, c.name, got.DType(), got.Shape(), got.Int64s(), c.shape, c.want)
			}
		}

		nz := []struct {
			name  string
			x     *Tensor
			shape Shape
			want  []int64
		}{
			{"matrix", FromSlice([]float32{0, 1, 2, 0, 0, 3}, Shape{2, 3}, dev), Shape{3, 2}, []int64{0, 1, 0, 2, 1, 2}},
			{"NaN", FromSlice([]float64{math.NaN(), 0}, nil, dev), Shape{1, 1}, []int64{0}},
			{"bool", FromSlice([]bool{false, true, true}, nil, dev), Shape{2, 1}, []int64{1, 2}},
			{"none", Zeros(Shape{2, 2}, Int64, dev), Shape{0, 2}, []int64{}},
			{"empty", Zeros(Shape{0, 3}, dev), Shape{0, 2}, []int64{}},
			{"0-d nonzero", Scalar(5, dev), Shape{1, 0}, []int64{}},
			{"0-d zero", Scalar(0, dev), Shape{0, 0}, []int64{}},
			{"3-d", FromSlice([]int64{0, 0, 0, 1, 0, 0, 1, 0}, Shape{2, 2, 2}, dev), Shape{2, 3}, []int64{0, 1, 1, 1, 1, 0}},
			{"transposed", FromSlice([]int64{1, 0, 0, 2}, Shape{2, 2}, dev).Permute(1, 0).Add(FromSlice([]int64{0, 1, 0, 0}, Shape{2, 2}, dev)), Shape{3, 2}, []int64{0, 0, 0, 1, 1, 1}},
		}
		for _, c := range nz {
			for name, got := range map[string]*Tensor{"nonzero": c.x.Nonzero(), "argwhere": c.x.Argwhere()} {
				if got.DType() != Int64 || got.Device() != dev || !slices.Equal(got.Shape(), c.shape) || !slices.Equal(got.Int64s(), c.want) {
					t.Errorf("%s %s %s: got %s %v %v, want %v %v", dev, name, c.name, got.DType(), got.Shape(), got.Int64s(), c.shape, c.want)
				}
			}
		}
	}
	a := FromSlice([]float64{1, -2}, nil)
	b := FromSlice([]float64{0.5, 3, -1}, nil)
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Outer(xs[1]) }, a, b)
}

// TestClampMinMax checks ClampMin and ClampMax against Clamp with one
// bound, their dtypes and gradients.
func TestClampMinMax(t *testing.T) {
	for _, dev := range logicDevices {
		x := FromSlice([]float32{-2, 0.5, 3, float32(math.NaN())}, nil, dev)
		if got := x.ClampMin(0); !closeAll(got.Float64s(), []float64{0, 0.5, 3, math.NaN()}, 0) {
			t.Errorf("%s clamp_min: %v", dev, got.Float64s())
		}
		if got := x.ClampMax(1); !closeAll(got.Float64s(), []float64{-2, 0.5, 1, math.NaN()}, 0) {
			t.Errorf("%s clamp_max: %v", dev, got.Float64s())
		}
		if got := FromSlice([]int64{-3, 4}, nil, dev).ClampMin(0); got.DType() != Int64 || !slices.Equal(got.Int64s(), []int64{0, 4}) {
			t.Errorf("%s clamp_min int64: %s %v", dev, got.DType(), got.Int64s())
		}
	}
	x := FromSlice([]float64{-2, 0.5, 3}, nil, WithGrad())
	x.ClampMin(0).Add(x.ClampMax(1)).Sum().Backward()
	if g := x.Grad().Float64s(); !closeAll(g, []float64{1, 2, 1}, 0) {
		t.Errorf("gradients: %v", g)
	}
}

// TestLogicalXorNonzeroTuple checks LogicalXor over dtypes, NaN and
// broadcasting, and NonzeroTuple against Nonzero's columns.
func TestLogicalXorNonzeroTuple(t *testing.T) {
	for _, dev := range logicDevices {
		xor := []struct {
			name  string
			a, b  *Tensor
			shape Shape
			want  []bool
		}{
			{"bool", FromSlice([]bool{true, true, false, false}, nil, dev), FromSlice([]bool{true, false, true, false}, nil, dev),
				Shape{4}, []bool{false, true, true, false}},
			{"mixed dtypes", FromSlice([]float64{math.NaN(), 0, 2}, nil, dev), FromSlice([]int64{0, 0, -1}, nil, dev),
				Shape{3}, []bool{true, false, false}},
			{"broadcast", FromSlice([]int32{0, 5}, Shape{2, 1}, dev), FromSlice([]bool{true, false}, nil, dev),
				Shape{2, 2}, []bool{true, false, false, true}},
			{"host scalar", FromSlice([]float32{0, 1}, nil, dev), Scalar(1), Shape{2}, []bool{true, false}},
			{"empty", Zeros(Shape{0}, dev), Zeros(Shape{1}, dev), Shape{0}, []bool{}},
		}
		for _, c := range xor {
			got := c.a.LogicalXor(c.b)
			if got.DType() != Bool || got.Device() != dev || !slices.Equal(got.Shape(), c.shape) || !slices.Equal(got.Bools(), c.want) {
				t.Errorf("%s logical_xor %s: got %s %v %v, want %v %v", dev, c.name, got.DType(), got.Shape(), got.Bools(), c.shape, c.want)
			}
		}
		tuple := []struct {
			name string
			x    *Tensor
			want [][]int64
		}{
			{"matrix", FromSlice([]float32{0, 1, 2, 0, 0, 3}, Shape{2, 3}, dev), [][]int64{{0, 0, 1}, {1, 2, 2}}},
			{"vector", FromSlice([]bool{false, true}, nil, dev), [][]int64{{1}}},
			{"none", Zeros(Shape{2, 2}, dev), [][]int64{{}, {}}},
			{"0-d", Scalar(3, dev), [][]int64{{0}}},
			{"0-d zero", Scalar(0, dev), [][]int64{{}}},
		}
		for _, c := range tuple {
			got := c.x.NonzeroTuple()
			if len(got) != len(c.want) {
				t.Errorf("%s nonzero tuple %s: %d tensors, want %d", dev, c.name, len(got), len(c.want))
				continue
			}
			for d, g := range got {
				if g.DType() != Int64 || g.Device() != dev || !slices.Equal(g.Shape(), Shape{len(c.want[d])}) || !slices.Equal(g.Int64s(), c.want[d]) {
					t.Errorf("%s nonzero tuple %s dim %d: got %s %v %v, want %v", dev, c.name, d, g.DType(), g.Shape(), g.Int64s(), c.want[d])
				}
			}
		}
	}
	if err := Catch(func() { Zeros(Shape{2}).LogicalXor(Zeros(Shape{3})) }); !errors.Is(err, ErrShape) {
		t.Errorf("logical_xor shapes: %v", err)
	}
	if err := Catch(func() { Zeros(Shape{2}).LogicalXor(Zeros(Shape{2}, Sim(0))) }); !errors.Is(err, ErrDevice) {
		t.Errorf("logical_xor devices: %v", err)
	}
}

// TestLerpDTypeErrorNamesDTypes checks that a dtype mismatch in Lerp names
// the operands' dtypes in words.
func TestLerpDTypeErrorNamesDTypes(t *testing.T) {
	tests := []struct {
		name string
		run  func(a, b *Tensor)
		want string
	}{
		{"scalar weight", func(a, b *Tensor) { a.LerpScalar(b, 0.5) }, "float32, float16"},
		{"tensor weight", func(a, b *Tensor) { a.Lerp(b, a) }, "float32, float16, float32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Zeros(Shape{2})
			b := Zeros(Shape{2}, Float16)
			defer a.Release()
			defer b.Release()
			err := Catch(func() { tt.run(a, b) })
			if !errors.Is(err, ErrDType) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrDType naming %s", err, tt.want)
			}
		})
	}
}
