package nn_test

import (
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// An ignored target adds nothing to a class loss or its gradients even
// when its row's log-probabilities hold −Inf (a class masked out with a
// logit of −Inf), as in PyTorch: the ignored row was weighed by 0, and
// 0·−Inf made the loss NaN.
func TestClassLossIgnoredRowWithMaskedClasses(t *testing.T) {
	vram.Tidy(func() {
		inf := math.Inf(-1)
		// Row 1 is ignored and masks class 0, the class an ignored row
		// was read at, and class 2; row 2 is kept.
		logits := []float64{0, 1, 2, inf, 1, inf, 0.5, -0.5, 0.25}
		targets := []int64{2, -100, 0}
		w := []float64{0.5, 2, 1.5}
		rows := refRows(logits, []int{3, 3})
		cases := []struct {
			name string
			f    func(x, wt *vram.Tensor, r nn.Reduction) *vram.Tensor
			w    []float64
			eps  float64
		}{
			{"cross_entropy", func(x, _ *vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(x, vram.FromSlice(targets, vram.Shape{3}), nn.CrossEntropyOptions{Reduction: r})
			}, nil, 0},
			{"cross_entropy weight smoothing", func(x, wt *vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(x, vram.FromSlice(targets, vram.Shape{3}), nn.CrossEntropyOptions{Weight: wt, LabelSmoothing: 0.1, Reduction: r})
			}, w, 0.1},
			{"nll_loss weight", func(x, wt *vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.NLLLossWith(x.LogSoftmax(1), vram.FromSlice(targets, vram.Shape{3}), nn.NLLLossOptions{Weight: wt, Reduction: r})
			}, w, 0},
		}
		for _, c := range cases {
			for _, r := range []nn.Reduction{nn.ReductionMean, nn.ReductionSum, nn.ReductionNone} {
				t.Run(c.name+"/"+r.String(), func(t *testing.T) {
					x := vram.FromSlice(logits, vram.Shape{3, 3}, vram.WithGrad())
					var wt *vram.Tensor
					if c.w != nil {
						wt = vram.FromSlice(c.w, vram.Shape{3}, vram.WithGrad())
					}
					l := c.f(x, wt, r)
					per, den := refClassLoss(rows, targets, c.w, -100, c.eps)
					want := reduceRef(per, den, r)
					got := l.Float64s()
					for i := range want {
						if !near(got[i], want[i], 1e-12) {
							t.Fatalf("loss %v, want %v", got, want)
						}
					}
					l.Sum().Backward()
					for _, g := range [][]float64{x.Grad().Float64s(), func() []float64 {
						if wt == nil {
							return nil
						}
						return wt.Grad().Float64s()
					}()} {
						for _, v := range g {
							if math.IsNaN(v) || math.IsInf(v, 0) {
								t.Fatalf("gradient %v is not finite", g)
							}
						}
					}
					if g := x.Grad().Float64s(); g[3] != 0 || g[4] != 0 || g[5] != 0 {
						t.Errorf("gradient of the ignored row %v, want zeros", g[3:6])
					}
				})
			}
		}
		t.Run("CrossEntropyLoss", func(t *testing.T) {
			x := vram.FromSlice(logits, vram.Shape{3, 3}, vram.WithGrad())
			l := nn.CrossEntropyLoss(x, vram.FromSlice(targets, vram.Shape{3}))
			per, den := refClassLoss(rows, targets, nil, -100, 0)
			if want := reduceRef(per, den, nn.ReductionMean)[0]; !near(l.Item(), want, 1e-12) {
				t.Fatalf("loss %v, want %v", l.Item(), want)
			}
			l.Backward()
			if g := x.Grad().Float64s(); g[3] != 0 || g[4] != 0 || g[5] != 0 || math.IsNaN(g[0]) {
				t.Errorf("gradient %v, want zeros for the ignored row", g)
			}
		})
	})
}
