package nn_test

import (
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// The class losses of 16-bit logits return the logits' dtype, as
// PyTorch's do, with every option and reduction (the plain mean always
// did), computed in float32 and rounded once; inside Autocast they return
// float32, as PyTorch's autocast runs cross_entropy and nll_loss.
func TestClassLossesHalfDType(t *testing.T) {
	vram.Tidy(func() {
		logits := []float64{0.5, -1.2, 2.0, 0.1, 3.0, -0.3, 0.7, 1.1, -2.0, 0.4, 0.0, 1.5}
		probs := []float64{0.1, 0.2, 0.3, 0.4, 1, 0, 0, 0, 0.25, 0.25, 0.25, 0.25}
		targets := []int64{2, -100, 3}
		w := []float64{0.5, 2, 1, 3}
		type lossFn func(x, w *vram.Tensor, r nn.Reduction) *vram.Tensor
		tgt := vram.FromSlice(targets, vram.Shape{3})
		cases := []struct {
			name string
			f    lossFn
			ref  func(rows [][]float64, r nn.Reduction) []float64
		}{
			{"cross_entropy", func(x, _ *vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(x, tgt, nn.CrossEntropyOptions{Reduction: r})
			}, func(rows [][]float64, r nn.Reduction) []float64 {
				per, den := refClassLoss(rows, targets, nil, -100, 0)
				return reduceRef(per, den, r)
			}},
			{"cross_entropy weight smoothing", func(x, wt *vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(x, tgt, nn.CrossEntropyOptions{Weight: wt, LabelSmoothing: 0.1, Reduction: r})
			}, func(rows [][]float64, r nn.Reduction) []float64 {
				per, den := refClassLoss(rows, targets, w, -100, 0.1)
				return reduceRef(per, den, r)
			}},
			{"cross_entropy probabilities", func(x, wt *vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(x, vram.FromSlice(probs, vram.Shape{3, 4}).Cast(x.DType()), nn.CrossEntropyOptions{Weight: wt, Reduction: r})
			}, func(rows [][]float64, r nn.Reduction) []float64 {
				return reduceRef(refSoftLoss(rows, probs, []int{3, 4}, w, 0), 3, r)
			}},
			{"nll_loss weight", func(x, wt *vram.Tensor, r nn.Reduction) *vram.Tensor {
				return nn.NLLLossWith(x.LogSoftmax(1), tgt, nn.NLLLossOptions{Weight: wt, Reduction: r})
			}, func(rows [][]float64, r nn.Reduction) []float64 {
				per, den := refClassLoss(rows, targets, w, -100, 0)
				return reduceRef(per, den, r)
			}},
		}
		for _, dt := range []vram.DType{vram.Float16, vram.BFloat16} {
			x := vram.FromSlice(logits, vram.Shape{3, 4}).Cast(dt)
			wt := vram.FromSlice(w, vram.Shape{4}).Cast(dt)
			rows := refRows(x.Float64s(), []int{3, 4})
			tol := 2e-3
			if dt == vram.BFloat16 {
				tol = 1.6e-2
			}
			for _, c := range cases {
				for _, r := range []nn.Reduction{nn.ReductionMean, nn.ReductionSum, nn.ReductionNone} {
					t.Run(dt.String()+"/"+c.name+"/"+r.String(), func(t *testing.T) {
						got := c.f(x, wt, r)
						if got.DType() != dt {
							t.Fatalf("dtype %v, want %v", got.DType(), dt)
						}
						want := c.ref(rows, r)
						g := got.Float64s()
						for i := range want {
							if math.Abs(g[i]-want[i]) > tol*(1+math.Abs(want[i])) {
								t.Fatalf("got %v, want %v", g, want)
							}
						}
						var ac *vram.Tensor
						vram.Autocast(dt, func() { ac = c.f(x, wt, r) })
						if ac.DType() != vram.Float32 {
							t.Fatalf("inside Autocast: dtype %v, want float32", ac.DType())
						}
					})
				}
			}
		}
	})
}
