package vram_test

import (
	"fmt"

	"github.com/vramgo/vram"
)

func ExampleEinsum() {
	a := vram.FromSlice([]float64{1, 2, 3, 4}, vram.Shape{2, 2})
	b := vram.FromSlice([]float64{5, 6}, vram.Shape{2})
	fmt.Println(vram.Einsum("ij,j->i", a, b).Float64s()) // matrix-vector product
	fmt.Println(vram.Einsum("ii", a).Item())             // trace
	fmt.Println(vram.Einsum("ij->ji", a).Float64s())     // transpose
	// Output:
	// [17 39]
	// 5
	// [1 3 2 4]
}

func ExampleTensor_MedianDim() {
	x := vram.FromSlice([]float64{4, 1, 3, 2, 9, 8, 7, 6}, vram.Shape{2, 4})
	v, i := x.MedianDim(1, false)
	fmt.Println(v.Float64s(), i.Int64s(), x.Median().Item())
	// Output:
	// [2 7] [3 2] 4
}

func ExampleTensor_Quantile() {
	x := vram.FromSlice([]float64{1, 2, 3, 10}, vram.Shape{4})
	q := vram.FromSlice([]float64{0.25, 0.5}, vram.Shape{2})
	for _, interp := range []string{vram.QuantileLinear, vram.QuantileLower, vram.QuantileNearest} {
		fmt.Println(interp, x.Quantile(q, 0, false, interp).Float64s())
	}
	// Output:
	// linear [1.75 2.5]
	// lower [1 2]
	// nearest [2 3]
}

func ExampleSearchSorted() {
	seq := vram.FromSlice([]float64{1, 3, 5, 7}, vram.Shape{4})
	vals := vram.FromSlice([]float64{3, 4, 8}, vram.Shape{3})
	fmt.Println(vram.SearchSorted(seq, vals, vram.SearchSortedOptions{}).Int64s())
	fmt.Println(vram.SearchSorted(seq, vals, vram.SearchSortedOptions{Right: true}).Int64s())
	// Output:
	// [1 2 4]
	// [2 2 4]
}

func ExampleTensor_BucketizeWith() {
	bounds := vram.FromSlice([]float64{1, 3, 5}, vram.Shape{3})
	x := vram.FromSlice([]float64{0, 3, 4, 6}, vram.Shape{4})
	idx := x.BucketizeWith(bounds, vram.BucketizeOptions{Right: true, OutInt32: true})
	fmt.Println(idx.DType(), idx.Int64s())
	// Output:
	// int32 [0 2 2 3]
}

func ExampleTensor_Unique() {
	x := vram.FromSlice([]int64{3, 1, 3, 2}, vram.Shape{4})
	v, inv, counts := x.Unique(true, true, true)
	fmt.Println(v.Int64s(), inv.Int64s(), counts.Int64s())
	// Output:
	// [1 2 3] [2 0 2 1] [1 1 2]
}

func ExampleTensor_UniqueDim() {
	x := vram.FromSlice([]int64{1, 2, 0, 5, 1, 2}, vram.Shape{3, 2})
	rows, inv, counts := x.UniqueDim(0, true, true)
	fmt.Println(rows.Shape(), rows.Int64s(), inv.Int64s(), counts.Int64s())
	// Output:
	// [2, 2] [0 5 1 2] [1 0 1] [1 2]
}

func ExampleTensor_QuantileAllKeepDim() {
	x := vram.FromSlice([]float64{1, 2, 3, 10}, vram.Shape{2, 2})
	q := vram.FromSlice([]float64{0.5, 1}, vram.Shape{2})
	y := x.QuantileAllKeepDim(q, "")
	fmt.Println(y.Shape(), y.Float64s())
	// Output:
	// [2, 1, 1] [2.5 10]
}
