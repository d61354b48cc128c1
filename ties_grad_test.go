package vram

import (
	"math"
	"testing"
)

// TestWholeReductionGradientsSplitAmongTies checks the gradients of the
// reductions of a whole tensor to one of its elements against PyTorch's
// evenly_distribute_backward, the rule of torch.max(), torch.min(),
// torch.median() and torch.nanmedian() without a dim: the gradient is
// shared equally by every element equal to the result, and by every NaN
// when the result is NaN. Before, a NaN maximum gave every element a NaN
// gradient and the medians gave all of it to the first tied element.
func TestWholeReductionGradientsSplitAmongTies(t *testing.T) {
	nan := math.NaN()
	third := 1.0 / 3
	for _, d := range orderDevices {
		for _, tc := range []struct {
			name string
			x    []float64
			fn   func(x *Tensor) *Tensor
			want []float64
		}{
			// torch.tensor([1., nan, 3.], requires_grad=True).max().backward() gives [0, 1, 0].
			{"max with NaN", []float64{1, nan, 3}, (*Tensor).max0, []float64{0, 1, 0}},
			{"max with two NaN", []float64{nan, 1, nan}, (*Tensor).max0, []float64{0.5, 0, 0.5}},
			{"min with NaN", []float64{1, nan, 3}, (*Tensor).min0, []float64{0, 1, 0}},
			{"max ties", []float64{3, 1, 3}, (*Tensor).max0, []float64{0.5, 0, 0.5}},
			// torch.tensor([2., 2., 1.], requires_grad=True).median().backward() gives [0.5, 0.5, 0].
			{"median ties", []float64{2, 2, 1}, (*Tensor).Median, []float64{0.5, 0.5, 0}},
			{"median three ties", []float64{2, 2, 2}, (*Tensor).Median, []float64{third, third, third}},
			{"median with NaN", []float64{2, nan, 1, nan}, (*Tensor).Median, []float64{0, 0.5, 0, 0.5}},
			{"median unique", []float64{1, 5, 3, 2}, (*Tensor).Median, []float64{0, 0, 0, 1}},
			{"nanmedian ties", []float64{2, 2, nan, 3}, (*Tensor).NanMedian, []float64{0.5, 0.5, 0, 0}},
			{"nanmedian all NaN", []float64{nan, nan}, (*Tensor).NanMedian, []float64{0.5, 0.5}},
			{"median of a 0-dimensional tensor", []float64{4}, func(x *Tensor) *Tensor {
				s := x.Reshape()
				defer s.Release()
				return s.Median()
			}, []float64{1}},
		} {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					x := FromSlice(tc.x, Shape{len(tc.x)}, d, WithGrad())
					y := tc.fn(x)
					if y.Dim() != 0 {
						t.Fatalf("result shape %v, want []", y.Shape())
					}
					y.Backward()
					if g := x.Grad().Float64s(); !sameFloats(g, tc.want, 1e-12) {
						t.Errorf("grad %v, want %v", g, tc.want)
					}
				})
			})
		}
	}
}

func (t *Tensor) max0() *Tensor { return t.Max() }
func (t *Tensor) min0() *Tensor { return t.Min() }
