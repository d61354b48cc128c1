package vram

import (
	"errors"
	"strings"
	"testing"
)

// TestIndexErrorsNameTheDevice: an index out of range, found by the
// device's kernel or checked before it, is an error of kind ErrIndex
// whose text names the device of the caller's tensors: a sim tensor's
// error does not read as the cpu backend's.
func TestIndexErrorsNameTheDevice(t *testing.T) {
	tests := []struct {
		name string
		op   func(d Device)
	}{
		{"gather", func(d Device) {
			x := FromSlice([]float32{1, 2, 3}, Shape{3}).To(d)
			x.Gather(0, FromSlice([]int64{-1}, Shape{1}).To(d))
		}},
		{"index_select", func(d Device) {
			x := FromSlice([]float32{1, 2, 3}, Shape{3}).To(d)
			x.IndexSelect(0, FromSlice([]int64{3}, Shape{1}).To(d))
		}},
		{"embedding", func(d Device) {
			w := FromSlice([]float32{1, 2, 3, 4}, Shape{2, 2}).To(d)
			Embedding(FromSlice([]int64{5}, Shape{1}).To(d), w)
		}},
		{"scatter_add", func(d Device) {
			x := FromSlice([]float32{1, 2, 3}, Shape{3}).To(d)
			x.ScatterAdd(0, FromSlice([]int64{-1}, Shape{1}).To(d), FromSlice([]float32{1}, Shape{1}).To(d))
		}},
		{"scatter", func(d Device) {
			x := FromSlice([]float32{1, 2, 3}, Shape{3}).To(d)
			x.Scatter(0, FromSlice([]int64{4}, Shape{1}).To(d), FromSlice([]float32{1}, Shape{1}).To(d))
		}},
		{"scatter_value", func(d Device) {
			x := FromSlice([]float32{1, 2, 3}, Shape{3}).To(d)
			x.ScatterValue(0, FromSlice([]int64{4}, Shape{1}).To(d), 7)
		}},
		{"take", func(d Device) {
			x := FromSlice([]float32{1, 2, 3}, Shape{3}).To(d)
			x.Take(FromSlice([]int64{7}, Shape{1}).To(d))
		}},
		{"index_add", func(d Device) {
			x := FromSlice([]float32{1, 2, 3}, Shape{3}).To(d)
			x.IndexAdd(0, FromSlice([]int64{-1}, Shape{1}).To(d), FromSlice([]float32{1}, Shape{1}).To(d), 1)
		}},
		{"nll_loss", func(d Device) {
			lp := FromSlice([]float32{-1, -2, -3, -4}, Shape{2, 2}).To(d)
			NLLLoss(lp, FromSlice([]int64{0, 2}, Shape{2}).To(d))
		}},
	}
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				err := Catch(func() { tc.op(dev) })
				if !errors.Is(err, ErrIndex) {
					t.Fatalf("got %v, want an error of kind ErrIndex", err)
				}
				msg := err.Error()
				if dev.Kind != "cpu" && strings.Contains(msg, "cpu") {
					t.Errorf("%q names the cpu backend for a tensor on %s", msg, dev)
				}
				var ve *Error
				if errors.As(err, &ve) && ve.Err != nil && !strings.Contains(ve.Err.Error(), dev.String()) {
					t.Errorf("the device's error %q does not name %s", ve.Err, dev)
				}
			})
		}
	}
}
