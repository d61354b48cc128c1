package nn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// An error raised inside an activation or a loss composed from other ops
// names the activation or the loss, in its Op and in its Detail, and
// never the inner op it came from.
func TestComposedErrorsNameTheirOp(t *testing.T) {
	xi := vram.FromSlice([]int64{1, 2}, vram.Shape{2})
	f2 := vram.FromSlice([]float32{1, 2}, vram.Shape{2})
	f3 := vram.FromSlice([]float32{1, 2, 3}, vram.Shape{3})
	tests := []struct {
		name, op, inner string
		fn              func()
	}{
		{"hardsigmoid int", "hardsigmoid", "hardtanh", func() { nn.NewHardsigmoid().Forward(xi) }},
		{"log_sigmoid int", "log_sigmoid", "softplus", func() { nn.NewLogSigmoid().Forward(xi) }},
		{"selu int", "selu", "elu", func() { nn.NewSELU().Forward(xi) }},
		{"softmin int", "softmin", "softmax", func() { nn.NewSoftmin(0).Forward(xi) }},
		{"soft_margin_loss int", "soft_margin_loss", "log_sigmoid", func() { nn.SoftMarginLoss(xi, xi, nn.ReductionSum) }},
		{"cosine_similarity int", "cosine_similarity", "norm", func() { nn.CosineSimilarity(xi, xi, 0, 1e-8) }},
		{"l1_loss shapes", "l1_loss", "sub", func() { nn.L1LossWith(f2, f3, nn.ReductionSum) }},
		{"mse_loss shapes", "mse_loss", "sub", func() { nn.MSELossWith(f2, f3, nn.ReductionSum) }},
		{"smooth_l1_loss shapes", "smooth_l1_loss", "sub", func() { nn.SmoothL1LossWith(f2, f3, 1, nn.ReductionSum) }},
		{"huber_loss shapes", "huber_loss", "sub", func() { nn.HuberLossWith(f2, f3, 1, nn.ReductionSum) }},
		{"kl_div shapes", "kl_div", "sub", func() { nn.KLDivLoss(f2, f3, false, nn.ReductionSum) }},
		{"cosine_similarity shapes", "cosine_similarity", "mul", func() { nn.CosineSimilarity(f2, f3, 0, 1e-8) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e *vram.Error
			if err := vram.Catch(tc.fn); !errors.As(err, &e) {
				t.Fatalf("got %v, want an *vram.Error", err)
			}
			if e.Op != tc.op {
				t.Errorf("Op %q, want %q (%v)", e.Op, tc.op, e)
			}
			for _, w := range strings.FieldsFunc(e.Detail, func(r rune) bool { return r == ' ' || r == ',' || r == ';' || r == ':' }) {
				if w == tc.inner {
					t.Errorf("detail %q names the inner op %q", e.Detail, tc.inner)
				}
			}
		})
	}
}
