package nn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// A class target outside [0, C) that is not ignored is an ErrIndex error
// that says the target is out of bounds and which classes there are,
// whatever the options, as CrossEntropyLoss's is: with class weights or
// extra dimensions it named only a bad index of a gather.
func TestClassLossTargetOutOfBounds(t *testing.T) {
	vram.Tidy(func() {
		x := vram.Zeros(vram.Shape{3, 4})
		x3 := vram.Zeros(vram.Shape{3, 4, 2})
		w := vram.Ones(vram.Shape{4})
		bad := vram.FromSlice([]int64{0, 4, 1}, vram.Shape{3})
		neg := vram.FromSlice([]int64{0, -3, 1}, vram.Shape{3})
		bad3 := vram.FromSlice([]int64{0, 1, 2, 3, 9, 1}, vram.Shape{3, 2})
		cases := []struct {
			name string
			fn   func()
		}{
			{"cross_entropy sum", func() { nn.CrossEntropyLossWith(x, bad, nn.CrossEntropyOptions{Reduction: nn.ReductionSum}) }},
			{"cross_entropy weight", func() { nn.CrossEntropyLossWith(x, bad, nn.CrossEntropyOptions{Weight: w}) }},
			{"cross_entropy negative weight", func() { nn.CrossEntropyLossWith(x, neg, nn.CrossEntropyOptions{Weight: w}) }},
			{"cross_entropy smoothing", func() { nn.CrossEntropyLossWith(x, neg, nn.CrossEntropyOptions{LabelSmoothing: 0.1}) }},
			{"cross_entropy extra dimensions", func() { nn.CrossEntropyLoss(x3, bad3) }},
			{"nll_loss weight", func() { nn.NLLLossWith(x, bad, nn.NLLLossOptions{Weight: w}) }},
			{"nll_loss ignore index", func() { nn.NLLLossWith(x, neg, nn.NLLLossOptions{IgnoreIndex: intp(1)}) }},
			{"multi_margin_loss", func() { nn.MultiMarginLoss(x, bad, 1, 1, nil, nn.ReductionSum) }},
			{"multi_margin_loss weight", func() { nn.MultiMarginLoss(x, neg, 1, 1, w, nn.ReductionSum) }},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				err := vram.Catch(c.fn)
				var e *vram.Error
				if !errors.As(err, &e) || e.Kind != vram.ErrIndex {
					t.Fatalf("error %v, want an ErrIndex error", err)
				}
				if !strings.Contains(e.Detail, "target out of bounds") || !strings.Contains(e.Detail, "classes 0 to 3") {
					t.Errorf("error %q does not say that a target is out of the classes 0 to 3", err)
				}
			})
		}
	})
}
