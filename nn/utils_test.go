package nn_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// twoBlocks is a module with a parameter of its own, a sub-module shared
// by two names and a checkpointed layer.
type twoBlocks struct {
	nn.Base
	scale *vram.Tensor
}

func (m *twoBlocks) Forward(x *vram.Tensor) *vram.Tensor { return x.Mul(m.scale) }

func newTwoBlocks(dev vram.Device) (*twoBlocks, *nn.Sequential, *nn.Linear) {
	inner := nn.NewLinear(3, 2, dev)
	seq := nn.NewSequential(inner, nn.NewDropout(0.5), nn.NewReLU())
	m := &twoBlocks{scale: vram.Ones(vram.Shape{2}, dev, vram.WithGrad())}
	m.RegisterParameter("scale", m.scale)
	m.RegisterModule("body", seq)
	m.RegisterModule("again", inner) // shared
	m.RegisterModule("ckpt", nn.Checkpoint(nn.NewLinear(2, 2, dev)))
	return m, seq, inner
}

func TestApply(t *testing.T) {
	m, _, _ := newTwoBlocks(vram.CPU)
	var order []string
	nn.Apply(m, func(x nn.Module) { order = append(order, fmt.Sprintf("%T", x)) })
	// Children before parents, the shared Linear once, the wrapped Linear
	// before its wrapper.
	want := []string{"*nn.Linear", "*nn.Dropout", "*nn.ReLU", "*nn.Sequential", "*nn.Linear", "*nn.Checkpointed", "*nn_test.twoBlocks"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	// Initialisation through Apply reaches every Linear.
	nn.Apply(m, func(x nn.Module) {
		if l, ok := x.(*nn.Linear); ok {
			nn.Constant(l.Weight, 0.5)
			nn.Zeros(l.Bias)
		}
	})
	for _, p := range m.NamedParameters() {
		if p.Name == "scale" {
			continue
		}
		for _, v := range p.Tensor.Float64s() {
			if v != 0 && v != 0.5 {
				t.Fatalf("%s not initialised: %v", p.Name, p.Tensor.Float64s())
			}
		}
	}
	nn.Apply(nil, func(nn.Module) { t.Fatal("called for a nil module") })
	if err := vram.Catch(func() { nn.Apply(m, nil) }); !errors.Is(err, vram.ErrArgument) {
		t.Fatalf("nil fn: %v", err)
	}
	// A Func is visited too (it is not comparable, so never deduplicated).
	n := 0
	nn.Apply(nn.NewSequential(nn.Func(func(x *vram.Tensor) *vram.Tensor { return x })), func(nn.Module) { n++ })
	if n != 2 {
		t.Fatalf("%d modules visited, want 2", n)
	}
}

func TestTrainEvalRecursion(t *testing.T) {
	m, _, _ := newTwoBlocks(vram.CPU)
	for _, mode := range []bool{false, true, false} {
		if mode {
			m.Train()
		} else {
			m.Eval()
		}
		for _, sub := range nn.NamedModules(m) {
			if sub.Module.Training() != mode {
				t.Fatalf("%q (%T): training %v, want %v", sub.Name, sub.Module, !mode, mode)
			}
		}
	}
}

func TestRequiresGradZeroGradNumParameters(t *testing.T) {
	for _, dev := range initDevices {
		t.Run(dev.String(), func(t *testing.T) {
			m, seq, inner := newTwoBlocks(dev)
			// scale 2, the shared Linear 3·2+2 once, the checkpointed 2·2+2.
			total, trainable := nn.NumParameters(m)
			if total != 16 || trainable != 16 {
				t.Fatalf("%d parameters, %d trainable; want 16, 16", total, trainable)
			}
			nn.SetRequiresGrad(seq, false)
			if total, trainable = nn.NumParameters(m); total != 16 || trainable != 8 {
				t.Fatalf("frozen: %d parameters, %d trainable; want 16, 8", total, trainable)
			}
			x := vram.Ones(vram.Shape{4, 3}, dev)
			y := seq.Forward(x)
			if y.RequiresGrad() {
				t.Fatal("a frozen module's output requires grad")
			}
			nn.SetRequiresGrad(m, true)
			loss := m.Forward(seq.Forward(x)).Sum()
			loss.Backward()
			if inner.Weight.Grad() == nil || m.Parameters()[0].Grad() == nil {
				t.Fatal("no gradients after unfreezing")
			}
			nn.ZeroGrad(m)
			for _, p := range m.NamedParameters() {
				if p.Tensor.Grad() != nil {
					t.Fatalf("%s still has a gradient", p.Name)
				}
			}
			total, trainable = nn.NumParameters(nil)
			nn.ZeroGrad(nil)
			nn.SetRequiresGrad(nil, true)
			if total != 0 || trainable != 0 {
				t.Fatal("a nil module has parameters")
			}
		})
	}
}

// intParam is a module with an integer parameter beside a float one.
type intParam struct{ nn.Base }

func (intParam) Forward(x *vram.Tensor) *vram.Tensor { return x }

func TestSetRequiresGradRefuses(t *testing.T) {
	m := &intParam{}
	w := vram.Zeros(vram.Shape{2}, vram.WithGrad())
	m.RegisterParameter("w", w)
	m.RegisterParameter("steps", vram.Zeros(vram.Shape{1}, vram.Int64))
	if err := vram.Catch(func() { nn.SetRequiresGrad(m, true) }); !errors.Is(err, vram.ErrDType) {
		t.Fatalf("%v, want ErrDType", err)
	}
	nn.SetRequiresGrad(m, false) // turning off is fine
	if w.RequiresGrad() {
		t.Fatal("w still requires grad")
	}
	w.SetRequiresGrad(true)
	if err := vram.Catch(func() { nn.SetRequiresGrad(m, true) }); err == nil || !w.RequiresGrad() {
		t.Fatalf("%v: the refused call changed w", err)
	}
	c := &intParam{}
	c.RegisterParameter("a", vram.Zeros(vram.Shape{2}))
	c.RegisterParameter("b", vram.Zeros(vram.Shape{2}, vram.WithGrad()).MulScalar(2))
	if err := vram.Catch(func() { nn.SetRequiresGrad(c, true) }); !errors.Is(err, vram.ErrAutograd) {
		t.Fatalf("%v, want ErrAutograd", err)
	}
	if c.Parameters()[0].RequiresGrad() {
		t.Fatal("the refused call changed a")
	}
}

func TestParametersVector(t *testing.T) {
	for _, dev := range initDevices {
		t.Run(dev.String(), func(t *testing.T) {
			a := vram.FromSlice([]float64{1, 2, 3, 4, 5, 6}, vram.Shape{2, 3}, vram.Float32, dev, vram.WithGrad())
			b := vram.FromSlice([]float64{7, 8}, vram.Shape{2}, vram.Float32, dev, vram.WithGrad())
			// A transposed (non-contiguous) view flattens in its own order.
			c := vram.FromSlice([]float64{9, 10, 11, 12}, vram.Shape{2, 2}, vram.Float32, dev).Transpose(0, 1)
			v := nn.ParametersToVector([]*vram.Tensor{a, b, c})
			if got, want := v.Float64s(), []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 10, 12}; !slices.Equal(got, want) || v.Device() != dev {
				t.Fatalf("%v on %v, want %v on %v", got, v.Device(), want, dev)
			}
			// Differentiable: the gradient flows back to each parameter.
			w := vram.Arange(0, 12, 1, vram.Float32, dev)
			v.Mul(w).Sum().Backward()
			if got := b.Grad().Float64s(); !slices.Equal(got, []float64{6, 7}) {
				t.Fatalf("b's gradient %v, want [6 7]", got)
			}
			// Back into the parameters, from another device and dtype.
			back := vram.Arange(20, 28, 1, vram.Float64, vram.Sim(1))
			nn.VectorToParameters(back, []*vram.Tensor{a, b})
			if got := a.Float64s(); !slices.Equal(got, []float64{20, 21, 22, 23, 24, 25}) || a.Shape().String() != "[2, 3]" {
				t.Fatalf("a = %v %v", got, a.Shape())
			}
			if got := b.Float64s(); !slices.Equal(got, []float64{26, 27}) || b.DType() != vram.Float32 || b.Device() != dev || !b.RequiresGrad() {
				t.Fatalf("b = %v, %v on %v", got, b.DType(), b.Device())
			}
		})
	}
}

func TestParametersVectorRefuses(t *testing.T) {
	a := vram.Ones(vram.Shape{2, 2})
	b := vram.Ones(vram.Shape{3})
	onSim := vram.Ones(vram.Shape{3}, vram.Sim(0))
	gone := vram.Ones(vram.Shape{3})
	gone.Release()
	goneVec := vram.Zeros(vram.Shape{7})
	goneVec.Release()
	tests := []struct {
		name string
		fn   func()
		kind error
	}{
		{"to vector: none", func() { nn.ParametersToVector(nil) }, vram.ErrArgument},
		{"to vector: nil", func() { nn.ParametersToVector([]*vram.Tensor{a, nil}) }, vram.ErrArgument},
		{"to vector: devices", func() { nn.ParametersToVector([]*vram.Tensor{a, onSim}) }, vram.ErrDevice},
		{"from vector: too short", func() { nn.VectorToParameters(vram.Zeros(vram.Shape{6}), []*vram.Tensor{a, b}) }, vram.ErrShape},
		{"from vector: too long", func() { nn.VectorToParameters(vram.Zeros(vram.Shape{8}), []*vram.Tensor{a, b}) }, vram.ErrShape},
		{"from vector: 2-D", func() { nn.VectorToParameters(vram.Zeros(vram.Shape{7, 1}), []*vram.Tensor{a, b}) }, vram.ErrShape},
		{"from vector: nil vec", func() { nn.VectorToParameters(nil, []*vram.Tensor{a, b}) }, vram.ErrArgument},
		{"from vector: devices", func() { nn.VectorToParameters(vram.Zeros(vram.Shape{7}), []*vram.Tensor{a, onSim}) }, vram.ErrDevice},
		{"from vector: none", func() { nn.VectorToParameters(vram.Zeros(vram.Shape{0}), nil) }, vram.ErrArgument},
		{"to vector: released", func() { nn.ParametersToVector([]*vram.Tensor{a, gone}) }, vram.ErrReleased},
		{"from vector: released parameter", func() { nn.VectorToParameters(vram.Zeros(vram.Shape{7}), []*vram.Tensor{a, gone}) }, vram.ErrReleased},
		{"from vector: released vec", func() { nn.VectorToParameters(goneVec, []*vram.Tensor{a, b}) }, vram.ErrReleased},
	}
	for _, tt := range tests {
		if err := vram.Catch(tt.fn); !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), "parameters_to_vector:") && !strings.Contains(err.Error(), "vector_to_parameters:") {
			t.Errorf("%s: %v, want %v naming the function", tt.name, err, tt.kind)
		}
	}
	// Nothing was written.
	for _, p := range []*vram.Tensor{a, b, onSim} {
		for _, v := range p.Float64s() {
			if v != 1 {
				t.Fatalf("a refused call changed a parameter: %v", p.Float64s())
			}
		}
	}
}
