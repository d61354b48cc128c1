package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestReleasedParameterChangesNothing converts, moves and freezes a model
// one of whose parameters (the second layer's weight, as shared weights
// released elsewhere leave it) was released: each call panics with an
// *vram.Error of kind ErrReleased naming the parameter before it changes
// any other, rather than convert, move or freeze the layers before it
// and fail there.
func TestReleasedParameterChangesNothing(t *testing.T) {
	tests := []struct {
		name string
		call func(s *nn.Sequential)
	}{
		{"Half", func(s *nn.Sequential) { s.Half() }},
		{"ToDType", func(s *nn.Sequential) { s.ToDType(vram.Float64) }},
		{"ConvertDType", func(s *nn.Sequential) { nn.ConvertDType(s, vram.BFloat16) }},
		{"To", func(s *nn.Sequential) { s.To(vram.Sim(0)) }},
		{"SetRequiresGrad", func(s *nn.Sequential) { nn.SetRequiresGrad(s, false) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := nn.NewSequential(nn.NewLinear(2, 2), nn.NewLinear(2, 2), nn.NewBatchNorm1d(2))
			defer nn.Release(s)
			s.At(1).(*nn.Linear).Weight.Release()
			err := vram.Catch(func() { tc.call(s) })
			if !errors.Is(err, vram.ErrReleased) {
				t.Errorf("got %v, want an error of kind ErrReleased", err)
			}
			for name, p := range nn.StateDict(s) {
				if name == "1.weight" {
					continue
				}
				if p.Device() != vram.CPU {
					t.Errorf("%s moved to %s", name, p.Device())
				}
				if dt := p.DType(); dt != vram.Float32 && dt != vram.Int64 {
					t.Errorf("%s converted to %s", name, dt)
				}
			}
			for _, p := range s.NamedParameters() {
				if p.Name != "1.weight" && !p.Tensor.RequiresGrad() {
					t.Errorf("%s frozen", p.Name)
				}
			}
		})
	}
}
