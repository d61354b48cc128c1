package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// pyFloorDiv is PyTorch's floor division of floats.
func pyFloorDiv(a, b float64) float64 {
	if b == 0 {
		return a / b
	}
	m := math.Mod(a, b)
	div := (a - m) / b
	if m != 0 && (b < 0) != (m < 0) {
		div--
	}
	if div == 0 {
		return math.Copysign(0, a/b)
	}
	f := math.Floor(div)
	if div-f > 0.5 {
		f++
	}
	return f
}

// pyRemainder is Python's float %.
func pyRemainder(a, b float64) float64 {
	m := math.Mod(a, b)
	if m != 0 && (b < 0) != (m < 0) {
		m += b
	}
	return m
}

// TestRemainderOps checks Fmod, Remainder and FloorDivide against their
// float64 definitions and exact integer results, on the CPU and a
// simulated device, including values where a - trunc(a/b)·b rounds wrong.
func TestRemainderOps(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	av := []float64{5, -5, 5, -5, 1, 1e17, 0.3, -0.3, 7.5, inf, 3, 0, -0.0, 2, nan}
	bv := []float64{3, 3, -3, -3, 0.1, 3, 0.1, 0.7, 2, 2, inf, 4, 4, 0, 1}
	for _, dev := range []Device{CPU, Sim(0)} {
		a, b := FromSlice(av, nil, dev), FromSlice(bv, nil, dev)
		wantF, wantR, wantD := make([]float64, len(av)), make([]float64, len(av)), make([]float64, len(av))
		for i := range av {
			wantF[i], wantR[i], wantD[i] = math.Mod(av[i], bv[i]), pyRemainder(av[i], bv[i]), pyFloorDiv(av[i], bv[i])
		}
		for _, c := range []struct {
			name string
			y    *Tensor
			want []float64
		}{{"fmod", a.Fmod(b), wantF}, {"remainder", a.Remainder(b), wantR}, {"floor_divide", a.FloorDivide(b), wantD}} {
			if c.y.DType() != Float64 || !closeAll(c.y.Float64s(), c.want, 0) {
				t.Errorf("%s %s: got %v, want %v", dev, c.name, c.y.Float64s(), c.want)
			}
		}
		ai := []int64{7, -7, 7, -7, 0, math.MinInt64, 9223372036854775807}
		bi := []int64{2, 2, -2, -2, 5, -1, 10}
		x, y := FromSlice(ai, nil, dev), FromSlice(bi, nil, dev)
		ints := []struct {
			name string
			y    *Tensor
			want []int64
		}{
			{"fmod int", x.Fmod(y), []int64{1, -1, 1, -1, 0, 0, 7}},
			{"remainder int", x.Remainder(y), []int64{1, 1, -1, -1, 0, 0, 7}},
			{"floor_divide int", x.FloorDivide(y), []int64{3, -4, -4, 3, 0, math.MinInt64, 922337203685477580}},
			{"remainder scalar", x.RemainderScalar(3), []int64{1, 2, 1, 2, 0, 1, 1}},
			{"floor_divide scalar", x.FloorDivideScalar(-3), []int64{-3, 2, -3, 2, 0, 3074457345618258602, -3074457345618258603}},
		}
		for _, c := range ints {
			if c.y.DType() != Int64 || !slices.Equal(c.y.Int64s(), c.want) {
				t.Errorf("%s %s: got %s %v, want %v", dev, c.name, c.y.DType(), c.y.Int64s(), c.want)
			}
		}
		dtypes := []struct {
			name  string
			y     *Tensor
			dtype DType
			want  []float64
		}{
			{"int32 % float scalar", FromSlice([]int32{5}, nil, dev).RemainderScalar(-1.5), Float32, []float64{-1}},
			{"int32 % int64", FromSlice([]int32{-5}, nil, dev).Remainder(FromSlice([]int64{3}, nil, dev)), Int64, []float64{1}},
			{"float16 fmod", FromSlice([]float32{5.5}, nil, Float16, dev).FmodScalar(2), Float16, []float64{1.5}},
			{"bool % int", FromSlice([]bool{true, false}, nil, dev).Remainder(FromSlice([]int64{2}, nil, dev)), Int64, []float64{1, 0}},
			{"broadcast", FromSlice([]float32{-1, 1}, Shape{2, 1}, dev).Remainder(FromSlice([]float32{3, -3}, Shape{2}, dev)), Float32, []float64{2, -1, 1, -2}},
			{"host scalar", FromSlice([]float64{-7}, nil, dev).Remainder(Scalar(4, Float64)), Float64, []float64{1}},
		}
		for _, c := range dtypes {
			if c.y.DType() != c.dtype || !closeAll(c.y.Float64s(), c.want, 0) {
				t.Errorf("%s %s: got %s %v, want %s %v", dev, c.name, c.y.DType(), c.y.Float64s(), c.dtype, c.want)
			}
		}
	}
	errs := []struct {
		name string
		f    func()
		kind error
	}{
		{"bool", func() { Ones(Shape{1}, Bool).Remainder(Ones(Shape{1}, Bool)) }, ErrDType},
		{"int zero", func() { Ones(Shape{1}, Int64).Remainder(Zeros(Shape{1}, Int64)).Int64s() }, ErrBackend},
		{"int zero floor", func() { Ones(Shape{1}, Int32).FloorDivideScalar(0).Int64s() }, ErrBackend},
		{"shape", func() { Ones(Shape{2}).Fmod(Ones(Shape{3})) }, ErrShape},
		{"device", func() { Ones(Shape{2}).Fmod(Ones(Shape{2}, Sim(0))) }, ErrDevice},
		{"nil", func() { Ones(Shape{2}).Fmod(nil) }, ErrArgument},
	}
	for _, e := range errs {
		if err := Catch(e.f); !errors.Is(err, e.kind) {
			t.Errorf("%s: got %v, want %v", e.name, err, e.kind)
		}
	}
	if y := FromSlice([]float64{1}, nil, WithGrad()).FloorDivide(Scalar(2, Float64)); y.RequiresGrad() {
		t.Error("floor_divide result requires grad")
	}
	two := func(f func(a, b *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(v []*Tensor) *Tensor { return f(v[0], v[1]) }
	}
	// Away from the jumps at multiples of b.
	a := FromSlice([]float64{5.3, -5.3, 7.9, -2.2, 0.4, -0.4}, Shape{2, 3})
	b := FromSlice([]float64{1.5, -2.5, 0.7}, Shape{3})
	gradCheck(t, two((*Tensor).Fmod), a, b)
	gradCheck(t, two((*Tensor).Remainder), a.Detach(), b.Detach())
}
