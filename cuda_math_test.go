package vram_test

import (
	"errors"
	"math"
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
		i := vram.FromSlice([]int64{7, -7, 7, -7}, vram.Shape{4}, vram.CUDA(0))
		if got := i.RemainderScalar(-2).Int64s(); got[0] != -1 || got[1] != -1 || got[2] != 1 || got[3] != 1 {
			t.Errorf("int64 remainder on the GPU: %v", got)
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
