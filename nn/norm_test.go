package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestBatchNorm2dOptions checks affine=False, track_running_stats=False,
// momentum=None, eps and momentum as PyTorch's BatchNorm2d takes them: the
// parameters and buffers the layer has, and what it normalizes with in
// each mode.
func TestBatchNorm2dOptions(t *testing.T) {
	x := vram.Randn(vram.Shape{6, 2, 3, 3}, vram.WithGenerator(vram.NewGenerator(3))).MulScalar(3).AddScalar(1)
	batch := vram.BatchNorm2d(x, nil, nil, nil, nil, true, 0.1, 1e-3)
	for _, tc := range []struct {
		name    string
		o       nn.BatchNormOptions
		params  []string
		buffers []string
		// evalBatch: evaluation mode normalizes with the batch's statistics.
		evalBatch bool
	}{
		{"default", nn.BatchNormOptions{Eps: 1e-3}, []string{"weight", "bias"}, []string{"running_mean", "running_var", "num_batches_tracked"}, false},
		{"no affine", nn.BatchNormOptions{Eps: 1e-3, NoAffine: true}, nil, []string{"running_mean", "running_var", "num_batches_tracked"}, false},
		{"no running stats", nn.BatchNormOptions{Eps: 1e-3, NoRunningStats: true}, []string{"weight", "bias"}, nil, true},
		{"neither", nn.BatchNormOptions{Eps: 1e-3, NoAffine: true, NoRunningStats: true, CumulativeAverage: true}, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bn := nn.NewBatchNorm2dOptions(2, tc.o)
			var params, buffers []string
			for _, p := range bn.NamedParameters() {
				params = append(params, p.Name)
			}
			for _, b := range nn.NamedBuffers(bn) {
				buffers = append(buffers, b.Name)
			}
			if !slices.Equal(params, tc.params) || !slices.Equal(buffers, tc.buffers) {
				t.Fatalf("parameters %v and buffers %v, want %v and %v", params, buffers, tc.params, tc.buffers)
			}
			if bn.Eps != 1e-3 || bn.Momentum != 0.1 {
				t.Errorf("eps %v, momentum %v", bn.Eps, bn.Momentum)
			}
			xg := x.Detach().SetRequiresGrad(true)
			y := bn.Forward(xg)
			closeAll(t, "training", y.Float64s(), batch.Float64s(), 1e-5)
			y.Square().Sum().Backward()
			if xg.Grad() == nil {
				t.Fatal("no input gradient")
			}
			bn.Eval()
			ye := bn.Forward(x)
			if got := slices.Equal(ye.Float64s(), y.Float64s()); got != tc.evalBatch {
				t.Errorf("evaluation mode gave the batch's normalization: %v, want %v", got, tc.evalBatch)
			}
			if tc.evalBatch {
				return
			}
			// The running statistics after one batch: 0.9·(0, 1) +
			// 0.1·(mean, unbiased variance).
			m, v := x.Mean(0, 2, 3).Float64s(), x.Var([]int{0, 2, 3}, 1, false).Float64s()
			for i := range m {
				m[i], v[i] = 0.1*m[i], 0.9+0.1*v[i]
			}
			closeAll(t, "running mean", bn.RunningMean.Float64s(), m, 1e-5)
			closeAll(t, "running variance", bn.RunningVar.Float64s(), v, 1e-5)
			if got := bn.NumBatchesTracked.Int64s()[0]; got != 1 {
				t.Errorf("num_batches_tracked %d, want 1", got)
			}
		})
	}
}

// TestBatchNorm2dInsideTidy checks that a layer made inside vram.Tidy
// keeps its running statistics when the Tidy ends.
func TestBatchNorm2dInsideTidy(t *testing.T) {
	var bn *nn.BatchNorm2d
	vram.Tidy(func() { bn = nn.NewBatchNorm2d(2) })
	if bn.RunningMean.Released() || bn.RunningVar.Released() || bn.NumBatchesTracked.Released() || bn.Weight.Released() {
		t.Fatal("the Tidy released the layer's tensors")
	}
	bn.Forward(vram.Randn(vram.Shape{4, 2, 2, 2}))
}

func TestBatchNorm2dOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    nn.BatchNormOptions
	}{
		{"negative eps", nn.BatchNormOptions{Eps: -1e-5}},
		{"NaN eps", nn.BatchNormOptions{Eps: math.NaN()}},
		{"infinite eps", nn.BatchNormOptions{Eps: math.Inf(1)}},
		{"momentum above 1", nn.BatchNormOptions{Momentum: 1.5}},
		{"negative momentum", nn.BatchNormOptions{Momentum: -0.1}},
		{"NaN momentum", nn.BatchNormOptions{Momentum: math.NaN()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := vram.Catch(func() { nn.NewBatchNorm2dOptions(3, tc.o) }); !errors.Is(err, vram.ErrArgument) {
				t.Errorf("error %v, want %v", err, vram.ErrArgument)
			}
		})
	}
}

// TestBatchNorm2dDTypes checks the dtypes of the layer's tensors: float64
// when asked for, float32 for any other dtype.
func TestBatchNorm2dDTypes(t *testing.T) {
	for _, tc := range []struct {
		dt, want vram.DType
	}{{vram.Float64, vram.Float64}, {vram.Float32, vram.Float32}, {vram.Float16, vram.Float32}, {vram.BFloat16, vram.Float32}} {
		bn := nn.NewBatchNorm2d(2, tc.dt)
		if bn.Weight.DType() != tc.want || bn.Bias.DType() != tc.want || bn.RunningMean.DType() != tc.want || bn.RunningVar.DType() != tc.want {
			t.Errorf("%s: weight %s, running mean %s, want %s", tc.dt, bn.Weight.DType(), bn.RunningMean.DType(), tc.want)
		}
	}
}

func closeAll(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestLayerNormNoAffine checks elementwise_affine=False: no parameters,
// the plain normalization, and a 16-bit input normalized in float32 and
// returned in its own dtype.
func TestLayerNormNoAffine(t *testing.T) {
	ln := nn.NewLayerNormNoAffine([]int{2, 3}, 1e-5)
	if ps := ln.Parameters(); len(ps) != 0 || len(nn.StateDict(ln)) != 0 {
		t.Fatalf("parameters %v, state dict %v", ps, nn.StateDict(ln))
	}
	x := vram.Randn(vram.Shape{4, 2, 3}, vram.WithGenerator(vram.NewGenerator(5))).MulScalar(2).AddScalar(1)
	for _, dt := range []vram.DType{vram.Float32, vram.Float16, vram.BFloat16} {
		xd := x.Cast(dt)
		y := ln.Forward(xd)
		if y.DType() != dt {
			t.Errorf("%s input gave %s", dt, y.DType())
		}
		want := vram.LayerNorm(xd.Cast(vram.Float32), []int{2, 3}, nil, nil, 1e-5).Cast(dt).Float64s()
		closeAll(t, dt.String(), y.Float64s(), want, 1e-2)
	}
	m := x.Mean(1, 2).Float64s()
	y := ln.Forward(x)
	if got := y.Mean(1, 2).Float64s(); math.Abs(got[0]) > 1e-5 || math.Abs(got[3]) > 1e-5 {
		t.Errorf("means %v of a normalization of inputs with means %v", got, m)
	}
	if err := vram.Catch(func() { nn.NewLayerNormNoAffine(nil, 1e-5) }); !errors.Is(err, vram.ErrArgument) {
		t.Errorf("empty shape: %v", err)
	}
}
