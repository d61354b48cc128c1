package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestRegressionAndBinaryLosses checks each loss against values computed
// from PyTorch's formulas in float64, its gradient against central
// differences, its dtype under half precision (float32, as autocast
// gives), and that it leaves no memory behind on a sim device.
func TestRegressionAndBinaryLosses(t *testing.T) {
	pred := []float64{0.5, -1.2, 2.0, 0.1, 3.0, -0.3}
	target := []float64{0.4, 0.3, -1.0, 0.1, 0.0, -0.35}
	logits := []float64{0.5, -1.2, 20.0, -30.0, 0.0, 3.0}
	probs := []float64{0.2, 0.9, 1.0, 0.0, 0.5, 0.75}
	labels := []float64{1, 0, 1, 0, 0.5, 0.25}
	tests := []struct {
		name     string
		loss     func(p, t *vram.Tensor) *vram.Tensor
		in, tgt  []float64
		want     float64
		gradSafe bool // finite differences apply (no kink or clamp near the inputs)
	}{
		{"L1Loss", nn.L1Loss, pred, target, 1.275, true},
		{"SmoothL1Loss beta 1", func(p, t *vram.Tensor) *vram.Tensor { return nn.SmoothL1Loss(p, t, 1) }, pred, target, 1.0010416666666666, true},
		{"SmoothL1Loss beta 0.5", func(p, t *vram.Tensor) *vram.Tensor { return nn.SmoothL1Loss(p, t, 0.5) }, pred, target, 1.1270833333333334, true},
		{"SmoothL1Loss beta 0", func(p, t *vram.Tensor) *vram.Tensor { return nn.SmoothL1Loss(p, t, 0) }, pred, target, 1.275, true},
		{"HuberLoss delta 1", func(p, t *vram.Tensor) *vram.Tensor { return nn.HuberLoss(p, t, 1) }, pred, target, 1.0010416666666666, true},
		{"HuberLoss delta 0.5", func(p, t *vram.Tensor) *vram.Tensor { return nn.HuberLoss(p, t, 0.5) }, pred, target, 0.5635416666666667, true},
		{"BCEWithLogitsLoss", nn.BCEWithLogitsLoss, logits, labels, 0.6215156642855121, true},
		{"BCELoss", nn.BCELoss, probs, labels, 0.9528019124901591, false},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				before := vram.MemoryAllocated(dev)
				vram.Tidy(func() {
					x := vram.FromSlice(tc.in, vram.Shape{2, 3}, dev, vram.WithGrad())
					y := vram.FromSlice(tc.tgt, vram.Shape{2, 3}, dev)
					l := tc.loss(x, y)
					if got := l.Item(); !near(got, tc.want, 1e-12) {
						t.Fatalf("loss %v, want %v", got, tc.want)
					}
					l.Backward()
					if !tc.gradSafe {
						return
					}
					g := x.Grad().Float64s()
					const h = 1e-6
					for i := range tc.in {
						at := func(d float64) float64 {
							v := append([]float64(nil), tc.in...)
							v[i] += d
							return tc.loss(vram.FromSlice(v, vram.Shape{2, 3}, dev), y).Item()
						}
						if fd := (at(h) - at(-h)) / (2 * h); math.Abs(fd-g[i]) > 1e-6 {
							t.Errorf("d/dx[%d] = %v, finite difference %v", i, g[i], fd)
						}
					}
					half := tc.loss(x.Cast(vram.BFloat16), y.Cast(vram.BFloat16))
					if half.DType() != vram.Float32 || !near(half.Item(), tc.want, 0.05) {
						t.Errorf("bfloat16 inputs: %v %s, want float32 near %v", half.Item(), half.DType(), tc.want)
					}
				})
				if after := vram.MemoryAllocated(dev); after != before {
					t.Errorf("%d bytes allocated after the loss, %d before", after, before)
				}
			})
		}
	}
}

// TestLossArguments checks the refusals of the losses' arguments.
func TestLossArguments(t *testing.T) {
	a := vram.Zeros(vram.Shape{2, 3})
	defer a.Release()
	b := vram.Zeros(vram.Shape{3, 2})
	defer b.Release()
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"smooth l1 negative beta", func() { nn.SmoothL1Loss(a, a, -1) }, vram.ErrArgument},
		{"smooth l1 NaN beta", func() { nn.SmoothL1Loss(a, a, math.NaN()) }, vram.ErrArgument},
		{"huber zero delta", func() { nn.HuberLoss(a, a, 0) }, vram.ErrArgument},
		{"huber infinite delta", func() { nn.HuberLoss(a, a, math.Inf(1)) }, vram.ErrArgument},
		{"bce shapes", func() { nn.BCELoss(a, b) }, vram.ErrShape},
		{"bce with logits shapes", func() { nn.BCEWithLogitsLoss(a, b) }, vram.ErrShape},
		{"bce nil", func() { nn.BCEWithLogitsLoss(nil, a) }, vram.ErrArgument},
		{"nll shapes", func() { nn.NLLLoss(a, vram.FromSlice([]int64{0, 1, 2}, nil)) }, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(func() { vram.Tidy(tc.fn) })
			if !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
		})
	}
}

// TestNLLLossIsCrossEntropyOfLogSoftmax checks NLLLoss of log-probabilities
// against CrossEntropyLoss of the logits, ignored targets included.
func TestNLLLossIsCrossEntropyOfLogSoftmax(t *testing.T) {
	vram.Tidy(func() {
		logits := vram.FromSlice([]float64{1, 2, 3, 0, 0, 0, -1, 4, 2}, vram.Shape{3, 3})
		targets := vram.FromSlice([]int64{2, -100, 1}, nil)
		ce := nn.CrossEntropyLoss(logits, targets).Item()
		nll := nn.NLLLoss(logits.LogSoftmax(1), targets).Item()
		if !near(ce, nll, 1e-15) {
			t.Fatalf("NLLLoss %v, CrossEntropyLoss %v", nll, ce)
		}
	})
}
