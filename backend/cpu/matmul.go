package cpu

import (
	"slices"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/vramgo/vram/backend"
)

// gemmFunc is the signature of gonum's Sgemm and Dgemm (row-major
// C = alpha*op(A)*op(B) + beta*C).
type gemmFunc[F floating] func(tA, tB blas.Transpose, m, n, k int, alpha F, a []F, lda int, b []F, ldb int, beta F, c []F, ldc int)

// gemmBlock and gemmMinParBlocks mirror gonum's blocking: a product with
// fewer than gemmMinParBlocks blocks of gemmBlock×gemmBlock elements of the
// result runs serially inside gonum, so batches of such products are run in
// parallel here instead.
const (
	gemmBlock        = 64
	gemmMinParBlocks = 4
)

// MatMul computes dst[b] = a[b] x b[b] for a [B,M,K], b [B,K,N] and dst
// [B,M,N]. float32 and float64 use gonum's Sgemm and Dgemm; float16 and
// bfloat16 are converted to float32 and back.
func (dev *Device) MatMul(st backend.Stream, dst, a, b backend.View) (err error) {
	const what = "matmul"
	if err := begin(st, what, backend.CheckMatMul(dst, a, b)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, a, b)
	if err != nil {
		return err
	}
	d, x, y := ops[0], ops[1], ops[2]
	bn, m, n, k := d.shape[0], d.shape[1], d.shape[2], x.shape[2]
	if bn == 0 || m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		return dev.Fill(dev.DefaultStream(), dst, 0)
	}
	if d.dt == backend.Float64 {
		return matmul(gonum.Implementation{}.Dgemm, d, x, y)
	}
	return matmul(gonum.Implementation{}.Sgemm, d, x, y)
}

// gemmLayout tells how gemm can read a rows×cols matrix with row stride sr
// and column stride sc in place: as a row-major matrix with leading
// dimension ld (trans false) or as the transpose of one (trans true).
func gemmLayout(rows, cols, sr, sc int) (trans bool, ld int, ok bool) {
	if sc == 1 || cols == 1 {
		ld := sr
		if rows == 1 {
			ld = max(cols, 1)
		}
		if ld >= max(1, cols) {
			return false, ld, true
		}
	}
	if sr == 1 || rows == 1 {
		ld := sc
		if cols == 1 {
			ld = max(rows, 1)
		}
		if ld >= max(1, rows) {
			return true, ld, true
		}
	}
	return false, 0, false
}

func blasT(trans bool) blas.Transpose {
	if trans {
		return blas.Trans
	}
	return blas.NoTrans
}

// extent returns the lowest and highest element offsets of o.
func extent(o *operand) (lo, hi int) {
	hi = o.off
	for i, n := range o.shape {
		hi += (n - 1) * o.strides[i]
	}
	return o.off, hi
}

// overlaps reports whether two operands share memory.
func overlaps(a, b *operand) bool {
	if len(a.raw) == 0 || len(b.raw) == 0 || &a.raw[0] != &b.raw[0] {
		return false
	}
	alo, ahi := extent(a)
	blo, bhi := extent(b)
	return alo <= bhi && blo <= ahi
}

// gemmOperand is one input matrix of a batch: in place, or packed.
type gemmOperand struct {
	in      bool // read in place
	trans   bool
	ld      int
	rows    int
	cols    int
	sr, sc  int
	batchSt int
}

func newGemmOperand[F floating](o *operand, rows, cols int) gemmOperand {
	g := gemmOperand{rows: rows, cols: cols, batchSt: o.strides[0], sr: o.strides[1], sc: o.strides[2]}
	if native[F](o.dt) {
		g.trans, g.ld, g.in = gemmLayout(rows, cols, g.sr, g.sc)
	}
	return g
}

// matrix returns the batch's matrix as gemm reads it, packing it into tmp
// when it cannot be read in place.
func matrix[F floating](g *gemmOperand, o *operand, bi int, tmp []F) (m []F, trans bool, ld int) {
	off := o.off + bi*g.batchSt
	if g.in {
		return typed[F](o.raw)[off:], g.trans, g.ld
	}
	for i := range g.rows {
		load(o, off+i*g.sr, g.sc, tmp[i*g.cols:(i+1)*g.cols])
	}
	return tmp, false, g.cols
}

func matmul[F floating](gemm gemmFunc[F], d, x, y *operand) error {
	gemm = ieee(gemm)
	bn, m, n, k := d.shape[0], d.shape[1], d.shape[2], x.shape[2]
	ga := newGemmOperand[F](x, m, k)
	gb := newGemmOperand[F](y, k, n)
	gc := newGemmOperand[F](d, m, n)
	if gc.in && (overlaps(d, x) || overlaps(d, y)) {
		gc.in = false
	}

	// One product when the batch folds into the rows of a: b is shared by
	// every batch and a and dst are stacks of row-major matrices.
	if bn > 1 && gb.batchSt == 0 && ga.in && !ga.trans && ga.batchSt == m*ga.ld &&
		gc.in && !gc.trans && gc.batchSt == m*gc.ld {
		ga.rows, gc.rows = bn*m, bn*m
		var tb []F
		if !gb.in {
			tb = make([]F, k*n)
		}
		return protect(func(int, int) error {
			am, at, lda := matrix[F](&ga, x, 0, nil)
			bm, bt, ldb := matrix(&gb, y, 0, tb)
			cm := typed[F](d.raw)[d.off:]
			gemm(blasT(at), blasT(bt), bn*m, n, k, 1, am, lda, bm, ldb, 0, cm, gc.ld)
			return nil
		}, 0, 1)
	}

	batch := func(bi int, ta, tb, tc []F) {
		am, at, lda := matrix(&ga, x, bi, ta)
		bm, bt, ldb := matrix(&gb, y, bi, tb)
		off := d.off + bi*gc.batchSt
		switch {
		case gc.in && !gc.trans:
			gemm(blasT(at), blasT(bt), m, n, k, 1, am, lda, bm, ldb, 0, typed[F](d.raw)[off:], gc.ld)
		case gc.in:
			// dst is stored transposed: compute dstᵀ = bᵀ aᵀ.
			gemm(blasT(!bt), blasT(!at), n, m, k, 1, bm, ldb, am, lda, 0, typed[F](d.raw)[off:], gc.ld)
		default:
			gemm(blasT(at), blasT(bt), m, n, k, 1, am, lda, bm, ldb, 0, tc, n)
			for i := range m {
				store(d, off+i*gc.sr, gc.sc, tc[i*n:(i+1)*n])
			}
		}
	}
	temps := func() (ta, tb, tc []F) {
		if !ga.in {
			ta = make([]F, m*k)
		}
		if !gb.in {
			tb = make([]F, k*n)
		}
		if !gc.in {
			tc = make([]F, m*n)
		}
		return
	}
	work := bn * m * n * k
	blocks := ((m + gemmBlock - 1) / gemmBlock) * ((n + gemmBlock - 1) / gemmBlock)
	if bn > 1 && blocks < gemmMinParBlocks {
		// Small products: gonum runs each serially, so share the batches
		// among goroutines. Each product is computed the same way either
		// way, so the result does not depend on the split.
		return parallel(bn, work, func(lo, hi int) error {
			ta, tb, tc := temps()
			for bi := lo; bi < hi; bi++ {
				batch(bi, ta, tb, tc)
			}
			return nil
		})
	}
	// Large products: gonum parallelises each one (by blocks of the result,
	// each computed in a fixed order).
	return protect(func(int, int) error {
		ta, tb, tc := temps()
		for bi := range bn {
			batch(bi, ta, tb, tc)
		}
		return nil
	}, 0, 1)
}

// ieee returns gemm made to follow IEEE arithmetic for operands that hold
// an infinity or a NaN, as PyTorch's products do: gonum's kernels skip the
// terms of each zero element of a (but for its dot-product kernel, for a
// not transposed and b transposed), among them the 0·Inf and 0·NaN terms
// that make a sum NaN, which would give 0 where an infinite input meets a
// zero weight. A product that would lose such a term runs through plain
// loops that add the terms in gonum's order without skipping any. Finding
// out costs a scan of a and, when it holds zeros, of the rows of b that
// its columns with a zero multiply (all of b at once when its rows are
// short), with vectorized dot products: a few percent of a product of 64
// rows or more, up to about as much as the product itself for one row.
func ieee[F floating](gemm gemmFunc[F]) gemmFunc[F] {
	return func(tA, tB blas.Transpose, m, n, k int, alpha F, a []F, lda int, b []F, ldb int, beta F, c []F, ldc int) {
		at, bt := tA != blas.NoTrans, tB != blas.NoTrans
		if !at && bt || !losesTerms(at, bt, m, n, k, a, lda, b, ldb) {
			gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			return
		}
		aAt := func(i, l int) F {
			if at {
				return a[l*lda+i]
			}
			return a[i*lda+l]
		}
		bAt := func(l, j int) F {
			if bt {
				return b[j*ldb+l]
			}
			return b[l*ldb+j]
		}
		row := make([]F, n)
		for i := range m {
			clear(row)
			for l := range k {
				v := alpha * aAt(i, l)
				for j := range row {
					row[j] += v * bAt(l, j)
				}
			}
			ci := c[i*ldc : i*ldc+n]
			for j, v := range row {
				if beta == 0 {
					ci[j] = v // C is not read, as BLAS does not read it for beta 0
				} else {
					ci[j] = v + beta*ci[j]
				}
			}
		}
	}
}

// losesTerms reports whether a kernel that skips the zero elements of the
// m×k matrix a (stored transposed when at, leading dimension lda) would
// skip a term whose factor from the k×n matrix b (likewise) is infinite or
// NaN: whether some column l of a holds a zero while row l of b holds a
// non-finite value.
func losesTerms[F floating](at, bt bool, m, n, k int, a []F, lda int, b []F, ldb int) bool {
	if m == 0 || n == 0 {
		return false
	}
	// The columns of a that hold a zero, found in a's storage order.
	zero := make([]bool, k)
	if at {
		for l := range k {
			zero[l] = slices.Contains(a[l*lda:l*lda+m], 0)
		}
	} else {
		for i := range m {
			for l, v := range a[i*lda : i*lda+k] {
				if v == 0 {
					zero[l] = true
				}
			}
		}
	}
	count := 0
	for _, z := range zero {
		if z {
			count++
		}
	}
	if count == 0 {
		return false
	}
	if !bt && ldb == n && n < dotMin {
		// Short rows of a dense b, whose dots one by one would cost more
		// in calls than in values: all of it at once.
		return !denseFinite(b[:k*n])
	}
	var zeros []F
	if n >= dotMin {
		zeros = make([]F, n)
	}
	for l, z := range zero {
		if !z {
			continue
		}
		off, inc := l*ldb, 1
		if bt {
			off, inc = l, ldb
		}
		if !rowFinite(n, b[off:], inc, zeros) {
			return true
		}
	}
	return false
}

// denseChunk is the number of values denseFinite checks with one
// vectorized dot product.
const denseChunk = 4096

// denseFinite reports whether the values of x are all finite, checking
// denseChunk of them at a time with a vectorized dot product with zeros.
func denseFinite[F floating](x []F) bool {
	zeros := make([]F, min(len(x), denseChunk))
	for len(x) > 0 {
		c := min(len(x), denseChunk)
		if dot(c, x, 1, zeros) != 0 {
			return false
		}
		x = x[c:]
	}
	return true
}

// dotMin is the length from which rowFinite checks a row with a vectorized
// dot product rather than a loop, whose calls cost more on short rows.
const dotMin = 64

// rowFinite reports whether the n values x[i·inc] are all finite: for a
// long row, whether its dot product with zeros (at least n of them) is 0
// rather than NaN (0·Inf, 0·NaN).
func rowFinite[F floating](n int, x []F, inc int, zeros []F) bool {
	if n >= dotMin {
		return dot(n, x, inc, zeros) == 0
	}
	if inc == 1 {
		for _, v := range x[:n] {
			if v-v != 0 { // NaN for an infinity or a NaN
				return false
			}
		}
		return true
	}
	for i := range n {
		if v := x[i*inc]; v-v != 0 {
			return false
		}
	}
	return true
}

// dot returns Σ x[i·incX]·y[i] over n elements through gonum's vectorized
// Sdot or Ddot.
func dot[F floating](n int, x []F, incX int, y []F) F {
	switch x := any(x).(type) {
	case []float32:
		return F(gonum.Implementation{}.Sdot(n, x, incX, any(y).([]float32), 1))
	case []float64:
		return F(gonum.Implementation{}.Ddot(n, x, incX, any(y).([]float64), 1))
	}
	panic("cpu: internal: dot of an unknown type")
}
