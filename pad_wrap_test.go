package vram

import (
	"errors"
	"math"
	"testing"
)

// TestPadRefusesSizesThatWrapAround pads with sizes whose sum with the
// input's side is far below zero but wraps around an int to a small
// positive one (2·MinInt is 0): Pad must refuse them with ErrShape, as
// it refuses any padding that leaves a negative side, rather than return
// a tensor of the input's shape.
func TestPadRefusesSizesThatWrapAround(t *testing.T) {
	x := Ones(Shape{1, 2, 4})
	defer x.Release()
	tests := []struct {
		name string
		pads []int
		mode PadMode
	}{
		{"constant, both MinInt", []int{math.MinInt, math.MinInt}, PadConstant},
		{"constant, MinInt and -4", []int{math.MinInt, -4}, PadConstant},
		{"circular, both MinInt", []int{math.MinInt, math.MinInt}, PadCircular},
		{"reflect, both MinInt", []int{math.MinInt, math.MinInt}, PadReflect},
		{"replicate, both MinInt", []int{math.MinInt, math.MinInt}, PadReplicate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var y *Tensor
			err := Catch(func() { y = Pad(x, tc.pads, tc.mode, 0) })
			if y != nil {
				t.Errorf("got a result of shape %v", y.Shape())
				y.Release()
			}
			if !errors.Is(err, ErrShape) {
				t.Errorf("got %v, want an error of kind ErrShape", err)
			}
		})
	}
}
