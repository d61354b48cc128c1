package vram

import (
	"errors"
	"math"
	"testing"
)

func TestDropoutBadInput(t *testing.T) {
	x := Ones(Shape{2, 3, 4})
	defer x.Release()
	ix := Ones(Shape{2, 3}, Int64)
	defer ix.Release()
	tests := []struct {
		name string
		call func() *Tensor
		want error
	}{
		{"negative p", func() *Tensor { return Dropout(x, -0.1) }, ErrArgument},
		{"p above 1", func() *Tensor { return Dropout(x, 1.5) }, ErrArgument},
		{"NaN p", func() *Tensor { return Dropout(x, math.NaN()) }, ErrArgument},
		{"integer tensor", func() *Tensor { return Dropout(ix, 0.5) }, ErrDType},
		{"negative spatial dims", func() *Tensor { return FeatureDropout(x, 0.5, -1) }, ErrArgument},
		{"spatial dims above the rank", func() *Tensor { return FeatureDropout(x, 0.5, 4) }, ErrArgument},
		{"feature dropout of integers", func() *Tensor { return FeatureDropout(ix, 0.5, 1) }, ErrDType},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			settle(x.Device())
			before := MemoryAllocated(x.Device())
			err := Catch(func() { c.call().Release() })
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if left := MemoryAllocated(x.Device()) - before; left != 0 {
				t.Errorf("%d bytes left allocated", left)
			}
			Tidy(func() {
				if s := x.Sum().Item(); s != 24 {
					t.Errorf("the input changed: sum %v", s)
				}
			})
		})
	}
}

// TestDropoutEdges: p 0 copies, p 1 zeroes, and the kept elements are
// scaled by 1/(1-p), with the gradient the same mask and scale.
func TestDropoutEdges(t *testing.T) {
	tests := []struct {
		name string
		p    float64
	}{
		{"p 0", 0},
		{"p 0.25", 0.25},
		{"p 1", 1},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			Tidy(func() {
				x := Ones(Shape{64}).SetRequiresGrad(true)
				y := Dropout(x, c.p, WithGenerator(NewGenerator(3)))
				y.Sum().Backward()
				vals, grads := y.Float32s(), x.Grad().Float32s()
				for i, v := range vals {
					ok := v == 0 || c.p < 1 && math.Abs(float64(v)-1/(1-c.p)) < 1e-6
					if !ok || grads[i] != v {
						t.Fatalf("element %d: value %v, gradient %v", i, v, grads[i])
					}
					if c.p == 0 && v != 1 || c.p == 1 && v != 0 {
						t.Fatalf("element %d: value %v for p %v", i, v, c.p)
					}
				}
			})
		})
	}
}
