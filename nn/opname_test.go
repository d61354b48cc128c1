package nn_test

import (
	"errors"
	"math"
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

// A loss of 16-bit inputs is computed in float32 and returned in their
// dtype, as PyTorch's losses return their inputs' dtype; inside an
// Autocast region it stays float32, as autocast runs them in float32.
func TestLossesKeepHalfDType(t *testing.T) {
	p := vram.FromSlice([]float32{0.2, 0.7, 0.4, 0.9}, vram.Shape{2, 2})
	q := vram.FromSlice([]float32{0.3, 0.1, 0.6, 0.5}, vram.Shape{2, 2})
	y := vram.FromSlice([]float32{1, -1}, vram.Shape{2})
	tests := []struct {
		name string
		fn   func(a, b *vram.Tensor) *vram.Tensor
	}{
		{"l1", func(a, b *vram.Tensor) *vram.Tensor { return nn.L1Loss(a, b) }},
		{"l1 none", func(a, b *vram.Tensor) *vram.Tensor { return nn.L1LossWith(a, b, nn.ReductionNone) }},
		{"smooth l1", func(a, b *vram.Tensor) *vram.Tensor { return nn.SmoothL1Loss(a, b, 1) }},
		{"huber", func(a, b *vram.Tensor) *vram.Tensor { return nn.HuberLossWith(a, b, 1, nn.ReductionSum) }},
		{"bce with logits", func(a, b *vram.Tensor) *vram.Tensor { return nn.BCEWithLogitsLoss(a, b) }},
		{"bce", func(a, b *vram.Tensor) *vram.Tensor { return nn.BCELoss(a, b) }},
		{"kl_div", func(a, b *vram.Tensor) *vram.Tensor { return nn.KLDivLoss(a, b, false, nn.ReductionSum) }},
		{"kl_div batchmean", func(a, b *vram.Tensor) *vram.Tensor {
			return nn.KLDivLoss(a, b, true, nn.ReductionBatchMean)
		}},
		{"cosine embedding", func(a, b *vram.Tensor) *vram.Tensor {
			return nn.CosineEmbeddingLoss(a, b, y, 0, nn.ReductionMean)
		}},
	}
	for _, dt := range []vram.DType{vram.Float16, vram.BFloat16} {
		for _, tc := range tests {
			t.Run(dt.String()+" "+tc.name, func(t *testing.T) {
				a, b := p.Cast(dt), q.Cast(dt)
				want := tc.fn(p, q).Float64s()
				got := tc.fn(a, b)
				if got.DType() != dt {
					t.Fatalf("dtype %v, want %v", got.DType(), dt)
				}
				for i, v := range got.Float64s() {
					if d := v - want[i]; d > 0.02 || d < -0.02 {
						t.Fatalf("value %v, want about %v", v, want[i])
					}
				}
				if tc.name == "bce" {
					return // refused inside Autocast (amp's TestAutocastRefusesBCELoss)
				}
				var in *vram.Tensor
				vram.Autocast(dt, func() { in = tc.fn(a, b) })
				if in.DType() != vram.Float32 {
					t.Fatalf("inside Autocast: dtype %v, want float32", in.DType())
				}
			})
		}
	}
}

// CosineSimilarity takes integer and bool inputs as float32, as
// torch.nn.functional.cosine_similarity takes them in its default dtype.
func TestCosineSimilarityIntegerInputs(t *testing.T) {
	tests := []struct {
		name   string
		x1, x2 *vram.Tensor
		want   float64
	}{
		{"int64", vram.FromSlice([]int64{1, 0}, vram.Shape{2}), vram.FromSlice([]int64{1, 1}, vram.Shape{2}), 1 / math.Sqrt2},
		{"int32 and float64", vram.FromSlice([]int32{3, 4}, vram.Shape{2}), vram.FromSlice([]float64{4, 3}, vram.Shape{2}), 24.0 / 25},
		{"bool", vram.FromSlice([]bool{true, true}, vram.Shape{2}), vram.FromSlice([]bool{true, false}, vram.Shape{2}), 1 / math.Sqrt2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := nn.CosineSimilarity(tc.x1, tc.x2, 0, 1e-8)
			wantDT := vram.Float32
			if tc.x1.DType() == vram.Float64 || tc.x2.DType() == vram.Float64 {
				wantDT = vram.Float64
			}
			if c.DType() != wantDT {
				t.Fatalf("dtype %v, want %v", c.DType(), wantDT)
			}
			if got := c.Item(); math.Abs(got-tc.want) > 1e-6 {
				t.Fatalf("cosine %v, want %v", got, tc.want)
			}
		})
	}
}
