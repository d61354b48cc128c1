package nn_test

import (
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/memory/trace"
	"github.com/vramgo/vram/nn"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{256 << 20, 256 << 20}}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

func checkValues(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		if !near(got[i], want[i], tol) {
			t.Fatalf("%s: got %v, want %v (element %d)", what, got, want, i)
		}
	}
}

// set overwrites a parameter's values.
func set(t *vram.Tensor, vals ...float64) {
	src := vram.FromSlice(vals, t.Shape(), t.DType(), t.Device())
	defer src.Release()
	vram.NoGrad(func() { t.CopyFrom(src) })
}

func TestLinearForward(t *testing.T) {
	tests := []struct {
		name   string
		layer  func() *nn.Linear
		x      []float64
		xshape vram.Shape
		shape  vram.Shape
		want   []float64
	}{
		{
			name: "with bias",
			layer: func() *nn.Linear {
				l := nn.NewLinear(3, 2, vram.Float64)
				set(l.Weight, 1, 2, 3, -1, 0, 1)
				set(l.Bias, 0.5, -0.5)
				return l
			},
			x: []float64{1, 1, 1, 2, 0, -1}, xshape: vram.Shape{2, 3}, shape: vram.Shape{2, 2},
			// [1+2+3+0.5, -1+0+1-0.5], [2+0-3+0.5, -2+0-1-0.5]
			want: []float64{6.5, -0.5, -0.5, -3.5},
		},
		{
			name: "no bias",
			layer: func() *nn.Linear {
				l := nn.NewLinearNoBias(2, 1, vram.Float64)
				set(l.Weight, 3, -2)
				return l
			},
			x: []float64{1, 2, 3, 4}, xshape: vram.Shape{2, 2}, shape: vram.Shape{2, 1},
			want: []float64{-1, 1},
		},
		{
			name: "batched 3-D input",
			layer: func() *nn.Linear {
				l := nn.NewLinear(2, 1, vram.Float64)
				set(l.Weight, 1, 1)
				set(l.Bias, 10)
				return l
			},
			x: []float64{1, 2, 3, 4, 5, 6}, xshape: vram.Shape{3, 1, 2}, shape: vram.Shape{3, 1, 1},
			want: []float64{13, 17, 21},
		},
		{
			name: "1-D input",
			layer: func() *nn.Linear {
				l := nn.NewLinear(2, 2, vram.Float64)
				set(l.Weight, 1, 0, 0, 2)
				set(l.Bias, 1, 1)
				return l
			},
			x: []float64{3, 4}, xshape: vram.Shape{2}, shape: vram.Shape{2},
			want: []float64{4, 9},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.layer()
			x := vram.FromSlice(tt.x, tt.xshape)
			y := l.Forward(x)
			if !slices.Equal(y.Shape(), tt.shape) {
				t.Fatalf("shape %v, want %v", y.Shape(), tt.shape)
			}
			checkValues(t, "output", y.Float64s(), tt.want, 1e-12)
		})
	}
}

func TestLinearInit(t *testing.T) {
	g := vram.NewGenerator(7)
	l := nn.NewLinear(16, 8, vram.WithGenerator(g))
	if !slices.Equal(l.Weight.Shape(), vram.Shape{8, 16}) || !slices.Equal(l.Bias.Shape(), vram.Shape{8}) {
		t.Fatalf("shapes %v %v", l.Weight.Shape(), l.Bias.Shape())
	}
	if l.Weight.DType() != vram.Float32 || !l.Weight.RequiresGrad() || !l.Bias.RequiresGrad() || !l.Weight.IsLeaf() {
		t.Fatalf("weight %v", l.Weight)
	}
	bound := 1 / math.Sqrt(16)
	for _, p := range []*vram.Tensor{l.Weight, l.Bias} {
		vals := p.Float64s()
		lo, hi := slices.Min(vals), slices.Max(vals)
		if lo < -bound || hi > bound {
			t.Fatalf("values in [%v, %v], want within ±%v", lo, hi, bound)
		}
		if hi-lo < bound/2 {
			t.Fatalf("values in [%v, %v] are not spread over ±%v", lo, hi, bound)
		}
	}
	// The same seed gives the same layer.
	l2 := nn.NewLinear(16, 8, vram.WithGenerator(vram.NewGenerator(7)))
	if !slices.Equal(l.Weight.Float64s(), l2.Weight.Float64s()) {
		t.Fatal("same seed, different weights")
	}
	// Options choose dtype and device.
	l3 := nn.NewLinear(2, 3, vram.Float64, vram.Sim(0))
	if l3.Weight.DType() != vram.Float64 || l3.Bias.Device() != vram.Sim(0) {
		t.Fatalf("options ignored: %v %v", l3.Weight, l3.Bias)
	}
}

// TestLinearGradient compares autograd's gradients of a Linear layer with
// central finite differences, in float64.
func TestLinearGradient(t *testing.T) {
	g := vram.NewGenerator(3)
	l := nn.NewLinear(4, 3, vram.Float64, vram.WithGenerator(g))
	x := vram.Randn(vram.Shape{5, 4}, vram.Float64, vram.WithGenerator(g))
	// A non-linear scalar function of the output, so that every gradient
	// entry differs.
	c := vram.Randn(vram.Shape{5, 3}, vram.Float64, vram.WithGenerator(g))
	loss := func() float64 {
		var v float64
		vram.NoGrad(func() {
			vram.Tidy(func() { v = l.Forward(x).Tanh().Mul(c).Sum().Item() })
		})
		return v
	}
	vram.Tidy(func() { l.Forward(x).Tanh().Mul(c).Sum().Backward() })

	const h = 1e-6
	for _, p := range l.NamedParameters() {
		analytic := p.Tensor.Grad().Float64s()
		vals := p.Tensor.Float64s()
		for i := range vals {
			orig := vals[i]
			vals[i] = orig + h
			set(p.Tensor, vals...)
			up := loss()
			vals[i] = orig - h
			set(p.Tensor, vals...)
			down := loss()
			vals[i] = orig
			set(p.Tensor, vals...)
			numeric := (up - down) / (2 * h)
			if math.Abs(numeric-analytic[i]) > 1e-7 {
				t.Errorf("%s[%d]: autograd %v, finite differences %v", p.Name, i, analytic[i], numeric)
			}
		}
	}
}

func TestActivations(t *testing.T) {
	in := []float64{-2, -0.5, 0, 1, 3}
	apply := func(f func(float64) float64) []float64 {
		out := make([]float64, len(in))
		for i, v := range in {
			out[i] = f(v)
		}
		return out
	}
	tests := []struct {
		name string
		m    nn.Module
		want []float64
	}{
		{"relu", nn.NewReLU(), []float64{0, 0, 0, 1, 3}},
		{"gelu", nn.NewGELU(), apply(func(v float64) float64 { return v * 0.5 * (1 + math.Erf(v/math.Sqrt2)) })},
		{"tanh", nn.NewTanh(), apply(math.Tanh)},
		{"sigmoid", nn.NewSigmoid(), apply(func(v float64) float64 { return 1 / (1 + math.Exp(-v)) })},
		{"func", nn.Func(func(x *vram.Tensor) *vram.Tensor { return x.MulScalar(2) }), []float64{-4, -1, 0, 2, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := vram.FromSlice(in, vram.Shape{5, 1})
			y := tt.m.Forward(x)
			if !slices.Equal(y.Shape(), vram.Shape{5, 1}) {
				t.Fatalf("shape %v", y.Shape())
			}
			checkValues(t, tt.name, y.Float64s(), tt.want, 1e-12)
			if len(tt.m.Parameters()) != 0 {
				t.Fatalf("%d parameters", len(tt.m.Parameters()))
			}
		})
	}
}

func TestDropout(t *testing.T) {
	const n = 10000
	x := vram.Ones(vram.Shape{100, 100}, vram.Float64)
	d := nn.NewDropout(0.25, vram.WithGenerator(vram.NewGenerator(1)))
	if !d.Training() {
		t.Fatal("a new module is not in training mode")
	}
	y := d.Forward(x)
	zeros := 0
	for _, v := range y.Float64s() {
		switch v {
		case 0:
			zeros++
		case 1 / 0.75:
		default:
			t.Fatalf("training output %v is neither 0 nor 1/(1-p)", v)
		}
	}
	if frac := float64(zeros) / n; math.Abs(frac-0.25) > 0.02 {
		t.Fatalf("dropped %v of the elements, want about 0.25", frac)
	}

	// The same seed drops the same elements; gradients follow the mask.
	xg := vram.Ones(vram.Shape{100, 100}, vram.Float64, vram.WithGrad())
	d2 := nn.NewDropout(0.25, vram.WithGenerator(vram.NewGenerator(1)))
	y2 := d2.Forward(xg)
	if !slices.Equal(y.Float64s(), y2.Float64s()) {
		t.Fatal("same seed, different masks")
	}
	y2.Sum().Backward()
	if !slices.Equal(xg.Grad().Float64s(), y.Float64s()) {
		t.Fatal("gradient is not the mask")
	}

	d.Eval()
	if d.Training() {
		t.Fatal("Eval did not switch mode")
	}
	ye := d.Forward(x)
	if !slices.Equal(ye.Float64s(), x.Float64s()) {
		t.Fatal("eval mode changed the input")
	}
	ye.Release() // the caller owns the result: x must survive
	if x.Released() {
		t.Fatal("releasing the eval output released the input")
	}
	d.Train()
	if d0 := nn.NewDropout(0).Forward(x); !slices.Equal(d0.Float64s(), x.Float64s()) {
		t.Fatal("p=0 changed the input")
	}

	// p = 1 drops everything, as in PyTorch: zeros, and zero gradients.
	x1 := vram.FromSlice([]float64{1, -2, 3}, nil, vram.WithGrad())
	dropped := nn.NewDropout(1).Forward(x1)
	if !slices.Equal(dropped.Float64s(), []float64{0, 0, 0}) {
		t.Fatalf("p=1 gave %v", dropped.Float64s())
	}
	dropped.Sum().Backward()
	if !slices.Equal(x1.Grad().Float64s(), []float64{0, 0, 0}) {
		t.Fatalf("p=1 gradient %v", x1.Grad().Float64s())
	}

	for _, p := range []float64{-0.1, 1.5, math.NaN()} {
		err := vram.Catch(func() { nn.NewDropout(p) })
		var ve *vram.Error
		if !errors.As(err, &ve) || !errors.Is(err, vram.ErrArgument) {
			t.Errorf("NewDropout(%v): %v, want a *vram.Error of kind ErrArgument", p, err)
		}
	}
}

func TestLayerNorm(t *testing.T) {
	ln := nn.NewLayerNorm([]int{3}, 1e-5, vram.Float64)
	checkValues(t, "weight", ln.Weight.Float64s(), []float64{1, 1, 1}, 0)
	checkValues(t, "bias", ln.Bias.Float64s(), []float64{0, 0, 0}, 0)
	x := vram.FromSlice([]float64{1, 2, 3, 2, 4, 6}, vram.Shape{2, 3})
	y := ln.Forward(x)
	// Row 1: mean 2, population variance 2/3; row 2: mean 4, variance 8/3.
	a := 1 / math.Sqrt(2.0/3+1e-5)
	b := 2 / math.Sqrt(8.0/3+1e-5)
	checkValues(t, "normalised", y.Float64s(), []float64{-a, 0, a, -b, 0, b}, 1e-12)

	set(ln.Weight, 2, 1, 1)
	set(ln.Bias, 0, 0, 1)
	checkValues(t, "affine", ln.Forward(x).Float64s(), []float64{-2 * a, 0, a + 1, -2 * b, 0, b + 1}, 1e-12)
	names := []string{}
	for _, p := range ln.NamedParameters() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"weight", "bias"}) {
		t.Fatalf("names %v", names)
	}
}

func TestEmbedding(t *testing.T) {
	e := nn.NewEmbedding(4, 2, vram.Float64)
	set(e.Weight, 0, 1, 10, 11, 20, 21, 30, 31)
	idx := vram.FromSlice([]int64{3, 0, 1, 3}, vram.Shape{2, 2})
	y := e.Forward(idx)
	if !slices.Equal(y.Shape(), vram.Shape{2, 2, 2}) {
		t.Fatalf("shape %v", y.Shape())
	}
	checkValues(t, "lookup", y.Float64s(), []float64{30, 31, 0, 1, 10, 11, 30, 31}, 0)
	y.Sum().Backward()
	checkValues(t, "grad", e.Weight.Grad().Float64s(), []float64{1, 1, 1, 1, 0, 0, 2, 2}, 0)

	// Normal init: mean about 0, standard deviation about 1.
	big := nn.NewEmbedding(100, 100, vram.Float64, vram.WithGenerator(vram.NewGenerator(5)))
	vals := big.Weight.Float64s()
	var sum, sq float64
	for _, v := range vals {
		sum += v
		sq += v * v
	}
	mean := sum / float64(len(vals))
	std := math.Sqrt(sq/float64(len(vals)) - mean*mean)
	if math.Abs(mean) > 0.05 || math.Abs(std-1) > 0.05 {
		t.Fatalf("mean %v, std %v", mean, std)
	}
}

// mlp is a user-defined module with sub-modules and its own parameter.
type mlp struct {
	nn.Base
	encoder *nn.Sequential
	head    *nn.Linear
	scale   *vram.Tensor
}

func newMLP(opts ...vram.Option) *mlp {
	m := &mlp{
		encoder: nn.NewSequential(nn.NewLinear(3, 4, opts...), nn.NewReLU(), nn.NewDropout(0.5, opts...)),
		head:    nn.NewLinear(4, 2, opts...),
		scale:   vram.Ones(vram.Shape{2}, append(opts, vram.WithGrad())...),
	}
	m.RegisterParameter("scale", m.scale)
	m.RegisterModule("encoder", m.encoder)
	m.RegisterModule("head", m.head)
	return m
}

func (m *mlp) Forward(x *vram.Tensor) *vram.Tensor {
	h := m.encoder.Forward(x)
	defer h.Release()
	y := m.head.Forward(h)
	defer y.Release()
	return y.Mul(m.scale)
}

func paramNames(m nn.Module) []string {
	var names []string
	for _, p := range m.NamedParameters() {
		names = append(names, p.Name)
	}
	return names
}

func TestParameterNames(t *testing.T) {
	tests := []struct {
		name string
		m    nn.Module
		want []string
	}{
		{"sequential", nn.NewSequential(nn.NewLinear(2, 3), nn.NewReLU(), nn.NewLinear(3, 1)),
			[]string{"0.weight", "0.bias", "2.weight", "2.bias"}},
		{"append", nn.NewSequential().Append(nn.NewTanh()).Append(nn.NewLinearNoBias(2, 2)),
			[]string{"1.weight"}},
		{"nested", newMLP(), []string{"scale", "encoder.0.weight", "encoder.0.bias", "head.weight", "head.bias"}},
		{"sequential of modules", nn.NewSequential(newMLP(), nn.NewLayerNorm([]int{2}, 1e-5), nn.NewEmbedding(3, 2)),
			[]string{"0.scale", "0.encoder.0.weight", "0.encoder.0.bias", "0.head.weight", "0.head.bias", "1.weight", "1.bias", "2.weight"}},
		{"func", nn.Func(func(x *vram.Tensor) *vram.Tensor { return x }), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := paramNames(tt.m); !slices.Equal(got, tt.want) {
				t.Fatalf("names %v, want %v", got, tt.want)
			}
			named, params := tt.m.NamedParameters(), tt.m.Parameters()
			if len(named) != len(params) {
				t.Fatalf("%d named, %d parameters", len(named), len(params))
			}
			for i := range named {
				if named[i].Tensor != params[i] {
					t.Fatalf("parameter %d differs", i)
				}
			}
			sd := nn.StateDict(tt.m)
			for _, p := range named {
				if sd[p.Name] != p.Tensor {
					t.Fatalf("StateDict[%q] is not the parameter", p.Name)
				}
			}
		})
	}
}

func TestSharedParameterListedOnce(t *testing.T) {
	a := nn.NewLinear(2, 2)
	s := nn.NewSequential(a, nn.NewReLU(), a)
	if got := paramNames(s); !slices.Equal(got, []string{"0.weight", "0.bias"}) {
		t.Fatalf("names %v", got)
	}
}

func TestSequentialForward(t *testing.T) {
	l1 := nn.NewLinear(2, 2, vram.Float64)
	set(l1.Weight, 1, -1, 2, 0)
	set(l1.Bias, 0, -3)
	l2 := nn.NewLinear(2, 1, vram.Float64)
	set(l2.Weight, 1, 1)
	set(l2.Bias, 0.5)
	id := nn.Func(func(x *vram.Tensor) *vram.Tensor { return x })
	s := nn.NewSequential(id, l1, nn.NewReLU(), id, l2)
	if s.Len() != 5 || s.At(1) != nn.Module(l1) {
		t.Fatalf("Len %d, At(1) %v", s.Len(), s.At(1))
	}
	x := vram.FromSlice([]float64{1, 2, 3, 1}, vram.Shape{2, 2})
	// h = relu([1-2, 2-3], [3-1, 6-3]) = [0, 0], [2, 3]; y = [0.5], [5.5]
	y := s.Forward(x)
	checkValues(t, "output", y.Float64s(), []float64{0.5, 5.5}, 0)
	if x.Released() {
		t.Fatal("Forward released its input")
	}
	y.Release()

	// An empty Sequential (or one of identities) returns a new reference.
	for _, m := range []*nn.Sequential{nn.NewSequential(), nn.NewSequential(id, id)} {
		out := m.Forward(x)
		out.Release()
		if x.Released() {
			t.Fatal("releasing the output released the input")
		}
	}

	// Backward through the chain reaches the first layer.
	xg := vram.FromSlice([]float64{1, 2, 3, 1}, vram.Shape{2, 2}, vram.WithGrad())
	s.Forward(xg).Sum().Backward()
	if l1.Weight.Grad() == nil || xg.Grad() == nil {
		t.Fatal("no gradient reached the first layer")
	}
}

func TestForwardLeavesNoGarbage(t *testing.T) {
	memtest.Settle()
	dev := vram.Sim(1)
	m := newMLP(dev, vram.WithGenerator(vram.NewGenerator(1)))
	x := vram.Randn(vram.Shape{8, 3}, dev)
	before := vram.MemoryAllocated(dev)
	leaked := vram.Storage(dev).Leaked
	for range 3 {
		y := m.Forward(x)
		sq := y.Square()
		loss := sq.Mean()
		loss.Backward()
		loss.Release()
		sq.Release()
		y.Release()
		for _, p := range m.Parameters() {
			p.ZeroGrad()
		}
		if after := vram.MemoryAllocated(dev); after != before {
			t.Fatalf("%d bytes live after a released forward and backward, %d before", after, before)
		}
	}
	nn.Release(m)
	x.Release()
	memtest.Settle()
	if n := vram.Storage(dev).Leaked - leaked; n != 0 {
		t.Fatalf("%d tensors were left to the garbage collector", n)
	}
}

func TestTrainEvalRecursive(t *testing.T) {
	m := newMLP()
	drop := m.encoder.At(2).(*nn.Dropout)
	m.Eval()
	if m.Training() || m.encoder.Training() || drop.Training() || m.head.Training() {
		t.Fatal("Eval did not reach every module")
	}
	m.Train()
	if !m.Training() || !m.encoder.Training() || !drop.Training() {
		t.Fatal("Train did not reach every module")
	}
}

func TestToKeepsIdentity(t *testing.T) {
	m := newMLP()
	params := m.Parameters()
	m.To(vram.CPU)
	for i, p := range m.Parameters() {
		if p != params[i] || p.Device() != vram.CPU || p.Released() {
			t.Fatalf("parameter %d changed", i)
		}
	}
	// Give one parameter a gradient, then move to a simulated GPU and back.
	vram.Tidy(func() { m.head.Forward(vram.Ones(vram.Shape{1, 4})).Sum().Backward() })
	want := m.head.Weight.Float64s()
	m.To(vram.Sim(0))
	for i, p := range m.Parameters() {
		if p != params[i] || p.Device() != vram.Sim(0) {
			t.Fatalf("parameter %d: %v", i, p)
		}
	}
	if g := m.head.Weight.Grad(); g == nil || g.Device() != vram.Sim(0) {
		t.Fatalf("gradient did not move: %v", g)
	}
	out := m.Forward(vram.Ones(vram.Shape{2, 3}, vram.Sim(0)))
	if out.Device() != vram.Sim(0) {
		t.Fatalf("output on %v", out.Device())
	}
	m.CPU()
	if m.head.Weight.Device() != vram.CPU || !slices.Equal(m.head.Weight.Float64s(), want) {
		t.Fatal("values changed on the round trip")
	}
}

func TestBuildInsideTidy(t *testing.T) {
	var m *mlp
	vram.Tidy(func() {
		m = newMLP()
		_ = nn.NewSequential(nn.NewLinear(2, 2), nn.NewLayerNorm([]int{2}, 1e-5), nn.NewEmbedding(2, 2))
	})
	for _, p := range m.NamedParameters() {
		if p.Tensor.Released() {
			t.Fatalf("%s was released by Tidy", p.Name)
		}
	}
	y := m.Forward(vram.Ones(vram.Shape{1, 3}))
	if !slices.Equal(y.Shape(), vram.Shape{1, 2}) {
		t.Fatalf("shape %v", y.Shape())
	}
	nn.Release(m)
	for _, p := range m.Parameters() {
		if !p.Released() {
			t.Fatal("Release left a parameter")
		}
	}
}

func TestRegisterErrors(t *testing.T) {
	tests := []struct {
		name string
		fn   func(b *nn.Base)
	}{
		{"nil parameter", func(b *nn.Base) { b.RegisterParameter("w", nil) }},
		{"nil module", func(b *nn.Base) { b.RegisterModule("m", nil) }},
		{"empty name", func(b *nn.Base) { b.RegisterParameter("", vram.Zeros(vram.Shape{1})) }},
		{"dotted name", func(b *nn.Base) { b.RegisterModule("a.b", nn.NewReLU()) }},
		{"duplicate", func(b *nn.Base) {
			b.RegisterParameter("w", vram.Zeros(vram.Shape{1}))
			b.RegisterModule("w", nn.NewReLU())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b nn.Base
			err := vram.Catch(func() { tt.fn(&b) })
			if !errors.Is(err, vram.ErrArgument) {
				t.Fatalf("got %v, want ErrArgument", err)
			}
		})
	}
}

func TestLosses(t *testing.T) {
	pred := vram.FromSlice([]float64{1, 2, 3, 4}, vram.Shape{2, 2})
	target := vram.FromSlice([]float64{1, 0, 0, 4}, vram.Shape{2, 2})
	if got := nn.MSELoss(pred, target).Item(); got != 13.0/4 {
		t.Fatalf("MSE %v, want 3.25", got)
	}
	logits := vram.FromSlice([]float64{1, 2, 3, 0, 0, 0}, vram.Shape{2, 3})
	targets := vram.FromSlice([]int64{2, 0}, nil)
	lse := math.Log(math.Exp(1) + math.Exp(2) + math.Exp(3))
	want := ((lse - 3) + math.Log(3)) / 2
	if got := nn.CrossEntropyLoss(logits, targets).Item(); !near(got, want, 1e-12) {
		t.Fatalf("cross entropy %v, want %v", got, want)
	}
}

// TestSequentialFusesLinearActivation checks that a Sequential, which runs
// Linear followed by ReLU or GELU as one fused op, gives the outputs and
// gradients of the same modules run one by one.
func TestSequentialFusesLinearActivation(t *testing.T) {
	for _, act := range []struct {
		name string
		mod  func() nn.Module
	}{{"relu", func() nn.Module { return nn.NewReLU() }}, {"gelu", func() nn.Module { return nn.NewGELU() }}} {
		t.Run(act.name, func(t *testing.T) {
			g := vram.NewGenerator(5)
			l1 := nn.NewLinear(6, 5, vram.Float64, vram.WithGenerator(g))
			a := act.mod()
			l2 := nn.NewLinear(5, 3, vram.Float64, vram.WithGenerator(g))
			seq := nn.NewSequential(l1, a, l2)
			x := vram.Randn(vram.Shape{4, 6}, vram.Float64, vram.WithGenerator(g))
			var fused, plain [][]float64
			for i, run := range []func() *vram.Tensor{
				func() *vram.Tensor { return seq.Forward(x) },
				func() *vram.Tensor { return l2.Forward(a.Forward(l1.Forward(x))) },
			} {
				out := run()
				out.Square().Sum().Backward()
				got := [][]float64{out.Float64s()}
				for _, p := range seq.Parameters() {
					got = append(got, p.Grad().Float64s())
					p.ZeroGrad()
				}
				if i == 0 {
					fused = got
				} else {
					plain = got
				}
			}
			for k := range plain {
				for j := range plain[k] {
					if math.Abs(fused[k][j]-plain[k][j]) > 1e-12*(1+math.Abs(plain[k][j])) {
						t.Fatalf("tensor %d element %d: fused %v, one by one %v", k, j, fused[k][j], plain[k][j])
					}
				}
			}
		})
	}
}

// TestParametersRegion checks that parameters, made on a device or moved
// there, are labelled "parameters" in the device's memory snapshot.
func TestParametersRegion(t *testing.T) {
	dev := vram.Sim(1)
	if !dev.Available() {
		t.Skip("no sim:1")
	}
	direct := nn.NewLinear(64, 32, dev)
	moved := nn.NewEmbedding(100, 16)
	moved.To(dev)
	defer nn.Release(direct)
	defer nn.Release(moved)
	var labelled, bytes int64
	for _, seg := range vram.MemorySnapshot(dev).Segments {
		for _, b := range seg.Blocks {
			if b.State == trace.StateActiveAllocated && b.Region == nn.ParametersRegion {
				labelled++
				bytes += b.Size
			}
		}
	}
	// Weight and bias of the Linear, the Embedding's table.
	if labelled != 3 || bytes < (64*32+32+100*16)*4 {
		t.Fatalf("%d blocks, %d bytes labelled %q; want 3 blocks of at least %d bytes", labelled, bytes, nn.ParametersRegion, (64*32+32+100*16)*4)
	}
}

// TestSequentialReleasesOnPanic checks that a module that panics leaves
// no intermediate result of the modules before it allocated.
func TestSequentialReleasesOnPanic(t *testing.T) {
	dev := vram.Sim(1)
	failing := nn.Func(func(*vram.Tensor) *vram.Tensor {
		panic(&vram.Error{Op: "failing", Kind: vram.ErrArgument, Detail: "failed on purpose"})
	})
	x := vram.Randn(vram.Shape{3, 4}, dev)
	defer x.Release()
	tests := []struct {
		name string
		mods func() []nn.Module
	}{
		{"first", func() []nn.Module { return []nn.Module{failing, nn.NewLinear(4, 4, dev)} }},
		{"after a fused linear", func() []nn.Module { return []nn.Module{nn.NewLinear(4, 4, dev), nn.NewReLU(), failing} }},
		{"after two layers", func() []nn.Module {
			return []nn.Module{nn.NewLinear(4, 4, dev), nn.NewTanh(), nn.NewIdentity(), failing}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := nn.NewSequential(tc.mods()...)
			defer nn.Release(s)
			for _, grad := range []bool{false, true} {
				memtest.Settle(dev)
				base := vram.MemoryAllocated(dev)
				x.SetRequiresGrad(grad)
				if err := vram.Catch(func() { s.Forward(x) }); !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("error %v, want the module's", err)
				}
				if got := vram.MemoryAllocated(dev); got != base {
					t.Errorf("grad %v: %d bytes allocated after the panic, want %d", grad, got, base)
				}
			}
			x.SetRequiresGrad(false)
		})
	}
}
