package vram

import (
	"errors"
	"testing"
)

// TestBackwardBadOptions: options Backward cannot use fail with a vram
// error that Catch returns, and leave the graph usable.
func TestBackwardBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts func() []BackwardOption
		kind error
	}{
		{"nil option", func() []BackwardOption { return []BackwardOption{nil} }, ErrArgument},
		{"nil after a good one", func() []BackwardOption { return []BackwardOption{RetainGraph(), nil} }, ErrArgument},
		{"gradient of another shape", func() []BackwardOption { return []BackwardOption{Gradient(Ones(Shape{2}))} }, ErrShape},
		{"gradient on another device", func() []BackwardOption { return []BackwardOption{Gradient(Ones(Shape{}, Sim(0)))} }, ErrDevice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2}, nil, WithGrad())
				loss := w.Mul(w).Sum()
				err := Catch(func() { loss.Backward(tc.opts()...) })
				if !errors.Is(err, tc.kind) {
					t.Fatalf("got %v, want %v", err, tc.kind)
				}
				loss.Backward()
				if got := w.Grad().Float64s(); got[0] != 2 || got[1] != 4 {
					t.Errorf("gradient after the refused call %v, want [2 4]", got)
				}
			})
		})
	}
}
