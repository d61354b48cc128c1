package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// refInstanceNorm normalizes every row of length per of x with its own
// statistics, or, where mean and variance are given per channel, with
// those, and applies w and b per channel (nil for none).
func refInstanceNorm(x []float64, c, per int, mean, vr, w, b []float64) []float64 {
	out := make([]float64, len(x))
	for r := 0; r < len(x)/per; r++ {
		row := x[r*per : r*per+per]
		ch := r % c
		var m, v float64
		if mean != nil {
			m, v = mean[ch], vr[ch]
		} else {
			for _, e := range row {
				m += e
			}
			m /= float64(per)
			for _, e := range row {
				v += (e - m) * (e - m)
			}
			v /= float64(per)
		}
		for i, e := range row {
			y := (e - m) / math.Sqrt(v+1e-5)
			if w != nil {
				y = y*w[ch] + b[ch]
			}
			out[r*per+i] = y
		}
	}
	return out
}

// InstanceNorm1d and 2d normalize each instance, apply their affine map,
// update their running statistics as PyTorch does (mean over the batch of
// the instances' means and unbiased variances) and use them in evaluation
// mode, on batched and unbatched inputs, on the CPU and a simulated
// device.
func TestInstanceNorm(t *testing.T) {
	const n, c = 2, 3
	tests := []struct {
		name  string
		make  func(o nn.InstanceNormOptions, opts ...vram.Option) *nn.InstanceNorm
		shape vram.Shape
	}{
		{"1d", func(o nn.InstanceNormOptions, opts ...vram.Option) *nn.InstanceNorm {
			return nn.NewInstanceNorm1d(c, o, opts...)
		}, vram.Shape{n, c, 5}},
		{"2d", func(o nn.InstanceNormOptions, opts ...vram.Option) *nn.InstanceNorm {
			return nn.NewInstanceNorm2d(c, o, opts...)
		}, vram.Shape{n, c, 2, 3}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+" "+tc.name, func(t *testing.T) {
				x := vram.Randn(tc.shape, vram.Float64, dev, vram.WithGenerator(vram.NewGenerator(6))).MulScalar(3).AddScalar(1)
				xs := x.Float64s()
				per := x.NumElements() / (n * c)

				plain := tc.make(nn.InstanceNormOptions{})
				if len(nn.StateDict(plain)) != 0 {
					t.Fatalf("default layer has state %v", nn.StateDict(plain))
				}
				want := refInstanceNorm(xs, c, per, nil, nil, nil, nil)
				checkValues(t, "plain", plain.Forward(x).Float64s(), want, 1e-10)
				plain.Eval()
				checkValues(t, "plain eval", plain.Forward(x).Float64s(), want, 1e-10)
				u := plain.Forward(x.Select(0, 1))
				if !slices.Equal(u.Shape(), tc.shape[1:]) {
					t.Fatalf("unbatched shape %v", u.Shape())
				}
				checkValues(t, "unbatched", u.Float64s(), want[c*per:], 1e-10)

				l := tc.make(nn.InstanceNormOptions{Affine: true, TrackRunningStats: true}, vram.Float64, dev)
				names := slices.Sorted(func(yield func(string) bool) {
					for k := range nn.StateDict(l) {
						if !yield(k) {
							return
						}
					}
				})
				if !slices.Equal(names, []string{"bias", "num_batches_tracked", "running_mean", "running_var", "weight"}) {
					t.Fatalf("state dict %v", names)
				}
				w, b := []float64{0.5, -1, 2}, []float64{0.1, 0.2, -0.3}
				set(l.Weight, w...)
				set(l.Bias, b...)
				checkValues(t, "affine", l.Forward(x).Float64s(), refInstanceNorm(xs, c, per, nil, nil, w, b), 1e-10)
				rm, rv := make([]float64, c), make([]float64, c)
				for r := range n * c {
					row := xs[r*per : r*per+per]
					var m, v float64
					for _, e := range row {
						m += e
					}
					m /= float64(per)
					for _, e := range row {
						v += (e - m) * (e - m)
					}
					rm[r%c] += 0.1 * m / n
					rv[r%c] += 0.1 * v / float64(per-1) / n
				}
				for i := range rv {
					rv[i] += 0.9
				}
				checkValues(t, "running mean", l.RunningMean.Float64s(), rm, 1e-10)
				checkValues(t, "running var", l.RunningVar.Float64s(), rv, 1e-10)
				if got := l.NumBatchesTracked.Item(); got != 0 {
					t.Fatalf("num_batches_tracked %v, want 0: PyTorch's instance norm does not count batches", got)
				}
				l.Eval()
				checkValues(t, "eval", l.Forward(x).Float64s(), refInstanceNorm(xs, c, per, rm, rv, w, b), 1e-10)
				checkValues(t, "running mean after eval", l.RunningMean.Float64s(), rm, 1e-10)
				l.Train()
				if dev == vram.CPU {
					xg := x.Clone()
					finiteDifferences(t, func() *vram.Tensor { return plain.Forward(xg) }, xg)
					noTrack := tc.make(nn.InstanceNormOptions{Affine: true}, vram.Float64)
					set(noTrack.Weight, w...)
					set(noTrack.Bias, b...)
					finiteDifferences(t, func() *vram.Tensor { return noTrack.Forward(xg) }, xg, noTrack.Weight, noTrack.Bias)
				}
			})
		}
	}
}

// A float16 input comes back float16, normalized in float32.
func TestInstanceNormHalf(t *testing.T) {
	x := vram.FromSlice([]float64{1, 2, 3, 4, -1, 0, 1, 2}, vram.Shape{1, 2, 4})
	y := nn.NewInstanceNorm1d(2, nn.InstanceNormOptions{Affine: true}).Forward(x.Half())
	if y.DType() != vram.Float16 {
		t.Fatalf("dtype %v", y.DType())
	}
	checkValues(t, "half", y.Float64s(), refInstanceNorm(x.Float64s(), 2, 4, nil, nil, nil, nil), 2e-3)
}

// Bad settings and shapes give errors of vram's kinds.
func TestInstanceNormErrors(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"channels 0", func() { nn.NewInstanceNorm1d(0, nn.InstanceNormOptions{}) }, vram.ErrArgument},
		{"negative eps", func() { nn.NewInstanceNorm2d(2, nn.InstanceNormOptions{Eps: -1}) }, vram.ErrArgument},
		{"momentum", func() { nn.NewInstanceNorm2d(2, nn.InstanceNormOptions{Momentum: 2}) }, vram.ErrArgument},
		{"momentum with ZeroMomentum", func() { nn.NewInstanceNorm2d(2, nn.InstanceNormOptions{Momentum: 0.5, ZeroMomentum: true}) }, vram.ErrArgument},
		{"dims", func() { nn.NewInstanceNorm1d(2, nn.InstanceNormOptions{}).Forward(vram.Randn(vram.Shape{1, 2, 3, 3})) }, vram.ErrShape},
		{"channels", func() {
			nn.NewInstanceNorm2d(2, nn.InstanceNormOptions{Affine: true}).Forward(vram.Randn(vram.Shape{1, 3, 3, 3}))
		}, vram.ErrShape},
		{"one element", func() { nn.NewInstanceNorm1d(2, nn.InstanceNormOptions{}).Forward(vram.Randn(vram.Shape{4, 2, 1})) }, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := vram.Catch(tc.fn); !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
		})
	}
}

// The momentum of the running statistics: the options' 0 means 0.1,
// ZeroMomentum and a Momentum field set to 0 leave them as they are (as
// PyTorch's momentum=0 and momentum=None do), and 1 takes the batch's.
func TestInstanceNormMomentum(t *testing.T) {
	x := vram.FromSlice([]float64{1, 3, 2, 6, 0, 4, 5, 9}, vram.Shape{2, 1, 4})
	// Per instance: means 3 and 4.5, unbiased variances 14/3 and 41/3.
	batchMean, batchVar := 3.75, (14.0/3+41.0/3)/2
	tests := []struct {
		name     string
		o        nn.InstanceNormOptions
		momentum float64 // the layer's Momentum field after construction, if not NaN
		want     float64 // the weight of the batch
	}{
		{"default", nn.InstanceNormOptions{}, math.NaN(), 0.1},
		{"0.5", nn.InstanceNormOptions{Momentum: 0.5}, math.NaN(), 0.5},
		{"1", nn.InstanceNormOptions{Momentum: 1}, math.NaN(), 1},
		{"ZeroMomentum", nn.InstanceNormOptions{ZeroMomentum: true}, math.NaN(), 0},
		{"field 0", nn.InstanceNormOptions{}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.TrackRunningStats = true
			l := nn.NewInstanceNorm1d(1, tc.o, vram.Float64)
			if !math.IsNaN(tc.momentum) {
				l.Momentum = tc.momentum
			}
			if l.Momentum != tc.want {
				t.Fatalf("Momentum %v, want %v", l.Momentum, tc.want)
			}
			for range 2 {
				l.Forward(x)
			}
			m, v := 0.0, 1.0
			for range 2 {
				m = (1-tc.want)*m + tc.want*batchMean
				v = (1-tc.want)*v + tc.want*batchVar
			}
			checkValues(t, "running mean", l.RunningMean.Float64s(), []float64{m}, 1e-12)
			checkValues(t, "running var", l.RunningVar.Float64s(), []float64{v}, 1e-12)
			if got := l.NumBatchesTracked.Item(); got != 0 {
				t.Errorf("num_batches_tracked %v, want 0", got)
			}
		})
	}
}
