package vram

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// refConv1d is the 1-D convolution in float64 loops, x [N, C, L], w [O,
// C/g, K], with explicit left and right padding.
func refConv1d(x, w, b *Tensor, stride, padL, padR, dilation, groups int) ([]float64, Shape) {
	n, c, l := x.Size(0), x.Size(1), x.Size(2)
	o, cg, k := w.Size(0), w.Size(1), w.Size(2)
	ol := (l+padL+padR-dilation*(k-1)-1)/stride + 1
	xs, ws := x.Float64s(), w.Float64s()
	var bs []float64
	if b != nil {
		bs = b.Float64s()
	}
	og := o / groups
	out := make([]float64, n*o*ol)
	for in := 0; in < n; in++ {
		for oc := 0; oc < o; oc++ {
			g := oc / og
			for i := 0; i < ol; i++ {
				var sum float64
				if bs != nil {
					sum = bs[oc]
				}
				for ic := 0; ic < cg; ic++ {
					for j := 0; j < k; j++ {
						p := i*stride - padL + j*dilation
						if p < 0 || p >= l {
							continue
						}
						sum += xs[(in*c+g*cg+ic)*l+p] * ws[(oc*cg+ic)*k+j]
					}
				}
				out[(in*o+oc)*ol+i] = sum
			}
		}
	}
	return out, Shape{n, o, ol}
}

func TestConv1d(t *testing.T) {
	tests := []struct {
		name       string
		x, w, b    *Tensor
		p          Conv1dParams
		padL, padR int
	}{
		{"plain", rnd(1, 2, 3, 7), rnd(2, 4, 3, 3), rnd(3, 4), Conv1dParams{}, 0, 0},
		{"no bias", rnd(1, 1, 2, 5), rnd(2, 3, 2, 2), nil, Conv1dParams{}, 0, 0},
		{"stride padding", rnd(1, 2, 3, 8), rnd(2, 2, 3, 3), rnd(3, 2), Conv1dParams{Stride: 2, Padding: 1}, 1, 1},
		{"dilation", rnd(1, 1, 2, 9), rnd(2, 3, 2, 3), rnd(3, 3), Conv1dParams{Dilation: 2, Padding: 2}, 2, 2},
		{"groups", rnd(1, 2, 4, 6), rnd(2, 6, 2, 3), rnd(3, 6), Conv1dParams{Groups: 2}, 0, 0},
		{"depthwise", rnd(1, 1, 3, 5), rnd(2, 3, 1, 2), nil, Conv1dParams{Groups: 3, Padding: 1}, 1, 1},
		{"same odd kernel", rnd(1, 2, 2, 6), rnd(2, 3, 2, 3), rnd(3, 3), Conv1dParams{Same: true}, 1, 1},
		{"same even kernel", rnd(1, 2, 2, 6), rnd(2, 3, 2, 4), rnd(3, 3), Conv1dParams{Same: true}, 1, 2},
		{"same dilated", rnd(1, 1, 2, 7), rnd(2, 2, 2, 2), nil, Conv1dParams{Same: true, Dilation: 3}, 1, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := max(tc.p.Dilation, 1)
			want, shape := refConv1d(tc.x, tc.w, tc.b, max(tc.p.Stride, 1), tc.padL, tc.padR, d, max(tc.p.Groups, 1))
			got := Conv1d(tc.x, tc.w, tc.b, tc.p)
			if !slices.Equal(got.Shape(), shape) {
				t.Fatalf("shape %v, want %v", got.Shape(), shape)
			}
			for i, g := range got.Float64s() {
				if math.Abs(g-want[i]) > 1e-12+1e-12*math.Abs(want[i]) {
					t.Fatalf("element %d: %v, want %v", i, g, want[i])
				}
			}
			// Unbatched input drops the batch dimension.
			one := Conv1d(tc.x.Select(0, 0), tc.w, tc.b, tc.p)
			if !slices.Equal(one.Shape(), shape[1:]) || !slices.Equal(one.Float64s(), got.Float64s()[:len(one.Float64s())]) {
				t.Errorf("unbatched: shape %v, values %v", one.Shape(), one.Float64s())
			}
			fn := func(xs []*Tensor) *Tensor { return Conv1d(xs[0], xs[1], nil, tc.p) }
			gradCheck(t, fn, tc.x.Clone(), tc.w.Clone())
		})
	}
}

func TestConv1dErrors(t *testing.T) {
	x, w := rnd(1, 2, 4, 6), rnd(2, 3, 4, 3)
	tests := []struct {
		name string
		x, w *Tensor
		p    Conv1dParams
		kind error
	}{
		{"4-D input", rnd(1, 2, 4, 6, 1), w, Conv1dParams{}, ErrShape},
		{"1-D input", rnd(1, 6), w, Conv1dParams{}, ErrShape},
		{"4-D weight", x, rnd(2, 3, 4, 1, 3), Conv1dParams{}, ErrShape},
		{"channels", x, rnd(2, 3, 3, 3), Conv1dParams{}, ErrShape},
		{"kernel too long", x, rnd(2, 3, 4, 7), Conv1dParams{}, ErrShape},
		{"groups", x, w, Conv1dParams{Groups: 3}, ErrShape},
		{"negative stride", x, w, Conv1dParams{Stride: -1}, ErrArgument},
		{"negative padding", x, w, Conv1dParams{Padding: -1}, ErrArgument},
		{"same with stride", x, w, Conv1dParams{Same: true, Stride: 2}, ErrArgument},
		{"nil weight", x, nil, Conv1dParams{}, ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(func() { Conv1d(tc.x, tc.w, nil, tc.p) })
			var ve *Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &ve) || ve.Op != "conv1d" {
				t.Fatalf("got %v, want a conv1d error of kind %v", err, tc.kind)
			}
			if msg := err.Error(); strings.Contains(msg, "[1 ") || strings.Contains(msg, "[0 ") || strings.Contains(msg, "1x") {
				t.Errorf("error %q speaks of the 2-D convolution", msg)
			}
		})
	}
}
