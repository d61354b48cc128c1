package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// Every loss refuses operands none of which is floating point, whatever
// the reduction: computed in integers, each element's loss would be
// truncated (a sum of integer Huber losses, an integer KL divergence),
// where the mean of the same call already failed.
func TestLossesRefuseIntegerInputs(t *testing.T) {
	vram.Tidy(func() {
		a := vram.FromSlice([]int64{1, 2, 3}, vram.Shape{3})
		b := vram.FromSlice([]int64{0, 2, 5}, vram.Shape{3})
		pm := vram.FromSlice([]int64{1, -1, 1}, vram.Shape{3})
		m := vram.FromSlice([]int64{1, 0, 2, 0, 1, 1}, vram.Shape{2, 3})
		cls := vram.FromSlice([]int64{0, 2}, vram.Shape{2})
		losses := []struct {
			name string
			f    func(r nn.Reduction) *vram.Tensor
		}{
			{"mse_loss", func(r nn.Reduction) *vram.Tensor { return nn.MSELossWith(a, b, r) }},
			{"l1_loss", func(r nn.Reduction) *vram.Tensor { return nn.L1LossWith(a, b, r) }},
			{"smooth_l1_loss", func(r nn.Reduction) *vram.Tensor { return nn.SmoothL1LossWith(a, b, 1, r) }},
			{"smooth_l1_loss", func(r nn.Reduction) *vram.Tensor { return nn.SmoothL1LossWith(a, b, 0, r) }},
			{"huber_loss", func(r nn.Reduction) *vram.Tensor { return nn.HuberLossWith(a, b, 1, r) }},
			{"binary_cross_entropy_with_logits", func(r nn.Reduction) *vram.Tensor {
				return nn.BCEWithLogitsLossWith(a, b, nn.BCEOptions{Reduction: r})
			}},
			{"binary_cross_entropy", func(r nn.Reduction) *vram.Tensor {
				return nn.BCELossWith(vram.FromSlice([]int64{0, 1, 1}, vram.Shape{3}), b, nn.BCEOptions{Reduction: r})
			}},
			{"kl_div", func(r nn.Reduction) *vram.Tensor { return nn.KLDivLoss(a, b, false, r) }},
			{"kl_div", func(r nn.Reduction) *vram.Tensor { return nn.KLDivLoss(a, b, true, r) }},
			{"poisson_nll_loss", func(r nn.Reduction) *vram.Tensor { return nn.PoissonNLLLoss(a, b, true, false, 1e-8, r) }},
			{"gaussian_nll_loss", func(r nn.Reduction) *vram.Tensor { return nn.GaussianNLLLoss(a, b, a, false, 1e-6, r) }},
			{"margin_ranking_loss", func(r nn.Reduction) *vram.Tensor { return nn.MarginRankingLoss(a, b, pm, 1, r) }},
			{"hinge_embedding_loss", func(r nn.Reduction) *vram.Tensor { return nn.HingeEmbeddingLoss(a, pm, 1, r) }},
			{"soft_margin_loss", func(r nn.Reduction) *vram.Tensor { return nn.SoftMarginLoss(a, pm, r) }},
			{"multilabel_soft_margin_loss", func(r nn.Reduction) *vram.Tensor { return nn.MultiLabelSoftMarginLoss(m, m, nil, r) }},
			{"multi_margin_loss", func(r nn.Reduction) *vram.Tensor { return nn.MultiMarginLoss(m, cls, 1, 1, nil, r) }},
			{"triplet_margin_loss", func(r nn.Reduction) *vram.Tensor { return nn.TripletMarginLoss(m, m, m, 1, 2, 1e-6, false, r) }},
			{"cosine_embedding_loss", func(r nn.Reduction) *vram.Tensor { return nn.CosineEmbeddingLoss(m, m, cls, 0, r) }},
			{"nll_loss", func(r nn.Reduction) *vram.Tensor { return nn.NLLLossWith(m, cls, nn.NLLLossOptions{Reduction: r}) }},
			{"nll_loss", func(r nn.Reduction) *vram.Tensor {
				return nn.NLLLossWith(m, cls, nn.NLLLossOptions{Weight: vram.Ones(vram.Shape{3}, vram.Float64), Reduction: r})
			}},
			{"cross_entropy", func(r nn.Reduction) *vram.Tensor {
				return nn.CrossEntropyLossWith(m, cls, nn.CrossEntropyOptions{Weight: vram.Ones(vram.Shape{3}, vram.Float64), Reduction: r})
			}},
		}
		for _, l := range losses {
			for _, r := range []nn.Reduction{nn.ReductionMean, nn.ReductionSum, nn.ReductionNone} {
				t.Run(l.name+"/"+r.String(), func(t *testing.T) {
					var e *vram.Error
					var out *vram.Tensor
					err := vram.Catch(func() { out = l.f(r) })
					if !errors.As(err, &e) || e.Kind != vram.ErrDType || e.Op != l.name {
						t.Fatalf("got %v (err %v), want an ErrDType error of %s", out, err, l.name)
					}
				})
			}
		}
	})
}

// An integer operand meeting a floating-point one takes its dtype, as in
// PyTorch: integer targets of a float prediction are fine.
func TestLossesPromoteIntegerTargets(t *testing.T) {
	vram.Tidy(func() {
		p := vram.FromSlice([]float64{1, 2, 3}, vram.Shape{3})
		y := vram.FromSlice([]int64{0, 2, 5}, vram.Shape{3})
		cases := []struct {
			name string
			got  *vram.Tensor
			want float64
		}{
			{"mse sum", nn.MSELossWith(p, y, nn.ReductionSum), 1 + 0 + 4},
			{"l1 sum", nn.L1LossWith(p, y, nn.ReductionSum), 1 + 0 + 2},
			{"huber sum", nn.HuberLossWith(p, y, 1, nn.ReductionSum), 0.5 + 0 + 1.5},
		}
		for _, c := range cases {
			if c.got.DType() != vram.Float64 || c.got.Item() != c.want {
				t.Errorf("%s: got %v %v, want float64 %v", c.name, c.got.DType(), c.got.Item(), c.want)
			}
		}
	})
}
