package nn_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// tiedCase is a model of two layers whose weights can be tied by
// assigning one layer's exported field to the other's, as PyTorch users
// write decoder.weight = encoder.weight.
type tiedCase struct {
	name string
	// build returns the model, a function that ties its weights and the
	// two fields, and an input.
	build func() (m nn.Module, tie func(), first, second **vram.Tensor, x *vram.Tensor)
	// names are the parameter names of the tied model, keys the
	// state-dict keys; shared is the state-dict key of the second use.
	names, keys []string
	shared      string
}

func tiedCases() []tiedCase {
	f64 := vram.Float64
	return []tiedCase{
		{"Linear-Linear", func() (nn.Module, func(), **vram.Tensor, **vram.Tensor, *vram.Tensor) {
			a, b := nn.NewLinear(3, 3, f64), nn.NewLinear(3, 3, f64)
			x := vram.FromSlice([]float64{1, -2, 0.5, 3, 0.25, -1}, vram.Shape{2, 3})
			return nn.NewSequential(a, nn.NewTanh(), b), func() { b.Weight = a.Weight }, &a.Weight, &b.Weight, x
		}, []string{"0.weight", "0.bias", "2.bias"}, []string{"0.bias", "0.weight", "2.bias", "2.weight"}, "2.weight"},
		// GPT-2's output projection is its token embedding, [vocab, dim]
		// both, with no transpose.
		{"Embedding-Linear", func() (nn.Module, func(), **vram.Tensor, **vram.Tensor, *vram.Tensor) {
			e, h := nn.NewEmbedding(5, 3, f64), nn.NewLinearNoBias(3, 5, f64)
			x := vram.FromSlice([]int64{0, 3, 3, 4}, vram.Shape{4})
			return nn.NewSequential(e, h), func() { h.Weight = e.Weight }, &e.Weight, &h.Weight, x
		}, []string{"0.weight"}, []string{"0.weight", "1.weight"}, "1.weight"},
		{"Conv2d", func() (nn.Module, func(), **vram.Tensor, **vram.Tensor, *vram.Tensor) {
			a, b := nn.NewConv2d(2, 2, 3, nn.ConvOptions{Padding: 1}, f64), nn.NewConv2d(2, 2, 3, nn.ConvOptions{Padding: 1}, f64)
			x := vram.Randn(vram.Shape{1, 2, 4, 4}, f64, vram.WithGenerator(vram.NewGenerator(3)))
			return nn.NewSequential(a, nn.NewTanh(), b), func() { b.Weight = a.Weight }, &a.Weight, &b.Weight, x
		}, []string{"0.weight", "0.bias", "2.bias"}, []string{"0.bias", "0.weight", "2.bias", "2.weight"}, "2.weight"},
	}
}

// TestTiedWeightsByAssignment ties weights by assigning an exported field
// and checks what PyTorch does: the shared tensor is a parameter once
// (named_parameters, parameter counts, optimizers), the state dict keys
// it under both names, and a replica keeps it shared and follows its own
// fields.
func TestTiedWeightsByAssignment(t *testing.T) {
	for _, tt := range tiedCases() {
		t.Run(tt.name, func(t *testing.T) {
			m, tie, first, second, x := tt.build()
			defer nn.Release(m)
			defer x.Release()
			old := *second
			total0, _ := nn.NumParameters(m)
			tie()
			old.Release()
			if got := paramNames(m); !slices.Equal(got, tt.names) {
				t.Errorf("parameters %q, want %q", got, tt.names)
			}
			total, trainable := nn.NumParameters(m)
			if want := total0 - (*first).NumElements(); total != want || trainable != want {
				t.Errorf("NumParameters = %d, %d; want %d, %d", total, trainable, want, want)
			}
			for _, p := range m.Parameters() {
				if p == old {
					t.Fatal("the replaced weight is still a parameter")
				}
			}
			sd := nn.StateDict(m)
			keys := make([]string, 0, len(sd))
			for k := range sd {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !slices.Equal(keys, tt.keys) {
				t.Errorf("state dict keys %q, want %q", keys, tt.keys)
			}
			if sd[tt.shared] != *first {
				t.Errorf("state dict %q is not the shared weight", tt.shared)
			}
			opt, err := optim.NewSGD(m.Parameters(), optim.SGDConfig{LR: 0.1})
			if err != nil {
				t.Fatalf("NewSGD of the tied parameters: %v", err)
			}
			opt.Release()

			rep, err := nn.Replicate(m, vram.CPU)
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(rep)
			if got := paramNames(rep); !slices.Equal(got, tt.names) {
				t.Errorf("replica parameters %q, want %q", got, tt.names)
			}
			// The replica's parameters are its fields: assigning one
			// changes the replica, not m.
			rsd := nn.StateDict(rep)
			if rsd[tt.shared] == *first || rsd[tt.shared] != rsd["0.weight"] {
				t.Errorf("the replica's tied weight is m's or not shared")
			}
			fresh := vram.ZerosLike(*first)
			defer fresh.Release()
			for _, nm := range nn.NamedModules(rep) {
				switch l := nm.Module.(type) {
				case *nn.Linear:
					l.Weight = fresh
				case *nn.Embedding:
					l.Weight = fresh
				case *nn.Conv2d:
					l.Weight = fresh
				}
			}
			if n := len(rep.Parameters()); n != len(tt.names) || !slices.Contains(rep.Parameters(), fresh) {
				t.Errorf("after assigning the replica's fields its parameters are %d, holding the new weight %v", n, slices.Contains(rep.Parameters(), fresh))
			}
			if !slices.Contains(m.Parameters(), *first) {
				t.Error("assigning the replica's field changed m")
			}
		})
	}
}

// TestTiedWeightsTrainAfterLoad saves a tied model, loads the file into
// another tied model and into an untied one (the file keys the shared
// weight under both names, as PyTorch's state_dict does), and trains both
// one step: the gradient of the shared weight is the sum of the untied
// weights' gradients, and one SGD step on the shared weight moves it by
// that sum.
func TestTiedWeightsTrainAfterLoad(t *testing.T) {
	const lr = 0.1
	for _, tt := range tiedCases() {
		t.Run(tt.name, func(t *testing.T) {
			src, tieSrc, _, _, x := tt.build()
			defer nn.Release(src)
			defer x.Release()
			tieSrc()
			path := filepath.Join(t.TempDir(), "tied.safetensors")
			if err := nn.Save(src, path); err != nil {
				t.Fatal(err)
			}

			tied, tie, first, _, _ := tt.build()
			defer nn.Release(tied)
			tie()
			if err := nn.Load(tied, path); err != nil {
				t.Fatalf("Load into the tied model: %v", err)
			}
			ref, _, rFirst, rSecond, _ := tt.build()
			defer nn.Release(ref)
			if err := nn.Load(ref, path); err != nil {
				t.Fatalf("strict Load into the untied model: %v", err)
			}
			want := nn.StateDict(src)[tt.names[0]].Float64s()
			for name, got := range map[string][]float64{"tied": (*first).Float64s(), "untied first": (*rFirst).Float64s(), "untied second": (*rSecond).Float64s()} {
				if !slices.Equal(got, want) {
					t.Fatalf("%s weight %v after Load, want %v", name, got, want)
				}
			}

			for _, m := range []nn.Module{tied, ref} {
				vram.Tidy(func() { m.Forward(x).Square().Sum().Backward() })
			}
			g1, g2 := (*rFirst).Grad().Float64s(), (*rSecond).Grad().Float64s()
			sum := make([]float64, len(g1))
			for i := range g1 {
				sum[i] = g1[i] + g2[i]
			}
			checkClose(t, "shared gradient", (*first).Grad().Float64s(), sum, 1e-9)

			opt, err := optim.NewSGD(tied.Parameters(), optim.SGDConfig{LR: lr})
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Release()
			opt.Step()
			stepped := make([]float64, len(want))
			for i := range want {
				stepped[i] = want[i] - lr*sum[i]
			}
			checkClose(t, "shared weight after a step", (*first).Float64s(), stepped, 1e-9)
		})
	}
}

// checkClose fails t unless got and want agree within tol.
func checkClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s has %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// TestParameterFieldSetToNil sets a registered field to nil, as PyTorch's
// module.bias = None: the parameter leaves the listings and the state
// dict, and comes back when a tensor is assigned again.
func TestParameterFieldSetToNil(t *testing.T) {
	l := nn.NewLinear(2, 2)
	defer nn.Release(l)
	bias := l.Bias
	defer bias.Release()
	l.Bias = nil
	if got := paramNames(l); !slices.Equal(got, []string{"weight"}) {
		t.Errorf("parameters %q with a nil bias, want [weight]", got)
	}
	if _, ok := nn.StateDict(l)["bias"]; ok {
		t.Error("the state dict keeps a nil bias")
	}
	l.Bias = bias
	if got := paramNames(l); !slices.Equal(got, []string{"weight", "bias"}) {
		t.Errorf("parameters %q after the bias came back, want [weight bias]", got)
	}
}

// fieldModule is a user's layer that registers its tensor field.
type fieldModule struct {
	nn.Base
	W *vram.Tensor
}

func (m *fieldModule) Forward(x *vram.Tensor) *vram.Tensor { return x.Mul(m.W) }

// TestRegisterParameterField: a user's layer makes its field a parameter
// (assigning the field replaces it, in the module and in a replica), and
// a nil field or tensor is refused as RegisterParameter refuses a nil
// tensor.
func TestRegisterParameterField(t *testing.T) {
	m := &fieldModule{W: vram.Ones(vram.Shape{2}, vram.WithGrad())}
	m.RegisterParameterField("w", &m.W)
	defer nn.Release(m)
	other := vram.Zeros(vram.Shape{3}, vram.WithGrad())
	old := m.W
	m.W = other
	old.Release()
	if ps := m.Parameters(); len(ps) != 1 || ps[0] != other {
		t.Fatal("assigning the field did not replace the parameter")
	}
	rep, err := nn.Replicate(m, vram.Sim(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Release(rep)
	r := rep.(*fieldModule)
	if ps := r.Parameters(); len(ps) != 1 || ps[0] != r.W || r.W.Device() != vram.Sim(0) {
		t.Fatal("the replica's parameter is not its field")
	}
	for _, tc := range []struct {
		name  string
		field **vram.Tensor
	}{
		{"nil field", nil},
		{"field holding nil", new(*vram.Tensor)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fieldModule{}
			err := vram.Catch(func() { b.RegisterParameterField("w", tc.field) })
			if !errors.Is(err, vram.ErrArgument) || len(b.Parameters()) != 0 {
				t.Fatalf("got %v with %d parameters, want an error matching vram.ErrArgument", err, len(b.Parameters()))
			}
		})
	}
}

// TestRecurrentWeightFields: the fields of a recurrent layer's or cell's
// weights are its parameters, in the layer and in its replica.
func TestRecurrentWeightFields(t *testing.T) {
	lstm := nn.NewLSTM(2, 3, nn.RecurrentOptions{NumLayers: 2, Bidirectional: true})
	cell := nn.NewGRUCell(2, 3, nn.CellOptions{})
	tests := []struct {
		name  string
		m     nn.Module
		field func(m nn.Module) **vram.Tensor
		key   string
	}{
		{"LSTM", lstm, func(m nn.Module) **vram.Tensor { return &m.(*nn.LSTM).Weights[3].WeightHH }, "weight_hh_l1_reverse"},
		{"GRUCell", cell, func(m nn.Module) **vram.Tensor { return &m.(*nn.GRUCell).BiasIH }, "bias_ih"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer nn.Release(tt.m)
			f := tt.field(tt.m)
			old := *f
			*f = vram.ZerosLike(old, vram.WithGrad())
			old.Release()
			if nn.StateDict(tt.m)[tt.key] != *f || !slices.Contains(tt.m.Parameters(), *f) {
				t.Fatalf("%s is not the tensor assigned to its field", tt.key)
			}
			rep, err := nn.Replicate(tt.m, vram.Sim(0))
			if err != nil {
				t.Fatal(err)
			}
			defer nn.Release(rep)
			rf := tt.field(rep)
			fresh := vram.OnesLike(*rf)
			defer fresh.Release()
			*rf = fresh
			if nn.StateDict(rep)[tt.key] != fresh || nn.StateDict(tt.m)[tt.key] != *f {
				t.Fatalf("the replica's %s is not its own field", tt.key)
			}
		})
	}
}
