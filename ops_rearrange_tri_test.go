package vram

import (
	"errors"
	"slices"
	"testing"
)

func TestTriuTril(t *testing.T) {
	x := Arange(1, 13, 1, Float64).Reshape(3, 4)
	tests := []struct {
		name string
		got  *Tensor
		want []float64
	}{
		{"triu 0", x.Triu(0), []float64{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}},
		{"triu 1", x.Triu(1), []float64{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}},
		{"triu -1", x.Triu(-1), []float64{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}},
		{"tril 0", x.Tril(0), []float64{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}},
		{"tril -1", x.Tril(-1), []float64{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}},
		{"tril 5", x.Tril(5), x.Float64s()},
		{"batched tril", Ones(Shape{2, 2, 2}, Float64).Tril(0), []float64{1, 0, 1, 1, 1, 0, 1, 1}},
		{"bool tril", Ones(Shape{2, 3}, Bool).Tril(0).Cast(Float64), []float64{1, 0, 0, 1, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got.Float64s(); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	gradCheck(t, func(xs []*Tensor) *Tensor { return xs[0].Triu(1) }, rnd(1, 2, 3, 3))
	if err := Catch(func() { Arange(0, 3, 1).Tril(0) }); !errors.Is(err, ErrShape) {
		t.Errorf("1-D input: %v", err)
	}
}
