package nn_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// block is a user-defined module with two sub-modules.
type block struct {
	nn.Base
	fc  *nn.Linear
	act nn.Module
}

func newBlock(shared *nn.Linear) *block {
	b := &block{fc: shared, act: nn.NewReLU()}
	b.RegisterModule("fc", b.fc)
	b.RegisterModule("act", b.act)
	return b
}

func (b *block) Forward(x *vram.Tensor) *vram.Tensor {
	h := b.fc.Forward(x)
	defer h.Release()
	return b.act.Forward(h)
}

func TestModules(t *testing.T) {
	shared := nn.NewLinear(2, 2)
	defer nn.Release(shared)
	flatten := nn.Func(func(x *vram.Tensor) *vram.Tensor { return x.Flatten(1, -1) })
	lin := nn.NewLinear(2, 2)
	defer nn.Release(lin)
	tests := []struct {
		name  string
		m     nn.Module
		names []string
	}{
		{"a layer alone", lin, []string{""}},
		{"a func", flatten, []string{""}},
		{"sequential", nn.NewSequential(lin, nn.NewReLU(), flatten), []string{"", "0", "1", "2"}},
		{"nested", nn.NewSequential(newBlock(shared), nn.NewSequential(nn.NewTanh(), newBlock(nn.NewLinear(2, 2)))),
			[]string{"", "0", "0.fc", "0.act", "1", "1.0", "1.1", "1.1.fc", "1.1.act"}},
		{"shared listed once", nn.NewSequential(newBlock(shared), shared, newBlock(shared)),
			[]string{"", "0", "0.fc", "0.act", "2", "2.act"}},
		{"a func registered twice is listed twice", nn.NewSequential(flatten, flatten), []string{"", "0", "1"}},
		{"the same module twice", nn.NewSequential(lin, lin), []string{"", "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			named := nn.NamedModules(tc.m)
			mods := nn.Modules(tc.m)
			var names []string
			for i, n := range named {
				names = append(names, n.Name)
				if !sameModule(mods[i], n.Module) {
					t.Errorf("Modules()[%d] is not NamedModules()[%d].Module", i, i)
				}
			}
			if !slices.Equal(names, tc.names) {
				t.Fatalf("names %q, want %q", names, tc.names)
			}
			if len(mods) != len(named) || !sameModule(mods[0], tc.m) {
				t.Fatalf("%d modules, the first %T: want the module itself first", len(mods), mods[0])
			}
		})
	}
}

// sameModule compares modules by identity where they can be compared.
func sameModule(a, b nn.Module) bool {
	if _, ok := a.(nn.Func); ok {
		_, ok := b.(nn.Func)
		return ok
	}
	return a == b
}

func TestModulesPicksLayersByType(t *testing.T) {
	model := nn.NewSequential(nn.NewLinear(3, 4), nn.NewReLU(), newBlock(nn.NewLinear(4, 4)), nn.NewLinear(4, 1))
	defer nn.Release(model)
	var linears int
	for _, m := range nn.Modules(model) {
		if l, ok := m.(*nn.Linear); ok {
			linears++
			vram.NoGrad(func() { l.Bias.FillInPlace(0) })
		}
	}
	if linears != 3 {
		t.Fatalf("found %d Linear layers, want 3", linears)
	}
	for _, p := range model.NamedParameters() {
		if p.Name[len(p.Name)-4:] == "bias" && p.Tensor.Sum().Item() != 0 {
			t.Fatalf("%s was not reached", p.Name)
		}
	}
}

func TestNamedChildren(t *testing.T) {
	b := newBlock(nn.NewLinear(2, 2))
	got := b.NamedChildren()
	if len(got) != 2 || got[0].Name != "fc" || got[0].Module != nn.Module(b.fc) || got[1].Name != "act" {
		t.Fatalf("NamedChildren() = %v", got)
	}
	if n := len(nn.NewReLU().NamedChildren()); n != 0 {
		t.Fatalf("a ReLU has %d children", n)
	}
}

// TestSequentialModulesMethod checks the method form that a PyTorch user
// reaches for (model.Modules()) against the function.
func TestSequentialModulesMethod(t *testing.T) {
	lin := nn.NewLinear(2, 2)
	defer nn.Release(lin)
	m := nn.NewSequential(lin, nn.NewReLU(), nn.NewSequential(nn.NewTanh()))
	got, want := m.Modules(), nn.Modules(m)
	if len(got) != 5 || len(got) != len(want) || got[0] != nn.Module(m) || got[1] != nn.Module(lin) {
		t.Fatalf("Modules() = %v, want %v (the model first)", got, want)
	}
	if names := m.NamedModules(); names[4].Name != "2.0" {
		t.Errorf("NamedModules()[4] = %q, want 2.0", names[4].Name)
	}
}

// TestLinearMaskAndInt8Errors checks that SetParameterMask and
// SetInt8Weight refuse what does not fit with errors matching vram's
// sentinels.
func TestLinearMaskAndInt8Errors(t *testing.T) {
	l := nn.NewLinear(3, 2)
	defer nn.Release(l)
	q := nn.NewLinear(3, 2)
	defer nn.Release(q)
	if err := q.SetInt8Weight(vram.Zeros(vram.Shape{2, 3}, vram.Int8), vram.Ones(vram.Shape{2})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"no such parameter", l.SetParameterMask("gamma", nil), vram.ErrArgument},
		{"mask of another shape", l.SetParameterMask("weight", vram.Ones(vram.Shape{3, 2})), vram.ErrArgument},
		{"mask of an int8 weight", q.SetParameterMask("weight", vram.Ones(vram.Shape{2, 3}, vram.Int8)), vram.ErrDType},
		{"nil int8 weight", l.SetInt8Weight(nil, nil), vram.ErrArgument},
		{"int8 weight of another shape", l.SetInt8Weight(vram.Zeros(vram.Shape{3, 2}, vram.Int8), vram.Ones(vram.Shape{2})), vram.ErrArgument},
		{"already quantized", q.SetInt8Weight(vram.Zeros(vram.Shape{2, 3}, vram.Int8), vram.Ones(vram.Shape{2})), vram.ErrArgument},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: %v, want an error matching %v", tt.name, tt.err, tt.want)
		}
	}
}
