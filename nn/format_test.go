package nn_test

import (
	"fmt"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// scaledBlock is a caller's own module with a parameter of its own beside a
// sub-module, as layers written on nn.Base have.
type scaledBlock struct {
	nn.Base
	fc *nn.Linear
}

func newScaledBlock(opts ...vram.Option) *scaledBlock {
	b := &scaledBlock{fc: nn.NewLinear(2, 2, opts...)}
	b.RegisterParameter("scale", vram.Ones(vram.Shape{2}, append(opts, vram.WithGrad())...))
	b.RegisterModule("fc", b.fc)
	return b
}

func (b *scaledBlock) Forward(x *vram.Tensor) *vram.Tensor { return b.fc.Forward(x) }

func TestFormat(t *testing.T) {
	released := nn.NewLinear(2, 1)
	nn.Release(released)
	tests := []struct {
		name string
		m    nn.Module
		want string
	}{
		{"nil", nil, "<nil>"},
		{"typed nil", (*nn.Linear)(nil), "<nil>"},
		{"leaf without parameters", nn.NewReLU(), "ReLU()"},
		{"leaf", nn.NewLinear(4, 3), "Linear(weight [3, 4], bias [3])"},
		{"buffers", nn.NewBatchNorm1d(5),
			"BatchNorm1d(weight [5], bias [5], running_mean [5], running_var [5], num_batches_tracked [] int64)"},
		{"dtype and device", nn.NewLinear(2, 1, vram.Float64, vram.Sim(0)),
			"Linear(weight [1, 2] float64 sim:0, bias [1] float64 sim:0)"},
		{"released", released, "Linear(weight [1, 2] (released), bias [1] (released))"},
		{"func", nn.Func(func(x *vram.Tensor) *vram.Tensor { return x }), "Func()"},
		{"sequential", nn.NewSequential(nn.NewLinear(4, 8), nn.NewReLU(), nn.NewLinear(8, 2)),
			"Sequential(\n  (0): Linear(weight [8, 4], bias [8])\n  (1): ReLU()\n  (2): Linear(weight [2, 8], bias [2])\n)"},
		{"nested with own parameter", nn.NewSequential(newScaledBlock(), nn.NewSequential(nn.NewTanh())),
			"Sequential(\n  (0): scaledBlock(scale [2],\n    (fc): Linear(weight [2, 2], bias [2])\n  )\n  (1): Sequential(\n    (0): Tanh()\n  )\n)"},
		{"wrapper", nn.NewSequential(nn.Checkpoint(nn.NewLinear(1, 1))),
			"Sequential(\n  (0): Checkpointed(Linear(weight [1, 1], bias [1]))\n)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nn.Format(tt.m); got != tt.want {
				t.Errorf("Format() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func ExampleFormat() {
	model := nn.NewSequential(nn.NewLinear(4, 16), nn.NewReLU(), nn.NewLinear(16, 3))
	fmt.Println(nn.Format(model)) // PyTorch's print(model)
	// Output:
	// Sequential(
	//   (0): Linear(weight [16, 4], bias [16])
	//   (1): ReLU()
	//   (2): Linear(weight [3, 16], bias [3])
	// )
}

// TestNilModule checks that every package-level function taking a Module
// treats a nil one as the documented no-op or error, never a nil-pointer
// dereference.
func TestNilModule(t *testing.T) {
	tests := []struct {
		name string
		call func() error
	}{
		{"Release", func() error { nn.Release(nil); return nil }},
		{"ToMemoryFormat", func() error { nn.ToMemoryFormat(nil, vram.ChannelsLast); return nil }},
		{"StateDict", func() error {
			if sd := nn.StateDict(nil); len(sd) != 0 {
				return fmt.Errorf("StateDict(nil) = %v, want empty", sd)
			}
			return nil
		}},
		{"ConvertDType", func() error { nn.ConvertDType(nil, vram.Float16); return nil }},
		{"ZeroGrad", func() error { nn.ZeroGrad(nil); return nil }},
		{"NumParameters", func() error { nn.NumParameters(nil); return nil }},
		{"SetRequiresGrad", func() error { nn.SetRequiresGrad(nil, false); return nil }},
		{"Apply", func() error { nn.Apply(nil, func(nn.Module) {}); return nil }},
		{"NamedModules", func() error { nn.NamedModules(nil); return nil }},
		{"NamedBuffers", func() error { nn.NamedBuffers(nil); return nil }},
		{"Format", func() error { nn.Format(nil); return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s(nil) panicked: %v", tt.name, r)
				}
			}()
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
