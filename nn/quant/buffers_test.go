package quant_test

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/nn/quant"
	"github.com/vramgo/vram/optim"
)

// TestQuantizedLayersHaveNoParameters checks that a quantized Linear has
// no parameters, as PyTorch's dynamically quantized Linear has none: its
// int8 weight, scale and bias are buffers under the same state-dict keys,
// so that parameter counts and optimizers leave them out. They used to be
// parameters, so that an optimizer built over a partly quantized model
// was handed the int8 weights and refused the whole model.
func TestQuantizedLayersHaveNoParameters(t *testing.T) {
	tests := []struct {
		name       string
		keep       func(name string, l *nn.Linear) bool
		wantN      int
		wantParams []string
		wantState  []string
	}{
		{"all", func(string, *nn.Linear) bool { return true }, 2, nil,
			[]string{"0.bias", "0.scale", "0.weight", "2.bias", "2.scale", "2.weight"}},
		{"first", func(name string, _ *nn.Linear) bool { return name == "0" }, 1, []string{"2.weight", "2.bias"},
			[]string{"0.bias", "0.scale", "0.weight", "2.bias", "2.weight"}},
		{"none", func(string, *nn.Linear) bool { return false }, 0, []string{"0.weight", "0.bias", "2.weight", "2.bias"},
			[]string{"0.bias", "0.weight", "2.bias", "2.weight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := vram.WithGenerator(vram.NewGenerator(11))
			model := nn.NewSequential(nn.NewLinear(6, 8, g), nn.NewReLU(), nn.NewLinear(8, 3, g))
			defer nn.Release(model)
			// A gradient from training, which the quantized bias drops.
			x := vram.Randn(vram.Shape{4, 6}, g)
			defer x.Release()
			vram.Tidy(func() { model.Forward(x).Sum().Backward() })
			n, err := quant.QuantizeSelected(model, tt.keep)
			if err != nil || n != tt.wantN {
				t.Fatalf("QuantizeSelected = %d, %v; want %d", n, err, tt.wantN)
			}
			var names []string
			for _, p := range model.NamedParameters() {
				names = append(names, p.Name)
				if !p.Tensor.DType().IsFloat() {
					t.Errorf("parameter %s is %s", p.Name, p.Tensor.DType())
				}
			}
			if !slices.Equal(names, tt.wantParams) {
				t.Errorf("parameters %v, want %v", names, tt.wantParams)
			}
			var keys []string
			for k := range nn.StateDict(model) {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !slices.Equal(keys, tt.wantState) {
				t.Errorf("state-dict keys %v, want %v", keys, tt.wantState)
			}
			for _, b := range nn.NamedBuffers(model) {
				if b.Tensor.RequiresGrad() || b.Tensor.Grad() != nil {
					t.Errorf("buffer %s requires grad %v, has a gradient %v", b.Name, b.Tensor.RequiresGrad(), b.Tensor.Grad() != nil)
				}
			}
			// An optimizer over the model gets the float layers only and
			// trains them; the quantized ones keep their values.
			if len(tt.wantParams) == 0 {
				if _, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1}); !errors.Is(err, vram.ErrArgument) {
					t.Errorf("optimizer over a model without parameters: %v, want an error matching vram.ErrArgument", err)
				}
				return
			}
			opt, err := optim.NewSGD(model.Parameters(), optim.SGDConfig{LR: 0.1})
			if err != nil {
				t.Fatalf("optimizer over the partly quantized model: %v", err)
			}
			before := map[string][]float64{}
			for _, b := range nn.NamedBuffers(model) {
				before[b.Name] = b.Tensor.Float64s()
			}
			opt.ZeroGrad()
			vram.Tidy(func() { model.Forward(x).Sum().Backward() })
			opt.Step()
			for _, b := range nn.NamedBuffers(model) {
				if !slices.Equal(b.Tensor.Float64s(), before[b.Name]) {
					t.Errorf("buffer %s changed in a step", b.Name)
				}
			}
		})
	}
}

// holder is a model that keeps the device its parameters are on, as a
// module that makes tensors in Forward does.
type holder struct {
	nn.Base
	Dev vram.Device
	fc  *nn.Linear
}

func (m *holder) Forward(x *vram.Tensor) *vram.Tensor { return m.fc.Forward(x) }

// TestQuantizedModelMoves checks that To, Replicate and Release reach
// the buffers of a quantized model, which has no parameters: the model
// computes the same on cpu and sim devices, a replica's device field
// follows it, and Release gives all the memory back.
func TestQuantizedModelMoves(t *testing.T) {
	tests := []struct {
		name string
		path []vram.Device // the devices To moves the model to, in turn
	}{
		{"cpu to sim", []vram.Device{vram.Sim(0)}},
		{"sim and back", []vram.Device{vram.Sim(0), vram.CPU}},
		{"cpu to cpu", []vram.Device{vram.CPU}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			memtest.Settle()
			base := vram.MemoryAllocated(vram.Sim(0))
			g := vram.WithGenerator(vram.NewGenerator(12))
			m := &holder{Dev: vram.CPU, fc: nn.NewLinear(5, 7, g)}
			m.RegisterModule("fc", m.fc)
			if _, err := quant.Quantize(m); err != nil {
				t.Fatal(err)
			}
			x := vram.Randn(vram.Shape{3, 5}, g)
			defer x.Release()
			var want []float64
			vram.NoGrad(func() { vram.Tidy(func() { want = m.Forward(x).Float64s() }) })
			for _, d := range tt.path {
				m.To(d)
				m.Dev = d
			}
			d := tt.path[len(tt.path)-1]
			for _, b := range nn.NamedBuffers(m) {
				if b.Tensor.Device() != d {
					t.Errorf("buffer %s on %s after To(%s)", b.Name, b.Tensor.Device(), d)
				}
			}
			vram.NoGrad(func() {
				vram.Tidy(func() {
					if got := m.Forward(x.To(d)).Float64s(); !slices.Equal(got, want) {
						t.Errorf("output on %s %v, want %v", d, got, want)
					}
				})
			})
			r, err := nn.Replicate(m, vram.Sim(0))
			if err != nil {
				t.Fatal(err)
			}
			rh := r.(*holder)
			if rh.Dev != vram.Sim(0) || rh.fc.Weight == m.fc.Weight || rh.fc.Weight.Device() != vram.Sim(0) {
				t.Errorf("replica: device field %s, weight on %s (shared %v)", rh.Dev, rh.fc.Weight.Device(), rh.fc.Weight == m.fc.Weight)
			}
			nn.Release(r)
			nn.Release(m)
			memtest.Settle()
			if left := vram.MemoryAllocated(vram.Sim(0)) - base; left != 0 {
				t.Errorf("%d bytes left on sim:0 after Release", left)
			}
		})
	}
}

// TestQuantizeTiedBias checks that a bias shared with a layer that is not
// quantized is refused, as a shared weight is: quantizing used to stop
// the other layer's bias from requiring grad without a word.
func TestQuantizeTiedBias(t *testing.T) {
	tests := []struct {
		name  string
		keep  func(name string, l *nn.Linear) bool
		wantN int
		ok    bool
	}{
		{"both quantized", func(string, *nn.Linear) bool { return true }, 2, true},
		{"one quantized", func(name string, _ *nn.Linear) bool { return name == "0" }, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := nn.NewLinear(4, 4)
			b := nn.NewLinearNoBias(4, 4)
			b.Bias = a.Bias
			b.RegisterParameter("bias", a.Bias)
			model := nn.NewSequential(a, b)
			defer nn.Release(model)
			n, err := quant.QuantizeSelected(model, tt.keep)
			if tt.ok {
				if err != nil || n != tt.wantN {
					t.Fatalf("QuantizeSelected = %d, %v; want %d", n, err, tt.wantN)
				}
				vram.NoGrad(func() { vram.Tidy(func() { model.Forward(vram.Ones(vram.Shape{1, 4})) }) })
				return
			}
			if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), `"1.bias"`) {
				t.Fatalf("QuantizeSelected = %d, %v; want an error matching vram.ErrArgument naming \"1.bias\"", n, err)
			}
			if !a.Bias.RequiresGrad() || a.Weight.DType() != vram.Float32 || len(model.Parameters()) != 3 {
				t.Error("the model changed although quantizing failed")
			}
		})
	}
}
