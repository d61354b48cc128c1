package vram_test

import (
	"fmt"

	"github.com/vramgo/vram"
)

// A 3×3 convolution with padding 1 keeps the image size; channels-last
// inputs give channels-last outputs with the same values.
func ExampleConv2d() {
	x := vram.Arange(0, 16, 1).Reshape(1, 1, 4, 4)
	w := vram.Ones(vram.Shape{2, 1, 3, 3}) // two box filters
	b := vram.FromSlice([]float32{0, 100}, vram.Shape{2})
	y := vram.Conv2d(x, w, b, vram.Conv2dParams{Padding: [2]int{1, 1}})
	fmt.Println(y.Shape(), y.Select(1, 0).Select(0, 0).Float32s()[:4])
	fmt.Println(y.Select(1, 1).Select(0, 0).Float32s()[:4])

	yc := vram.Conv2d(x.Contiguous(vram.ChannelsLast), w, b, vram.Conv2dParams{Padding: [2]int{1, 1}})
	fmt.Println(yc.IsContiguous(vram.ChannelsLast), yc.Strides())
	// Output:
	// [1, 2, 4, 4] [10 18 24 18]
	// [110 118 124 118]
	// true [32 1 8 2]
}

// Max pooling halves each side; adaptive average pooling to 1×1 is the
// global average of ResNet's head.
func ExampleMaxPool2d() {
	x := vram.Arange(0, 16, 1).Reshape(1, 1, 4, 4)
	fmt.Println(vram.MaxPool2d(x, vram.Pool2dParams{Kernel: [2]int{2, 2}}).Float32s())
	fmt.Println(vram.AdaptiveAvgPool2d(x, 1, 1).Float32s())
	// Output:
	// [5 7 13 15]
	// [7.5]
}

// Padding "same" keeps the image size whatever the kernel: a 2×2 kernel
// pads one zero at the bottom and right, as PyTorch does.
func ExampleConv2dParams_same() {
	x := vram.Arange(0, 9, 1).Reshape(1, 1, 3, 3)
	w := vram.Ones(vram.Shape{1, 1, 2, 2})
	y := vram.Conv2d(x, w, nil, vram.Conv2dParams{Same: true})
	fmt.Println(y.Shape(), y.Float32s())
	// Output:
	// [1, 1, 3, 3] [8 12 7 20 24 13 13 15 8]
}

// In ceil mode a last window that runs past the input is kept; the
// indices say where each maximum came from (PyTorch's return_indices).
func ExampleMaxPool2dWithIndices() {
	x := vram.FromSlice([]float32{
		1, 5, 2, 0, 9,
		3, 4, 8, 1, 2,
		7, 0, 6, 3, 1,
	}, vram.Shape{1, 1, 3, 5})
	y, idx := vram.MaxPool2dWithIndices(x, vram.Pool2dParams{Kernel: [2]int{2, 2}, CeilMode: true})
	fmt.Println(y.Shape(), y.Float32s())
	fmt.Println(idx.Int64s())
	// Output:
	// [1, 1, 2, 3] [5 8 9 7 6 1]
	// [1 7 4 10 12 14]
}

func ExampleConv1d() {
	// A moving sum of width 2 over a sequence of one channel, padded with
	// "same" (the odd zero goes on the right, as PyTorch pads).
	x := vram.FromSlice([]float32{1, 2, 3, 4}, vram.Shape{1, 1, 4}) // [N, C, L]
	w := vram.Ones(vram.Shape{1, 1, 2})                             // [O, C, K]
	y := vram.Conv1d(x, w, nil, vram.Conv1dParams{Same: true})
	fmt.Println(y.Shape(), y.Float64s())
	// Output: [1, 1, 4] [3 5 7 4]
}
