package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestInstanceNormChangedFields sets an InstanceNorm's Eps or Momentum
// after construction to what NewInstanceNorm2d refuses: Forward refuses
// it too, in training and in evaluation, before it updates the running
// statistics, rather than return NaN or fail once they have changed.
func TestInstanceNormChangedFields(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 3, 2, 2}, vram.WithGenerator(vram.NewGenerator(1)))
	defer x.Release()
	tests := []struct {
		name   string
		change func(l *nn.InstanceNorm)
	}{
		{"NaN eps", func(l *nn.InstanceNorm) { l.Eps = math.NaN() }},
		{"infinite eps", func(l *nn.InstanceNorm) { l.Eps = math.Inf(1) }},
		{"negative eps", func(l *nn.InstanceNorm) { l.Eps = -1 }},
		{"NaN momentum", func(l *nn.InstanceNorm) { l.Momentum = math.NaN() }},
		{"momentum above 1", func(l *nn.InstanceNorm) { l.Momentum = 2 }},
	}
	for _, tc := range tests {
		for _, training := range []bool{true, false} {
			l := nn.NewInstanceNorm2d(3, nn.InstanceNormOptions{TrackRunningStats: true, Affine: true})
			if !training {
				l.Eval()
			}
			tc.change(l)
			mean, variance := l.RunningMean.Float64s(), l.RunningVar.Float64s()
			err := vram.Catch(func() { l.Forward(x) })
			var ve *vram.Error
			if !errors.Is(err, vram.ErrArgument) || !errors.As(err, &ve) || ve.Op != "instance_norm2d" {
				t.Errorf("%s, training %v: got %v, want an instance_norm2d error of kind ErrArgument", tc.name, training, err)
			}
			if !slices.Equal(l.RunningMean.Float64s(), mean) || !slices.Equal(l.RunningVar.Float64s(), variance) {
				t.Errorf("%s, training %v: the failed Forward changed the running statistics", tc.name, training)
			}
			nn.Release(l)
		}
	}
}
