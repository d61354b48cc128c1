package nn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestTransformerLayerGradients checks every gradient of an encoder and a
// decoder layer, with the norms after and before their blocks, against
// central differences in float64: each parameter's and each input's
// elements, of the loss sum(out · r).
func TestTransformerLayerGradients(t *testing.T) {
	type layerCase struct {
		name   string
		params []nn.NamedParameter
		run    func() *vram.Tensor
	}
	for _, normFirst := range []bool{false, true} {
		g := vram.NewGenerator(11)
		o := nn.TransformerOptions{DimFeedforward: 3, NoDropout: true, NormFirst: normFirst, Activation: "gelu"}
		rnd := func(shape ...int) *vram.Tensor {
			return vram.Randn(shape, vram.Float64, vram.WithGenerator(g), vram.WithGrad())
		}
		enc := nn.NewTransformerEncoderLayer(4, 2, o, vram.Float64, vram.WithGenerator(g))
		dec := nn.NewTransformerDecoderLayer(4, 2, o, vram.Float64, vram.WithGenerator(g))
		src, tgt, mem := rnd(3, 2, 4), rnd(2, 2, 4), rnd(3, 2, 4)
		pad := vram.FromSlice([]bool{false, false, true, false, false, false}, vram.Shape{2, 3})
		// The biases and norms start at zeros and ones; other values reach
		// more of the formulas.
		for _, p := range append(enc.Parameters(), dec.Parameters()...) {
			vram.NoGrad(func() { p.CopyFrom(vram.Randn(p.Shape(), vram.Float64, vram.WithGenerator(g))) })
		}
		cases := []layerCase{
			{"encoder", append(enc.NamedParameters(), nn.NamedParameter{Name: "src", Tensor: src}), func() *vram.Tensor {
				return enc.ForwardMasked(src, nn.EncoderMasks{KeyPaddingMask: pad, Causal: true})
			}},
			{"decoder", append(dec.NamedParameters(), nn.NamedParameter{Name: "tgt", Tensor: tgt}, nn.NamedParameter{Name: "memory", Tensor: mem}),
				func() *vram.Tensor {
					return dec.ForwardMemory(tgt, mem, nn.DecoderMasks{TgtCausal: true, MemoryKeyPaddingMask: pad})
				}},
		}
		for _, lc := range cases {
			t.Run(fmt.Sprintf("%s/norm first %v", lc.name, normFirst), func(t *testing.T) {
				out := lc.run()
				r := vram.Randn(out.Shape(), vram.Float64, vram.WithGenerator(g))
				loss := func() float64 {
					var v float64
					vram.NoGrad(func() { v = lc.run().Mul(r).Sum().Item() })
					return v
				}
				out.Mul(r).Sum().Backward()
				const eps = 1e-6
				for _, p := range lc.params {
					grad := p.Tensor.Grad()
					if grad == nil {
						t.Fatalf("%s: no gradient", p.Name)
					}
					gv, vals := grad.Float64s(), p.Tensor.Float64s()
					for i := range vals {
						orig := vals[i]
						put := func(x float64) {
							vals[i] = x
							vram.NoGrad(func() { p.Tensor.CopyFrom(vram.FromSlice(vals, p.Tensor.Shape())) })
						}
						put(orig + eps)
						up := loss()
						put(orig - eps)
						down := loss()
						put(orig)
						if fd := (up - down) / (2 * eps); math.IsNaN(gv[i]) || math.Abs(gv[i]-fd) > 1e-6+1e-5*math.Abs(fd) {
							t.Fatalf("%s[%d]: gradient %v, finite difference %v", p.Name, i, gv[i], fd)
						}
					}
				}
			})
		}
	}
}
