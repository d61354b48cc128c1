package vram

import (
	"errors"
	"testing"
)

// Target lengths whose sum overflows int64 back to the number of
// concatenated targets are refused with ErrShape, as any other sum that
// differs from it: they passed the check and sliced the targets out of
// range, a runtime panic that Catch does not recover.
func TestCTCLossTargetLengthsOverflow(t *testing.T) {
	Tidy(func() {
		lp := Zeros(Shape{3, 4, 3}).LogSoftmax(2)
		in := FromSlice([]int64{3, 3, 3, 3}, Shape{4})
		const q = int64(1) << 62 // four of them sum to 2^64, 0 in int64
		cases := []struct {
			name    string
			targets *Tensor
			lengths []int64
		}{
			{"sum wraps to 0", Zeros(Shape{0}, Int64), []int64{q, q, q, q}},
			{"sum wraps to 2", FromSlice([]int64{1, 2}, Shape{2}), []int64{q, q, q, q + 2}},
			{"one length above the targets", FromSlice([]int64{1, 2}, Shape{2}), []int64{5, -1, -1, -1}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("panic that Catch does not recover: %v", r)
						}
					}()
					err = Catch(func() { CTCLoss(lp, c.targets, in, FromSlice(c.lengths, Shape{4}), 0, false) })
				}()
				var e *Error
				if !errors.As(err, &e) || (e.Kind != ErrShape && e.Kind != ErrArgument) {
					t.Fatalf("error %v, want an ErrShape or ErrArgument error", err)
				}
			})
		}
	})
}
