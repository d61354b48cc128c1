package vram

import (
	"errors"
	"slices"
	"testing"
)

// TestMatrixNormEmpty checks MatrixNorm of matrices with a zero size and
// of empty batches against torch.linalg.matrix_norm: an order that picks
// the largest or smallest of some row sums, column sums or singular values
// fails with ErrShape when there are none, and gives 0 (or an empty
// result) otherwise.
func TestMatrixNormEmpty(t *testing.T) {
	cases := []struct {
		ord   string
		shape Shape
		keep  bool
		want  Shape // nil: ErrShape
	}{
		{"inf", Shape{2, 0}, false, Shape{}},
		{"-inf", Shape{2, 0}, true, Shape{1, 1}},
		{"inf", Shape{0, 2}, false, nil},
		{"-inf", Shape{0, 2}, false, nil},
		{"1", Shape{0, 2}, false, Shape{}},
		{"-1", Shape{0, 2}, false, Shape{}},
		{"1", Shape{2, 0}, false, nil},
		{"-1", Shape{2, 0}, false, nil},
		{"2", Shape{2, 0}, false, nil},
		{"-2", Shape{0, 2}, false, nil},
		{"fro", Shape{2, 0}, false, Shape{}},
		{"fro", Shape{0, 2}, true, Shape{1, 1}},
		{"nuc", Shape{2, 0}, false, Shape{}},
		{"nuc", Shape{0, 2}, false, Shape{}},
		{"inf", Shape{0, 3, 2}, false, Shape{0}},
		{"1", Shape{3, 0, 2, 2}, true, Shape{3, 0, 1, 1}},
		{"2", Shape{0, 2, 2}, false, Shape{0}},
		{"-2", Shape{0, 2, 3}, false, Shape{0}},
		{"nuc", Shape{0, 2, 2}, false, Shape{0}},
		{"inf", Shape{2, 3, 0}, false, Shape{2}},
		{"1", Shape{2, 3, 0}, false, nil},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.ord+"/"+tc.shape.String(), func(t *testing.T) {
				Tidy(func() {
					a := Zeros(tc.shape, Float64, d)
					var got *Tensor
					err := Catch(func() { got = MatrixNorm(a, tc.ord, tc.keep) })
					if tc.want == nil {
						if !errors.Is(err, ErrShape) {
							t.Errorf("got %v, %v; want ErrShape", got, err)
						}
						return
					}
					if err != nil {
						t.Fatalf("got %v, want shape %v", err, tc.want)
					}
					if !slices.Equal(got.Shape(), tc.want) || got.DType() != Float64 {
						t.Fatalf("got %v %v, want float64 %v", got.DType(), got.Shape(), tc.want)
					}
					for _, v := range got.Float64s() {
						if v != 0 {
							t.Errorf("got %v, want zeros", got.Float64s())
							break
						}
					}
				})
			})
		}
	}
}
