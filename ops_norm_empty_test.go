package vram

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestNormEmptyDims checks the vector norms over empty dimensions against
// torch.linalg.vector_norm: orders with an identity (0 and the positive
// ones) give 0, and the infinity and negative orders, which have none,
// fail with ErrShape; a reduction over non-empty dimensions of an empty
// tensor gives an empty result for every order.
func TestNormEmptyDims(t *testing.T) {
	cases := []struct {
		p     float64
		shape Shape
		dims  []int
		want  Shape // nil: ErrShape
	}{
		{2, Shape{0}, nil, Shape{}},
		{1, Shape{2, 0}, []int{1}, Shape{2}},
		{0, Shape{2, 0}, []int{1}, Shape{2}},
		{0.5, Shape{2, 0}, []int{1}, Shape{2}},
		{-1, Shape{0}, nil, nil},
		{-1, Shape{2, 0}, []int{1}, nil},
		{-0.5, Shape{2, 0}, []int{0, 1}, nil},
		{-2, Shape{2, 0}, []int{0}, Shape{0}},
		{math.Inf(1), Shape{2, 0}, []int{1}, nil},
		{math.Inf(-1), Shape{0}, nil, nil},
		{math.Inf(-1), Shape{2, 0}, []int{0}, Shape{0}},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%v/p=%v/%v/dims=%v", d, tc.p, tc.shape, tc.dims), func(t *testing.T) {
				Tidy(func() {
					x := Zeros(tc.shape, d)
					var got *Tensor
					err := Catch(func() { got = VectorNorm(x, tc.p, tc.dims, false) })
					if tc.want == nil {
						if !errors.Is(err, ErrShape) {
							t.Errorf("p=%v dims %v: got %v, %v; want ErrShape", tc.p, tc.dims, got, err)
						}
						return
					}
					if err != nil || !slices.Equal(got.Shape(), tc.want) {
						t.Fatalf("p=%v dims %v: got %v, %v; want shape %v", tc.p, tc.dims, got, err, tc.want)
					}
					for _, v := range got.Float64s() {
						if v != 0 {
							t.Errorf("p=%v dims %v: got %v, want zeros", tc.p, tc.dims, got)
							break
						}
					}
				})
			})
		}
	}
}
