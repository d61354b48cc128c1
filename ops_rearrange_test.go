package vram_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
)

// TestRearrange pins Flip, Roll, Tril and Triu against torch.flip,
// torch.roll, torch.tril and torch.triu on a [2, 3] tensor holding 0..5,
// including a transposed (non-contiguous) input, with their gradients.
func TestRearrange(t *testing.T) {
	cases := []struct {
		name  string
		op    func(x *vram.Tensor) *vram.Tensor
		want  []float64
		shape vram.Shape
	}{
		{"flip 0", func(x *vram.Tensor) *vram.Tensor { return x.Flip(0) }, []float64{3, 4, 5, 0, 1, 2}, vram.Shape{2, 3}},
		{"flip -1", func(x *vram.Tensor) *vram.Tensor { return x.Flip(-1) }, []float64{2, 1, 0, 5, 4, 3}, vram.Shape{2, 3}},
		{"flip both", func(x *vram.Tensor) *vram.Tensor { return x.Flip(0, 1) }, []float64{5, 4, 3, 2, 1, 0}, vram.Shape{2, 3}},
		{"flip none", func(x *vram.Tensor) *vram.Tensor { return x.Flip() }, []float64{0, 1, 2, 3, 4, 5}, vram.Shape{2, 3}},
		{"flip transposed", func(x *vram.Tensor) *vram.Tensor { return x.T().Flip(0) }, []float64{2, 5, 1, 4, 0, 3}, vram.Shape{3, 2}},
		{"roll flat", func(x *vram.Tensor) *vram.Tensor { return x.Roll([]int{1}, nil) }, []float64{5, 0, 1, 2, 3, 4}, vram.Shape{2, 3}},
		{"roll flat -7", func(x *vram.Tensor) *vram.Tensor { return x.Roll([]int{-7}, nil) }, []float64{1, 2, 3, 4, 5, 0}, vram.Shape{2, 3}},
		{"roll -1 on 1", func(x *vram.Tensor) *vram.Tensor { return x.Roll([]int{-1}, []int{1}) }, []float64{1, 2, 0, 4, 5, 3}, vram.Shape{2, 3}},
		{"roll two dims", func(x *vram.Tensor) *vram.Tensor { return x.Roll([]int{4, 1}, []int{-1, 0}) }, []float64{5, 3, 4, 2, 0, 1}, vram.Shape{2, 3}},
		{"roll transposed", func(x *vram.Tensor) *vram.Tensor { return x.T().Roll([]int{1}, []int{0}) }, []float64{2, 5, 0, 3, 1, 4}, vram.Shape{3, 2}},
		{"tril", func(x *vram.Tensor) *vram.Tensor { return x.Tril(0) }, []float64{0, 0, 0, 3, 4, 0}, vram.Shape{2, 3}},
		{"tril 1", func(x *vram.Tensor) *vram.Tensor { return x.Tril(1) }, []float64{0, 1, 0, 3, 4, 5}, vram.Shape{2, 3}},
		{"tril -1", func(x *vram.Tensor) *vram.Tensor { return x.Tril(-1) }, []float64{0, 0, 0, 3, 0, 0}, vram.Shape{2, 3}},
		{"triu", func(x *vram.Tensor) *vram.Tensor { return x.Triu(0) }, []float64{0, 1, 2, 0, 4, 5}, vram.Shape{2, 3}},
		{"triu 2", func(x *vram.Tensor) *vram.Tensor { return x.Triu(2) }, []float64{0, 0, 2, 0, 0, 0}, vram.Shape{2, 3}},
		{"triu transposed", func(x *vram.Tensor) *vram.Tensor { return x.T().Triu(0) }, []float64{0, 3, 0, 4, 0, 0}, vram.Shape{3, 2}},
		{"tril batched", func(x *vram.Tensor) *vram.Tensor { return x.Reshape(3, 1, 2).Expand(3, 2, 2).Tril(0) }, []float64{0, 0, 0, 1, 2, 0, 2, 3, 4, 0, 4, 5}, vram.Shape{3, 2, 2}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				memtest.Settle(dev)
				before := vram.MemoryAllocated(dev)
				vram.Tidy(func() {
					x := vram.Arange(0, 6, 1, dev, vram.Float64, vram.WithGrad())
					y := c.op(x.Reshape(2, 3))
					if got := y.Float64s(); !slices.Equal(got, c.want) || !slices.Equal(y.Shape(), c.shape) {
						t.Fatalf("got %v %v, want %v %v", y.Shape(), got, c.shape, c.want)
					}
					// The gradient of sum(y * w) reaches each entry of x
					// from the places it went to: the sum of the weights
					// there. Each value of x is its position; a zero in y
					// may be x[0] or a zeroed entry, so x[0] is left out.
					w := vram.Arange(1, float64(len(c.want))+1, 1, dev, vram.Float64).Reshape(c.shape...)
					y.Mul(w).Sum().Backward()
					ref := make([]float64, 6)
					for i, v := range c.want {
						ref[int(v)] += float64(i + 1)
					}
					if got := x.Grad().Float64s(); !slices.Equal(got[1:], ref[1:]) {
						t.Errorf("gradient %v, want %v at positions 1..5", got, ref)
					}
				})
				if after := vram.MemoryAllocated(dev); after != before {
					t.Errorf("%d bytes still allocated after releasing everything", after-before)
				}
			})
		}
	}
	errs := []struct {
		name string
		op   func(x *vram.Tensor)
		kind error
	}{
		{"flip out of range", func(x *vram.Tensor) { x.Flip(2) }, vram.ErrIndex},
		{"flip twice", func(x *vram.Tensor) { x.Flip(1, -1) }, vram.ErrArgument},
		{"roll lengths", func(x *vram.Tensor) { x.Roll([]int{1, 2}, []int{0}) }, vram.ErrArgument},
		{"roll flat two shifts", func(x *vram.Tensor) { x.Roll([]int{1, 2}, nil) }, vram.ErrArgument},
		{"roll out of range", func(x *vram.Tensor) { x.Roll([]int{1}, []int{-3}) }, vram.ErrIndex},
		{"tril of a vector", func(x *vram.Tensor) { x.Reshape(6).Tril(0) }, vram.ErrShape},
		{"triu of a scalar", func(x *vram.Tensor) { vram.Scalar(1).Triu(0) }, vram.ErrShape},
	}
	for _, c := range errs {
		t.Run(c.name, func(t *testing.T) {
			x := vram.Arange(0, 6, 1).Reshape(2, 3)
			if err := vram.Catch(func() { c.op(x) }); !errors.Is(err, c.kind) {
				t.Errorf("err = %v, want %v", err, c.kind)
			}
		})
	}
}

func ExampleTensor_Tril() {
	x := vram.Ones(vram.Shape{3, 3})
	fmt.Println(x.Tril(0))
	fmt.Println(x.Triu(1))
	// Output:
	// Tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]], shape=[3, 3], dtype=float32, device=cpu)
	// Tensor([[0, 1, 1], [0, 0, 1], [0, 0, 0]], shape=[3, 3], dtype=float32, device=cpu)
}

func ExampleTensor_Roll() {
	x := vram.Arange(0, 5, 1)
	fmt.Println(x.Roll([]int{2}, []int{0}))
	fmt.Println(x.Flip(0))
	// Output:
	// Tensor([3, 4, 0, 1, 2], shape=[5], dtype=float32, device=cpu)
	// Tensor([4, 3, 2, 1, 0], shape=[5], dtype=float32, device=cpu)
}

// TestFlipZeroDimensional checks Flip of a 0-dimensional tensor against
// torch.flip, which wraps its dims as a 1-dimensional tensor's (0 and -1
// name the one there is) and returns a copy: it was an ErrIndex. A dim
// named twice is an ErrArgument, and another dim an ErrIndex.
func TestFlipZeroDimensional(t *testing.T) {
	for _, tc := range []struct {
		name string
		dims []int
		kind error
	}{
		{"no dims", nil, nil},
		{"dim 0", []int{0}, nil},
		{"dim -1", []int{-1}, nil},
		{"dim 0 twice", []int{0, -1}, vram.ErrArgument},
		{"dim 1", []int{1}, vram.ErrIndex},
		{"dim -2", []int{-2}, vram.ErrIndex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := vram.Scalar(3, vram.WithGrad())
			defer x.Release()
			var y *vram.Tensor
			err := vram.Catch(func() { y = x.Flip(tc.dims...) })
			if tc.kind != nil {
				if !errors.Is(err, tc.kind) {
					t.Fatalf("got %v, want %v", err, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer y.Release()
			if y.Dim() != 0 || y.Item() != 3 || y.SharesStorage(x) {
				t.Fatalf("got %v, want a copy of 3 of shape []", y)
			}
			y.Backward()
			if g := x.Grad().Item(); g != 1 {
				t.Errorf("gradient %v, want 1", g)
			}
		})
	}
}
