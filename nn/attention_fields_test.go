package nn_test

import (
	"errors"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestMultiheadAttentionChangedFields changes a MultiheadAttention's
// exported fields after NewMultiheadAttention into what the constructor
// refuses, as a caller porting a model might by hand: Forward must refuse
// them as NewMultiheadAttention does (PyTorch asserts embed_dim divisible
// by num_heads), with a vram error naming the layer, rather than divide by
// zero, dereference nil or fail in an internal reshape.
func TestMultiheadAttentionChangedFields(t *testing.T) {
	tests := []struct {
		name   string
		change func(m *nn.MultiheadAttention)
		kind   error
	}{
		{"no heads", func(m *nn.MultiheadAttention) { m.NumHeads = 0 }, vram.ErrArgument},
		{"negative heads", func(m *nn.MultiheadAttention) { m.NumHeads = -2 }, vram.ErrArgument},
		{"heads not dividing", func(m *nn.MultiheadAttention) { m.NumHeads = 3 }, vram.ErrArgument},
		{"no embedding", func(m *nn.MultiheadAttention) { m.EmbedDim = 0 }, vram.ErrArgument},
		{"dropout", func(m *nn.MultiheadAttention) { m.Dropout = 1.5 }, vram.ErrArgument},
		{"no output projection", func(m *nn.MultiheadAttention) { m.OutProj = nil }, vram.ErrArgument},
		{"no input projection", func(m *nn.MultiheadAttention) { m.InProjWeight = nil }, vram.ErrArgument},
		{"input projection shape", func(m *nn.MultiheadAttention) { m.InProjWeight = vram.Zeros(vram.Shape{8, 4}) }, vram.ErrShape},
		{"input bias shape", func(m *nn.MultiheadAttention) { m.InProjBias = vram.Zeros(vram.Shape{4}) }, vram.ErrShape},
	}
	x := vram.Randn(vram.Shape{3, 2, 4}) // [L, N, E]
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := nn.NewMultiheadAttention(4, 2, nn.MultiheadAttentionOptions{})
			tc.change(m)
			for _, fwd := range []func(){
				func() { m.Forward(x) },
				func() { m.ForwardQKV(x, x, x, nn.MultiheadForwardOptions{PerHeadWeights: true}) },
			} {
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("panicked with %T %v, want a vram error", r, r)
						}
					}()
					err = vram.Catch(fwd)
				}()
				var ve *vram.Error
				if !errors.Is(err, tc.kind) || !errors.As(err, &ve) || ve.Op != "multihead_attention" {
					t.Fatalf("got %v, want a multihead_attention error of kind %v", err, tc.kind)
				}
			}
		})
	}
}
