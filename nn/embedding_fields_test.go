package nn_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// TestEmbeddingForwardErrors gives Embedding.Forward what PyTorch's
// embedding refuses (an index outside [0, num_embeddings): IndexError,
// "index out of range in self") and fields changed after construction
// into what NewEmbeddingOptions refuses, with each option that adds work
// before the lookup (max_norm renormalises the table in place first,
// scale_grad_by_freq counts the indices). Each must panic with a vram
// error naming embedding, not the operation it delegated to, and leave
// the table as it was.
func TestEmbeddingForwardErrors(t *testing.T) {
	idx := func(v ...int64) *vram.Tensor { return vram.FromSlice(v, vram.Shape{len(v)}) }
	maxNorm := nn.EmbeddingOptions{MaxNorm: 0.5}
	freq := nn.EmbeddingOptions{ScaleGradByFreq: true}
	tests := []struct {
		name   string
		o      nn.EmbeddingOptions
		change func(e *nn.Embedding)
		x      *vram.Tensor
		kind   error
	}{
		{"index past the end", nn.EmbeddingOptions{}, nil, idx(0, 4), vram.ErrIndex},
		{"negative index", nn.EmbeddingOptions{}, nil, idx(-1), vram.ErrIndex},
		{"max norm, index past the end", maxNorm, nil, idx(1, 7), vram.ErrIndex},
		{"max norm, negative index", maxNorm, nil, idx(-1, 1), vram.ErrIndex},
		{"max norm, largest index", maxNorm, nil, idx(math.MaxInt64), vram.ErrIndex},
		{"scale by frequency, index past the end", freq, nil, idx(7), vram.ErrIndex},
		{"max norm, float indices", maxNorm, nil, vram.FromSlice([]float64{1}, vram.Shape{1}), vram.ErrDType},
		{"nil weight", nn.EmbeddingOptions{}, func(e *nn.Embedding) { e.Weight = nil }, idx(1), vram.ErrArgument},
		{"max norm, nil weight", maxNorm, func(e *nn.Embedding) { e.Weight = nil }, idx(1), vram.ErrArgument},
		{"max norm, 1-D weight", maxNorm, func(e *nn.Embedding) { e.Weight = vram.Ones(vram.Shape{4}) }, idx(1), vram.ErrShape},
		{"max norm, integer weight", maxNorm, func(e *nn.Embedding) { e.Weight = vram.Ones(vram.Shape{4, 3}, vram.Int64) }, idx(1), vram.ErrDType},
		{"max norm NaN", maxNorm, func(e *nn.Embedding) { e.MaxNorm = math.NaN() }, idx(1), vram.ErrArgument},
		{"max norm infinite", maxNorm, func(e *nn.Embedding) { e.MaxNorm = math.Inf(1) }, idx(1), vram.ErrArgument},
		{"norm type NaN", maxNorm, func(e *nn.Embedding) { e.NormType = math.NaN() }, idx(1), vram.ErrArgument},
		{"padding index past the end", nn.EmbeddingOptions{}, func(e *nn.Embedding) { p := 4; e.PaddingIdx = &p }, idx(1), vram.ErrArgument},
		{"negative padding index", nn.EmbeddingOptions{}, func(e *nn.Embedding) { p := -1; e.PaddingIdx = &p }, idx(1), vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := nn.NewEmbeddingOptions(4, 3, tc.o, vram.WithGenerator(vram.NewGenerator(1)))
			vram.NoGrad(func() { e.Weight.MulScalarInPlace(3) }) // rows longer than MaxNorm
			if tc.change != nil {
				tc.change(e)
			}
			var before []float64
			if e.Weight != nil && e.Weight.DType().IsFloat() {
				before = e.Weight.Float64s()
			}
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked with %T %v, want a vram error", r, r)
					}
				}()
				err = vram.Catch(func() { e.Forward(tc.x) })
			}()
			var ve *vram.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &ve) || ve.Op != "embedding" {
				t.Fatalf("got %v, want an embedding error of kind %v", err, tc.kind)
			}
			if before != nil && !slices.Equal(e.Weight.Float64s(), before) {
				t.Error("the failed Forward changed the table")
			}
		})
	}
}
