package cpu

import (
	"unsafe"

	"gonum.org/v1/gonum/blas/gonum"

	"github.com/vramgo/vram/backend"
)

var _ backend.FusedMatMul = (*Device)(nil)

// MatMulBias computes dst = a·b + bias (then ReLU when relu is set): the
// product, then one elementwise pass over dst. It implements
// [backend.FusedMatMul], so that code written for the fused form runs (and
// is tested) on the CPU too. For float16 and bfloat16 the product is kept
// in float32 and the bias added to it before the one rounding to 16 bits,
// as CUDA's fused epilogue does.
func (d *Device) MatMulBias(st backend.Stream, dst, a, b, bias backend.View, relu bool) (err error) {
	const what = "matmul_bias"
	if err := begin(st, what, backend.CheckMatMulBias(dst, a, b, bias)); err != nil {
		return err
	}
	op := backend.Add
	if relu {
		op = backend.AddRelu
	}
	row := backend.View{Buf: bias.Buf, DType: bias.DType, Shape: dst.Shape, Strides: []int{0, bias.Strides[0]}, Offset: bias.Offset}
	if dst.DType.OpMath() == dst.DType {
		if err := d.MatMul(d.DefaultStream(), as3(dst), as3(a), as3(b)); err != nil {
			return err
		}
		return d.Binary(d.DefaultStream(), op, dst, dst, row)
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, as3(dst), as3(a), as3(b), dst, row)
	if err != nil {
		return err
	}
	m, n := dst.Shape[0], dst.Shape[1]
	if m == 0 || n == 0 {
		return nil
	}
	// The float32 product, in scratch memory of the kernel's own.
	words := make([]float32, m*n)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), 4*m*n)
	acc := &operand{dt: backend.Float32, raw: raw, shape: []int{1, m, n}, strides: []int{m * n, n, 1}}
	if a.Shape[1] > 0 {
		if err := matmul(gonum.Implementation{}.Sgemm, acc, ops[1], ops[2]); err != nil {
			return err
		}
	}
	acc2 := &operand{dt: backend.Float32, raw: raw, shape: []int{m, n}, strides: []int{n, 1}}
	return binaryIn(what, op, kFloat32, ops[3], acc2, ops[4])
}

// MatMulRowSum computes dst = a·b and rowSum[i] = Σ_k a[i,k]: the product
// and a reduction. It implements [backend.FusedMatMul].
func (d *Device) MatMulRowSum(st backend.Stream, dst, a, b, rowSum backend.View) error {
	if err := begin(st, "matmul_rowsum", backend.CheckMatMulRowSum(dst, a, b, rowSum)); err != nil {
		return err
	}
	if err := d.MatMul(d.DefaultStream(), as3(dst), as3(a), as3(b)); err != nil {
		return err
	}
	col := backend.View{Buf: rowSum.Buf, DType: rowSum.DType, Shape: []int{a.Shape[0], 1},
		Strides: []int{rowSum.Strides[0], 1}, Offset: rowSum.Offset}
	return d.Reduce(d.DefaultStream(), backend.Sum, col, a, []int{1})
}

// as3 views a 2-D matrix as a batch of one.
func as3(v backend.View) backend.View {
	v.Shape = []int{1, v.Shape[0], v.Shape[1]}
	v.Strides = []int{0, v.Strides[0], v.Strides[1]}
	return v
}
