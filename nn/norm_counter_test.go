package nn_test

import (
	"errors"
	"slices"
	"strings"
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

// TestBatchNorm1dForwardReLUResidualShape gives BatchNorm1d.ForwardReLU a
// residual whose shape differs from the input's: the error is of kind
// ErrShape and names batch_norm1d, not the reshape inside it, and the
// running statistics and the batch count stay as they were.
func TestBatchNorm1dForwardReLUResidualShape(t *testing.T) {
	for _, tc := range []struct {
		name        string
		x, residual vram.Shape
	}{
		{"more channels", vram.Shape{2, 3}, vram.Shape{2, 4}},
		{"as many elements", vram.Shape{2, 3, 2}, vram.Shape{2, 2, 3}},
		{"a scalar", vram.Shape{2, 3}, vram.Shape{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := nn.NewBatchNorm1d(3)
			defer nn.Release(l)
			x, r := vram.Randn(tc.x), vram.Randn(tc.residual)
			defer x.Release()
			defer r.Release()
			err := vram.Catch(func() { l.ForwardReLU(x, r).Release() })
			if !errors.Is(err, vram.ErrShape) || !strings.Contains(err.Error(), "batch_norm1d") {
				t.Errorf("got %v, want an error of kind ErrShape naming batch_norm1d", err)
			}
			if got := l.NumBatchesTracked.Int64s()[0]; got != 0 {
				t.Errorf("num_batches_tracked %d after the failed call, want 0", got)
			}
			if got := l.RunningMean.Float64s(); !slices.Equal(got, []float64{0, 0, 0}) {
				t.Errorf("running_mean %v after the failed call, want zeros", got)
			}
		})
	}
}
