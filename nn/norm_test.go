package nn_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
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

// refGroupNorm computes group normalization of x [N, C, S] directly, in
// float64.
func refGroupNorm(x []float64, n, c, s, groups int, w, b []float64, eps float64) []float64 {
	out := make([]float64, len(x))
	per := c / groups * s
	for i := range n * groups {
		seg := x[i*per : (i+1)*per]
		mean, v := 0.0, 0.0
		for _, e := range seg {
			mean += e
		}
		mean /= float64(per)
		for _, e := range seg {
			v += (e - mean) * (e - mean)
		}
		v /= float64(per)
		for j, e := range seg {
			ch := (i%groups)*(c/groups) + j/s
			y := (e - mean) / math.Sqrt(v+eps)
			if w != nil {
				y = y*w[ch] + b[ch]
			}
			out[i*per+j] = y
		}
	}
	return out
}

// TestGroupNorm checks GroupNorm against the direct computation for one
// group, several, and one per channel, with and without the affine map,
// on inputs of 2 to 4 dimensions, and its gradients against finite
// differences.
func TestGroupNorm(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(6))
	for _, tc := range []struct {
		name           string
		groups, chans  int
		shape          vram.Shape
		affine         bool
		dt, wantOutput vram.DType
	}{
		{"one group", 1, 4, vram.Shape{2, 4, 3, 2}, true, vram.Float64, vram.Float64},
		{"two groups", 2, 4, vram.Shape{3, 4, 5}, true, vram.Float64, vram.Float64},
		{"instance norm", 3, 3, vram.Shape{2, 3, 2, 2}, false, vram.Float64, vram.Float64},
		{"2-D input", 2, 6, vram.Shape{4, 6}, true, vram.Float64, vram.Float64},
		{"half input", 2, 4, vram.Shape{2, 4, 3, 3}, true, vram.Float16, vram.Float16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l *nn.GroupNorm
			if tc.affine {
				l = nn.NewGroupNorm(tc.groups, tc.chans, 1e-5, vram.Float64)
				vram.NoGrad(func() {
					l.Weight.CopyFrom(vram.Randn(vram.Shape{tc.chans}, vram.Float64, g))
					l.Bias.CopyFrom(vram.Randn(vram.Shape{tc.chans}, vram.Float64, g))
				})
				if tc.dt == vram.Float16 {
					l.Half()
					if l.Weight.DType() != vram.Float32 {
						t.Fatalf("Half made the weight %s", l.Weight.DType())
					}
				}
			} else {
				l = nn.NewGroupNormNoAffine(tc.groups, tc.chans, 1e-5)
			}
			x := vram.Randn(tc.shape, vram.Float64, g).MulScalar(2).AddScalar(1).Cast(tc.dt)
			y := l.Forward(x)
			if y.DType() != tc.wantOutput || !slices.Equal(y.Shape(), tc.shape) {
				t.Fatalf("output %s %v, want %s %v", y.DType(), y.Shape(), tc.wantOutput, tc.shape)
			}
			s := x.NumElements() / (tc.shape[0] * tc.chans)
			var w, b []float64
			if tc.affine {
				w, b = l.Weight.Float64s(), l.Bias.Float64s()
			}
			want := refGroupNorm(x.Float64s(), tc.shape[0], tc.chans, s, tc.groups, w, b, 1e-5)
			tol := 1e-9
			if tc.dt == vram.Float16 {
				tol = 2e-3
			}
			closeAll(t, "output", y.Float64s(), want, tol)
			if tc.dt != vram.Float64 {
				return
			}
			params := []*vram.Tensor{x.Detach()}
			if tc.affine {
				params = append(params, l.Weight, l.Bias)
			}
			finiteDifferences(t, func() *vram.Tensor { return l.Forward(params[0]) }, params...)
		})
	}
	for _, bad := range []func(){
		func() { nn.NewGroupNorm(3, 4, 1e-5) },
		func() { nn.NewGroupNorm(0, 4, 1e-5) },
		func() { nn.NewGroupNormNoAffine(2, 0, 1e-5) },
	} {
		if err := vram.Catch(bad); !errors.Is(err, vram.ErrArgument) {
			t.Errorf("bad sizes: %v", err)
		}
	}
	if err := vram.Catch(func() { nn.NewGroupNorm(2, 4, 1e-5).Forward(vram.Randn(vram.Shape{2, 6, 3})) }); !errors.Is(err, vram.ErrShape) {
		t.Errorf("wrong channels: %v", err)
	}
}

// finiteDifferences compares the gradients of sum(f()·r), for a fixed
// random r, with respect to the float64 tensors ts with central finite
// differences.
func finiteDifferences(t *testing.T, f func() *vram.Tensor, ts ...*vram.Tensor) {
	t.Helper()
	for _, p := range ts {
		p.SetRequiresGrad(true)
		p.ZeroGrad()
	}
	out := f()
	r := vram.Randn(out.Shape(), vram.Float64, vram.WithGenerator(vram.NewGenerator(8)))
	out.Mul(r).Sum().Backward()
	loss := func() float64 {
		var v float64
		vram.NoGrad(func() { v = f().Mul(r).Sum().Item() })
		return v
	}
	const eps = 1e-6
	for k, p := range ts {
		got := p.Grad().Float64s()
		vals := p.Float64s()
		for i := range vals {
			set := func(v float64) {
				c := slices.Clone(vals)
				c[i] = v
				vram.NoGrad(func() { p.CopyFrom(vram.FromSlice(c, p.Shape())) })
			}
			set(vals[i] + eps)
			up := loss()
			set(vals[i] - eps)
			down := loss()
			set(vals[i])
			want := (up - down) / (2 * eps)
			if math.Abs(got[i]-want) > 1e-5+1e-4*math.Abs(want) {
				t.Errorf("tensor %d element %d: gradient %v, finite difference %v", k, i, got[i], want)
			}
		}
	}
}

// TestBatchNorm1d checks BatchNorm1d on [N, C] and [N, C, L] inputs
// against BatchNorm2d on the input seen as [N, C, L, 1]: the outputs, the
// running statistics, the state-dict names and evaluation mode.
func TestBatchNorm1d(t *testing.T) {
	g := vram.WithGenerator(vram.NewGenerator(9))
	for _, shape := range []vram.Shape{{6, 3}, {4, 3, 5}} {
		t.Run(shape.String(), func(t *testing.T) {
			bn1, bn2 := nn.NewBatchNorm1d(3), nn.NewBatchNorm2d(3)
			if got, want := len(nn.StateDict(bn1)), len(nn.StateDict(bn2)); got != want || nn.StateDict(bn1)["num_batches_tracked"] == nil {
				t.Fatalf("state dict %v", nn.StateDict(bn1))
			}
			x := vram.Randn(shape, g).MulScalar(2).AddScalar(1)
			x4 := x.Reshape(shape[0], shape[1], x.NumElements()/(shape[0]*shape[1]), 1)
			for _, eval := range []bool{false, true} {
				if eval {
					bn1.Eval()
					bn2.Eval()
				}
				xg := x.Detach().SetRequiresGrad(true)
				y1 := bn1.Forward(xg)
				y2 := bn2.Forward(x4)
				if !slices.Equal(y1.Shape(), shape) {
					t.Fatalf("shape %v, want %v", y1.Shape(), shape)
				}
				closeAll(t, "output", y1.Float64s(), y2.Float64s(), 1e-6)
				closeAll(t, "running mean", bn1.RunningMean.Float64s(), bn2.RunningMean.Float64s(), 1e-6)
				r := bn1.ForwardReLU(xg, x)
				closeAll(t, "relu with residual", r.Float64s(), bn2.ForwardReLU(x4, x4).Float64s(), 1e-5)
				r.Sum().Backward()
				if xg.Grad() == nil {
					t.Fatal("no input gradient")
				}
			}
		})
	}
	for _, bad := range []vram.Shape{{6}, {2, 3, 4, 5}} {
		if err := vram.Catch(func() { nn.NewBatchNorm1d(3).Forward(vram.Randn(bad)) }); !errors.Is(err, vram.ErrShape) {
			t.Errorf("input %v: %v", bad, err)
		}
	}
}

// TestOptionLayersFreeTheirTemporaries runs the layers and options of
// padding "same", ceil-mode pooling, GroupNorm, BatchNorm1d and adaptive
// max pooling forward and backward on a simulated device, and checks that
// nothing but what the caller holds stays allocated.
func TestOptionLayersFreeTheirTemporaries(t *testing.T) {
	d := vram.Sim(1)
	if !d.Available() {
		t.Skip("no sim:1")
	}
	memtest.Settle()
	base := vram.Storage(d).LiveBytes
	pool := nn.NewMaxPool2d(3, 2, 1)
	pool.Params.CeilMode = true
	avg := nn.NewAvgPool2d(2, 2, 1)
	avg.Params.CeilMode, avg.Params.DivisorOverride = true, 3
	m := nn.NewSequential(
		nn.NewConv2d(2, 4, 2, nn.ConvOptions{PaddingSame: true}, d),
		nn.NewGroupNorm(2, 4, 1e-5, d),
		pool, avg,
		nn.NewAdaptiveMaxPool2d(2, 2),
		nn.NewFlatten(),
		nn.NewBatchNorm1d(16, d),
	)
	x := vram.Randn(vram.Shape{3, 2, 9, 8}, d)
	vram.Tidy(func() {
		m.Forward(x).Sum().Backward()
		_, idx := pool.ForwardWithIndices(x.Narrow(1, 0, 1))
		_ = idx
	})
	x.Release()
	nn.Release(m)
	memtest.Settle()
	if got := vram.Storage(d).LiveBytes - base; got > 0 {
		t.Fatalf("%d bytes live after the step and nn.Release", got)
	}
	runtime.KeepAlive(m)
}

// TestNormConstructorArguments checks that the LayerNorm and GroupNorm
// constructors refuse an eps that would make every output NaN and a
// negative normalized size, and accept eps 0.
func TestNormConstructorArguments(t *testing.T) {
	tests := []struct {
		name string
		fn   func()
		kind error // nil: accepted
	}{
		{"layer norm negative eps", func() { nn.NewLayerNorm([]int{3}, -1e-5) }, vram.ErrArgument},
		{"layer norm NaN eps", func() { nn.NewLayerNormNoBias([]int{3}, math.NaN()) }, vram.ErrArgument},
		{"layer norm infinite eps", func() { nn.NewLayerNormNoAffine([]int{3}, math.Inf(1)) }, vram.ErrArgument},
		{"layer norm negative size", func() { nn.NewLayerNormNoAffine([]int{2, -3}, 1e-5) }, vram.ErrArgument},
		{"layer norm eps 0", func() { nn.NewLayerNorm([]int{3}, 0) }, nil},
		{"group norm negative eps", func() { nn.NewGroupNorm(1, 2, -1) }, vram.ErrArgument},
		{"group norm NaN eps", func() { nn.NewGroupNormNoAffine(1, 2, math.NaN()) }, vram.ErrArgument},
		{"group norm eps 0", func() { nn.NewGroupNorm(1, 2, 0) }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(func() { vram.Tidy(tc.fn) })
			if (err == nil) != (tc.kind == nil) || !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
		})
	}
}

// TestBatchNorm1dOneValuePerChannel: training a BatchNorm1d on one value
// per channel fails with an error that names the layer and the input as
// given ([1, C] or [1, C, 1]), not the 4-d view BatchNorm2d normalizes;
// evaluation mode takes such inputs.
func TestBatchNorm1dOneValuePerChannel(t *testing.T) {
	tests := []struct {
		shape vram.Shape
		eval  bool
	}{
		{vram.Shape{1, 3}, false},
		{vram.Shape{1, 3, 1}, false},
		{vram.Shape{1, 3}, true},
		{vram.Shape{1, 3, 1}, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.shape, tc.eval), func(t *testing.T) {
			bn := nn.NewBatchNorm1d(3)
			defer nn.Release(bn)
			if tc.eval {
				bn.Eval()
			}
			err := vram.Catch(func() { bn.Forward(vram.Ones(tc.shape)).Release() })
			if tc.eval {
				if err != nil {
					t.Fatalf("evaluation: %v", err)
				}
				return
			}
			var e *vram.Error
			if !errors.As(err, &e) || e.Kind != vram.ErrShape || e.Op != "batch_norm1d" || !strings.Contains(e.Detail, tc.shape.String()) {
				t.Fatalf("got %v, want a batch_norm1d error of kind ErrShape naming the input %v", err, tc.shape)
			}
		})
	}
}

// TestGroupNormRefusesBadFields checks that GroupNorm.Forward refuses
// fields set after construction to what NewGroupNorm refuses, as PyTorch's
// group_norm refuses num_groups that do not divide the channels and
// per-channel weights of another size, with an *vram.Error rather than a
// division by zero or a reshape naming shapes the caller never made.
func TestGroupNormRefusesBadFields(t *testing.T) {
	x := vram.Randn(vram.Shape{2, 4, 3, 3})
	for _, tc := range []struct {
		name string
		set  func(l *nn.GroupNorm)
		kind error
		msg  string // in the error
	}{
		{"zero groups", func(l *nn.GroupNorm) { l.NumGroups = 0 }, vram.ErrArgument, "groups"},
		{"negative groups", func(l *nn.GroupNorm) { l.NumGroups = -2 }, vram.ErrArgument, "groups"},
		{"groups not dividing the channels", func(l *nn.GroupNorm) { l.NumGroups = 3 }, vram.ErrArgument, "groups"},
		{"weight of another size", func(l *nn.GroupNorm) { l.Weight = vram.Ones(vram.Shape{3}) }, vram.ErrShape, "weight"},
		{"bias of another shape", func(l *nn.GroupNorm) { l.Bias = vram.Zeros(vram.Shape{2, 2}) }, vram.ErrShape, "bias"},
		{"weight without bias", func(l *nn.GroupNorm) { l.Bias = nil }, vram.ErrArgument, "bias"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := nn.NewGroupNorm(2, 4, 1e-5)
			tc.set(l)
			err := catchAll(func() { l.Forward(x) })
			if !errors.Is(err, tc.kind) || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("error %v, want %v naming the %s", err, tc.kind, tc.msg)
			}
		})
	}
}
