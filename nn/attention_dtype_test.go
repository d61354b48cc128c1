package nn_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestMultiheadAttentionDTypes runs MultiheadAttention with its
// parameters in float32, float16 and bfloat16, on the CPU and on sim:0,
// against PyTorch's formulas in float64 (refMHA) from the same rounded
// parameters and inputs: batch-first inputs, separate key and value
// sizes (kdim, vdim), a bool key_padding_mask (true = ignore) and the
// causal mask. Outputs and weights keep the parameters' dtype; the
// tolerances allow for each dtype's roundings.
func TestMultiheadAttentionDTypes(t *testing.T) {
	const n, l, s, e, h = 2, 3, 4, 4, 2
	kpm := []bool{false, false, true, false, false, true, false, false} // [N, S]
	blocked := func(b, _, i, j int) bool { return kpm[b*s+j] || j > i }
	zero := func(b, h, i, j int) float64 { return 0 }
	devices := []vram.Device{vram.CPU}
	if vram.Sim(0).Available() {
		devices = append(devices, vram.Sim(0))
	}
	for _, dt := range []vram.DType{vram.Float32, vram.Float16, vram.BFloat16} {
		tol := map[vram.DType]float64{vram.Float32: 1e-5, vram.Float16: 1e-2, vram.BFloat16: 5e-2}[dt]
		for _, dev := range devices {
			t.Run(dt.String()+"/"+dev.String(), func(t *testing.T) {
				g := vram.NewGenerator(5)
				m := nn.NewMultiheadAttention(e, h, nn.MultiheadAttentionOptions{BatchFirst: true, KDim: 3, VDim: 5},
					dt, dev, vram.WithGenerator(g))
				defer nn.Release(m)
				vram.NoGrad(func() {
					b := vram.Randn(m.InProjBias.Shape(), vram.WithGenerator(g))
					m.InProjBias.CopyFrom(b.Cast(dt).To(dev))
				})
				rnd := func(rows, cols int) *vram.Tensor {
					return vram.Randn(vram.Shape{n, rows, cols}, vram.WithGenerator(g)).Cast(dt).To(dev)
				}
				q, k, v := rnd(l, e), rnd(s, 3), rnd(s, 5)
				want, wantW := refMHA(m, q.Float64s(), k.Float64s(), v.Float64s(), n, l, s, blocked, zero)
				mask := vram.FromSlice(kpm, vram.Shape{n, s}).To(dev)
				out, w := m.ForwardQKV(q, k, v, nn.MultiheadForwardOptions{KeyPaddingMask: mask, Causal: true, PerHeadWeights: true})
				if out.DType() != dt || w.DType() != dt || out.Device() != dev {
					t.Fatalf("output %s on %s, weights %s, want %s on %s", out.DType(), out.Device(), w.DType(), dt, dev)
				}
				checkValues(t, "output", out.Float64s(), want, tol)
				checkValues(t, "weights", w.Float64s(), wantW, tol)
			})
		}
	}
}
