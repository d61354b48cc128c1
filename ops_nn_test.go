package vram

import (
	"errors"
	"slices"
	"testing"
)

// TestSoftmaxEdgeCases checks the softmax family on inputs PyTorch accepts
// without a reduction to compute (empty tensors, whichever dimension is
// empty) and on the dtypes it refuses.
func TestSoftmaxEdgeCases(t *testing.T) {
	ops := []struct {
		name string
		fn   func(x *Tensor, dim int) *Tensor
	}{
		{"Softmax", (*Tensor).Softmax},
		{"LogSoftmax", (*Tensor).LogSoftmax},
	}
	for _, op := range ops {
		for _, tc := range []struct {
			shape Shape
			dim   int
		}{
			{Shape{0, 3}, 0},
			{Shape{0, 3}, 1},
			{Shape{3, 0}, -1},
			{Shape{2, 0, 4}, 1},
			{Shape{0}, 0},
		} {
			x := Ones(tc.shape, Float64, WithGrad())
			var y *Tensor
			if err := Catch(func() { y = op.fn(x, tc.dim) }); err != nil {
				t.Errorf("%s(%d) of %v: %v", op.name, tc.dim, tc.shape, err)
				continue
			}
			if !slices.Equal(y.Shape(), tc.shape) || y.DType() != Float64 {
				t.Errorf("%s(%d) of %v: got %v %s, want the input's shape and dtype", op.name, tc.dim, tc.shape, y.Shape(), y.DType())
			}
			y.Sum().Backward()
			if g := x.Grad(); g == nil || !slices.Equal(g.Shape(), tc.shape) {
				t.Errorf("%s(%d) of %v: gradient %v", op.name, tc.dim, tc.shape, g)
			}
		}
		for _, dt := range []DType{Bool, Int64, Int32, Int8} {
			x := Ones(Shape{2, 3}, dt)
			if err := Catch(func() { op.fn(x, 1) }); !errors.Is(err, ErrDType) {
				t.Errorf("%s of %s: got %v, want %v", op.name, dt, err, ErrDType)
			}
		}
	}
}
