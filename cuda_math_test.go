package vram_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
)

// TestCUDAComposedMathOps checks that the composed math ops give the CPU's
// results on a GPU, that integer remainders run there, and that float
// ones, which need a remainder kernel the GPU lacks, fail with an error
// wrapping backend.ErrNotImplemented rather than give a rounded answer.
func TestCUDAComposedMathOps(t *testing.T) {
	requireCUDA(t, 1)
	vram.Tidy(func() {
		x := vram.FromSlice([]float32{-0.9, -0.3, 0, 0.2, 0.7, 0.95}, vram.Shape{2, 3})
		g := x.CUDA(0)
		ops := []struct {
			name string
			f    func(*vram.Tensor) *vram.Tensor
		}{
			{"asin", (*vram.Tensor).Asin}, {"acos", (*vram.Tensor).Acos}, {"atan", (*vram.Tensor).Atan},
			{"sinh", (*vram.Tensor).Sinh}, {"cosh", (*vram.Tensor).Cosh}, {"tan", (*vram.Tensor).Tan},
			{"log2 abs", func(v *vram.Tensor) *vram.Tensor { return v.Abs().AddScalar(1).Log2() }},
			{"logsumexp", func(v *vram.Tensor) *vram.Tensor { return v.Logsumexp([]int{1}, false) }},
			{"cdist", func(v *vram.Tensor) *vram.Tensor { return vram.Cdist(v, v, 2) }},
			{"diagonal", func(v *vram.Tensor) *vram.Tensor { return v.Diagonal(1, 0, 1).Contiguous() }},
			{"masked_select", func(v *vram.Tensor) *vram.Tensor { return v.MaskedSelect(v.GtScalar(0)) }},
		}
		for _, o := range ops {
			closeSlices(t, o.name, o.f(g).CPU().Float32s(), o.f(x).Float32s(), 1e-6, 1e-7)
		}
		// Python's 7 % -2 and -7 % -2 are both -1; 7 % 2 and -7 % 2 both 1;
		// C's fmod takes the dividend's sign instead.
		ic := vram.FromSlice([]int64{7, -7, 7, -7}, vram.Shape{4})
		dc := vram.FromSlice([]int64{-2, -2, 2, 2}, vram.Shape{4})
		i, d := ic.CUDA(0), dc.CUDA(0)
		ints := []struct {
			name string
			got  []int64
			want []int64
		}{
			{"remainder by -2", i.RemainderScalar(-2).Int64s(), []int64{-1, -1, -1, -1}},
			{"remainder by 2", i.RemainderScalar(2).Int64s(), []int64{1, 1, 1, 1}},
			{"remainder by a tensor", i.Remainder(d).Int64s(), []int64{-1, -1, 1, 1}},
			{"fmod by a tensor", i.Fmod(d).Int64s(), []int64{1, -1, 1, -1}},
			{"floor_divide by a tensor", i.FloorDivide(d).Int64s(), []int64{-4, 3, 3, -4}},
			{"cpu remainder by a tensor", ic.Remainder(dc).Int64s(), []int64{-1, -1, 1, 1}},
		}
		for _, c := range ints {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("int64 %s on the GPU: %v, want %v", c.name, c.got, c.want)
			}
		}
		err := vram.Catch(func() { g.RemainderScalar(2) })
		if !errors.Is(err, backend.ErrNotImplemented) && err != nil {
			t.Errorf("float remainder on the GPU: %v", err)
		}
		if err == nil && math.Abs(g.RemainderScalar(2).CPU().Float64s()[0]-1.1) > 1e-6 {
			t.Errorf("float remainder on the GPU: %v", g.RemainderScalar(2).CPU().Float64s())
		}
	})
}
