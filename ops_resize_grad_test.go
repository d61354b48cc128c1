package vram

import "testing"

// TestResizeGradients compares the gradients of the padding, resizing and
// patch ops with finite differences.
func TestResizeGradients(t *testing.T) {
	one := func(f func(x *Tensor) *Tensor) func([]*Tensor) *Tensor {
		return func(xs []*Tensor) *Tensor { return f(xs[0]) }
	}
	cases := []struct {
		name  string
		f     func([]*Tensor) *Tensor
		shape []int
	}{
		{"pad constant", one(func(x *Tensor) *Tensor { return Pad(x, []int{1, -1, 2, 1}, PadConstant, 3) }), []int{2, 3, 4}},
		{"pad reflect", one(func(x *Tensor) *Tensor { return Pad(x, []int{2, 1, 1, 2}, PadReflect, 0) }), []int{1, 3, 4}},
		{"pad replicate", one(func(x *Tensor) *Tensor { return Pad(x, []int{3, 1, 0, 2, 1, 1}, PadReplicate, 0) }), []int{1, 2, 2, 3}},
		{"pad circular", one(func(x *Tensor) *Tensor { return Pad(x, []int{3, 2}, PadCircular, 0) }), []int{2, 3}},
		{"nearest", one(func(x *Tensor) *Tensor { return Interpolate(x, InterpolateOptions{Size: []int{3, 5}}) }), []int{1, 2, 2, 3}},
		{"nearest-exact", one(func(x *Tensor) *Tensor {
			return Interpolate(x, InterpolateOptions{ScaleFactor: []float64{0.6}, Mode: InterpNearestExact})
		}), []int{1, 1, 5}},
		{"linear", one(func(x *Tensor) *Tensor { return Interpolate(x, InterpolateOptions{Size: []int{7}, Mode: InterpLinear}) }), []int{2, 1, 3}},
		{"bilinear align", one(func(x *Tensor) *Tensor {
			return Interpolate(x, InterpolateOptions{Size: []int{4, 5}, Mode: InterpBilinear, AlignCorners: true})
		}), []int{1, 1, 3, 2}},
		{"bicubic", one(func(x *Tensor) *Tensor {
			return Interpolate(x, InterpolateOptions{ScaleFactor: []float64{1.5}, Mode: InterpBicubic})
		}), []int{1, 1, 3, 3}},
		{"trilinear", one(func(x *Tensor) *Tensor {
			return Interpolate(x, InterpolateOptions{Size: []int{3, 2, 3}, Mode: InterpTrilinear})
		}), []int{1, 1, 2, 2, 2}},
		{"area 3d", one(func(x *Tensor) *Tensor {
			return Interpolate(x, InterpolateOptions{Size: []int{2, 2, 1}, Mode: InterpArea})
		}), []int{1, 1, 3, 3, 2}},
		{"pixel shuffle", one(func(x *Tensor) *Tensor { return PixelShuffle(x, 2) }), []int{2, 4, 1, 2}},
		{"pixel unshuffle", one(func(x *Tensor) *Tensor { return PixelUnshuffle(x, 2) }), []int{1, 2, 2, 4}},
		{"unfold", one(func(x *Tensor) *Tensor {
			return Unfold(x, [2]int{2, 2}, FoldParams{Padding: [2]int{1, 0}, Stride: [2]int{1, 2}})
		}), []int{1, 2, 3, 4}},
		{"fold", one(func(x *Tensor) *Tensor {
			return Fold(x, [2]int{3, 3}, [2]int{2, 2}, FoldParams{})
		}), []int{1, 8, 4}},
		{"tensor unfold", one(func(x *Tensor) *Tensor { return x.Unfold(1, 3, 2) }), []int{2, 8}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			Tidy(func() { gradCheck(t, c.f, rnd(3, c.shape...)) })
		})
	}
}
