package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas/gonum"
)

// TestGemmKeepsNonFiniteTerms compares ieee(Dgemm) in each transposition
// with plain IEEE sums over matrices holding zeros, infinities and NaNs:
// every entry is NaN, infinite or within rounding of the plain sum exactly
// where the plain sum is.
func TestGemmKeepsNonFiniteTerms(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pick := func() float64 {
		switch r.IntN(12) {
		case 0, 1, 2, 3:
			return 0
		case 4:
			return math.Inf(1 - 2*r.IntN(2))
		case 5:
			if r.IntN(3) == 0 {
				return math.NaN()
			}
		}
		return r.NormFloat64()
	}
	gemm := ieee(gonum.Implementation{}.Dgemm)
	for it := range 200 {
		m, n, k := 1+r.IntN(5), 1+r.IntN(5), 1+r.IntN(5)
		if it%4 == 0 {
			n = dotMin + r.IntN(8) // rows long enough for the vectorized check
		}
		at, bt := r.IntN(2) == 1, r.IntN(2) == 1
		t.Run(fmt.Sprintf("%d %dx%dx%d at=%v bt=%v", it, m, n, k, at, bt), func(t *testing.T) {
			A := make([]float64, m*k) // row-major op(a)
			B := make([]float64, k*n)
			for i := range A {
				A[i] = pick()
			}
			for i := range B {
				B[i] = pick()
			}
			a, lda := A, k
			if at {
				a, lda = transpose(A, m, k), m
			}
			b, ldb := B, n
			if bt {
				b, ldb = transpose(B, k, n), k
			}
			c := make([]float64, m*n)
			for i := range c {
				c[i] = math.NaN() // beta 0: never read
			}
			gemm(blasT(at), blasT(bt), m, n, k, 1, a, lda, b, ldb, 0, c, n)
			for i := range m {
				for j := range n {
					want := 0.0
					for l := range k {
						want += A[i*k+l] * B[l*n+j]
					}
					got := c[i*n+j]
					if math.IsNaN(want) != math.IsNaN(got) || math.IsInf(want, 0) && want != got ||
						!math.IsNaN(want) && !math.IsInf(want, 0) && math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
						t.Fatalf("c[%d,%d] = %v, want %v", i, j, got, want)
					}
				}
			}
		})
	}
}

// transpose returns the rows×cols row-major matrix x transposed.
func transpose(x []float64, rows, cols int) []float64 {
	out := make([]float64, len(x))
	for i := range rows {
		for j := range cols {
			out[j*rows+i] = x[i*cols+j]
		}
	}
	return out
}
