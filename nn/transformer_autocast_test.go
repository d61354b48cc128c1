package nn_test

import (
	"fmt"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestTransformerLayersAutocast runs the encoder and decoder layers of
// float32 parameters inside float16 and bfloat16 autocast regions, with
// the norms after and before their blocks and a float32 mask of -1e9
// (which float16 cannot hold): the output is float32, as PyTorch's
// autocast runs layer_norm in float32 and adds the 16-bit blocks to
// float32 residuals, and near the float32 output.
func TestTransformerLayersAutocast(t *testing.T) {
	for _, dt := range []vram.DType{vram.Float16, vram.BFloat16} {
		for _, normFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/norm first %v", dt, normFirst), func(t *testing.T) {
				g := vram.NewGenerator(3)
				o := nn.TransformerOptions{DimFeedforward: 16, NormFirst: normFirst}
				enc := nn.NewTransformerEncoderLayer(8, 2, o, vram.WithGenerator(g))
				dec := nn.NewTransformerDecoderLayer(8, 2, o, vram.WithGenerator(g))
				defer nn.Release(enc)
				defer nn.Release(dec)
				enc.Eval()
				dec.Eval()
				src := vram.Randn(vram.Shape{4, 2, 8}, vram.WithGenerator(g))
				tgt := vram.Randn(vram.Shape{3, 2, 8}, vram.WithGenerator(g))
				far := vram.FromSlice([]float32{0, -1e9, 0, 0, 0, 0, 0, -1e9}, vram.Shape{2, 4})
				em := nn.EncoderMasks{KeyPaddingMask: far, Causal: true}
				dm := nn.DecoderMasks{TgtCausal: true, MemoryKeyPaddingMask: far}
				wantEnc := enc.ForwardMasked(src, em).Float64s()
				wantDec := dec.ForwardMemory(tgt, src, dm).Float64s()
				tol := 0.02
				if dt == vram.BFloat16 {
					tol = 0.1
				}
				vram.Autocast(dt, func() {
					e := enc.ForwardMasked(src, em)
					d := dec.ForwardMemory(tgt, src, dm)
					if e.DType() != vram.Float32 || d.DType() != vram.Float32 {
						t.Fatalf("outputs %v and %v, want float32", e.DType(), d.DType())
					}
					checkValues(t, "encoder layer", e.Float64s(), wantEnc, tol)
					checkValues(t, "decoder layer", d.Float64s(), wantDec, tol)
				})
			})
		}
	}
}
