package vram_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
)

// TestMatMulVectorShapes pins torch.matmul's rules for 1-D operands: each
// is promoted to a row (left) or a column (right) and the added dimension
// removed, so that two vectors give their dot product as a 0-d tensor.
func TestMatMulVectorShapes(t *testing.T) {
	cases := []struct {
		name   string
		a, b   vram.Shape
		want   vram.Shape
		wantAt float64 // every element, all inputs being ones
	}{
		{"vector vector", vram.Shape{3}, vram.Shape{3}, vram.Shape{}, 3},
		{"vector matrix", vram.Shape{3}, vram.Shape{3, 2}, vram.Shape{2}, 3},
		{"matrix vector", vram.Shape{2, 3}, vram.Shape{3}, vram.Shape{2}, 3},
		{"vector batch", vram.Shape{3}, vram.Shape{4, 3, 2}, vram.Shape{4, 2}, 3},
		{"batch vector", vram.Shape{4, 2, 3}, vram.Shape{3}, vram.Shape{4, 2}, 3},
		{"empty vectors", vram.Shape{0}, vram.Shape{0}, vram.Shape{}, 0},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				a := vram.Ones(c.a, dev, vram.WithGrad())
				defer a.Release()
				b := vram.Ones(c.b, dev, vram.WithGrad())
				defer b.Release()
				vram.Tidy(func() {
					r := a.MatMul(b)
					if !slices.Equal(r.Shape(), c.want) {
						t.Fatalf("shape %v, want %v", r.Shape(), c.want)
					}
					for i, v := range r.Float64s() {
						if v != c.wantAt {
							t.Fatalf("element %d is %v, want %v", i, v, c.wantAt)
						}
					}
					r.Sum().Backward()
				})
				if !slices.Equal(a.Grad().Shape(), c.a) || !slices.Equal(b.Grad().Shape(), c.b) {
					t.Errorf("gradient shapes %v and %v, want %v and %v", a.Grad().Shape(), b.Grad().Shape(), c.a, c.b)
				}
			})
		}
	}
	a, b := vram.Ones(vram.Shape{3}), vram.Ones(vram.Shape{4})
	defer a.Release()
	defer b.Release()
	if err := vram.Catch(func() { a.MatMul(b) }); !errors.Is(err, vram.ErrShape) {
		t.Errorf("[3] @ [4]: %v, want ErrShape", err)
	}
}

// TestMatMulShapeErrorNamesOperands checks that a product whose inner
// sizes differ is refused with the shapes the caller gave, 1-D operands
// included, not those of their promoted rows and columns.
func TestMatMulShapeErrorNamesOperands(t *testing.T) {
	cases := []struct {
		a, b vram.Shape
		want string
	}{
		{vram.Shape{3, 4}, vram.Shape{3}, "vram: matmul: shapes [3, 4] and [3] cannot be multiplied (4 != 3)"},
		{vram.Shape{3}, vram.Shape{4, 2}, "vram: matmul: shapes [3] and [4, 2] cannot be multiplied (3 != 4)"},
		{vram.Shape{3}, vram.Shape{4}, "vram: matmul: shapes [3] and [4] cannot be multiplied (3 != 4)"},
		{vram.Shape{2, 3}, vram.Shape{5, 2}, "vram: matmul: shapes [2, 3] and [5, 2] cannot be multiplied (3 != 5)"},
		{vram.Shape{7, 2, 3}, vram.Shape{4}, "vram: matmul: shapes [7, 2, 3] and [4] cannot be multiplied (3 != 4)"},
	}
	for _, c := range cases {
		a, b := vram.Ones(c.a), vram.Ones(c.b)
		err := vram.Catch(func() { a.MatMul(b) })
		if !errors.Is(err, vram.ErrShape) || err.Error() != c.want {
			t.Errorf("%v @ %v: %v, want ErrShape %q", c.a, c.b, err, c.want)
		}
		a.Release()
		b.Release()
	}
}
