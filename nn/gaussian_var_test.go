package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// GaussianNLLLoss takes, as PyTorch's does, a variance of the input's
// number of dimensions that differs from it in one dimension of size 1,
// whichever dimension that is (one variance for the channels of an image,
// [N, 1, H, W] for [N, C, H, W]), and refuses a variance that differs in
// more than one.
func TestGaussianNLLLossSharedVarianceDimension(t *testing.T) {
	vram.Tidy(func() {
		in := vram.Shape{2, 3, 2}
		x := make([]float64, 12)
		y := make([]float64, 12)
		for i := range x {
			x[i] = 0.3*float64(i) - 1
			y[i] = math.Sin(float64(i))
		}
		cases := []struct {
			name string
			vs   vram.Shape
		}{
			{"first", vram.Shape{1, 3, 2}},
			{"middle", vram.Shape{2, 1, 2}},
			{"last", vram.Shape{2, 3, 1}},
			{"same", vram.Shape{2, 3, 2}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				n := c.vs.NumElements()
				v := make([]float64, n)
				for i := range v {
					v[i] = 0.5 + 0.25*float64(i)
				}
				var got []float64
				err := vram.Catch(func() {
					got = nn.GaussianNLLLoss(vram.FromSlice(x, in), vram.FromSlice(y, in), vram.FromSlice(v, c.vs), false, 1e-6, nn.ReductionNone).Float64s()
				})
				if err != nil {
					t.Fatal(err)
				}
				// Element (i, j, k) takes the variance at its index with the
				// variance's size-1 dimension at 0.
				for i := range in[0] {
					for j := range in[1] {
						for k := range in[2] {
							e := (i*in[1]+j)*in[2] + k
							idx := []int{i, j, k}
							for d := range idx {
								if c.vs[d] == 1 {
									idx[d] = 0
								}
							}
							vi := v[(idx[0]*c.vs[1]+idx[1])*c.vs[2]+idx[2]]
							want := 0.5 * (math.Log(vi) + (x[e]-y[e])*(x[e]-y[e])/vi)
							if math.Abs(got[e]-want) > 1e-12 {
								t.Fatalf("element %d: %v, want %v", e, got[e], want)
							}
						}
					}
				}
			})
		}
		for _, vs := range []vram.Shape{{1, 1, 2}, {2, 3, 3}, {3, 2}, {1, 3, 2, 1}} {
			err := vram.Catch(func() {
				nn.GaussianNLLLoss(vram.FromSlice(x, in), vram.FromSlice(y, in), vram.Ones(vs, vram.Float64), false, 1e-6, nn.ReductionSum)
			})
			if !errors.Is(err, vram.ErrShape) {
				t.Errorf("variance %v for input %v: error %v, want ErrShape", vs, in, err)
			}
		}
	})
}
