package nn_test

import (
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/nn"
)

// TestMultiheadAttentionHeldMemory: what self-attention's graph keeps
// between forward and backward does not depend on the input's layout. A
// sequence-first input used to be copied to batch-first once for each of
// the three projections, and each projection kept its copy for the
// weight's gradient; PyTorch keeps a reference to the input.
func TestMultiheadAttentionHeldMemory(t *testing.T) {
	const l, n, e, h = 16, 4, 32, 4
	dev := vram.Sim(1)
	// Float32 bytes: the result [L, N, E], what the products keep (the
	// scaled queries, the keys, the values, the softmax result [N, H, L,
	// L], the heads joined for the output projection); the input's own
	// storage is the caller's.
	const act = l * n * e * 4
	const want = act + 3*act + n*h*l*l*4 + act
	tests := []struct {
		name       string
		batchFirst bool
		shape      vram.Shape
		batched    bool
	}{
		{"sequence first", false, vram.Shape{l, n, e}, true},
		{"batch first", true, vram.Shape{n, l, e}, true},
		{"unbatched", false, vram.Shape{l, e}, false},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			m := nn.NewMultiheadAttention(e, h, nn.MultiheadAttentionOptions{BatchFirst: c.batchFirst}, dev, vram.WithGenerator(vram.NewGenerator(1)))
			defer nn.Release(m)
			x := vram.Randn(c.shape, dev, vram.WithGenerator(vram.NewGenerator(2)))
			defer x.Release()
			memtest.Settle(dev)
			before := vram.MemoryAllocated(dev)
			out, _ := m.ForwardQKV(x, x, x, nn.MultiheadForwardOptions{NoWeights: true})
			held := vram.MemoryAllocated(dev) - before
			limit := int64(want)
			if !c.batched {
				limit /= n
			}
			if held > limit {
				t.Errorf("held %d bytes between forward and backward, want at most %d", held, limit)
			}
			vram.Tidy(func() { out.Sum().Backward() })
			out.Release()
		})
	}
}
