package nn_test

import (
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// shiftedLinear is a caller's layer built on a Linear, as an adapter is:
// its Forward adds 100 to the Linear's output.
type shiftedLinear struct{ *nn.Linear }

func (s shiftedLinear) Forward(x *vram.Tensor) *vram.Tensor {
	y := s.Linear.Forward(x)
	defer y.Release()
	return y.AddScalar(100)
}

// shiftedConv is shiftedLinear for a Conv2d.
type shiftedConv struct{ *nn.Conv2d }

func (s shiftedConv) Forward(x *vram.Tensor) *vram.Tensor {
	y := s.Conv2d.Forward(x)
	defer y.Release()
	return y.AddScalar(100)
}

// TestSequentialRunsEmbeddingLayersForward: a type that embeds a Linear
// or a Conv2d and has a Forward of its own, followed by a ReLU or a GELU,
// runs its own Forward in a Sequential, as it does alone, rather than the
// fused op of the layer it embeds.
func TestSequentialRunsEmbeddingLayersForward(t *testing.T) {
	g := vram.NewGenerator(1)
	tests := []struct {
		name string
		m    nn.Module
		act  nn.Module
		x    *vram.Tensor
	}{
		{"linear, relu", shiftedLinear{nn.NewLinear(3, 2, vram.WithGenerator(g))}, nn.NewReLU(), vram.Randn(vram.Shape{4, 3}, vram.WithGenerator(g))},
		{"linear, gelu", shiftedLinear{nn.NewLinear(3, 2, vram.WithGenerator(g))}, nn.NewGELU(), vram.Randn(vram.Shape{4, 3}, vram.WithGenerator(g))},
		{"conv, relu", shiftedConv{nn.NewConv2d(1, 2, 3, nn.ConvOptions{}, vram.WithGenerator(g))}, nn.NewReLU(), vram.Randn(vram.Shape{1, 1, 5, 5}, vram.WithGenerator(g))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.m.Forward(tc.x)
			want := tc.act.Forward(h).Float64s()
			got := nn.NewSequential(tc.m, tc.act).Forward(tc.x).Float64s()
			if !slices.Equal(got, want) {
				t.Errorf("in a Sequential %v, alone %v", got, want)
			}
		})
	}
}
