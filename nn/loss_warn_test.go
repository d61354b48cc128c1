package nn

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vramgo/vram"
)

// warnRuns makes each run of TestLossTargetSizeWarning use shapes of its
// own, so that -count=N sees warnings that earlier runs did not give yet.
var warnRuns atomic.Int64

// TestLossTargetSizeWarning checks that the elementwise losses warn, once
// per call site and at the caller's line, when the target's shape differs
// from the input's and they broadcast, as PyTorch's do, and say nothing
// when the shapes agree.
func TestLossTargetSizeWarning(t *testing.T) {
	var got []vram.Warning
	defer vram.SetWarningHandler(vram.SetWarningHandler(func(w vram.Warning) { got = append(got, w) }))
	n := 3 + int(warnRuns.Add(1))
	pred := vram.Randn(vram.Shape{n, 1})
	defer pred.Release()
	flat := vram.Randn(vram.Shape{n})
	defer flat.Release()
	same := vram.Randn(vram.Shape{n, 1})
	defer same.Release()
	cases := []struct {
		name   string
		loss   func(pred, target *vram.Tensor) *vram.Tensor // each called from a line of its own
		op     string
		target *vram.Tensor
		warns  int
	}{
		{"mse", func(p, y *vram.Tensor) *vram.Tensor { return MSELoss(p, y) }, "mse_loss", flat, 1},
		{"mse sum", func(p, y *vram.Tensor) *vram.Tensor { return MSELossWith(p, y, ReductionSum) }, "mse_loss", flat, 1},
		{"mse none", func(p, y *vram.Tensor) *vram.Tensor { return MSELossWith(p, y, ReductionNone) }, "mse_loss", flat, 1},
		{"root mse", func(p, y *vram.Tensor) *vram.Tensor { return vram.MSELoss(p, y) }, "mse_loss", flat, 1},
		{"l1", func(p, y *vram.Tensor) *vram.Tensor { return L1Loss(p, y) }, "l1_loss", flat, 1},
		{"smooth l1", func(p, y *vram.Tensor) *vram.Tensor { return SmoothL1Loss(p, y, 1) }, "smooth_l1_loss", flat, 1},
		{"smooth l1 beta 0", func(p, y *vram.Tensor) *vram.Tensor { return SmoothL1Loss(p, y, 0) }, "l1_loss", flat, 1},
		{"huber", func(p, y *vram.Tensor) *vram.Tensor { return HuberLoss(p, y, 1) }, "huber_loss", flat, 1},
		{"mse same shape", MSELoss, "", same, 0},
		{"l1 same shape", L1Loss, "", same, 0},
		{"huber same shape", func(p, y *vram.Tensor) *vram.Tensor { return HuberLoss(p, y, 1) }, "", same, 0},
	}
	for _, c := range cases {
		got = nil
		for range 3 { // one call site, as in a training loop: one warning
			c.loss(pred, c.target).Release()
		}
		if len(got) != c.warns {
			t.Errorf("%s: %d warnings, want %d: %v", c.name, len(got), c.warns, got)
			continue
		}
		for _, w := range got {
			if !strings.HasPrefix(w.Message, c.op+": ") || !strings.Contains(w.Message, "broadcast") {
				t.Errorf("%s: warning %q does not name %s and the broadcast", c.name, w.Message, c.op)
			}
			if !strings.Contains(w.Location, "loss_warn_test.go:") {
				t.Errorf("%s: warning located at %q, want the caller's line in loss_warn_test.go", c.name, w.Location)
			}
		}
	}
}

// TestKLDivLossMeanWarning checks that KLDivLoss warns, once per call
// site, when its reduction is ReductionMean, as PyTorch's kl_div does:
// the mean divides by the number of elements, not by the batch size that
// the divergence per sample needs, which ReductionBatchMean gives. Other
// reductions say nothing.
func TestKLDivLossMeanWarning(t *testing.T) {
	var got []vram.Warning
	defer vram.SetWarningHandler(vram.SetWarningHandler(func(w vram.Warning) { got = append(got, w) }))
	n := 3 + int(warnRuns.Add(1))
	x := vram.Randn(vram.Shape{n, 4}).LogSoftmax(1)
	defer x.Release()
	y := vram.Randn(vram.Shape{n, 4}).Softmax(1)
	defer y.Release()
	for _, c := range []struct {
		r     Reduction
		warns int
	}{{ReductionMean, 1}, {ReductionBatchMean, 0}, {ReductionSum, 0}, {ReductionNone, 0}} {
		got = nil
		for range 3 {
			KLDivLoss(x, y, false, c.r).Release()
		}
		if len(got) != c.warns {
			t.Errorf("%v: %d warnings, want %d: %v", c.r, len(got), c.warns, got)
			continue
		}
		for _, w := range got {
			if !strings.HasPrefix(w.Message, "kl_div: ") || !strings.Contains(w.Message, "batchmean") || !strings.Contains(w.Location, "loss_warn_test.go:") {
				t.Errorf("%v: warning %q at %q does not name kl_div and batchmean at the caller's line", c.r, w.Message, w.Location)
			}
		}
	}
}
