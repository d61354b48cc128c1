package vram

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// TestUniqueDim checks UniqueDim and UniqueConsecutiveDim against
// torch.unique and torch.unique_consecutive with a dim, worked by hand.
func TestUniqueDim(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name        string
		data        []float64
		shape       Shape
		dim         int
		consecutive bool
		want        []float64
		wantShape   Shape
		inv, counts []int64
	}{
		{"rows", []float64{1, 2, 0, 1, 1, 2, 0, 0}, Shape{4, 2}, 0, false,
			[]float64{0, 0, 0, 1, 1, 2}, Shape{3, 2}, []int64{2, 1, 2, 0}, []int64{1, 1, 2}},
		{"columns", []float64{3, 1, 3, 1, 4, 9, 4, 9}, Shape{2, 4}, 1, false,
			[]float64{1, 3, 9, 4}, Shape{2, 2}, []int64{1, 0, 1, 0}, []int64{2, 2}},
		{"negative dim", []float64{3, 1, 3, 1, 4, 9, 4, 9}, Shape{2, 4}, -1, false,
			[]float64{1, 3, 9, 4}, Shape{2, 2}, []int64{1, 0, 1, 0}, []int64{2, 2}},
		{"lexicographic not by sum", []float64{0, 9, 1, 0, 0, 5}, Shape{3, 2}, 0, false,
			[]float64{0, 5, 0, 9, 1, 0}, Shape{3, 2}, []int64{1, 2, 0}, []int64{1, 1, 1}},
		{"middle dim of 3-D", []float64{1, 2, 1, 2, 5, 7, 5, 6}, Shape{2, 2, 2}, 1, false,
			[]float64{1, 2, 1, 2, 5, 6, 5, 7}, Shape{2, 2, 2}, []int64{1, 0}, []int64{1, 1}},
		{"all equal", []float64{4, 4, 4, 4, 4, 4}, Shape{3, 2}, 0, false,
			[]float64{4, 4}, Shape{1, 2}, []int64{0, 0, 0}, []int64{3}},
		{"1-D", []float64{3, 1, 3}, Shape{3}, 0, false,
			[]float64{1, 3}, Shape{2}, []int64{1, 0, 1}, []int64{1, 2}},
		{"NaN rows stay apart", []float64{nan, 1, 0, 1, nan, 1}, Shape{3, 2}, 0, false,
			[]float64{0, 1, nan, 1, nan, 1}, Shape{3, 2}, []int64{1, 0, 2}, []int64{1, 1, 1}},
		{"empty dim", nil, Shape{0, 3}, 0, false,
			nil, Shape{0, 3}, []int64{}, []int64{}},
		{"consecutive", []float64{1, 2, 1, 2, 0, 0, 1, 2}, Shape{4, 2}, 0, true,
			[]float64{1, 2, 0, 0, 1, 2}, Shape{3, 2}, []int64{0, 0, 1, 2}, []int64{2, 1, 1}},
		{"consecutive columns", []float64{1, 1, 2, 3, 3, 4}, Shape{2, 3}, 1, true,
			[]float64{1, 2, 3, 4}, Shape{2, 2}, []int64{0, 0, 1}, []int64{2, 1}},
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				for _, dt := range []DType{Float32, Int64} {
					if dt == Int64 && slices.ContainsFunc(tc.data, math.IsNaN) {
						continue
					}
					Tidy(func() {
						x := FromSlice(append([]float64{}, tc.data...), tc.shape, d).Cast(dt)
						f := x.UniqueDim
						if tc.consecutive {
							f = x.UniqueConsecutiveDim
						}
						v, inv, cnt := f(tc.dim, true, true)
						if v.DType() != dt || v.Device() != d || !slices.Equal(v.Shape(), tc.wantShape) ||
							!sameFloats(v.Float64s(), tc.want, 0) {
							t.Errorf("%v: values %v %v, want %v %v", dt, v.Shape(), v.Float64s(), tc.wantShape, tc.want)
						}
						if inv.DType() != Int64 || !slices.Equal(inv.Shape(), Shape{len(tc.inv)}) || !slices.Equal(inv.Int64s(), tc.inv) {
							t.Errorf("%v: inverse %v %v, want %v", dt, inv.Shape(), inv.Int64s(), tc.inv)
						}
						if !slices.Equal(cnt.Shape(), Shape{len(tc.counts)}) || !slices.Equal(cnt.Int64s(), tc.counts) {
							t.Errorf("%v: counts %v, want %v", dt, cnt.Int64s(), tc.counts)
						}
						v2, i2, c2 := f(tc.dim, false, false)
						if i2 != nil || c2 != nil || !sameFloats(v2.Float64s(), tc.want, 0) {
							t.Errorf("%v: without inverse and counts got %v %v %v", dt, v2, i2, c2)
						}
					})
				}
			})
		}
	}
}

// TestUniqueDimErrors checks UniqueDim's refusals, which follow PyTorch's.
func TestUniqueDimErrors(t *testing.T) {
	cases := []struct {
		name string
		fn   func()
		kind error
	}{
		{"dim out of range", func() { Zeros(Shape{2, 2}).UniqueDim(2, false, false) }, ErrIndex},
		{"0-d", func() { Scalar(1).UniqueDim(0, false, false) }, ErrIndex},
		{"other dim empty", func() { Zeros(Shape{2, 0}).UniqueDim(0, false, false) }, ErrShape},
		{"two dims empty", func() { Zeros(Shape{0, 0}).UniqueDim(0, false, false) }, ErrShape},
		{"consecutive dim out of range", func() { Zeros(Shape{2}).UniqueConsecutiveDim(-2, true, true) }, ErrIndex},
		{"consecutive other dim empty", func() { Zeros(Shape{0, 3}).UniqueConsecutiveDim(1, true, true) }, ErrShape},
		{"nil", func() { (*Tensor)(nil).UniqueDim(0, false, false) }, ErrArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := Catch(func() { Tidy(tc.fn) }); !errors.Is(err, tc.kind) {
				t.Errorf("got %v, want %v", err, tc.kind)
			}
		})
	}
}
