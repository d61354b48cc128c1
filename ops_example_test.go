package vram_test

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

func ExampleTensor_Prod() {
	x := vram.FromSlice([]float64{2, 0, 4}, vram.Shape{3}, vram.WithGrad())
	p := x.Prod()
	p.Backward()
	// With one zero, only the zero gets a gradient: the product of the others.
	fmt.Println(p.Item(), x.Grad().Float64s())
	// Output: 0 [0 8 0]
}

func ExampleTensor_Norm() {
	x := vram.FromSlice([]float64{3, -4, 0, 0}, vram.Shape{2, 2})
	fmt.Println(x.Norm(2, nil, false).Item())
	fmt.Println(x.Norm(1, []int{1}, false).Float64s())
	fmt.Println(x.Norm(math.Inf(1), []int{-1}, true).Float64s())
	// Output:
	// 5
	// [7 0]
	// [4 0]
}

func ExampleTensor_CumSum() {
	x := vram.FromSlice([]int32{1, 2, 3, 4}, vram.Shape{4})
	s := x.CumSum(0)
	fmt.Println(s.DType(), s.Int64s())
	fmt.Println(vram.FromSlice([]float64{1, 2, 3, 4}, vram.Shape{4}).CumProd(0).Float64s())
	// Output:
	// int64 [1 3 6 10]
	// [1 2 6 24]
}

func ExampleTensor_IndexSelect() {
	x := vram.FromSlice([]float64{1, 2, 3, 4, 5, 6}, vram.Shape{3, 2})
	rows := x.IndexSelect(0, vram.FromSlice([]int64{2, 0}, vram.Shape{2}))
	fmt.Println(rows.Shape(), rows.Float64s())
	// Output: [2, 2] [5 6 1 2]
}

func ExampleTensor_ScatterValue() {
	// One-hot rows from class labels.
	labels := vram.FromSlice([]int64{2, 0, 1}, vram.Shape{3, 1})
	oneHot := vram.Zeros(vram.Shape{3, 4}).ScatterValue(1, labels, 1)
	fmt.Println(oneHot.Float64s())
	// Output: [0 0 1 0 1 0 0 0 0 1 0 0]
}

func ExampleTensor_ScatterAdd() {
	// Sums per group: group[i] names the bucket of value[i].
	group := vram.FromSlice([]int64{0, 1, 0, 2, 1}, vram.Shape{5})
	value := vram.FromSlice([]float64{1, 2, 3, 4, 5}, vram.Shape{5})
	fmt.Println(vram.Zeros(vram.Shape{3}, vram.Float64).ScatterAdd(0, group, value).Float64s())
	// Output: [4 7 4]
}

func ExampleTensor_Sort() {
	x := vram.FromSlice([]float64{3, math.NaN(), 1, 3}, vram.Shape{4})
	v, i := x.Sort(0, false)
	fmt.Println(v.Float64s(), i.Int64s())
	// Output: [1 3 3 NaN] [2 0 3 1]
}

func ExampleTensor_TopK() {
	logits := vram.FromSlice([]float64{0.1, 2.5, -1, 0.7, 2.5}, vram.Shape{5})
	v, i := logits.TopK(3, -1, true)
	fmt.Println(v.Float64s(), i.Int64s())
	// Output: [2.5 2.5 0.7] [1 4 3]
}

func ExampleTensor_ArgMaxAll() {
	x := vram.FromSlice([]float64{1, 7, 3, 9, 2, 9}, vram.Shape{2, 3})
	fmt.Println(x.ArgMaxAll().Item(), x.ArgMinAll().Item())
	// Output: 3 0
}

func ExampleTensor_ClampTensor() {
	x := vram.FromSlice([]float64{-5, 0.5, 5, 2}, vram.Shape{2, 2})
	lo := vram.FromSlice([]float64{-1, 1}, vram.Shape{2}) // per column
	fmt.Println(x.ClampTensor(lo, vram.Scalar(3, vram.Float64)).Float64s())
	// Output: [-1 1 3 2]
}

func ExampleTensor_Chunk() {
	x := vram.Arange(0, 5, 1)
	for _, c := range x.Chunk(3, 0) { // views of x: release them when done
		fmt.Println(c.Float32s())
		c.Release()
	}
	// Output:
	// [0 1]
	// [2 3]
	// [4]
}

func ExampleTensor_Repeat() {
	x := vram.FromSlice([]float32{1, 2}, vram.Shape{2})
	r := x.Repeat(2, 2)
	fmt.Println(r.Shape(), r.Float32s())
	fmt.Println(x.Tile(3).Float32s())
	// Output:
	// [2, 4] [1 2 1 2 1 2 1 2]
	// [1 2 1 2 1 2]
}

func ExampleTensor_MaskedFill() {
	scores := vram.FromSlice([]float32{0.5, 2, -1, 3}, vram.Shape{2, 2})
	causal := vram.FromSlice([]bool{false, true, false, false}, vram.Shape{2, 2})
	fmt.Println(scores.MaskedFill(causal, math.Inf(-1)).Float32s())
	// Output: [0.5 -Inf -1 3]
}

func ExampleTensor_Hardtanh() {
	x := vram.FromSlice([]float64{-2, -1, 0.5, 1, 2}, vram.Shape{5}, vram.WithGrad())
	y := x.Hardtanh(-1, 1)
	y.Sum().Backward()
	// As PyTorch's, the gradient is 0 at the bounds themselves.
	fmt.Println(y.Float64s(), x.Grad().Float64s())
	// Output: [-1 -1 0.5 1 1] [0 0 1 0 0]
}

func ExampleTensor_Softplus() {
	x := vram.FromSlice([]float64{0, 30}, vram.Shape{2})
	// beta 1, threshold 20 (PyTorch's defaults): x itself above 20.
	fmt.Printf("%.4f\n", x.Softplus(1, 20).Float64s())
	// Output: [0.6931 30.0000]
}

func ExampleScaledDotProductAttention() {
	// Queries that score every key alike spread their attention evenly
	// over the keys the causal mask lets them see: query i averages
	// values 0..i.
	q := vram.Zeros(vram.Shape{3, 2})
	k := vram.Randn(vram.Shape{3, 2})
	v := vram.FromSlice([]float32{1, 2, 3}, vram.Shape{3, 1})
	out := vram.ScaledDotProductAttention(q, k, v, vram.AttentionOptions{Causal: true})
	fmt.Println(out.Shape(), out.Float64s())

	// A bool mask says which keys each query may use (true = attend).
	mask := vram.FromSlice([]bool{false, true, true}, vram.Shape{3})
	out = vram.ScaledDotProductAttention(q, k, v, vram.AttentionOptions{Mask: mask})
	fmt.Println(out.Float64s())
	// Output:
	// [3, 1] [1 1.5 2]
	// [2.5 2.5 2.5]
}

func ExamplePad() {
	x := vram.FromSlice([]float32{1, 2, 3}, vram.Shape{1, 3})
	fmt.Println(vram.Pad(x, []int{2, 1}, vram.PadConstant, 0).Float32s())
	fmt.Println(vram.Pad(x, []int{2, 1}, vram.PadReflect, 0).Float32s())
	fmt.Println(vram.Pad(x, []int{2, 1}, vram.PadReplicate, 0).Float32s())
	fmt.Println(vram.Pad(x, []int{2, 1}, vram.PadCircular, 0).Float32s())
	// Output:
	// [0 0 1 2 3 0]
	// [3 2 1 2 3 2]
	// [1 1 1 2 3 3]
	// [2 3 1 2 3 1]
}

func ExampleInterpolate() {
	x := vram.FromSlice([]float32{0, 10, 20}, vram.Shape{1, 1, 3})
	near := vram.Interpolate(x, vram.InterpolateOptions{Size: []int{5}})
	lin := vram.Interpolate(x, vram.InterpolateOptions{Size: []int{5}, Mode: vram.InterpLinear, AlignCorners: true})
	fmt.Println(near.Float32s())
	fmt.Println(lin.Float32s())
	// Output:
	// [0 0 10 10 20]
	// [0 5 10 15 20]
}

func ExampleUnfold() {
	// The 2x2 blocks of a 3x3 image, one a column, and back: Fold adds
	// the blocks up, so each pixel counts the blocks that cover it.
	x := vram.Ones(vram.Shape{1, 1, 3, 3})
	cols := vram.Unfold(x, [2]int{2, 2}, vram.FoldParams{})
	fmt.Println(cols.Shape())
	fmt.Println(vram.Fold(cols, [2]int{3, 3}, [2]int{2, 2}, vram.FoldParams{}).Float32s())
	// Output:
	// [1, 4, 4]
	// [1 2 1 2 4 2 1 2 1]
}

func ExampleTensor_Unfold() {
	x := vram.Arange(0, 7, 1, vram.Float32)
	fmt.Println(x.Unfold(0, 3, 2).Float32s())
	// Output:
	// [0 1 2 2 3 4 4 5 6]
}

// Dropout zeroes elements at random and scales the others by 1/(1-p); its
// graph keeps a one-byte bool mask for the backward pass.
func ExampleDropout() {
	x := vram.Ones(vram.Shape{2, 4}).SetRequiresGrad(true)
	y := vram.Dropout(x, 0.5, vram.WithGenerator(vram.NewGenerator(1)))
	fmt.Println(y.Float32s())
	y.Sum().Backward()
	fmt.Println(x.Grad().Float32s())
	// Output:
	// [0 0 0 2 0 2 2 2]
	// [0 0 0 2 0 2 2 2]
}

func ExampleRMSNorm() {
	x := vram.FromSlice([]float64{1, 2, 2, 4}, vram.Shape{2, 2})
	w := vram.FromSlice([]float64{1, 0.5}, vram.Shape{2})
	// Each row is divided by its root mean square, then scaled by w.
	y := vram.RMSNorm(x, []int{2}, w, 0)
	fmt.Printf("%.4f\n", y.Float64s())
	// Output: [0.6325 0.6325 0.6325 0.6325]
}

func ExampleNormalize() {
	x := vram.FromSlice([]float64{3, 4, 0, 0}, vram.Shape{2, 2})
	// Rows of Euclidean norm 1; a zero row stays zero (its norm is below eps).
	fmt.Println(vram.Normalize(x, 2, 1, 1e-12).Float64s())
	fmt.Println(vram.Normalize(x, math.Inf(1), -1, 1e-12).Float64s())
	// Output:
	// [0.6 0.8 0 0]
	// [0.75 1 0 0]
}
