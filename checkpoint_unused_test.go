package vram

import (
	"strings"
	"testing"
)

// TestCheckpointResultIndependentOfGrad: a checkpointed function that
// ignores its input and uses no tensor that requires grad gives a result
// through which no gradient flows, as in PyTorch, where that result would
// not require grad at all. The checkpoint only learns it in the
// recompute, so Backward warns that the result depends on nothing that
// requires grad; x gets no gradient, and the other terms of the loss get
// theirs.
func TestCheckpointResultIndependentOfGrad(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func(c *Tensor) func(x *Tensor) *Tensor
		want float64
		// backward runs Backward from a line of its own, as the warning
		// is given once a line.
		backward func(loss *Tensor)
	}{
		{"constant", func(c *Tensor) func(x *Tensor) *Tensor {
			return func(*Tensor) *Tensor { return c.MulScalar(2) }
		}, 3, func(l *Tensor) { l.Backward() }},
		{"detached input", func(*Tensor) func(x *Tensor) *Tensor {
			return func(x *Tensor) *Tensor { d := x.Detach(); defer d.Release(); return d.MulScalar(2) }
		}, 2, func(l *Tensor) { l.Backward() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warnings []string
			old := SetWarningHandler(func(w Warning) { warnings = append(warnings, w.Message) })
			defer SetWarningHandler(old)
			Tidy(func() {
				c := Full(Shape{3}, 1.5)
				x := Ones(Shape{3}, WithGrad())
				w := Ones(Shape{3}, WithGrad())
				out := Checkpoint(tc.fn(c), x)
				if got := out.Float64s(); got[0] != tc.want {
					t.Fatalf("result %v, want %vs", got, tc.want)
				}
				tc.backward(out.Add(w).Sum())
				if x.Grad() != nil {
					if s := x.Grad().Float64s(); s[0] != 0 {
						t.Errorf("x got gradient %v from a result that does not depend on it", s)
					}
				}
				if w.Grad() == nil || w.Grad().Float64s()[0] != 1 {
					t.Errorf("the other term's gradient is %v, want ones", w.Grad())
				}
			})
			if !strings.Contains(strings.Join(warnings, "\n"), "depends on no tensor that requires grad") {
				t.Errorf("warnings %q; want one saying the result depends on no tensor that requires grad", warnings)
			}
		})
	}
}
