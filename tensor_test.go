package vram

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
)

func TestFactories(t *testing.T) {
	tests := []struct {
		name  string
		t     *Tensor
		shape Shape
		dtype DType
		vals  []float64
	}{
		{"zeros", Zeros(Shape{2, 2}), Shape{2, 2}, Float32, []float64{0, 0, 0, 0}},
		{"ones f64", Ones(Shape{3}, Float64), Shape{3}, Float64, []float64{1, 1, 1}},
		{"full int", Full(Shape{2}, 7, Int64), Shape{2}, Int64, []float64{7, 7}},
		{"full bf16", Full(Shape{1}, 1.5, BFloat16), Shape{1}, BFloat16, []float64{1.5}},
		{"full f16", Full(Shape{1}, -2.25, Float16), Shape{1}, Float16, []float64{-2.25}},
		{"arange", Arange(0, 5, 2), Shape{3}, Float32, []float64{0, 2, 4}},
		{"arange down", Arange(3, 0, -1, Int32), Shape{3}, Int32, []float64{3, 2, 1}},
		{"arange empty", Arange(3, 3, 1), Shape{0}, Float32, []float64{}},
		{"scalar", Scalar(3.5), Shape{}, Float32, []float64{3.5}},
		{"from slice", FromSlice([]int{1, 2, 3, 4}, Shape{2, 2}), Shape{2, 2}, Int64, []float64{1, 2, 3, 4}},
		{"from bools", FromSlice([]bool{true, false}, nil), Shape{2}, Bool, []float64{1, 0}},
		{"from slice cast", FromSlice([]float64{1.7, -1.7}, nil, Int32), Shape{2}, Int32, []float64{1, -1}},
		{"empty zero size", Empty(Shape{0, 3}), Shape{0, 3}, Float32, []float64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.t.Shape(), tc.shape) || tc.t.DType() != tc.dtype || tc.t.Device() != CPU {
				t.Fatalf("got %v %v %v", tc.t.Shape(), tc.t.DType(), tc.t.Device())
			}
			if got := tc.t.Float64s(); !reflect.DeepEqual(got, tc.vals) {
				t.Fatalf("values %v, want %v", got, tc.vals)
			}
		})
	}
}

func TestRandomIsSeeded(t *testing.T) {
	a := Randn(Shape{5}, WithGenerator(NewGenerator(3))).Float64s()
	b := Randn(Shape{5}, WithGenerator(NewGenerator(3))).Float64s()
	c := Randn(Shape{5}, WithGenerator(NewGenerator(4))).Float64s()
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, c) {
		t.Fatalf("seeded generators: %v %v %v", a, b, c)
	}
	u := Rand(Shape{1000}, Float64)
	if mn, mx := u.Min().Item(), u.Max().Item(); mn < 0 || mx >= 1 {
		t.Fatalf("rand outside [0,1): %v %v", mn, mx)
	}
	if err := Catch(func() { Rand(Shape{2}, Int64) }); !errors.Is(err, ErrDType) {
		t.Fatalf("Rand int64: %v", err)
	}
}

func TestNewConstructorsInherit(t *testing.T) {
	devs := []Device{CPU}
	if Sim(0).Available() {
		devs = append(devs, Sim(0))
	}
	for _, d := range devs {
		for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64} {
			base := Ones(Shape{2}, d, dt)
			for name, n := range map[string]*Tensor{
				"zeros": base.NewZeros(Shape{3, 4}), "ones": base.NewOnes(Shape{3, 4}), "full": base.NewFull(Shape{3, 4}, 2),
				"empty": base.NewEmpty(Shape{3, 4}), "tensor": base.NewTensor([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Shape{3, 4}),
			} {
				if n.Device() != d || n.DType() != dt || !reflect.DeepEqual(n.Shape(), Shape{3, 4}) {
					t.Errorf("%s on %v %v: got %v %v %v", name, d, dt, n.Device(), n.DType(), n.Shape())
				}
			}
		}
	}
}

func TestViews(t *testing.T) {
	x := Arange(0, 24, 1).Reshape(2, 3, 4)
	tests := []struct {
		name  string
		v     *Tensor
		shape Shape
		vals  []float64
		view  bool
	}{
		{"reshape", x.Reshape(4, -1), Shape{4, 6}, nil, true},
		{"transpose", x.Transpose(0, 2), Shape{4, 3, 2}, nil, true},
		{"narrow", x.Narrow(2, 1, 2).Narrow(1, 2, 1), Shape{2, 1, 2}, []float64{9, 10, 21, 22}, true},
		{"slice", x.Select(0, 0).Select(0, 0).Slice(0, 0, 4, 3), Shape{2}, []float64{0, 3}, true},
		{"select", x.Select(1, -1), Shape{2, 4}, []float64{8, 9, 10, 11, 20, 21, 22, 23}, true},
		{"permute", x.Permute(1, 0, 2).Select(0, 1).Select(1, 0), Shape{2}, []float64{4, 16}, true},
		{"unsqueeze", x.Unsqueeze(1), Shape{2, 1, 3, 4}, nil, true},
		{"squeeze", x.Unsqueeze(0).Unsqueeze(-1).Squeeze(), Shape{2, 3, 4}, nil, true},
		{"squeeze non-1 kept", x.Squeeze(0), Shape{2, 3, 4}, nil, true},
		{"expand", Arange(0, 3, 1).Reshape(3, 1).Expand(3, 2), Shape{3, 2}, []float64{0, 0, 1, 1, 2, 2}, false},
		{"transpose then reshape copies", x.Transpose(1, 2).Reshape(2, 12).Narrow(1, 0, 3), Shape{2, 3}, []float64{0, 4, 8, 12, 16, 20}, false},
		{"flatten", x.Flatten(1, 2), Shape{2, 12}, nil, true},
		{"mT", x.MT(), Shape{2, 4, 3}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.v.Shape(), tc.shape) {
				t.Fatalf("shape %v, want %v", tc.v.Shape(), tc.shape)
			}
			if tc.vals != nil && !reflect.DeepEqual(tc.v.Float64s(), tc.vals) {
				t.Fatalf("values %v, want %v", tc.v.Float64s(), tc.vals)
			}
			if tc.view && !tc.v.SharesStorage(x) {
				t.Fatal("expected a view of x")
			}
		})
	}
	// Writing through a view changes the base.
	v := x.Narrow(0, 1, 1)
	v.FillInPlace(-1)
	if got := x.Sum().Item(); got != float64(66-12) {
		t.Fatalf("sum after writing through view: %v", got)
	}
	c := x.Transpose(0, 1)
	if c.IsContiguous() || !c.Contiguous().IsContiguous() {
		t.Fatal("contiguity")
	}
	if err := Catch(func() { c.View(-1) }); !errors.Is(err, ErrShape) {
		t.Fatalf("View of a transposed tensor: %v", err)
	}
}

func TestShapeErrors(t *testing.T) {
	a, b := Ones(Shape{2, 3}), Ones(Shape{4, 3})
	cases := map[string]func(){
		"add":       func() { a.Add(b) },
		"matmul":    func() { a.MatMul(b) },
		"reshape":   func() { a.Reshape(4, 2) },
		"cat":       func() { Cat([]*Tensor{a, Ones(Shape{2, 2})}, 0) },
		"expand":    func() { a.Expand(3, 3) },
		"item":      func() { a.Item() },
		"narrow":    func() { a.Narrow(1, 2, 2) },
		"dim":       func() { a.Sum(2) },
		"neg shape": func() { Zeros(Shape{-1}) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			err := Catch(f)
			var ve *Error
			if !errors.As(err, &ve) || !(errors.Is(err, ErrShape) || errors.Is(err, ErrIndex)) {
				t.Fatalf("got %v, want a shape or index error", err)
			}
		})
	}
	err := Catch(func() { a.Add(b) })
	if !contains(err.Error(), "[2, 3]") || !contains(err.Error(), "[4, 3]") {
		t.Fatalf("message does not name the shapes: %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("Catch swallowed a foreign panic: %v", r)
			}
		}()
		Catch(func() { panic("boom") })
	}()
}

func TestOps(t *testing.T) {
	a := FromSlice([]float64{1, -2, 3, -4, 5, -6}, Shape{2, 3})
	b := FromSlice([]float64{1, 2, 3}, nil)
	tests := []struct {
		name string
		got  *Tensor
		want []float64
	}{
		{"add broadcast", a.Add(b), []float64{2, 0, 6, -3, 7, -3}},
		{"mul", a.Mul(b), []float64{1, -4, 9, -4, 10, -18}},
		{"div", a.Div(b), []float64{1, -1, 1, -4, 2.5, -2}},
		{"relu", a.Relu(), []float64{1, 0, 3, 0, 5, 0}},
		{"abs", a.Abs(), []float64{1, 2, 3, 4, 5, 6}},
		{"sum dim", a.Sum(1), []float64{2, -5}},
		{"sum keepdim", a.SumKeepDim(0), []float64{-3, 3, -3}},
		{"mean", a.Mean(), []float64{-0.5}},
		{"max", a.Max(0), []float64{1, 5, 3}},
		{"min", a.Min(1), []float64{-2, -6}},
		{"argmax", a.ArgMax(1, false), []float64{2, 1}},
		{"var", FromSlice([]float64{1, 2, 3, 4}, nil).Var(nil, 1, false), []float64{5.0 / 3}},
		{"var pop", FromSlice([]float64{1, 2, 3, 4}, nil).Var(nil, 0, false), []float64{1.25}},
		{"matmul", a.MatMul(b), []float64{6, -12}},
		{"gt", a.GtScalar(0), []float64{1, 0, 1, 0, 1, 0}},
		{"eq", b.Eq(FromSlice([]float64{1, 0, 3}, nil)), []float64{1, 0, 1}},
		{"where", Where(a.GtScalar(0), a, FromSlice([]float64{0}, nil)), []float64{1, 0, 3, 0, 5, 0}},
		{"softmax rows sum to 1", a.Softmax(1).Sum(1), []float64{1, 1}},
		{"cat", Cat([]*Tensor{b, b}, 0), []float64{1, 2, 3, 1, 2, 3}},
		{"stack", Stack([]*Tensor{b, b}, 1).Sum(1), []float64{2, 4, 6}},
		{"int sum is int64", FromSlice([]int32{1, 2}, nil).Sum(), []float64{3}},
		{"int div is float", FromSlice([]int64{1, 2}, nil).DivScalar(2), []float64{0.5, 1}},
		{"cast to int truncates", FromSlice([]float64{1.9, -1.9}, nil).Cast(Int64), []float64{1, -1}},
		{"clamp", a.Clamp(-1, 2), []float64{1, -1, 2, -1, 2, -1}},
		{"embedding", Embedding(FromSlice([]int64{2, 0}, nil), a.T()), []float64{3, -6, 1, -4}},
		{"cross entropy uniform", CrossEntropy(Zeros(Shape{2, 4}, Float64), FromSlice([]int64{1, 3}, nil)), []float64{math.Log(4)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.got.Float64s()
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	if FromSlice([]int32{1, 2}, nil).Sum().DType() != Int64 {
		t.Fatal("int32 sum should be int64")
	}
	if got := fmt.Sprint(FromSlice([]float32{1, 2}, nil)); got != "Tensor([1, 2], shape=[2], dtype=float32, device=cpu)" {
		t.Fatalf("String: %s", got)
	}
}

func TestHalfPrecision(t *testing.T) {
	for _, dt := range []DType{Float16, BFloat16} {
		x := FromSlice([]float32{1, 2, 3, 4}, Shape{2, 2}, dt)
		y := x.MatMul(x).Add(x).Sqrt().Square()
		if y.DType() != dt {
			t.Fatalf("%v: result dtype %v", dt, y.DType())
		}
		want := []float64{8, 12, 18, 26}
		for i, v := range y.Float64s() {
			if math.Abs(v-want[i]) > 0.02*want[i] {
				t.Fatalf("%v: got %v, want %v", dt, y.Float64s(), want)
			}
		}
	}
}

// TestValuesThatOverflowTheDType checks that the factories and fills refuse
// a value their dtype cannot hold, as PyTorch's full and fill_ do, rather
// than store a wrapped one, and accept every value it can hold (an integer
// dtype truncates a value within its range toward zero, but refuses a
// fraction beyond its last value, 127.9 for int8, as c10::overflows
// compares the value itself; floats take infinities and NaN).
func TestValuesThatOverflowTheDType(t *testing.T) {
	for _, tc := range []struct {
		v  float64
		dt DType
		ok bool
	}{
		{300, Int8, false},
		{-129, Int8, false},
		{126.9, Int8, true},
		{-127.9, Int8, true},
		{127.9, Int8, false},
		{-128.9, Int8, false},
		{math.NaN(), Int32, false},
		{math.Inf(1), Int64, false},
		{1 << 31, Int32, false},
		{-(1 << 31), Int32, true},
		{1 << 63, Int64, false},
		{-(1 << 63), Int64, true},
		{1e6, Float16, false},
		{-65504, Float16, true},
		{math.Inf(-1), Float16, true},
		{math.NaN(), BFloat16, true},
		{1e39, BFloat16, false},
		{1e300, Float32, false},
		{1e300, Float64, true},
		{math.NaN(), Bool, true},
		{-7, Bool, true},
	} {
		for name, fn := range map[string]func() *Tensor{
			"Full":      func() *Tensor { return Full(Shape{2}, tc.v, tc.dt) },
			"Scalar":    func() *Tensor { return Scalar(tc.v, tc.dt) },
			"NewFull":   func() *Tensor { return Zeros(Shape{1}, tc.dt).NewFull(Shape{2}, tc.v) },
			"FullLike":  func() *Tensor { return FullLike(Zeros(Shape{2}), tc.v, tc.dt) },
			"Arange":    func() *Tensor { return Arange(tc.v, tc.v+1, 1, tc.dt) },
			"FromSlice": func() *Tensor { return FromSlice([]float64{0, tc.v}, nil, tc.dt) },
		} {
			if name == "Arange" && (math.IsNaN(tc.v) || math.IsInf(tc.v, 0) || tc.v+1 == tc.v) {
				continue // refused for not being finite, or empty
			}
			if name == "Arange" && !tc.dt.IsFloat() && tc.v != math.Trunc(tc.v) {
				continue // bounds truncated in int64 first, as PyTorch's arange does
			}
			if name == "FromSlice" && tc.dt.IsFloat() {
				continue // floats convert as Cast does
			}
			err := Catch(func() { fn() })
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrArgument) {
				t.Errorf("%s(%v, %s): %v, want ok=%v", name, tc.v, tc.dt, err, tc.ok)
			}
		}
		x := Full(Shape{3}, 1, tc.dt)
		err := Catch(func() { x.FillInPlace(tc.v) })
		if tc.ok && err != nil || !tc.ok && (!errors.Is(err, ErrArgument) || x.Float64s()[0] != 1) {
			t.Errorf("FillInPlace(%v) of %s: %v, values %v; want ok=%v and the values kept", tc.v, tc.dt, err, x.Float64s(), tc.ok)
		}
	}
	if err := Catch(func() { Arange(120, 130, 1, Int8) }); !errors.Is(err, ErrArgument) {
		t.Errorf("Arange(120, 130) as int8: %v, want %v", err, ErrArgument)
	}
}

// TestStringShowsValues checks the values String prints, int64 ones beyond
// 2^53 exactly (a float64 would round them).
// TestHostReadsAgreeWithCast checks that Int32s and Int64s convert as
// Cast(Int32) and Cast(Int64) do, on the CPU and a sim device: int64
// values out of int32's range wrap around, and the exact int64 path is
// taken above 2^53.
func TestHostReadsAgreeWithCast(t *testing.T) {
	ints := []int64{1 << 40, 1<<31 + 5, -(1 << 31) - 7, 1<<53 + 1, math.MaxInt64, math.MinInt64, -3, 0}
	for _, dev := range []Device{CPU, Sim(0)} {
		tests := []struct {
			name string
			x    func() *Tensor
		}{
			{"int64", func() *Tensor { return FromSlice(ints, nil, dev) }},
			{"int32", func() *Tensor { return FromSlice([]int32{math.MinInt32, math.MaxInt32, -3}, nil, dev) }},
			{"int8", func() *Tensor { return FromSlice([]int64{-128, 127, 3}, nil, Int8, dev) }},
			{"bool", func() *Tensor { return FromSlice([]bool{true, false}, nil, dev) }},
			{"float64", func() *Tensor { return FromSlice([]float64{2.9, -2.9, 1e9, 0}, nil, dev) }},
			{"float16", func() *Tensor { return FromSlice([]float64{2.5, -65504, 0}, nil, Float16, dev) }},
		}
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					x := tc.x()
					if got, want := x.Int32s(), x.Cast(Int32).Int32s(); !slices.Equal(got, want) {
						t.Errorf("Int32s() = %v, Cast(Int32) holds %v", got, want)
					}
					if got, want := x.Int64s(), x.Cast(Int64).Int64s(); !slices.Equal(got, want) {
						t.Errorf("Int64s() = %v, Cast(Int64) holds %v", got, want)
					}
				})
			})
		}
	}
	if got := FromSlice([]int64{1<<31 + 5, 1<<53 + 1}, nil).Int32s(); !slices.Equal(got, []int32{-1<<31 + 5, 1}) {
		t.Errorf("Int32s of 2^31+5 and 2^53+1 = %v, want [%d 1]", got, -1<<31+5)
	}
}

func TestStringShowsValues(t *testing.T) {
	for _, tc := range []struct {
		x    *Tensor
		want string
	}{
		{FromSlice([]int64{1<<53 + 1, math.MinInt64, math.MaxInt64}, nil), "Tensor([9007199254740993, -9223372036854775808, 9223372036854775807], shape=[3], dtype=int64, device=cpu)"},
		{FromSlice([]int32{-7, 3}, Shape{2, 1}), "Tensor([[-7], [3]], shape=[2, 1], dtype=int32, device=cpu)"},
		{FromSlice([]bool{true, false}, nil), "Tensor([true, false], shape=[2], dtype=bool, device=cpu)"},
		{FromSlice([]float32{1.5, float32(math.Inf(-1))}, nil).Half(), "Tensor([1.5, -Inf], shape=[2], dtype=float16, device=cpu)"},
		{Scalar(2.5, Float64), "Tensor(2.5, shape=[], dtype=float64, device=cpu)"},
		{FromSlice([]int64{1, 2, 3, 4}, Shape{2, 2}).T(), "Tensor([[1, 3], [2, 4]], shape=[2, 2], dtype=int64, device=cpu)"},
		// Whole floats below 1e8 print in full; others keep 4 digits.
		{FromSlice([]float32{12345, 33554432, -65504, 1e8, 1234.5}, nil), "Tensor([12345, 33554432, -65504, 1e+08, 1234.5], shape=[5], dtype=float32, device=cpu)"},
		{FromSlice([]float64{99999999, math.Copysign(0, -1)}, nil).Half(), "Tensor([+Inf, -0], shape=[2], dtype=float16, device=cpu)"},
		{FromSlice([]float64{2049, 2050}, nil).BFloat16(), "Tensor([2048, 2048], shape=[2], dtype=bfloat16, device=cpu)"},
	} {
		if got := tc.x.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
}

// TestStringFollowsPyTorch checks the cases where String used to mislead a
// PyTorch user: a tensor without elements printed one bracket per leading
// dimension, a tensor of more than 32 elements no values at all (PyTorch
// summarizes it with its first and last 3 values per dimension), and a
// value whose 4 significant digits hide its fraction printed as a whole
// number (1234.5 as 1234, 0.99999 as 1).
func TestStringFollowsPyTorch(t *testing.T) {
	negZero := math.Copysign(0, -1)
	grid := Arange(0, 100, 1).Reshape(10, 10)
	for _, tc := range []struct {
		name string
		x    *Tensor
		want string
	}{
		{"empty 3-d", Zeros(Shape{2, 0, 3}), "Tensor([], shape=[2, 0, 3], dtype=float32, device=cpu)"},
		{"empty 2-d on sim", Zeros(Shape{0, 4}, Sim(0)), "Tensor([], shape=[0, 4], dtype=float32, device=sim:0)"},
		{"negative zero", FromSlice([]float32{float32(negZero), 1}, nil), "Tensor([-0, 1], shape=[2], dtype=float32, device=cpu)"},
		{"fraction above 1000", FromSlice([]float64{1234.5, -12345.6}, nil), "Tensor([1234.5, -12345.6], shape=[2], dtype=float64, device=cpu)"},
		{"rounds to a whole number", FromSlice([]float64{0.99999, 999.99999}, nil), "Tensor([1.0000, 1000.0000], shape=[2], dtype=float64, device=cpu)"},
		{"4 significant digits kept", FromSlice([]float64{0.123456, 3.14159, 1e-5, 1.5e9}, nil), "Tensor([0.1235, 3.142, 1e-05, 1.5e+09], shape=[4], dtype=float64, device=cpu)"},
		{"33 elements", Arange(0, 33, 1, Int64), "Tensor([0, 1, 2, ..., 30, 31, 32], shape=[33], dtype=int64, device=cpu)"},
		{"a million elements", Arange(0, 1e6, 1, Int32), "Tensor([0, 1, 2, ..., 999997, 999998, 999999], shape=[1000000], dtype=int32, device=cpu)"},
		{"rows summarized", grid,
			"Tensor([[0, 1, 2, ..., 7, 8, 9], [10, 11, 12, ..., 17, 18, 19], [20, 21, 22, ..., 27, 28, 29], ..., " +
				"[70, 71, 72, ..., 77, 78, 79], [80, 81, 82, ..., 87, 88, 89], [90, 91, 92, ..., 97, 98, 99]], shape=[10, 10], dtype=float32, device=cpu)"},
		{"transposed on sim", grid.T().To(Sim(0)),
			"Tensor([[0, 10, 20, ..., 70, 80, 90], [1, 11, 21, ..., 71, 81, 91], [2, 12, 22, ..., 72, 82, 92], ..., " +
				"[7, 17, 27, ..., 77, 87, 97], [8, 18, 28, ..., 78, 88, 98], [9, 19, 29, ..., 79, 89, 99]], shape=[10, 10], dtype=float32, device=sim:0)"},
		{"short dimensions in full", Arange(0, 42, 1).Reshape(2, 3, 7).Narrow(2, 1, 6).Contiguous().Reshape(6, 6).Narrow(0, 0, 6),
			"Tensor([[1, 2, 3, 4, 5, 6], [8, 9, 10, 11, 12, 13], [15, 16, 17, 18, 19, 20], [22, 23, 24, 25, 26, 27], [29, 30, 31, 32, 33, 34], [36, 37, 38, 39, 40, 41]], shape=[6, 6], dtype=float32, device=cpu)"},
		{"a view's offset", Arange(0, 100, 1).Narrow(0, 50, 40), "Tensor([50, 51, 52, ..., 87, 88, 89], shape=[40], dtype=float32, device=cpu)"},
		{"bool", Ones(Shape{40}, Bool), "Tensor([true, true, true, ..., true, true, true], shape=[40], dtype=bool, device=cpu)"},
	} {
		if got := tc.x.String(); got != tc.want {
			t.Errorf("%s: String() = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestFactoriesRejectBadArguments checks the arguments PyTorch's factories
// refuse: a dtype that is none of vram's, and uniform bounds that are not
// finite, are reversed, or do not fit the dtype.
func TestFactoriesRejectBadArguments(t *testing.T) {
	bad := DType(99)
	for _, tc := range []struct {
		name string
		fn   func()
		kind error
	}{
		{"Ones of an invalid dtype", func() { Ones(Shape{2}, bad) }, ErrDType},
		{"Empty of an invalid dtype", func() { Empty(Shape{2}, bad) }, ErrDType},
		{"FromSlice to an invalid dtype", func() { FromSlice([]float32{1}, nil, bad) }, ErrDType},
		{"ZerosLike to an invalid dtype", func() { ZerosLike(Ones(Shape{2}), bad) }, ErrDType},
		{"NewZeros of an invalid dtype", func() { Ones(Shape{2}).NewZeros(Shape{2}, bad) }, ErrDType},
		{"Uniform with lo > hi", func() { Uniform(Shape{3}, 5, 1) }, ErrArgument},
		{"Uniform with a NaN bound", func() { Uniform(Shape{3}, math.NaN(), 1) }, ErrArgument},
		{"Uniform with an infinite bound", func() { Uniform(Shape{3}, 0, math.Inf(1)) }, ErrArgument},
		{"Uniform wider than float16", func() { Uniform(Shape{3}, -4e4, 4e4, Float16) }, ErrArgument},
	} {
		if err := Catch(tc.fn); !errors.Is(err, tc.kind) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.kind)
		}
	}
	u := Uniform(Shape{1000}, -2, 3, Float64)
	if lo, hi := u.Min().Item(), u.Max().Item(); lo < -2 || hi >= 3 {
		t.Errorf("Uniform(-2, 3) ranges over [%v, %v]", lo, hi)
	}
	if v := Uniform(Shape{4}, 1.5, 1.5).Float64s(); !slices.Equal(v, []float64{1.5, 1.5, 1.5, 1.5}) {
		t.Errorf("Uniform(1.5, 1.5) = %v, want all 1.5", v)
	}
}
