package nn_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// Every loss's gradient, with each reduction and with its weights, ignored
// targets and options, matches central differences in float64 on the CPU,
// for its inputs and for the weights that take part in it.
func TestLossGradientsFiniteDifferences(t *testing.T) {
	vram.Tidy(func() {
		g := vram.WithGenerator(vram.NewGenerator(2))
		rn := func(s ...int) *vram.Tensor { return vram.Randn(vram.Shape(s), vram.Float64, g) }
		// Probabilities, variances and rates in [0.1, 0.9], away from the
		// kinks and clamps where a difference quotient straddles two branches.
		ru := func(s ...int) *vram.Tensor {
			return vram.Rand(vram.Shape(s), vram.Float64, g).MulScalar(0.8).AddScalar(0.1)
		}
		i64 := func(shape vram.Shape, v ...int64) *vram.Tensor { return vram.FromSlice(v, shape) }
		x, y, x3 := rn(3, 4), rn(3, 4), rn(2, 4, 3)
		p, q, v := ru(3, 4), ru(3, 4), ru(3, 4)
		w, pw := ru(4), ru(4)
		pm := vram.FromSlice([]float64{1, -1, 1}, vram.Shape{3})
		counts := vram.FromSlice([]float64{0, 1, 2, 3, 4, 0, 1, 2, 5, 1, 0, 2}, vram.Shape{3, 4})
		ignored := i64(vram.Shape{3}, 0, -100, 3)
		ignored3 := i64(vram.Shape{2, 3}, 0, 1, 2, 2, 3, 1)
		lp := rn(4, 2, 3)
		type loss struct {
			name string
			f    func(r nn.Reduction) *vram.Tensor
			ts   []*vram.Tensor
		}
		losses := []loss{
			{"mse_loss", func(r nn.Reduction) *vram.Tensor { return nn.MSELossWith(x, y, r) }, []*vram.Tensor{x, y}},
			{"l1_loss", func(r nn.Reduction) *vram.Tensor { return nn.L1LossWith(x, y, r) }, []*vram.Tensor{x, y}},
			{"smooth_l1_loss", func(r nn.Reduction) *vram.Tensor { return nn.SmoothL1LossWith(x, y, 0.7, r) }, []*vram.Tensor{x, y}},
			{"huber_loss", func(r nn.Reduction) *vram.Tensor { return nn.HuberLossWith(x, y, 0.7, r) }, []*vram.Tensor{x, y}},
			{"binary_cross_entropy_with_logits", func(r nn.Reduction) *vram.Tensor {
				return nn.BCEWithLogitsLossWith(x, q, nn.BCEOptions{Weight: w, PosWeight: pw, Reduction: r})
			}, []*vram.Tensor{x, q, w, pw}},
			{"binary_cross_entropy", func(r nn.Reduction) *vram.Tensor {
				return nn.BCELossWith(p, q, nn.BCEOptions{Weight: w, Reduction: r})
			}, []*vram.Tensor{p, q, w}},
			{"cross_entropy weight ignore smoothing", func(r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(x, ignored, nn.CrossEntropyOptions{Weight: w, LabelSmoothing: 0.2, Reduction: r})
			}, []*vram.Tensor{x, w}},
			{"cross_entropy extra dimensions ignore index 2", func(r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(x3, ignored3, nn.CrossEntropyOptions{Weight: w, IgnoreIndex: intp(2), LabelSmoothing: 0.1, Reduction: r})
			}, []*vram.Tensor{x3, w}},
			{"cross_entropy probabilities", func(r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(x, q, nn.CrossEntropyOptions{Weight: w, LabelSmoothing: 0.2, Reduction: r})
			}, []*vram.Tensor{x, q, w}},
			{"nll_loss weight ignore", func(r nn.Reduction) *vram.Tensor {
				return nn.NLLLossWith(x, ignored, nn.NLLLossOptions{Weight: w, Reduction: r})
			}, []*vram.Tensor{x, w}},
			{"kl_div", func(r nn.Reduction) *vram.Tensor { return nn.KLDivLoss(x, q, false, r) }, []*vram.Tensor{x, q}},
			{"kl_div log target", func(r nn.Reduction) *vram.Tensor { return nn.KLDivLoss(x, y, true, r) }, []*vram.Tensor{x, y}},
			{"poisson_nll_loss log input full", func(r nn.Reduction) *vram.Tensor { return nn.PoissonNLLLoss(x, counts, true, true, 1e-8, r) }, []*vram.Tensor{x}},
			{"poisson_nll_loss rate", func(r nn.Reduction) *vram.Tensor { return nn.PoissonNLLLoss(p, counts, false, false, 1e-8, r) }, []*vram.Tensor{p}},
			{"gaussian_nll_loss", func(r nn.Reduction) *vram.Tensor { return nn.GaussianNLLLoss(x, y, v, true, 1e-6, r) }, []*vram.Tensor{x, y, v}},
			{"margin_ranking_loss", func(r nn.Reduction) *vram.Tensor { return nn.MarginRankingLoss(x, y, pm.Unsqueeze(1), 0.3, r) }, []*vram.Tensor{x, y}},
			{"hinge_embedding_loss", func(r nn.Reduction) *vram.Tensor { return nn.HingeEmbeddingLoss(p, pm.Unsqueeze(1), 0.5, r) }, []*vram.Tensor{p}},
			{"soft_margin_loss", func(r nn.Reduction) *vram.Tensor { return nn.SoftMarginLoss(x, pm.Unsqueeze(1), r) }, []*vram.Tensor{x}},
			{"multilabel_soft_margin_loss", func(r nn.Reduction) *vram.Tensor { return nn.MultiLabelSoftMarginLoss(x, q, w, r) }, []*vram.Tensor{x, q, w}},
			{"multi_margin_loss", func(r nn.Reduction) *vram.Tensor {
				return nn.MultiMarginLoss(x, i64(vram.Shape{3}, 0, 2, 3), 2, 0.9, w, r)
			}, []*vram.Tensor{x, w}},
			{"multilabel_margin_loss", func(r nn.Reduction) *vram.Tensor {
				return nn.MultiLabelMarginLoss(x, i64(vram.Shape{3, 4}, 0, 2, -1, 0, 3, -1, 0, 0, 1, 2, 3, -1), r)
			}, []*vram.Tensor{x}},
			{"triplet_margin_loss", func(r nn.Reduction) *vram.Tensor { return nn.TripletMarginLoss(x, y, p, 0.5, 2, 1e-6, true, r) }, []*vram.Tensor{x, y, p}},
			{"cosine_embedding_loss", func(r nn.Reduction) *vram.Tensor { return nn.CosineEmbeddingLoss(x, y, pm, 0.1, r) }, []*vram.Tensor{x, y}},
			{"ctc_loss", func(r nn.Reduction) *vram.Tensor {
				return nn.CTCLoss(lp, i64(vram.Shape{2, 2}, 1, 2, 2, 0), i64(vram.Shape{2}, 4, 3), i64(vram.Shape{2}, 2, 1), 0, r, false)
			}, []*vram.Tensor{lp}},
		}
		for _, l := range losses {
			for _, r := range []nn.Reduction{nn.ReductionMean, nn.ReductionSum, nn.ReductionNone} {
				t.Run(l.name+"/"+r.String(), func(t *testing.T) { finiteDifferences(t, func() *vram.Tensor { return l.f(r) }, l.ts...) })
			}
		}
		t.Run("kl_div/batchmean", func(t *testing.T) {
			finiteDifferences(t, func() *vram.Tensor { return nn.KLDivLoss(x, q, false, nn.ReductionBatchMean) }, x, q)
		})
	})
}
