package nn_test

import (
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// SoftMarginLoss and MultiLabelSoftMarginLoss are exact in float64 for
// margins beyond 20, as PyTorch's log1p(exp(·)) is, and so are their
// gradients: they were computed by Softplus with its threshold 20, which
// returns its input there and a gradient of 1, off by e^−z.
func TestSoftMarginLossesLargeMargins(t *testing.T) {
	vram.Tidy(func() {
		// softplus(z) = log(1 + e^z) and its derivative σ(z), exactly.
		softplus := func(z float64) float64 { return math.Max(z, 0) + math.Log1p(math.Exp(-math.Abs(z))) }
		sigmoid := func(z float64) float64 { return 1 / (1 + math.Exp(-z)) }
		xs := []float64{-21, 25, -30, 22}
		cases := []struct {
			name string
			y    []float64
			f    func(x, y *vram.Tensor) *vram.Tensor
			// per-element loss and its derivative in x
			ref func(x, y float64) (float64, float64)
		}{
			{"soft_margin_loss", []float64{1, -1, 1, -1}, func(x, y *vram.Tensor) *vram.Tensor { return nn.SoftMarginLoss(x, y, nn.ReductionSum) },
				func(x, y float64) (float64, float64) { return softplus(-y * x), -y * sigmoid(-y*x) }},
			{"multilabel_soft_margin_loss", []float64{1, 0, 1, 0}, func(x, y *vram.Tensor) *vram.Tensor {
				return nn.MultiLabelSoftMarginLoss(x, y, nil, nn.ReductionSum)
			}, func(x, y float64) (float64, float64) {
				// −(y·log σ(x) + (1 − y)·log σ(−x)) over C = 4 classes.
				l := y*softplus(-x) + (1-y)*softplus(x)
				d := -y*sigmoid(-x) + (1-y)*sigmoid(x)
				return l / 4, d / 4
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				x := vram.FromSlice(xs, vram.Shape{4}, vram.WithGrad())
				l := c.f(x, vram.FromSlice(c.y, vram.Shape{4}))
				l.Backward()
				want := 0.0
				g := x.Grad().Float64s()
				for i := range xs {
					v, d := c.ref(xs[i], c.y[i])
					want += v
					if math.Abs(g[i]-d) > 1e-15*math.Abs(d) {
						t.Errorf("gradient %d: %v, want %v", i, g[i], d)
					}
				}
				if got := l.Item(); math.Abs(got-want) > 1e-15*want {
					t.Errorf("loss %v, want %v", got, want)
				}
			})
		}
	})
}
