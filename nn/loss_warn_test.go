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
