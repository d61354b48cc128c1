package vram

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// TestCrossEntropyTargetOutOfBounds checks that a class target outside
// [0, C) is reported as a target, with the classes there are, as
// PyTorch's "Target 5 is out of bounds", rather than as a bad index of an
// internal gather.
func TestCrossEntropyTargetOutOfBounds(t *testing.T) {
	logits := Ones(Shape{2, 3})
	for _, tc := range []struct {
		name string
		f    func(targets *Tensor)
	}{
		{"cross_entropy", func(tg *Tensor) { CrossEntropy(logits, tg) }},
		{"nll_loss", func(tg *Tensor) { NLLLoss(logits, tg) }},
	} {
		for _, bad := range []int64{5, 3, -1} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, bad), func(t *testing.T) {
				err := Catch(func() { tc.f(FromSlice([]int64{0, bad}, Shape{2})) })
				if !errors.Is(err, ErrIndex) {
					t.Fatalf("%v, want an error of kind ErrIndex", err)
				}
				for _, w := range []string{tc.name + ": ", "target out of bounds", "classes 0 to 2", "-100"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%q lacks %q", err, w)
					}
				}
			})
		}
	}
}

// TestEmbeddingIndexOutOfRange checks that an index outside the rows of an
// embedding is reported as such, with the rows there are, rather than as a
// bad index of an internal gather.
func TestEmbeddingIndexOutOfRange(t *testing.T) {
	w := Ones(Shape{10, 4})
	for _, bad := range []int64{10, 11, -1} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			err := Catch(func() { Embedding(FromSlice([]int64{0, bad}, Shape{2}), w) })
			if !errors.Is(err, ErrIndex) {
				t.Fatalf("%v, want an error of kind ErrIndex", err)
			}
			for _, w := range []string{"embedding: ", "index out of range", "rows 0 to 9"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}
