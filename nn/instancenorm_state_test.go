package nn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestInstanceNormBadStateChangesNothing gives an InstanceNorm with
// running statistics and an affine map a field that Forward cannot use: a
// running buffer or parameter of the wrong shape or dtype, one of a pair
// left nil, a released one, or a Spatial or NumFeatures no constructor
// makes. Forward panics with an *vram.Error of the kind named, in
// training and in evaluation mode, and leaves the running statistics as
// they were: it checks everything before it updates anything.
func TestInstanceNormBadStateChangesNothing(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 3, 4}, vram.WithGenerator(vram.NewGenerator(1)))
	defer x.Release()
	tests := []struct {
		name   string
		change func(l *nn.InstanceNorm)
		kind   error
	}{
		{"running_var of 4 channels", func(l *nn.InstanceNorm) { l.RunningVar = vram.Ones(vram.Shape{4}) }, vram.ErrShape},
		{"running_var [3, 1]", func(l *nn.InstanceNorm) { l.RunningVar = vram.Ones(vram.Shape{3, 1}) }, vram.ErrShape},
		{"running_mean of 2 channels", func(l *nn.InstanceNorm) { l.RunningMean = vram.Zeros(vram.Shape{2}) }, vram.ErrShape},
		{"int64 running_var", func(l *nn.InstanceNorm) { l.RunningVar = vram.Ones(vram.Shape{3}, vram.Int64) }, vram.ErrDType},
		{"bool running_var", func(l *nn.InstanceNorm) { l.RunningVar = vram.Ones(vram.Shape{3}, vram.Bool) }, vram.ErrDType},
		{"nil running_var", func(l *nn.InstanceNorm) { l.RunningVar = nil }, vram.ErrArgument},
		{"released running_var", func(l *nn.InstanceNorm) { l.RunningVar.Release() }, vram.ErrReleased},
		{"weight of 4 channels", func(l *nn.InstanceNorm) { l.Weight = vram.Ones(vram.Shape{4}) }, vram.ErrShape},
		{"bias of 2 channels", func(l *nn.InstanceNorm) { l.Bias = vram.Zeros(vram.Shape{2}) }, vram.ErrShape},
		{"nil bias", func(l *nn.InstanceNorm) { l.Bias = nil }, vram.ErrArgument},
		{"released weight", func(l *nn.InstanceNorm) { l.Weight.Release() }, vram.ErrReleased},
		{"NumFeatures 4", func(l *nn.InstanceNorm) { l.NumFeatures = 4 }, vram.ErrShape},
		{"Spatial 0", func(l *nn.InstanceNorm) { l.Spatial = 0 }, vram.ErrArgument},
		{"Spatial -1", func(l *nn.InstanceNorm) { l.Spatial = -1 }, vram.ErrArgument},
		{"Spatial -2", func(l *nn.InstanceNorm) { l.Spatial = -2 }, vram.ErrArgument},
		{"Spatial 4", func(l *nn.InstanceNorm) { l.Spatial = 4 }, vram.ErrArgument},
	}
	for _, tc := range tests {
		for _, training := range []bool{true, false} {
			l := nn.NewInstanceNorm1d(3, nn.InstanceNormOptions{TrackRunningStats: true, Affine: true, Momentum: 0.5})
			if !training {
				l.Eval()
			}
			mean, variance := l.RunningMean, l.RunningVar
			tc.change(l)
			before := func(t *vram.Tensor) []float64 {
				if t.Released() {
					return nil
				}
				return t.Float64s()
			}
			wantMean, wantVar := before(mean), before(variance)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s, training %v: panicked with %v (%T), want an *vram.Error", tc.name, training, r, r)
					}
				}()
				err = vram.Catch(func() { l.Forward(x).Release() })
			}()
			if !errors.Is(err, tc.kind) {
				t.Errorf("%s, training %v: got %v, want an error of kind %v", tc.name, training, err, tc.kind)
			}
			if got := before(mean); !slices.Equal(got, wantMean) {
				t.Errorf("%s, training %v: running_mean %v after the failed Forward, want %v", tc.name, training, got, wantMean)
			}
			if got := before(variance); !slices.Equal(got, wantVar) {
				t.Errorf("%s, training %v: running_var %v after the failed Forward, want %v", tc.name, training, got, wantVar)
			}
			nn.Release(l)
			mean.Release()
			variance.Release()
		}
	}
}

// TestInstanceNormEmptyBatch normalizes a batch of no samples in training
// mode: the result is empty, and the running statistics, which have no
// instance to average, stay as they were rather than become NaN (as a
// batch norm's do).
func TestInstanceNormEmptyBatch(t *testing.T) {
	l := nn.NewInstanceNorm2d(3, nn.InstanceNormOptions{TrackRunningStats: true, Affine: true})
	defer nn.Release(l)
	x := vram.Zeros(vram.Shape{0, 3, 2, 2})
	defer x.Release()
	y := l.Forward(x)
	defer y.Release()
	if !slices.Equal(y.Shape(), x.Shape()) {
		t.Errorf("shape %v, want %v", y.Shape(), x.Shape())
	}
	if got := l.RunningMean.Float64s(); !slices.Equal(got, []float64{0, 0, 0}) {
		t.Errorf("running_mean %v, want zeros", got)
	}
	if got := l.RunningVar.Float64s(); !slices.Equal(got, []float64{1, 1, 1}) {
		t.Errorf("running_var %v, want ones", got)
	}
}
