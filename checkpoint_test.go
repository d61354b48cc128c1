package vram

import (
	"slices"
	"testing"
)

// TestCheckpointReleasesForwardActivations: the tensors a checkpointed
// function computes and drops are gone once Checkpoint returns, even
// inside a caller's Tidy and when fn releases nothing itself (as a
// PyTorch user writes it), while the gradients stay those of the plain
// computation.
func TestCheckpointReleasesForwardActivations(t *testing.T) {
	d := Sim(0)
	const n = 64 // a [n, n] float32 block is 16 KiB
	block := int64(n * n * 4)
	tests := []struct {
		name string
		fn   func(w *Tensor) func(x *Tensor) *Tensor
		// live is the number of [n, n] blocks Checkpoint's result may
		// add: the result itself, or nothing when it is a view of x or w.
		live int64
	}{
		{"three activations", func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor { return x.MatMul(w).Relu().MatMul(w).Tanh() }
		}, 1},
		{"nested", func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor {
				inner := Checkpoint(func(y *Tensor) *Tensor { return y.MatMul(w).Relu() }, x.Tanh(), w)
				return inner.MatMul(w).Sigmoid()
			}
		}, 1},
		{"returns x", func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor { x.MatMul(w).Relu(); return x }
		}, 0},
		{"returns the weight", func(w *Tensor) func(*Tensor) *Tensor {
			return func(x *Tensor) *Tensor { x.MatMul(w).Relu(); return w }
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			grads := func(ckpt bool) []float64 {
				w := Randn(Shape{n, n}, d, WithGenerator(NewGenerator(1))).MulScalar(0.1).SetRequiresGrad(true)
				defer w.Release()
				x := Randn(Shape{n, n}, d, WithGenerator(NewGenerator(2))).SetRequiresGrad(true)
				defer x.Release()
				settle(d)
				base := MemoryAllocated(d)
				Tidy(func() {
					var y *Tensor
					if ckpt {
						y = Checkpoint(tc.fn(w), x, w)
						if got := MemoryAllocated(d) - base; got > tc.live*block {
							t.Errorf("%d bytes live after Checkpoint, want at most %d", got, tc.live*block)
						}
					} else {
						y = tc.fn(w)(x)
					}
					y.Mul(y).Sum().Backward()
				})
				var out []float64
				for _, g := range []*Tensor{w.Grad(), x.Grad()} {
					if g != nil {
						out = append(out, g.Float64s()...)
					}
					out = append(out, -1) // a separator
				}
				return out
			}
			if plain, ck := grads(false), grads(true); !slices.Equal(plain, ck) {
				t.Error("checkpointed gradients differ from the plain ones")
			}
		})
	}
}
