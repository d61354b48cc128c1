package vram

import (
	"math"
	"testing"
)

// TestProductsPropagateNonFinite pins IEEE arithmetic in the products that
// matrix multiplication computes, as PyTorch's are: 0·Inf is NaN, so an
// infinite input meeting a zero weight gives NaN, not 0, through a matrix
// product in each layout, a convolution and a transposed convolution, in
// float32, float64 and float16.
func TestProductsPropagateNonFinite(t *testing.T) {
	inf := math.Inf(1)
	for _, dt := range []DType{Float32, Float64, Float16} {
		tests := []struct {
			name string
			f    func() *Tensor
			want []float64 // NaN stands for NaN
		}{
			{"matmul zero row times inf", func() *Tensor {
				a := FromSlice([]float64{0, 1, 0, 1}, Shape{2, 2}, dt)
				b := FromSlice([]float64{inf, 1, 1, 1}, Shape{2, 2}, dt)
				return a.MatMul(b)
			}, []float64{math.NaN(), 1, math.NaN(), 1}},
			{"matmul transposed a", func() *Tensor {
				a := FromSlice([]float64{0, 0, 1, 1}, Shape{2, 2}, dt).Transpose(0, 1)
				b := FromSlice([]float64{inf, 1, 1, 1}, Shape{2, 2}, dt)
				return a.MatMul(b)
			}, []float64{math.NaN(), 1, math.NaN(), 1}},
			{"matmul transposed both", func() *Tensor {
				a := FromSlice([]float64{0, 0, 1, 1}, Shape{2, 2}, dt).Transpose(0, 1)
				b := FromSlice([]float64{inf, 1, 2, 3}, Shape{2, 2}, dt).Transpose(0, 1)
				return a.MatMul(b)
			}, []float64{math.NaN(), 3, math.NaN(), 3}},
			{"matmul nan times zero", func() *Tensor {
				a := FromSlice([]float64{math.NaN(), 1}, Shape{1, 2}, dt)
				b := FromSlice([]float64{0, 0, 0, 0}, Shape{2, 2}, dt)
				return a.MatMul(b)
			}, []float64{math.NaN(), math.NaN()}},
			{"batched matmul", func() *Tensor {
				a := FromSlice([]float64{0, 1, 1, 1}, Shape{2, 1, 2}, dt)
				b := FromSlice([]float64{inf, 1}, Shape{2, 1}, dt)
				return a.MatMul(b)
			}, []float64{math.NaN(), inf}},
			{"conv2d of inf with zero weight", func() *Tensor {
				x := Full(Shape{1, 1, 2, 2}, inf, dt)
				w := Zeros(Shape{1, 1, 1, 1}, dt)
				return Conv2d(x, w, nil, Conv2dParams{})
			}, []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN()}},
			{"conv_transpose2d of inf with zero weight", func() *Tensor {
				x := Full(Shape{1, 1, 1, 2}, inf, dt)
				w := Zeros(Shape{1, 1, 1, 1}, dt)
				return ConvTranspose2d(x, w, nil, Conv2dParams{})
			}, []float64{math.NaN(), math.NaN()}},
			{"conv1d of a zero input with an inf weight", func() *Tensor {
				x := Zeros(Shape{1, 1, 3}, dt)
				w := Full(Shape{1, 1, 2}, inf, dt)
				return Conv1d(x, w, nil, Conv1dParams{})
			}, []float64{math.NaN(), math.NaN()}},
		}
		for _, tc := range tests {
			t.Run(dt.String()+" "+tc.name, func(t *testing.T) {
				Tidy(func() {
					got := tc.f().Float64s()
					for i, w := range tc.want {
						if math.IsNaN(w) != math.IsNaN(got[i]) || !math.IsNaN(w) && got[i] != w {
							t.Errorf("got %v, want %v", got, tc.want)
							return
						}
					}
				})
			})
		}
	}
}
