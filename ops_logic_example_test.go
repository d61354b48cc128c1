package vram_test

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

func ExampleTensor_Any() {
	x := vram.FromSlice([]float64{0, 0, 0, 2, math.NaN(), 1}, vram.Shape{3, 2})
	fmt.Println(x.Any().Bools(), x.Any(1).Bools(), x.All(1).Bools(), x.CountNonzero(0).Int64s())
	// Output:
	// [true] [false true true] [false false true] [1 2]
}

func ExampleTensor_IsClose() {
	a := vram.FromSlice([]float64{1, 1, math.NaN()}, vram.Shape{3})
	b := vram.FromSlice([]float64{1 + 1e-9, 1.1, math.NaN()}, vram.Shape{3})
	fmt.Println(a.IsClose(b, vram.IsCloseRTol, vram.IsCloseATol, false).Bools())
	fmt.Println(a.AllClose(b, 0.2, 0, true), a.Equal(a))
	// Output:
	// [true false false]
	// true false
}

func ExampleTensor_Nonzero() {
	x := vram.FromSlice([]int64{0, 3, 5, 0}, vram.Shape{2, 2})
	fmt.Println(x.Nonzero().Shape(), x.Nonzero().Int64s())
	// Output:
	// [2, 2] [0 1 1 0]
}

func ExampleTensor_OneHot() {
	labels := vram.FromSlice([]int64{2, 0}, vram.Shape{2})
	fmt.Println(labels.OneHot(-1).Shape(), labels.OneHot(4).Int64s())
	// Output:
	// [2, 3] [0 0 1 0 1 0 0 0]
}

func ExampleTensor_NanToNum() {
	x := vram.FromSlice([]float32{float32(math.NaN()), float32(math.Inf(1)), -1}, vram.Shape{3})
	fmt.Println(x.NanToNum(0, math.Inf(1), math.Inf(-1)).Float64s())
	fmt.Println(x.NanToNum(-1, 100, -100).Float64s())
	// Output:
	// [0 3.4028234663852886e+38 -1]
	// [-1 100 -1]
}

func ExampleTensor_Lerp() {
	start := vram.FromSlice([]float64{0, 10}, vram.Shape{2})
	end := vram.FromSlice([]float64{4, 20}, vram.Shape{2})
	fmt.Println(start.LerpScalar(end, 0.25).Float64s(), start.Lerp(end, vram.FromSlice([]float64{0.5, 1}, vram.Shape{2})).Float64s())
	// Output:
	// [1 12.5] [2 20]
}
