package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestBatchNormCumulativeBadCounter gives a batch norm with a cumulative
// average a NumBatchesTracked that is not an int64 scalar: Forward must
// panic with vram's error for the counter, as without a cumulative
// average, and leave the running statistics as they were.
func TestBatchNormCumulativeBadCounter(t *testing.T) {
	tests := []struct {
		name    string
		counter func() *vram.Tensor
		want    error
	}{
		{"empty", func() *vram.Tensor { return vram.Zeros(vram.Shape{0}, vram.Int64) }, vram.ErrArgument},
		{"two counts", func() *vram.Tensor { return vram.Zeros(vram.Shape{2}, vram.Int64) }, vram.ErrArgument},
		{"float32", func() *vram.Tensor { return vram.Zeros(vram.Shape{}) }, vram.ErrArgument},
		{"released", func() *vram.Tensor {
			c := vram.Zeros(vram.Shape{}, vram.Int64)
			c.Release()
			return c
		}, vram.ErrReleased},
	}
	for _, tt := range tests {
		for _, oneD := range []bool{false, true} {
			name := tt.name + " BatchNorm2d"
			if oneD {
				name = tt.name + " BatchNorm1d"
			}
			t.Run(name, func(t *testing.T) {
				o := nn.BatchNormOptions{CumulativeAverage: true}
				var m nn.Module
				var bn *nn.BatchNorm2d
				x := vram.Ones(vram.Shape{2, 2, 2, 2})
				if oneD {
					l := nn.NewBatchNorm1dOptions(2, o)
					m, bn = l, &l.BatchNorm2d
					x = vram.Ones(vram.Shape{2, 2, 3})
				} else {
					bn = nn.NewBatchNorm2dOptions(2, o)
					m = bn
				}
				defer x.Release()
				bn.NumBatchesTracked.Release()
				bn.NumBatchesTracked = tt.counter()
				err := vram.Catch(func() { m.Forward(x).Release() })
				var ve *vram.Error
				if !errors.As(err, &ve) || !errors.Is(err, tt.want) {
					t.Fatalf("Forward: %v (%T), want a *vram.Error matching %v", err, err, tt.want)
				}
				if got := bn.RunningMean.Float32s(); got[0] != 0 || got[1] != 0 {
					t.Errorf("running mean %v, want it unchanged", got)
				}
				bn.NumBatchesTracked.Release()
				bn.NumBatchesTracked = nil
				nn.Release(m)
			})
		}
	}
}
