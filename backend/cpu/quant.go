package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/half"
)

var (
	_ backend.Int8Linear      = (*Device)(nil)
	_ backend.Int8Dequantizer = (*Device)(nil)
)

// int8Block is the number of output channels that MatMulInt8Weight expands
// to floats at a time: its scratch memory is int8Block·K compute values,
// never the whole weight.
const int8Block = 128

// DequantizeInt8 sets dst[n,k] = wq[n,k]·scale[n], in float32 (float64 for
// float64) rounded once to dst's dtype. It implements
// [backend.Int8Dequantizer].
func (*Device) DequantizeInt8(st backend.Stream, dst, wq, scale backend.View) (err error) {
	const what = "dequantize_int8"
	if err := begin(st, what, backend.CheckDequantizeInt8(dst, wq, scale)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, wq, scale)
	if err != nil {
		return err
	}
	if dst.DType == backend.Float64 {
		dequantizeInto[float64](ops[0], ops[1], ops[2])
	} else {
		dequantizeInto[float32](ops[0], ops[1], ops[2])
	}
	return nil
}

func dequantizeInto[F floating](d, w, s *operand) {
	n, k := w.shape[0], w.shape[1]
	if n == 0 || k == 0 {
		return
	}
	sc := make([]F, n)
	load(s, s.off, 1, sc)
	wq := typed[int8](w.raw)[w.off : w.off+n*k]
	row := make([]F, k)
	for r := range n {
		for c, q := range wq[r*k : (r+1)*k] {
			row[c] = F(q) * sc[r]
		}
		store(d, d.off+r*k, 1, row)
	}
}

// MatMulInt8Weight computes dst = x·(wq⊙scale)ᵀ + bias: it expands
// int8Block output channels of the weight at a time into float32 (float64
// for float64) scratch, rounded to dst's dtype as DequantizeInt8 rounds,
// and multiplies each block with gonum's Sgemm or Dgemm; the bias is added
// before the one rounding of the result to dst's dtype. It implements
// [backend.Int8Linear].
func (*Device) MatMulInt8Weight(st backend.Stream, dst, x, wq, scale, bias backend.View) (err error) {
	const what = "matmul_int8_weight"
	if err := begin(st, what, backend.CheckMatMulInt8Weight(dst, x, wq, scale, bias)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	vs := []backend.View{dst, x, wq, scale}
	if bias.DType != backend.Invalid {
		vs = append(vs, bias)
	}
	ops, err := resolveAll(what, vs...)
	if err != nil {
		return err
	}
	var b *operand
	if len(ops) == 5 {
		b = ops[4]
	}
	if dst.DType == backend.Float64 {
		int8Linear(gonum.Implementation{}.Dgemm, ops[0], ops[1], ops[2], ops[3], b)
	} else {
		int8Linear(gonum.Implementation{}.Sgemm, ops[0], ops[1], ops[2], ops[3], b)
	}
	return nil
}

// int8Linear computes d = x·(w⊙s)ᵀ + b (b may be nil) in compute type F
// for contiguous operands.
func int8Linear[F floating](gemm gemmFunc[F], d, x, w, s, b *operand) {
	m, n, k := x.shape[0], w.shape[0], w.shape[1]
	if m == 0 || n == 0 {
		return
	}
	acc := make([]F, m*n)
	if k > 0 {
		xs := make([]F, m*k)
		load(x, x.off, 1, xs)
		sc := make([]F, n)
		load(s, s.off, 1, sc)
		wq := typed[int8](w.raw)[w.off : w.off+n*k]
		round := roundTo[F](d.dt)
		blk := make([]F, min(int8Block, n)*k)
		for n0 := 0; n0 < n; n0 += int8Block {
			nb := min(int8Block, n-n0)
			for r := range nb {
				for c, q := range wq[(n0+r)*k : (n0+r+1)*k] {
					blk[r*k+c] = round(F(q) * sc[n0+r])
				}
			}
			gemm(blas.NoTrans, blas.Trans, m, nb, k, 1, xs, k, blk[:nb*k], k, 0, acc[n0:], n)
		}
	}
	if b != nil {
		bs := make([]F, n)
		load(b, b.off, 1, bs)
		for i := range m {
			row := acc[i*n : (i+1)*n]
			for j := range row {
				row[j] += bs[j]
			}
		}
	}
	store(d, d.off, 1, acc)
}

// roundTo returns the rounding of a compute value to dtype dt and back: the
// identity but for float16 and bfloat16.
func roundTo[F floating](dt backend.DType) func(F) F {
	switch dt {
	case backend.Float16:
		return func(v F) F { return F(half.F16To32(half.F16(float32(v)))) }
	case backend.BFloat16:
		return func(v F) F { return F(half.BF16To32(half.BF16(float32(v)))) }
	}
	return func(v F) F { return v }
}
