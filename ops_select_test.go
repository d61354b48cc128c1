package vram

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestSelectOps checks Diagonal, Take, MaskedSelect and IndexAdd against
// hand-computed results on the CPU and a simulated device.
func TestSelectOps(t *testing.T) {
	x12 := make([]float64, 12)
	for i := range x12 {
		x12[i] = float64(i)
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		x := func() *Tensor { return FromSlice(x12, Shape{3, 4}, dev) }
		i64 := func(v []int64, s ...int) *Tensor { return FromSlice(v, Shape(s), dev) }
		cases := []struct {
			name  string
			y     func() *Tensor
			shape Shape
			want  []float64
		}{
			{"diagonal", func() *Tensor { return x().Diagonal(0, 0, 1) }, Shape{3}, []float64{0, 5, 10}},
			{"diagonal above", func() *Tensor { return x().Diagonal(1, 0, 1) }, Shape{3}, []float64{1, 6, 11}},
			{"diagonal above short", func() *Tensor { return x().Diagonal(2, 0, 1) }, Shape{2}, []float64{2, 7}},
			{"diagonal below", func() *Tensor { return x().Diagonal(-1, 0, 1) }, Shape{2}, []float64{4, 9}},
			{"diagonal swapped dims", func() *Tensor { return x().Diagonal(1, 1, 0) }, Shape{2}, []float64{4, 9}},
			{"diagonal past the edge", func() *Tensor { return x().Diagonal(5, 0, 1) }, Shape{0}, []float64{}},
			{"diagonal far below", func() *Tensor { return x().Diagonal(-7, 0, 1) }, Shape{0}, []float64{}},
			{"diagonal batched", func() *Tensor { return FromSlice(x12, Shape{3, 2, 2}, dev).Diagonal(0, -2, -1) }, Shape{3, 2}, []float64{0, 3, 4, 7, 8, 11}},
			{"diagonal outer dims", func() *Tensor { return FromSlice(x12, Shape{2, 3, 2}, dev).Diagonal(0, 0, 2) }, Shape{3, 2}, []float64{0, 7, 2, 9, 4, 11}},
			{"diagonal of transpose", func() *Tensor { return x().T().Diagonal(1, 0, 1) }, Shape{2}, []float64{4, 9}},
			{"take", func() *Tensor { return x().Take(i64([]int64{0, 11, -1, 5, -12, 5}, 2, 3)) }, Shape{2, 3}, []float64{0, 11, 11, 5, 0, 5}},
			{"take transposed", func() *Tensor { return x().T().Take(i64([]int64{1, 3}, 2)) }, Shape{2}, []float64{4, 1}},
			{"take 0-d index", func() *Tensor { return x().Take(i64([]int64{7})).Reshape() }, Shape{}, []float64{7}},
			{"take empty", func() *Tensor { return x().Take(i64(nil, 0, 2)) }, Shape{0, 2}, []float64{}},
			{"masked_select", func() *Tensor {
				return x().MaskedSelect(evenMask(x()))
			}, Shape{6}, []float64{0, 2, 4, 6, 8, 10}},
			{"masked_select broadcast", func() *Tensor {
				return x().MaskedSelect(FromSlice([]bool{true, false, false, true}, Shape{4}, dev))
			}, Shape{6}, []float64{0, 3, 4, 7, 8, 11}},
			{"masked_select none", func() *Tensor { return x().MaskedSelect(Zeros(Shape{3, 1}, Bool, dev)) }, Shape{0}, []float64{}},
			{"index_add", func() *Tensor {
				return x().IndexAdd(0, i64([]int64{2, 0, 2}, 3), Ones(Shape{3, 4}, Float64, dev), 2)
			}, Shape{3, 4}, []float64{2, 3, 4, 5, 4, 5, 6, 7, 12, 13, 14, 15}},
			{"index_add dim 1", func() *Tensor {
				return x().IndexAdd(-1, FromSlice([]int32{3}, Shape{1}, dev), FromSlice([]float64{10, 20, 30}, Shape{3, 1}, dev), 1)
			}, Shape{3, 4}, []float64{0, 1, 2, 13, 4, 5, 6, 27, 8, 9, 10, 41}},
			{"index_add 0-d", func() *Tensor {
				return Scalar(1, Float64, dev).IndexAdd(0, i64([]int64{0}), Scalar(2, Float64, dev), 1)
			}, Shape{}, []float64{3}},
		}
		for _, c := range cases {
			y := c.y()
			if !slices.Equal(y.Shape(), c.shape) || !slices.Equal(y.Float64s(), c.want) {
				t.Errorf("%s %s: got %v %v, want %v %v", dev, c.name, y.Shape(), y.Float64s(), c.shape, c.want)
			}
		}
		// Diagonal is a view: a write through it shows in its base.
		b := Zeros(Shape{3, 3}, dev)
		NoGrad(func() { b.Diagonal(0, 0, 1).FillInPlace(1) })
		if got := b.Float64s(); !slices.Equal(got, []float64{1, 0, 0, 0, 1, 0, 0, 0, 1}) {
			t.Errorf("%s diagonal write: %v", dev, got)
		}
		// The input is left alone by IndexAdd.
		in := x()
		in.IndexAdd(0, i64([]int64{0}, 1), Ones(Shape{1, 4}, Float64, dev), 1)
		if !slices.Equal(in.Float64s(), x12) {
			t.Errorf("%s index_add changed its input", dev)
		}
		if y := FromSlice([]int32{1, 2}, nil, dev).IndexAdd(0, i64([]int64{1}, 1), FromSlice([]int32{5}, nil, dev), 2); y.DType() != Int32 || !slices.Equal(y.Float64s(), []float64{1, 12}) {
			t.Errorf("%s index_add int32: %s %v", dev, y.DType(), y.Float64s())
		}
		// A bool tensor reads alpha as a bool, as PyTorch's add does: any
		// whole alpha but 0 ors the source in, and keeps the dtype.
		for _, c := range []struct {
			alpha float64
			want  []float64
		}{
			{1, []float64{1, 1, 0, 1}},
			{2, []float64{1, 1, 0, 1}},
			{-3, []float64{1, 1, 0, 1}},
			{0, []float64{1, 0, 0, 0}},
		} {
			in := FromSlice([]bool{true, false, false, false}, nil, dev)
			src := FromSlice([]bool{true, true, false}, nil, dev)
			y := in.IndexAdd(0, i64([]int64{1, 3, 2}, 3), src, c.alpha)
			if y.DType() != Bool || !slices.Equal(y.Float64s(), c.want) {
				t.Errorf("%s index_add bool, alpha %v: %s %v, want bool %v", dev, c.alpha, y.DType(), y.Float64s(), c.want)
			}
		}
	}
	errs := []struct {
		name string
		f    func()
		kind error
	}{
		{"diagonal same dims", func() { Ones(Shape{2, 2}).Diagonal(0, 1, -1) }, ErrArgument},
		{"diagonal dim", func() { Ones(Shape{2, 2}).Diagonal(0, 0, 2) }, ErrIndex},
		{"diagonal vector", func() { Ones(Shape{2}).Diagonal(0, 0, 1) }, ErrIndex},
		{"take past the end", func() { Ones(Shape{2, 2}).Take(FromSlice([]int64{4}, nil)) }, ErrIndex},
		{"take before the start", func() { Ones(Shape{2, 2}).Take(FromSlice([]int64{-5}, nil)) }, ErrIndex},
		{"take float index", func() { Ones(Shape{2}).Take(Ones(Shape{1})) }, ErrDType},
		{"take device", func() { Ones(Shape{2}).Take(Zeros(Shape{1}, Int64, Sim(0))) }, ErrDevice},
		{"masked_select dtype", func() { Ones(Shape{2}).MaskedSelect(Ones(Shape{2})) }, ErrDType},
		{"masked_select shape", func() { Ones(Shape{2}).MaskedSelect(Ones(Shape{3}, Bool)) }, ErrShape},
		{"masked_select nil", func() { Ones(Shape{2}).MaskedSelect(nil) }, ErrArgument},
		{"index_add position", func() { Ones(Shape{2}).IndexAdd(0, FromSlice([]int64{2}, nil), Ones(Shape{1}), 1) }, ErrIndex},
		{"index_add negative", func() { Ones(Shape{2}).IndexAdd(0, FromSlice([]int64{-1}, nil), Ones(Shape{1}), 1) }, ErrIndex},
		{"index_add source shape", func() { Ones(Shape{2, 3}).IndexAdd(0, FromSlice([]int64{0}, nil), Ones(Shape{1, 2}), 1) }, ErrShape},
		{"index_add source dtype", func() { Ones(Shape{2}).IndexAdd(0, FromSlice([]int64{0}, nil), Ones(Shape{1}, Float64), 1) }, ErrDType},
		{"index_add index dtype", func() { Ones(Shape{2}).IndexAdd(0, Ones(Shape{1}), Ones(Shape{1}), 1) }, ErrDType},
		{"index_add index shape", func() { Ones(Shape{2}).IndexAdd(0, Zeros(Shape{1, 1}, Int64), Ones(Shape{1}), 1) }, ErrShape},
		{"index_add dim", func() { Ones(Shape{2}).IndexAdd(1, FromSlice([]int64{0}, nil), Ones(Shape{1}), 1) }, ErrIndex},
		{"index_add fraction", func() { Ones(Shape{2}, Int64).IndexAdd(0, FromSlice([]int64{0}, nil), Ones(Shape{1}, Int64), 0.5) }, ErrArgument},
	}
	for _, e := range errs {
		if err := Catch(e.f); !errors.Is(err, e.kind) {
			t.Errorf("%s: got %v, want %v", e.name, err, e.kind)
		}
	}
}

// evenMask returns a mask that is true at t's even values.
func evenMask(t *Tensor) *Tensor {
	h := t.DivScalar(2)
	return h.Floor().Eq(h)
}

// TestSelectGradients checks the gradients of Diagonal, Take, MaskedSelect
// and IndexAdd by finite differences.
func TestSelectGradients(t *testing.T) {
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].Diagonal(1, 0, 1) }, rnd(61, 3, 4))
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].Diagonal(-1, 2, 0) }, rnd(62, 3, 2, 4))
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].Take(FromSlice([]int64{0, -1, 3, 3}, Shape{2, 2})) }, rnd(63, 2, 3))
	mask := FromSlice([]bool{true, false, true}, Shape{3})
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].MaskedSelect(mask) }, rnd(64, 2, 3))
	idx := FromSlice([]int64{1, 1, 0}, Shape{3})
	gradCheck(t, func(v []*Tensor) *Tensor { return v[0].IndexAdd(1, idx, v[1], -0.5) }, rnd(65, 2, 2), rnd(66, 2, 3))
}

// TestLinspaceLogspace checks both factories' values, dtypes and errors
// with PyTorch's rules.
func TestLinspaceLogspace(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		cases := []struct {
			name  string
			y     *Tensor
			dtype DType
			want  []float64
		}{
			{"linspace", Linspace(0, 1, 5, dev), Float32, []float64{0, 0.25, 0.5, 0.75, 1}},
			{"linspace down", Linspace(2, -2, 3, Float64, dev), Float64, []float64{2, 0, -2}},
			{"linspace one", Linspace(3, 7, 1, dev), Float32, []float64{3}},
			{"linspace none", Linspace(3, 7, 0, dev), Float32, []float64{}},
			// Counted up from start to the middle, down from end after it.
			{"linspace ends exact", Linspace(0.1, 0.7, 7, Float64, dev), Float64, []float64{0.1, 0.2, 0.3, 0.39999999999999997, 0.5, 0.6, 0.7}},
			{"linspace int", Linspace(0, 5, 4, Int64, dev), Int64, []float64{0, 1, 3, 5}},
			{"logspace", Logspace(0, 3, 4, 10, dev), Float32, []float64{1, 10, 100, 1000}},
			{"logspace base 2", Logspace(-1, 2, 4, 2, Float64, dev), Float64, []float64{0.5, 1, 2, 4}},
		}
		for _, c := range cases {
			if c.y.DType() != c.dtype || c.y.Device() != dev || !slices.Equal(c.y.Float64s(), c.want) {
				t.Errorf("%s %s: got %s %s %v, want %s %v", dev, c.name, c.y.DType(), c.y.Device(), c.y.Float64s(), c.dtype, c.want)
			}
		}
	}
	if g := Linspace(0, 1, 3, WithGrad()); !g.RequiresGrad() {
		t.Error("linspace WithGrad: no requires_grad")
	}
	errs := []struct {
		name string
		f    func()
		kind error
	}{
		{"negative steps", func() { Linspace(0, 1, -1) }, ErrArgument},
		{"nan", func() { Linspace(math.NaN(), 1, 3) }, ErrArgument},
		{"overflow", func() { Linspace(0, 300, 3, Int8) }, ErrArgument},
		{"logspace negative steps", func() { Logspace(0, 1, -2, 10) }, ErrArgument},
	}
	for _, e := range errs {
		if err := Catch(e.f); !errors.Is(err, e.kind) {
			t.Errorf("%s: got %v, want %v", e.name, err, e.kind)
		}
	}
}

// TestLinspaceLogspaceHugeSteps checks that a number of steps no device can
// hold is refused by the device, allocating nothing, rather than by a host
// slice of that length (a runtime panic, or the process killed for memory).
func TestLinspaceLogspaceHugeSteps(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		cases := []struct {
			name string
			f    func()
			kind error
		}{
			{"linspace 2^62 steps", func() { Linspace(0, 1, 1<<62, dev) }, ErrShape},
			{"linspace 2^40 steps", func() { Linspace(0, 1, 1<<40, dev) }, ErrOutOfMemory},
			{"linspace 2^40 int64 steps", func() { Linspace(0, 1, 1<<40, Int64, dev) }, ErrOutOfMemory},
			{"logspace 2^62 steps", func() { Logspace(0, 1, 1<<62, 10, dev) }, ErrShape},
			{"logspace 2^40 steps", func() { Logspace(0, 1, 1<<40, 2, Float64, dev) }, ErrOutOfMemory},
		}
		for _, c := range cases {
			before := MemoryAllocated(dev)
			if err := Catch(c.f); !errors.Is(err, c.kind) {
				t.Errorf("%s %s: got %v, want %v", dev, c.name, err, c.kind)
			}
			if after := MemoryAllocated(dev); after > before {
				t.Errorf("%s %s: %d bytes allocated before, %d after", dev, c.name, before, after)
			}
		}
	}
}

// TestSelectPositionErrors checks that Take and IndexAdd name a position
// out of range as the integer it is, on the CPU and a simulated device:
// read through a float64, -2^63 printed as -9.223372036854776e+18 and
// 2^53+1 as 2^53.
func TestSelectPositionErrors(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		x := Zeros(Shape{2, 3}, dev)
		one := Ones(Shape{2, 1}, dev)
		for _, tc := range []struct {
			name  string
			index *Tensor
			fn    func(index *Tensor)
			want  string
		}{
			{"take int64 min", FromSlice([]int64{0, math.MinInt64}, Shape{2}, dev), func(i *Tensor) { x.Take(i) },
				"positions from -9223372036854775808 to 0 out of range for a tensor of 6 elements"},
			{"take 2^53+1", FromSlice([]int64{1<<53 + 1}, Shape{1}, dev), func(i *Tensor) { x.Take(i) },
				"positions from 9007199254740993 to 9007199254740993"},
			{"take int32", FromSlice([]int32{-7, 1 << 30}, Shape{2}, dev), func(i *Tensor) { x.Take(i) },
				"positions from -7 to 1073741824"},
			{"index_add int64 max", FromSlice([]int64{math.MaxInt64}, Shape{1}, dev), func(i *Tensor) { x.IndexAdd(1, i, one, 1) },
				"positions from 9223372036854775807 to 9223372036854775807 out of range for dimension 1 of size 3"},
			{"index_add int32", FromSlice([]int32{1 << 30}, Shape{1}, dev), func(i *Tensor) { x.IndexAdd(1, i, one, 1) },
				"positions from 1073741824 to 1073741824"},
			{"index_add negative", FromSlice([]int64{-1}, Shape{1}, dev), func(i *Tensor) { x.IndexAdd(1, i, one, 1) },
				"positions from -1 to -1"},
		} {
			err := Catch(func() { tc.fn(tc.index) })
			if !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %s: error %v, want ErrIndex with %q", dev, tc.name, err, tc.want)
			}
			tc.index.Release()
		}
		x.Release()
		one.Release()
	}
}
