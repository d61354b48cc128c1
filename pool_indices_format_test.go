package vram

import (
	"slices"
	"testing"
)

// TestPoolIndicesKeepFormat checks that the indices of max pooling come in
// the input's memory format, as the values do: PyTorch's
// max_pool2d_with_indices and adaptive_max_pool2d allocate both outputs
// in input.suggest_memory_format(), so channels-last indices stay
// channels-last through a model; their values are the row-major input's.
func TestPoolIndicesKeepFormat(t *testing.T) {
	x := rnd(51, 2, 3, 6, 5)
	for _, tc := range []struct {
		name string
		pool func(x *Tensor) (y, idx *Tensor)
	}{
		{"max", func(x *Tensor) (*Tensor, *Tensor) {
			return MaxPool2dWithIndices(x, Pool2dParams{Kernel: [2]int{2, 2}, CeilMode: true})
		}},
		{"adaptive max", func(x *Tensor) (*Tensor, *Tensor) { return AdaptiveMaxPool2dWithIndices(x, 4, 3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, want := tc.pool(x)
			for _, f := range []MemoryFormat{ContiguousFormat, ChannelsLast} {
				y, idx := tc.pool(x.Contiguous(f))
				if !idx.IsContiguous(f) || !y.IsContiguous(f) {
					t.Errorf("%s input: values strides %v, indices strides %v, want both %s", f, y.Strides(), idx.Strides(), f)
				}
				if !slices.Equal(idx.Int64s(), want.Int64s()) {
					t.Errorf("%s input: indices %v, want %v", f, idx.Int64s(), want.Int64s())
				}
			}
		})
	}
}
