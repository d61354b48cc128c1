package vram_test

import (
	"errors"
	"fmt"

	"github.com/vramgo/vram"
)

func ExampleSolve() {
	a := vram.FromSlice([]float64{2, 1, 1, 3}, vram.Shape{2, 2})
	b := vram.FromSlice([]float64{3, 5}, vram.Shape{2})
	fmt.Println(vram.Det(a).Item(), vram.Solve(a, b, true).Float64s())
	singular := vram.FromSlice([]float64{1, 2, 2, 4}, vram.Shape{2, 2})
	err := vram.Catch(func() { vram.Inv(singular) })
	fmt.Println(errors.Is(err, vram.ErrArgument))
	// Output:
	// 5 [0.8 1.4]
	// true
}

func ExampleCholesky() {
	a := vram.FromSlice([]float64{4, 2, 2, 5}, vram.Shape{2, 2})
	fmt.Println(vram.Cholesky(a, false).Float64s(), vram.Cholesky(a, true).Float64s())
	// Output:
	// [2 0 1 2] [2 1 0 2]
}

func ExampleEigh() {
	a := vram.FromSlice([]float64{2, 1, 1, 2}, vram.Shape{2, 2})
	w, v := vram.Eigh(a, "L")
	// V·diag(w)·Vᵀ rebuilds A; each eigenvector's sign is arbitrary.
	back := v.Mul(w.Unsqueeze(0)).MatMul(v.MT())
	fmt.Printf("%.3g %.3g\n", w.Float64s(), back.Float64s())
	// Output:
	// [1 3] [2 1 1 2]
}

func ExampleSVD() {
	a := vram.FromSlice([]float64{3, 0, 0, -2, 0, 0}, vram.Shape{3, 2})
	u, s, vh := vram.SVD(a, false)
	fmt.Println(u.Shape(), s.Float64s(), vh.Shape())
	fmt.Println(vram.MatrixRank(a).Int64s(), vram.MatrixNorm(a, "2", false).Item())
	// Output:
	// [3, 2] [3 2] [2, 2]
	// [2] 3
}

func ExampleMatrixNormDim() {
	// Two 2×2 matrices stored with the batch dimension last: x[:, :, b].
	x := vram.FromSlice([]float64{1, 10, -2, 20, 3, 30, 4, -40}, vram.Shape{2, 2, 2})
	fmt.Println(vram.MatrixNormDim(x, "inf", [2]int{0, 1}, false).Float64s())
	fmt.Println(vram.MatrixNormDim(x, "1", [2]int{0, 1}, true).Shape())
	// Output:
	// [7 70]
	// [1, 1, 2]
}
