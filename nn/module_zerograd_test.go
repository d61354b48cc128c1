package nn_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// twoLayers is a module of its own, embedding Base, as users write them.
type twoLayers struct {
	nn.Base
	a, b *nn.Linear
}

func (m *twoLayers) Forward(x *vram.Tensor) *vram.Tensor {
	h := m.a.Forward(x)
	defer h.Release()
	return m.b.Forward(h)
}

// TestModuleZeroGradMethod checks model.ZeroGrad(), PyTorch's
// model.zero_grad(): every parameter's gradient, those of sub-modules
// included, is released, on the layers, containers and modules of one's own.
func TestModuleZeroGradMethod(t *testing.T) {
	own := &twoLayers{a: nn.NewLinear(3, 4), b: nn.NewLinear(4, 2)}
	own.RegisterModule("a", own.a)
	own.RegisterModule("b", own.b)
	cases := []struct {
		name string
		m    interface {
			nn.Module
			ZeroGrad()
		}
	}{
		{"linear", nn.NewLinear(3, 2)},
		{"sequential", nn.NewSequential(nn.NewLinear(3, 4), nn.NewReLU(), nn.NewLinear(4, 2))},
		{"own module", own},
	}
	for _, c := range cases {
		x := vram.Randn(vram.Shape{5, 3})
		vram.Tidy(func() { c.m.Forward(x).Sum().Backward() })
		x.Release()
		for _, np := range c.m.NamedParameters() {
			if np.Tensor.Grad() == nil {
				t.Fatalf("%s: %s has no gradient after Backward", c.name, np.Name)
			}
		}
		c.m.ZeroGrad()
		for _, np := range c.m.NamedParameters() {
			if np.Tensor.Grad() != nil {
				t.Errorf("%s: %s still has a gradient after ZeroGrad", c.name, np.Name)
			}
		}
		nn.Release(c.m)
	}
}
