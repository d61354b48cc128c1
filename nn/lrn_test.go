package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// LocalResponseNorm divides by (k + alpha·mean of the squares over its
// window of channels)^beta, the window running size/2 channels before and
// (size−1)/2 after, with zeros outside, for odd and even sizes, on the CPU
// and a simulated device; its gradient matches finite differences.
func TestLocalResponseNorm(t *testing.T) {
	const n, c, s = 2, 5, 3
	x := vram.Randn(vram.Shape{n, c, s}, vram.Float64, vram.WithGenerator(vram.NewGenerator(7)))
	xs := x.Float64s()
	for _, size := range []int{1, 2, 3, 4, 7} {
		const alpha, beta, k = 0.3, 0.75, 2.0
		want := make([]float64, len(xs))
		for b := range n {
			for ch := range c {
				for p := range s {
					var sum float64
					for j := ch - size/2; j <= ch+(size-1)/2; j++ {
						if j >= 0 && j < c {
							v := xs[b*c*s+j*s+p]
							sum += v * v
						}
					}
					i := b*c*s + ch*s + p
					want[i] = xs[i] / math.Pow(k+alpha*sum/float64(size), beta)
				}
			}
		}
		for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
			l := nn.NewLocalResponseNorm(size, alpha, beta, k)
			checkValues(t, dev.String(), l.Forward(x.To(dev)).Float64s(), want, 1e-12)
		}
		xg := x.Clone()
		finiteDifferences(t, func() *vram.Tensor { return nn.NewLocalResponseNorm(size, alpha, beta, k).Forward(xg) }, xg)
	}
	for _, tc := range []struct {
		name string
		fn   func()
		kind error
	}{
		{"size 0", func() { nn.NewLocalResponseNorm(0, 1e-4, 0.75, 1) }, vram.ErrArgument},
		{"NaN", func() { nn.NewLocalResponseNorm(2, math.NaN(), 0.75, 1) }, vram.ErrArgument},
		{"2-d", func() { nn.NewLocalResponseNorm(2, 1e-4, 0.75, 1).Forward(vram.Randn(vram.Shape{2, 3})) }, vram.ErrShape},
		{"nil", func() { nn.NewLocalResponseNorm(2, 1e-4, 0.75, 1).Forward(nil) }, vram.ErrArgument},
	} {
		if err := vram.Catch(tc.fn); !errors.Is(err, tc.kind) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.kind)
		}
	}
}
