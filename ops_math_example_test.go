package vram_test

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

func ExampleTensor_Logsumexp() {
	x := vram.FromSlice([]float64{1000, 1000, math.Inf(-1), math.Inf(-1)}, vram.Shape{2, 2})
	fmt.Println(x.Logsumexp([]int{1}, false).Float64s())
	// Output:
	// [1000.6931471805599 -Inf]
}

func ExampleTensor_Remainder() {
	x := vram.FromSlice([]int64{7, -7}, vram.Shape{2})
	fmt.Println(x.RemainderScalar(3).Int64s(), x.FmodScalar(3).Int64s(), x.FloorDivideScalar(3).Int64s())
	y := vram.FromSlice([]float64{1}, vram.Shape{1})
	fmt.Printf("%.17f\n", y.RemainderScalar(0.1).Float64s()[0])
	// Output:
	// [1 2] [1 -1] [2 -3]
	// 0.09999999999999995
}

func ExampleTensor_Diagonal() {
	x := vram.Arange(0, 9, 1, vram.Float64).Reshape(3, 3)
	fmt.Println(x.Diagonal(0, 0, 1).Float64s(), x.Diagonal(1, 0, 1).Float64s(), x.Diagonal(-1, 0, 1).Float64s())
	// Output:
	// [0 4 8] [1 5] [3 7]
}

func ExampleCdist() {
	a := vram.FromSlice([]float64{0, 0, 3, 4}, vram.Shape{2, 2})
	b := vram.FromSlice([]float64{0, 0}, vram.Shape{1, 2})
	fmt.Println(vram.Cdist(a, b, 2).Float64s())
	// Output:
	// [0 5]
}

func ExampleTensor_RoundDecimals() {
	x := vram.FromSlice([]float64{0.125, 0.375, 1250, 1350}, vram.Shape{4})
	fmt.Println(x.RoundDecimals(2).Float64s(), x.RoundDecimals(-2).Float64s())
	// Output:
	// [0.12 0.38 1250 1350] [0 0 1200 1400]
}
