package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestAssignedBuffers assigns new tensors to layers' buffer fields, as
// PyTorch code assigns bn.running_mean: the state dict, NamedBuffers, To
// and the layer's Forward must all see the new tensor, and a field set to
// nil leaves the buffer out of them, as a buffer set to None.
func TestAssignedBuffers(t *testing.T) {
	tests := []struct {
		name  string
		mk    func() nn.Module
		field func(nn.Module) **vram.Tensor
		key   string
	}{
		{"BatchNorm2d running_mean", func() nn.Module { return nn.NewBatchNorm2d(2) },
			func(m nn.Module) **vram.Tensor { return &m.(*nn.BatchNorm2d).RunningMean }, "running_mean"},
		{"BatchNorm1d running_var", func() nn.Module { return nn.NewBatchNorm1d(2) },
			func(m nn.Module) **vram.Tensor { return &m.(*nn.BatchNorm1d).RunningVar }, "running_var"},
		{"InstanceNorm2d running_mean", func() nn.Module {
			return nn.NewInstanceNorm2d(2, nn.InstanceNormOptions{TrackRunningStats: true})
		}, func(m nn.Module) **vram.Tensor { return &m.(*nn.InstanceNorm).RunningMean }, "running_mean"},
		{"Sequential BatchNorm2d", func() nn.Module { return nn.NewSequential(nn.NewBatchNorm2d(2)) },
			func(m nn.Module) **vram.Tensor { return &m.(*nn.Sequential).At(0).(*nn.BatchNorm2d).RunningMean }, "0.running_mean"},
		{"quantized Linear scale", func() nn.Module { return quantizedLinear(t) },
			func(m nn.Module) **vram.Tensor { return &m.(*nn.Linear).Scale }, "scale"},
		{"quantized Linear bias", func() nn.Module { return quantizedLinear(t) },
			func(m nn.Module) **vram.Tensor { return &m.(*nn.Linear).Bias }, "bias"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.mk()
			defer nn.Release(m)
			field := tt.field(m)
			old := *field
			*field = vram.Full(vram.Shape{2}, 5)
			old.Release()
			if got := nn.StateDict(m)[tt.key]; got != *field {
				t.Fatalf("StateDict()[%q] = %v, want the assigned tensor", tt.key, got)
			}
			found := false
			for _, b := range nn.NamedBuffers(m) {
				if b.Name == tt.key {
					found = b.Tensor == *field
				}
			}
			if !found {
				t.Errorf("NamedBuffers lacks the assigned %q", tt.key)
			}
			sim := vram.Sim(0)
			m.To(sim)
			if d := (*field).Device(); d != sim {
				t.Errorf("To(%v) left the assigned buffer on %v", sim, d)
			}
			m.CPU()
			*field = nil
			if _, ok := nn.StateDict(m)[tt.key]; ok {
				t.Errorf("StateDict keeps %q after its field was set to nil", tt.key)
			}
		})
	}
}

// fieldBuf is a caller's layer whose buffer is a field.
type fieldBuf struct {
	nn.Base
	Scale *vram.Tensor
}

func (m *fieldBuf) Forward(x *vram.Tensor) *vram.Tensor { return x.Mul(m.Scale) }

// TestRegisterBufferField checks a caller's buffer registered by its
// field: replacing the tensor replaces the buffer, in the state dict, in
// Replicate's copy and in loading, and the name rules are those of
// RegisterBuffer.
func TestRegisterBufferField(t *testing.T) {
	m := &fieldBuf{Scale: vram.Ones(vram.Shape{2})}
	m.RegisterBufferField("scale", &m.Scale)
	defer nn.Release(m)
	first := m.Scale
	m.Scale = vram.Full(vram.Shape{2}, 3)
	first.Release()
	if got := nn.StateDict(m)["scale"]; got != m.Scale {
		t.Fatalf("StateDict()[\"scale\"] is not the assigned tensor")
	}
	r, err := nn.Replicate(m, vram.CPU)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.(*fieldBuf)
	defer nn.Release(rep)
	rep.Scale.Release()
	rep.Scale = vram.Full(vram.Shape{2}, 7)
	if got := nn.StateDict(rep)["scale"]; got != rep.Scale {
		t.Errorf("the replica's buffer does not follow its field")
	}
	if got := nn.StateDict(m)["scale"].Float32s(); got[0] != 3 {
		t.Errorf("the module's buffer changed with the replica's: %v", got)
	}
	for _, tc := range []struct {
		name  string
		field **vram.Tensor
	}{
		{"nil field", nil},
		{"field holding nil", new(*vram.Tensor)},
		{"", &m.Scale},
		{"a.b", &m.Scale},
		{"scale", &m.Scale},
	} {
		err := vram.Catch(func() { m.RegisterBufferField(tc.name, tc.field) })
		if !errors.Is(err, vram.ErrArgument) {
			t.Errorf("RegisterBufferField(%q): %v, want ErrArgument", tc.name, err)
		}
	}
}

// quantizedLinear returns a Linear from 2 to 2 features made int8 with
// SetInt8Weight.
func quantizedLinear(t *testing.T) *nn.Linear {
	l := nn.NewLinear(2, 2)
	if err := l.SetInt8Weight(vram.Ones(vram.Shape{2, 2}, vram.Int8), vram.Full(vram.Shape{2}, 0.5)); err != nil {
		t.Fatal(err)
	}
	return l
}
