package vram

import (
	"math"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/gonum/mat"
)

// This file holds torch.linalg's operations. The decompositions (LU,
// Cholesky, QR, symmetric eigenvalues, SVD) run on the host in float64:
// the matrices are copied from the tensor's device, factored, and the
// results rounded once to the tensor's dtype and copied back, which
// synchronizes with the device's stream, as some of PyTorch's MAGMA and
// cuSOLVER paths do. Trace, VectorNorm, MatrixNorm's elementwise orders,
// Outer, Kron, Diag and DiagEmbed are composed of device ops and stay on
// the device.

// matrices is a batch of matrices read to the host in float64.
type matrices struct {
	batch []int     // the leading (batch) dimensions
	m, n  int       // the rows and columns of each matrix
	data  []float64 // count()*m*n values, row-major; nil when valueless
	// valueless is set for a shape-only device, which keeps no values:
	// the ops then compute nothing, and fail only for shapes and dtypes,
	// so that a step planned there runs as on a real device.
	valueless bool
}

// count returns the number of matrices.
func (h matrices) count() int { return backendNum(h.batch) }

// loops returns the number of matrices to compute: count, or none when
// the device keeps no values. The result buffers the ops size by count
// are then never written, and fromHost does not read them.
func (h matrices) loops() int {
	if h.valueless {
		return 0
	}
	return h.count()
}

// loopsFilling returns loops, or 0 when every buffer of results that the
// walk fills is empty: matrices whose results have no elements need no
// walk, however many of them there are (2^40 of size 0×0 hold no data).
func (h matrices) loopsFilling(bufs ...[]float64) int {
	for _, b := range bufs {
		if len(b) > 0 {
			return h.loops()
		}
	}
	return 0
}

// at returns matrix i of the batch, sharing h's storage.
func (h matrices) at(i int) []float64 { return h.data[i*h.m*h.n : (i+1)*h.m*h.n] }

// readMatrices checks that a is a float32 or float64 tensor of at least
// two dimensions (square ones when square is set) and returns its values
// on the host. The caller pins a.
func readMatrices(op string, a *Tensor, square bool) matrices {
	if len(a.shape) < 2 {
		fail(op, ErrShape, "the input must have at least 2 dimensions, got shape %v", Shape(a.shape))
	}
	if a.dtype != Float32 && a.dtype != Float64 {
		fail(op, ErrDType, "expected a float32 or float64 tensor, got %s; Cast it first", a.dtype)
	}
	r := len(a.shape)
	h := matrices{batch: slices.Clone(a.shape[:r-2]), m: a.shape[r-2], n: a.shape[r-1]}
	if square && h.m != h.n {
		fail(op, ErrShape, "A must be batches of square matrices, but they are %d by %d matrices", h.m, h.n)
	}
	if a.ds().shapeOnly() {
		h.valueless = true
		return h
	}
	raw := a.readHost(op)
	h.data = make([]float64, a.NumElements())
	for i := range h.data {
		h.data[i] = load(a.dtype, raw, i)
	}
	return h
}

// requireFinite panics with ErrArgument when h holds a NaN or an infinity,
// on which the iterative decompositions cannot converge.
func requireFinite(op string, h matrices) {
	for _, v := range h.data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			fail(op, ErrArgument, "the algorithm failed to converge because the input matrix contained non-finite values")
		}
	}
}

// fromHost returns a new tensor of dtype dt and the given shape on ds
// holding vals, rounded once to dt (an uninitialised one on a shape-only
// device, without reading vals).
func fromHost(op string, ds *devState, dt DType, shape []int, vals []float64) *Tensor {
	if ds.shapeOnly() {
		return newTensor(op, ds, dt, shape)
	}
	return fromBytes(op, ds, dt, shape, encode(vals, dt))
}

// hostOutputs allocates on ds the tensors of dtype dt and the given shapes
// that an operation computes on the host, before it computes anything or
// makes a host buffer of their size (see writeBytes): a result that the
// device cannot hold and that the input does not bound, such as the
// determinants of 2^31 empty matrices or the m×m U of matrices without
// columns, then fails as an allocation on the device. If one fails, those
// made are released. The caller defers releaseAllOnPanic of them and
// fills each with writeHost.
func hostOutputs(op string, ds *devState, dt DType, shapes ...[]int) []*Tensor {
	ts := make([]*Tensor, 0, len(shapes))
	ok := false
	defer func() {
		if !ok {
			for _, t := range ts {
				t.Release()
			}
		}
	}()
	for _, shape := range shapes {
		ts = append(ts, newTensor(op, ds, dt, shape))
	}
	ok = true
	return ts
}

// releaseAllOnPanic, deferred, releases ts when the function panics and
// passes the panic on.
func releaseAllOnPanic(ts []*Tensor) {
	if r := recover(); r != nil {
		for _, t := range ts {
			t.Release()
		}
		panic(r)
	}
}

// writeHost copies vals, rounded once to t's dtype, into t from
// hostOutputs and returns t; on a shape-only device, where vals is not
// computed, it leaves t as it is.
func writeHost(op string, t *Tensor, vals []float64) *Tensor {
	if !t.ds().shapeOnly() {
		t.writeBytes(op, encode(vals, t.dtype))
	}
	return t
}

// luFactor factors the n×n row-major a in place as P·A = L·U with partial
// pivoting (L unit lower, U upper, both stored in a). It returns the row
// swapped into each position, the sign of P, and the 1-based index of the
// first exactly-zero pivot (0 when there is none), as LAPACK's getrf does.
func luFactor(a []float64, n int) (piv []int, sign float64, zero int) {
	piv = make([]int, n)
	sign = 1
	for k := range n {
		p := k
		for i := k + 1; i < n; i++ {
			if math.Abs(a[i*n+k]) > math.Abs(a[p*n+k]) {
				p = i
			}
		}
		piv[k] = p
		if p != k {
			sign = -sign
			for j := range n {
				a[k*n+j], a[p*n+j] = a[p*n+j], a[k*n+j]
			}
		}
		d := a[k*n+k]
		if d == 0 {
			if zero == 0 {
				zero = k + 1
			}
			continue
		}
		for i := k + 1; i < n; i++ {
			f := a[i*n+k] / d
			a[i*n+k] = f
			if f == 0 {
				continue
			}
			for j := k + 1; j < n; j++ {
				a[i*n+j] -= f * a[k*n+j]
			}
		}
	}
	return piv, sign, zero
}

// luSolve overwrites the n×k row-major b with A⁻¹·b, for the factors of a
// nonsingular A from luFactor.
func luSolve(lu []float64, piv []int, n int, b []float64, k int) {
	for i, p := range piv {
		if p != i {
			for j := range k {
				b[i*k+j], b[p*k+j] = b[p*k+j], b[i*k+j]
			}
		}
	}
	for i := range n {
		for r := range i {
			f := lu[i*n+r]
			for j := range k {
				b[i*k+j] -= f * b[r*k+j]
			}
		}
	}
	for i := n - 1; i >= 0; i-- {
		for r := i + 1; r < n; r++ {
			f := lu[i*n+r]
			for j := range k {
				b[i*k+j] -= f * b[r*k+j]
			}
		}
		d := lu[i*n+i]
		for j := range k {
			b[i*k+j] /= d
		}
	}
}

// singular panics with the error of a singular input to op, naming the
// batch element and the zero pivot as torch.linalg does.
func singular(op string, h matrices, i, zero int) {
	where := ""
	if len(h.batch) > 0 {
		where = " of batch element " + strconv.Itoa(i)
	}
	fail(op, ErrArgument, "the diagonal element %d%s is zero; the input matrix is singular", zero, where)
}

// Det returns the determinant of each square matrix of a (…, n, n), a
// tensor of shape (…) (torch.linalg.det). A singular matrix gives 0, and a
// 0×0 one 1. It runs on the host in float64 (see the file's comment) and
// is differentiable, singular matrices included. It panics with [ErrShape]
// for non-square or fewer than two dimensions and with [ErrDType] for
// dtypes other than float32 and float64.
func Det(a *Tensor) *Tensor {
	const op = "linalg.det"
	notNil(op, a)
	defer pin(op, a).unpin()
	h := readMatrices(op, a, true)
	outs := hostOutputs(op, a.ds(), a.dtype, h.batch)
	defer releaseAllOnPanic(outs)
	out := make([]float64, h.loops())
	n := h.n
	for i := range h.loops() {
		lu := slices.Clone(h.at(i))
		_, d, _ := luFactor(lu, n)
		for k := range n {
			d *= lu[k*n+k]
		}
		out[i] = d
	}
	y := writeHost(op, outs[0], out)
	if needsGrad(a) {
		sv := save(a)
		record(op, y, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
			c := cofactors(op, sv[0])
			return []*Tensor{c.Mul(g.Unsqueeze(-1).Unsqueeze(-1))}
		})
	}
	return y
}

// cofactors returns the matrix of cofactors of each square matrix of a,
// the gradient of its determinant: det(A)·A⁻ᵀ when A is invertible, and
// det(U)·det(V)·U·diag(∏_{j≠i} s_j)·Vᵀ from A = U·diag(s)·Vᵀ otherwise.
func cofactors(op string, a *Tensor) *Tensor {
	defer pin(op, a).unpin()
	h := readMatrices(op, a, true)
	n := h.n
	out := make([]float64, len(h.data))
	for i := range h.loopsFilling(out) {
		src, dst := h.at(i), out[i*n*n:(i+1)*n*n]
		lu := slices.Clone(src)
		piv, d, zero := luFactor(lu, n)
		if zero == 0 {
			for k := range n {
				d *= lu[k*n+k]
			}
			// det·A⁻ᵀ: solve Aᵀ·X = det·I through A's factors.
			inv := identity(n)
			luSolve(lu, piv, n, inv, n)
			for r := range n {
				for c := range n {
					dst[r*n+c] = d * inv[c*n+r]
				}
			}
			continue
		}
		var svd mat.SVD
		if !svd.Factorize(mat.NewDense(n, n, slices.Clone(src)), mat.SVDFull) {
			fail(op, ErrArgument, "the SVD of a singular matrix for the determinant's gradient did not converge")
		}
		var u, v mat.Dense
		svd.UTo(&u)
		svd.VTo(&v)
		s := svd.Values(nil)
		w := make([]float64, n)
		for k := range n {
			w[k] = 1
			for j := range n {
				if j != k {
					w[k] *= s[j]
				}
			}
		}
		sg := mat.Det(&u) * mat.Det(&v)
		for r := range n {
			for c := range n {
				var acc float64
				for k := range n {
					acc += u.At(r, k) * w[k] * v.At(c, k)
				}
				dst[r*n+c] = sg * acc
			}
		}
	}
	return fromHost(op, a.ds(), a.dtype, a.shape, out)
}

// eyeOf returns the n×n identity matrix in the dtype and on the device of
// like, filled on the device ([Eye]) rather than copied from n·n values
// built on the host: a side too large for the device fails there, as an
// allocation, before any host memory is taken.
func eyeOf(like *Tensor, n int) *Tensor { return Eye(n, n, like.dtype, like.Device()) }

// identity returns the n×n identity matrix, row-major, for the host
// factorizations.
func identity(n int) []float64 {
	e := make([]float64, n*n)
	for i := range n {
		e[i*n+i] = 1
	}
	return e
}

// Slogdet returns the sign and the natural logarithm of the absolute value
// of the determinant of each square matrix of a (torch.linalg.slogdet),
// two tensors of shape (…); a singular matrix gives sign 0 and logabsdet
// -Inf. It runs on the host in float64. logAbsDet is differentiable, with
// gradient A⁻ᵀ, which panics as [Inv] does when backward reaches a singular
// matrix; sign has none. Other panics are as for [Det].
func Slogdet(a *Tensor) (sign, logAbsDet *Tensor) {
	const op = "linalg.slogdet"
	notNil(op, a)
	defer pin(op, a).unpin()
	h := readMatrices(op, a, true)
	outs := hostOutputs(op, a.ds(), a.dtype, h.batch, h.batch)
	defer releaseAllOnPanic(outs)
	sg, la := make([]float64, h.loops()), make([]float64, h.loops())
	n := h.n
	for i := range h.loops() {
		lu := slices.Clone(h.at(i))
		_, s, zero := luFactor(lu, n)
		if zero != 0 {
			sg[i], la[i] = 0, math.Inf(-1)
			continue
		}
		var l float64
		for k := range n {
			d := lu[k*n+k]
			if d < 0 {
				s = -s
			}
			l += math.Log(math.Abs(d))
		}
		sg[i], la[i] = s, l
	}
	sign, logAbsDet = writeHost(op, outs[0], sg), writeHost(op, outs[1], la)
	if needsGrad(a) {
		sv := save(a)
		record(op, logAbsDet, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
			defer asOp(op)
			return []*Tensor{Inv(sv[0]).MT().Mul(g.Unsqueeze(-1).Unsqueeze(-1))}
		})
	}
	return sign, logAbsDet
}

// Inv returns the inverse of each square matrix of a (torch.linalg.inv).
// It runs on the host in float64 and is differentiable. It panics with
// [ErrArgument] for a singular matrix (an exactly zero pivot, as LAPACK
// finds), with [ErrShape] for non-square or fewer than two dimensions and
// with [ErrDType] for dtypes other than float32 and float64.
func Inv(a *Tensor) *Tensor {
	const op = "linalg.inv"
	notNil(op, a)
	defer pin(op, a).unpin()
	h := readMatrices(op, a, true)
	n := h.n
	out := make([]float64, len(h.data))
	for i := range h.loopsFilling(out) {
		lu := slices.Clone(h.at(i))
		piv, _, zero := luFactor(lu, n)
		if zero != 0 {
			singular(op, h, i, zero)
		}
		inv := identity(n)
		luSolve(lu, piv, n, inv, n)
		copy(out[i*n*n:], inv)
	}
	y := fromHost(op, a.ds(), a.dtype, a.shape, out)
	if needsGrad(a) {
		sv := save(y)
		record(op, y, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
			yt := sv[0].MT()
			return []*Tensor{yt.MatMul(g).MatMul(yt).Neg()}
		})
	}
	return y
}

// Solve returns the solution X of A·X = B, or of X·A = B when left is
// false (torch.linalg.solve). a is (…, n, n); b is (…, n, k) ((…, k, n)
// when left is false), or, when left is set, a batch of vectors (…, n)
// when it is 1-D or has one dimension fewer than a and a's leading sizes;
// the batch dimensions broadcast. It runs on the host in
// float64 and is differentiable in both operands. It panics with
// [ErrArgument] for a singular A, with [ErrShape] for shapes that do not
// fit, and with [ErrDType] for dtypes other than float32 and float64 or
// operands of different dtypes.
func Solve(a, b *Tensor, left bool) *Tensor {
	const op = "linalg.solve"
	notNil(op, a, b)
	defer pin(op, a, b).unpin()
	defer asOp(op)
	deviceOf(op, a, b)
	if a.dtype != b.dtype {
		fail(op, ErrDType, "A is %s but B is %s; Cast one of them", a.dtype, b.dtype)
	}
	if len(a.shape) < 2 || len(b.shape) < 1 {
		fail(op, ErrShape, "expected A (…, n, n) and B (…, n, k) or (…, n), got %v and %v", Shape(a.shape), Shape(b.shape))
	}
	ra := len(a.shape)
	vector := len(b.shape) == 1 || len(b.shape) == ra-1 && slices.Equal(b.shape, a.shape[:ra-1])
	if vector && !left {
		fail(op, ErrShape, "a batch of vectors B %v is not supported with left=false; pass it as rows, B.Unsqueeze(-2)", Shape(b.shape))
	}
	aShape, bShape := Shape(a.shape), Shape(b.shape) // as given, for errors
	return composed(op, func() *Tensor {
		if !left {
			a, b = a.MT(), b.MT()
		}
		if vector {
			b = b.Unsqueeze(-1)
		}
		if b.shape[len(b.shape)-2] != a.shape[ra-1] {
			want := "(…, n, k) or (…, n)"
			if !left {
				want = "(…, k, n)"
			}
			fail(op, ErrShape, "incompatible shapes of A %v and B %v: for A (…, n, n), B must be %s", aShape, bShape, want)
		}
		batch := broadcastShapes(op, a.shape[:ra-2], b.shape[:len(b.shape)-2])
		a = a.Expand(append(slices.Clone(batch), a.shape[ra-2:]...)...)
		b = b.Expand(append(slices.Clone(batch), b.shape[len(b.shape)-2:]...)...)
		x := solveRaw(op, a, b)
		if vector {
			return x.Squeeze(-1)
		}
		if !left {
			return x.MT()
		}
		return x
	})
}

// solveRaw solves A·X = B for a (…, n, n) and b (…, n, k) of the same
// batch shape, recording the gradient.
func solveRaw(op string, a, b *Tensor) *Tensor {
	h := readMatrices(op, a, true)
	rb := readMatrices(op, b, false)
	n, k := h.n, rb.n
	out := slices.Clone(rb.data)
	for i := range h.loopsFilling(out) {
		lu := slices.Clone(h.at(i))
		piv, _, zero := luFactor(lu, n)
		if zero != 0 {
			singular(op, h, i, zero)
		}
		luSolve(lu, piv, n, out[i*n*k:(i+1)*n*k], k)
	}
	x := fromHost(op, a.ds(), a.dtype, b.shape, out)
	if needsGrad(a, b) {
		sv := save(a, x)
		ra, rb := a.requiresGrad.Load(), b.requiresGrad.Load()
		record(op, x, []*Tensor{a, b}, sv, func(g *Tensor) []*Tensor {
			gb := solveRaw(op, sv[0].MT(), g)
			return []*Tensor{
				gradIf(ra, func() *Tensor { return gb.MatMul(sv[1].MT()).Neg() }),
				gradIf(rb, func() *Tensor { return gb }),
			}
		})
	}
	return x
}

// Cholesky returns the Cholesky factor of each symmetric positive-definite
// matrix of a (torch.linalg.cholesky): L lower triangular with A = L·Lᵀ,
// or, when upper is set, U = Lᵀ with A = Uᵀ·U. Only the lower triangle of
// a is read. It runs on the host in float64 and is differentiable. It
// panics with [ErrArgument] when a matrix is not positive-definite, naming
// the order of the leading minor that is not, with [ErrShape] for
// non-square or fewer than two dimensions and with [ErrDType] for dtypes
// other than float32 and float64.
func Cholesky(a *Tensor, upper bool) *Tensor {
	const op = "linalg.cholesky"
	notNil(op, a)
	defer pin(op, a).unpin()
	if upper {
		return composed(op, func() *Tensor { return Cholesky(a, false).MT().Contiguous() })
	}
	h := readMatrices(op, a, true)
	n := h.n
	out := make([]float64, len(h.data))
	for i := range h.loopsFilling(out) {
		src, l := h.at(i), out[i*n*n:(i+1)*n*n]
		for j := range n {
			d := src[j*n+j]
			for k := range j {
				d -= l[j*n+k] * l[j*n+k]
			}
			if !(d > 0) {
				where := ""
				if len(h.batch) > 0 {
					where = " of batch element " + strconv.Itoa(i)
				}
				fail(op, ErrArgument, "the factorization could not be completed because the input is not positive-definite (the leading minor of order %d%s is not positive-definite)", j+1, where)
			}
			d = math.Sqrt(d)
			l[j*n+j] = d
			for r := j + 1; r < n; r++ {
				s := src[r*n+j]
				for k := range j {
					s -= l[r*n+k] * l[j*n+k]
				}
				l[r*n+j] = s / d
			}
		}
	}
	y := fromHost(op, a.ds(), a.dtype, a.shape, out)
	if needsGrad(a) {
		sv := save(y)
		record(op, y, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
			// gA = L⁻ᵀ·Φ(Lᵀ·tril(gL))·L⁻¹, symmetrized, where Φ keeps
			// the lower triangle and halves the diagonal.
			l := sv[0]
			p := l.MT().MatMul(g.Tril(0)).Tril(0)
			p = p.Sub(p.Triu(0).MulScalar(0.5))
			li := Inv(l)
			ga := li.MT().MatMul(p).MatMul(li)
			return []*Tensor{ga.Add(ga.MT()).MulScalar(0.5)}
		})
	}
	return y
}

// QR returns the QR decomposition of each matrix of a (…, m, n)
// (torch.linalg.qr) with Householder reflections, as LAPACK's geqrf: R's
// diagonal may be negative. With k = min(m, n), mode "reduced" gives Q
// (…, m, k) and R (…, k, n), "complete" Q (…, m, m) and R (…, m, n), and
// "r" only R (…, k, n), with q an empty tensor. It runs on the host in
// float64.
//
// Q and R are differentiable in every mode but "complete" with m > n,
// where Q's last m-n columns are not determined by A and QR panics with
// [ErrAutograd] when a requires a gradient (PyTorch raises in backward).
// The gradient is PyTorch's, defined where the leading k×k block of R is
// invertible (A's first k columns independent); backward panics with
// [ErrArgument] when a diagonal element of R is exactly zero and is large
// near one. Unlike PyTorch, mode "r" has R's gradient too, from a Q
// computed alongside.
//
// It panics with [ErrArgument] for another mode, with [ErrShape] for
// fewer than two dimensions and with [ErrDType] for dtypes other than
// float32 and float64.
func QR(a *Tensor, mode string) (q, r *Tensor) {
	const op = "linalg.qr"
	notNil(op, a)
	defer pin(op, a).unpin()
	if mode != "reduced" && mode != "complete" && mode != "r" {
		fail(op, ErrArgument, "mode must be \"reduced\", \"complete\" or \"r\", got %q", mode)
	}
	h := readMatrices(op, a, false)
	m, n := h.m, h.n
	k := min(m, n)
	grad := needsGrad(a)
	if grad && mode == "complete" && m > n {
		fail(op, ErrAutograd, "mode \"complete\" of a %d×%d matrix (more rows than columns) has no gradient: the last %d columns of Q are not determined by A; use mode \"reduced\", or call it on a.Detach()", m, n, m-n)
	}
	qc, rr := k, k // Q's columns, R's rows
	if mode == "complete" {
		qc, rr = m, m
	}
	rs := append(slices.Clone(h.batch), rr, n)
	outs := hostOutputs(op, a.ds(), a.dtype, rs, append(slices.Clone(h.batch), m, qc))
	defer releaseAllOnPanic(outs)
	qv := make([]float64, h.loops()*m*qc)
	rv := make([]float64, h.loops()*rr*n)
	for i := range h.loopsFilling(qv, rv) {
		if m == 0 || n == 0 {
			for j := range min(m, qc) {
				qv[i*m*qc+j*qc+j] = 1
			}
			continue
		}
		qi, ri := householderQR(slices.Clone(h.at(i)), m, n, qc)
		copy(qv[i*m*qc:], qi)
		for r := range min(rr, m) {
			for c := r; c < n; c++ {
				rv[i*rr*n+r*n+c] = ri[r*n+c]
			}
		}
	}
	r = writeHost(op, outs[0], rv)
	if mode == "r" && !grad {
		outs[1].Release()
		return newTensor(op, a.ds(), a.dtype, []int{0}), r
	}
	q = writeHost(op, outs[1], qv)
	if grad {
		// Here Q is m×k and R k×n: the reduced factors, which "complete"
		// gives too when m <= n.
		sq := save(q, r)
		record(op, q, []*Tensor{a}, sq, func(g *Tensor) []*Tensor {
			defer asOp(op)
			return []*Tensor{qrBackward(sq[0], sq[1], g, nil)}
		})
		sr := save(q, r)
		record(op, r, []*Tensor{a}, sr, func(g *Tensor) []*Tensor {
			defer asOp(op)
			return []*Tensor{qrBackward(sr[0], sr[1], nil, g)}
		})
	}
	if mode == "r" {
		q.Release()
		return newTensor(op, a.ds(), a.dtype, []int{0}), r
	}
	return q, r
}

// qrBackward returns the gradient of A = Q·R (Q m×k with orthonormal
// columns, R k×n upper triangular, k = min(m, n)) from those of Q and R
// (nil for none). For m >= n it is (gQ + Q·copyltu(M))·R⁻ᵀ with M =
// R·gRᵀ - gQᵀ·Q, where copyltu(M) is the symmetric matrix with M's lower
// triangle. For m < n, A = [X | Y] and R = [U | V] with U square: Y's is
// Q·gV, and X's the square case's for U, with gQ + Y·gVᵀ for gQ.
func qrBackward(q, r, gQ, gR *Tensor) *Tensor {
	m, k, n := q.shape[len(q.shape)-2], q.shape[len(q.shape)-1], r.shape[len(r.shape)-1]
	if k == 0 {
		return q.NewZeros(append(slices.Clone(q.shape[:len(q.shape)-2]), m, n), q.dtype)
	}
	u := r
	var gU, gV *Tensor
	if gR != nil {
		gU = gR
	}
	if n > k {
		u = r.Narrow(-1, 0, k)
		if gR != nil {
			gU, gV = gR.Narrow(-1, 0, k), gR.Narrow(-1, k, n-k)
			y := q.MatMul(r.Narrow(-1, k, n-k))
			if gQ == nil {
				gQ = y.MatMul(gV.MT())
			} else {
				gQ = gQ.Add(y.MatMul(gV.MT()))
			}
		}
	}
	// M = U·gUᵀ - gQᵀ·Q, its terms as given.
	var mm *Tensor
	if gU != nil {
		mm = u.MatMul(gU.MT())
	}
	if gQ != nil {
		t := gQ.MT().MatMul(q)
		if mm == nil {
			mm = t.Neg()
		} else {
			mm = mm.Sub(t)
		}
	}
	b := q.MatMul(mm.Tril(0).Add(mm.Tril(-1).MT()))
	if gQ != nil {
		b = b.Add(gQ)
	}
	gX := Solve(u.MT(), b, false) // b·U⁻ᵀ
	if n == k {
		return gX
	}
	if gV == nil {
		return Cat([]*Tensor{gX, q.NewZeros(append(slices.Clone(q.shape[:len(q.shape)-2]), m, n-k), q.dtype)}, -1)
	}
	return Cat([]*Tensor{gX, q.MatMul(gV)}, -1)
}

// householderQR factors the m×n row-major a (overwritten) with
// Householder reflections as LAPACK's geqrf and orgqr do: each reflection
// maps its column onto -sign(a_jj)·‖column‖·e_j (none when the column below
// the diagonal is already zero). It returns the first qc columns of Q
// (m×qc, row-major) and a, which then holds R in its upper triangle.
func householderQR(a []float64, m, n, qc int) (q, r []float64) {
	k := min(m, n)
	vs := make([][]float64, k)
	taus := make([]float64, k)
	for j := range k {
		alpha := a[j*n+j]
		var xn float64
		for i := j + 1; i < m; i++ {
			xn = math.Hypot(xn, a[i*n+j])
		}
		v := make([]float64, m-j)
		v[0] = 1
		vs[j] = v
		if xn == 0 {
			continue // tau = 0: H is the identity
		}
		beta := -math.Copysign(math.Hypot(alpha, xn), alpha)
		taus[j] = (beta - alpha) / beta
		for i := j + 1; i < m; i++ {
			v[i-j] = a[i*n+j] / (alpha - beta)
			a[i*n+j] = 0
		}
		a[j*n+j] = beta
		applyReflection(a, n, j, j+1, n, v, taus[j])
	}
	q = make([]float64, m*qc)
	for i := range min(m, qc) {
		q[i*qc+i] = 1
	}
	for j := k - 1; j >= 0; j-- {
		applyReflection(q, qc, j, 0, qc, vs[j], taus[j])
	}
	return q, a
}

// applyReflection applies I - tau·v·vᵀ to rows r0.. of columns c0..c1 of
// the row-major matrix a with stride ld.
func applyReflection(a []float64, ld, r0, c0, c1 int, v []float64, tau float64) {
	if tau == 0 {
		return
	}
	for c := c0; c < c1; c++ {
		var d float64
		for i, vi := range v {
			d += vi * a[(r0+i)*ld+c]
		}
		d *= tau
		for i, vi := range v {
			a[(r0+i)*ld+c] -= d * vi
		}
	}
}

// Eigh returns the eigenvalues, in ascending order, and the orthonormal
// eigenvectors (the columns of v) of each symmetric matrix of a
// (torch.linalg.eigh), so that A = V·diag(w)·Vᵀ. uplo "L" reads the lower
// triangle of a, "U" the upper one. Each eigenvector's sign is arbitrary,
// as in LAPACK. It runs on the host in float64 and is differentiable with
// PyTorch's gradient (infinite for repeated eigenvalues when v is used).
// It panics with [ErrArgument] for another uplo or non-finite values, with [ErrShape] for
// non-square or fewer than two dimensions and with [ErrDType] for dtypes
// other than float32 and float64.
func Eigh(a *Tensor, uplo string) (w, v *Tensor) {
	const op = "linalg.eigh"
	notNil(op, a)
	defer pin(op, a).unpin()
	if uplo != "L" && uplo != "U" {
		fail(op, ErrArgument, "uplo must be \"L\" or \"U\", got %q", uplo)
	}
	h := readMatrices(op, a, true)
	n := h.n
	wv := make([]float64, h.count()*n)
	vv := make([]float64, len(h.data))
	for i := range h.loopsFilling(wv, vv) {
		src := h.at(i)
		if n == 0 {
			continue
		}
		sym := mat.NewSymDense(n, nil)
		for r := range n {
			for c := r; c < n; c++ {
				x := src[c*n+r] // lower
				if uplo == "U" {
					x = src[r*n+c]
				}
				sym.SetSym(r, c, x)
			}
		}
		for _, x := range sym.RawSymmetric().Data {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				fail(op, ErrArgument, "the algorithm failed to converge because the input matrix contained non-finite values")
			}
		}
		var e mat.EigenSym
		if !e.Factorize(sym, true) {
			fail(op, ErrArgument, "the algorithm failed to converge")
		}
		vals := e.Values(nil)
		var vecs mat.Dense
		e.VectorsTo(&vecs)
		order := make([]int, n)
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(x, y int) bool { return vals[order[x]] < vals[order[y]] })
		for j, o := range order {
			wv[i*n+j] = vals[o]
			for r := range n {
				vv[i*n*n+r*n+j] = vecs.At(r, o)
			}
		}
	}
	w, v = fromHost(op, a.ds(), a.dtype, append(slices.Clone(h.batch), n), wv), fromHost(op, a.ds(), a.dtype, a.shape, vv)
	if needsGrad(a) {
		recordEigh(op, a, w, v)
	}
	return w, v
}

// recordEigh records the gradients of Eigh's outputs, PyTorch's: w's is
// V·diag(g)·Vᵀ, and v's V·(skew(Vᵀ·g) / E)·Vᵀ with E_ij = w_j - w_i off
// the diagonal (so repeated eigenvalues give infinities, as in PyTorch)
// and skew(X) = (X - Xᵀ)/2. Both are symmetric, the gradient of a function
// of the symmetric matrix, whichever triangle uplo read.
func recordEigh(op string, a, w, v *Tensor) {
	sw := save(v)
	record(op, w, []*Tensor{a}, sw, func(g *Tensor) []*Tensor {
		vv := sw[0]
		return []*Tensor{vv.Mul(g.Unsqueeze(-2)).MatMul(vv.MT())}
	})
	sv := save(w, v)
	record(op, v, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
		ww, vv := sv[0], sv[1]
		x := vv.MT().MatMul(g)
		x = x.Sub(x.MT()).MulScalar(0.5)
		e := ww.Unsqueeze(-2).Sub(ww.Unsqueeze(-1)) // w_j - w_i
		n := ww.Shape()[len(ww.Shape())-1]
		eye := eyeOf(ww, n)
		off := Where(eye.GtScalar(0), x.NewZeros(nil), x.Div(e.Add(eye)))
		return []*Tensor{vv.MatMul(off).MatMul(vv.MT())}
	})
}

// svdHost returns the singular values (descending) of every matrix of h
// and, when vectors is set, U and Vᵀ: full (m×m and n×n) when full is set,
// else thin (m×k and k×n, k = min(m, n)).
func svdHost(op string, h matrices, vectors, full bool) (u, s, vt []float64, uc, vr int) {
	requireFinite(op, h)
	m, n := h.m, h.n
	k := min(m, n)
	uc, vr = k, k
	if full {
		uc, vr = m, n
	}
	s = make([]float64, h.loops()*k)
	if vectors {
		u = make([]float64, h.loops()*m*uc)
		vt = make([]float64, h.loops()*vr*n)
	}
	// Values alone come from the thin factorization too: LAPACK's
	// value-only path rounds differently, and Svdvals should agree with
	// SVD's S exactly, as PyTorch's do.
	kind := mat.SVDThin
	if full {
		kind = mat.SVDFull
	}
	for i := range h.loopsFilling(s, u, vt) {
		if k == 0 {
			if vectors {
				for j := range min(m, uc) {
					u[i*m*uc+j*uc+j] = 1
				}
				for j := range min(vr, n) {
					vt[i*vr*n+j*n+j] = 1
				}
			}
			continue
		}
		var f mat.SVD
		if !f.Factorize(mat.NewDense(m, n, slices.Clone(h.at(i))), kind) {
			fail(op, ErrArgument, "the algorithm failed to converge")
		}
		f.Values(s[i*k : (i+1)*k])
		if !vectors {
			continue
		}
		var um, vm mat.Dense
		f.UTo(&um)
		f.VTo(&vm)
		for r := range m {
			for c := range uc {
				u[i*m*uc+r*uc+c] = um.At(r, c)
			}
		}
		for r := range vr {
			for c := range n {
				vt[i*vr*n+r*n+c] = vm.At(c, r)
			}
		}
	}
	return u, s, vt, uc, vr
}

// SVD returns the singular value decomposition A = U·diag(S)·Vh of each
// matrix of a (…, m, n) (torch.linalg.svd): S (…, k) descending, k =
// min(m, n); U (…, m, m) and Vh (…, n, n) when fullMatrices is set, else
// U (…, m, k) and Vh (…, k, n). Singular vectors are unique only up to
// sign (and, for repeated singular values, rotation). It runs on the host
// in float64.
//
// U, S and Vh are differentiable, with PyTorch's gradient. S's alone is
// always defined (see [Svdvals]). U's and Vh's are meaningful only for a
// loss that does not depend on the singular vectors' signs (such as one of
// U·diag(S)·Vh, |U| or U's columns times Vh's rows) and are defined only
// when the singular values are distinct, and, for m ≠ n, nonzero: as in
// PyTorch, backward then gives infinities or NaN rather than failing. When
// fullMatrices is set, the gradients of U's last m-k columns and Vh's last
// n-k rows are ignored, as in PyTorch: those span any basis of the
// complement.
//
// It panics with [ErrArgument] for non-finite values, with [ErrShape] for
// fewer than two dimensions and with [ErrDType] for dtypes other than
// float32 and float64.
func SVD(a *Tensor, fullMatrices bool) (u, s, vh *Tensor) {
	const op = "linalg.svd"
	notNil(op, a)
	defer pin(op, a).unpin()
	h := readMatrices(op, a, false)
	b, k := h.batch, min(h.m, h.n)
	uc, vr := k, k
	if fullMatrices {
		uc, vr = h.m, h.n
	}
	outs := hostOutputs(op, a.ds(), a.dtype, append(slices.Clone(b), h.m, uc), append(slices.Clone(b), k), append(slices.Clone(b), vr, h.n))
	defer releaseAllOnPanic(outs)
	uv, sv, vv, _, _ := svdHost(op, h, true, fullMatrices)
	u, s, vh = writeHost(op, outs[0], uv), writeHost(op, outs[1], sv), writeHost(op, outs[2], vv)
	if needsGrad(a) {
		recordSVD(op, a, u, s, vh, k)
	}
	return u, s, vh
}

// recordSVD records the gradients of SVD's outputs: each is svdBackward's
// with the other two outputs' gradients zero, the thin factors saved.
func recordSVD(op string, a, u, s, vh *Tensor, k int) {
	ut, vt := u, vh
	if u.shape[len(u.shape)-1] != k {
		ut = u.Narrow(-1, 0, k).Contiguous()
		defer ut.Release()
	}
	if vh.shape[len(vh.shape)-2] != k {
		vt = vh.Narrow(-2, 0, k).Contiguous()
		defer vt.Release()
	}
	su := save(ut, s, vt)
	record(op, u, []*Tensor{a}, su, func(g *Tensor) []*Tensor {
		defer asOp(op)
		return []*Tensor{svdBackward(su[0], su[1], su[2], g.Narrow(-1, 0, k), nil, nil)}
	})
	ss := save(ut, s, vt)
	record(op, s, []*Tensor{a}, ss, func(g *Tensor) []*Tensor {
		defer asOp(op)
		return []*Tensor{svdBackward(ss[0], ss[1], ss[2], nil, g, nil)}
	})
	sv := save(ut, s, vt)
	record(op, vh, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
		defer asOp(op)
		return []*Tensor{svdBackward(sv[0], sv[1], sv[2], nil, nil, g.Narrow(-2, 0, k))}
	})
}

// svdBackward returns the gradient of A = U·diag(S)·Vh (U m×k, Vh k×n,
// k = min(m, n)) from those of U, S and Vh (nil for none), as PyTorch's
// svd_backward: U·(J + diag(gS))·Vh with J = (skew(Uᵀ·gU)·diag(S) +
// diag(S)·skew(Vh·gVhᵀ)) / E, E_ij = S_j² - S_i² off the diagonal and
// skew(X) = X - Xᵀ, plus (I - U·Uᵀ)·gU·diag(S)⁻¹·Vh for m > n and
// U·diag(S)⁻¹·gVh·(I - Vhᵀ·Vh) for m < n.
func svdBackward(u, s, vh, gU, gS, gVh *Tensor) *Tensor {
	m, k, n := u.shape[len(u.shape)-2], s.shape[len(s.shape)-1], vh.shape[len(vh.shape)-1]
	if k == 0 {
		return u.NewZeros(append(slices.Clone(u.shape[:len(u.shape)-2]), m, n), u.dtype)
	}
	if gU == nil && gVh == nil {
		return u.Mul(gS.Unsqueeze(-2)).MatMul(vh)
	}
	var j *Tensor
	if gU != nil {
		x := u.MT().MatMul(gU)
		j = x.Sub(x.MT()).Mul(s.Unsqueeze(-2))
	}
	if gVh != nil {
		x := vh.MatMul(gVh.MT())
		t := s.Unsqueeze(-1).Mul(x.Sub(x.MT()))
		if j == nil {
			j = t
		} else {
			j = j.Add(t)
		}
	}
	s2 := s.Square()
	eye := eyeOf(s, k)
	j = j.Div(s2.Unsqueeze(-2).Sub(s2.Unsqueeze(-1)).Add(eye))
	if gS != nil {
		j = j.Add(DiagEmbed(gS, 0))
	}
	switch {
	case m > n && gU != nil:
		// (I - U·Uᵀ)·gU·diag(S)⁻¹, then ·Vh.
		p := gU.Sub(u.MatMul(u.MT().MatMul(gU))).Div(s.Unsqueeze(-2))
		return u.MatMul(j).Add(p).MatMul(vh)
	case m < n && gVh != nil:
		p := gVh.Sub(gVh.MatMul(vh.MT()).MatMul(vh)).Div(s.Unsqueeze(-1))
		return u.MatMul(j.MatMul(vh).Add(p))
	}
	return u.MatMul(j).MatMul(vh)
}

// Svdvals returns the singular values of each matrix of a (…, m, n), a
// (…, min(m, n)) tensor in descending order (torch.linalg.svdvals). It runs
// on the host in float64 and is differentiable, with gradient
// U·diag(g)·Vh (so [MatrixNorm]'s "nuc", "2" and "-2" are too); its
// panics are those of [SVD].
func Svdvals(a *Tensor) *Tensor {
	const op = "linalg.svdvals"
	notNil(op, a)
	defer pin(op, a).unpin()
	h := readMatrices(op, a, false)
	grad := needsGrad(a)
	uv, sv, vv, _, _ := svdHost(op, h, grad, false)
	k := min(h.m, h.n)
	s := fromHost(op, a.ds(), a.dtype, append(slices.Clone(h.batch), k), sv)
	if grad {
		u := fromHost(op, a.ds(), a.dtype, append(slices.Clone(h.batch), h.m, k), uv)
		vh := fromHost(op, a.ds(), a.dtype, append(slices.Clone(h.batch), k, h.n), vv)
		sd := save(u, vh)
		u.Release()
		vh.Release()
		record(op, s, []*Tensor{a}, sd, func(g *Tensor) []*Tensor {
			return []*Tensor{sd[0].Mul(g.Unsqueeze(-2)).MatMul(sd[1])}
		})
	}
	return s
}

// defaultRtol returns torch.linalg's default relative tolerance for
// singular values of an m×n matrix of dtype dt: eps(dt)·max(m, n).
func defaultRtol(dt DType, m, n int) float64 {
	eps := 0x1p-52
	if dt == Float32 {
		eps = 0x1p-23
	}
	return eps * float64(max(m, n))
}

// Pinv returns the Moore–Penrose pseudo-inverse (…, n, m) of each matrix of
// a (…, m, n) (torch.linalg.pinv), from its SVD: singular values at or
// below eps·max(m, n) times the largest are taken as zero. It runs on the
// host in float64. It is differentiable, with the derivative of the
// pseudo-inverse (Golub and Pereyra's, which PyTorch uses):
// -A⁺ᵀ·G·A⁺ᵀ + (I - A·A⁺)·Gᵀ·A⁺·A⁺ᵀ + A⁺ᵀ·A⁺·Gᵀ·(I - A⁺·A) for the
// result's gradient G, composed of device products. It holds where A's
// rank does not change nearby (all full-rank A among them), repeated
// singular values included; at a rank-deficient A it is the gradient
// along perturbations that keep the rank, as in PyTorch. Its panics are
// those of [SVD].
func Pinv(a *Tensor) *Tensor {
	const op = "linalg.pinv"
	notNil(op, a)
	defer pin(op, a).unpin()
	h := readMatrices(op, a, false)
	m, n := h.m, h.n
	outs := hostOutputs(op, a.ds(), a.dtype, append(slices.Clone(h.batch), n, m))
	defer releaseAllOnPanic(outs)
	k := min(m, n)
	out := make([]float64, h.loops()*n*m)
	var u, s, vt []float64
	loops := 0 // the pseudo-inverse of a matrix without rows or columns is empty
	if k > 0 {
		u, s, vt, _, _ = svdHost(op, h, true, false)
		loops = h.loops()
	}
	rtol := defaultRtol(a.dtype, m, n)
	for i := range loops {
		si := s[i*k : (i+1)*k]
		ui, vi := u[i*m*k:(i+1)*m*k], vt[i*k*n:(i+1)*k*n]
		o := out[i*n*m : (i+1)*n*m]
		for j := range k {
			if !(si[j] > rtol*si[0]) {
				break
			}
			inv := 1 / si[j]
			for r := range n {
				f := vi[j*n+r] * inv
				for c := range m {
					o[r*m+c] += f * ui[c*k+j]
				}
			}
		}
	}
	y := writeHost(op, outs[0], out)
	if needsGrad(a) {
		sv := save(a, y)
		record(op, y, []*Tensor{a}, sv, func(g *Tensor) []*Tensor {
			defer asOp(op)
			return []*Tensor{pinvBackward(sv[0], sv[1], g)}
		})
	}
	return y
}

// pinvBackward returns the gradient of A (…, m, n) from that of its
// pseudo-inverse P (…, n, m): -Pᵀ·G·Pᵀ + (Gᵀ - A·(P·Gᵀ))·(P·Pᵀ) +
// (Pᵀ·P)·(Gᵀ - (Gᵀ·P)·A).
func pinvBackward(a, p, g *Tensor) *Tensor {
	pt, gt := p.MT(), g.MT()
	t1 := pt.MatMul(g).MatMul(pt)
	t2 := gt.Sub(a.MatMul(p.MatMul(gt))).MatMul(p.MatMul(pt))
	t3 := pt.MatMul(p).MatMul(gt.Sub(gt.MatMul(p).MatMul(a)))
	return t2.Add(t3).Sub(t1)
}

// MatrixRank returns the rank of each matrix of a (…, m, n), an int64
// tensor of shape (…) (torch.linalg.matrix_rank): the number of singular
// values above eps·max(m, n) times the largest. It runs on the host in
// float64; its integer result has no gradient, whether or not a requires
// one. Its panics are those of [SVD].
func MatrixRank(a *Tensor) *Tensor {
	const op = "linalg.matrix_rank"
	notNil(op, a)
	defer pin(op, a).unpin()
	h := readMatrices(op, a, false)
	outs := hostOutputs(op, a.ds(), Int64, h.batch)
	defer releaseAllOnPanic(outs)
	_, s, _, _, _ := svdHost(op, h, false, false)
	k := min(h.m, h.n)
	rtol := defaultRtol(a.dtype, h.m, h.n)
	out := make([]float64, h.loops())
	for i := range h.loops() {
		si := s[i*k : (i+1)*k]
		for _, v := range si {
			if v > rtol*si[0] {
				out[i]++
			}
		}
	}
	return writeHost(op, outs[0], out)
}

// MatrixNorm returns a matrix norm of each matrix of a (…, m, n) over its
// last two dimensions (torch.linalg.matrix_norm). ord is "fro" (Frobenius),
// "nuc" (the sum of the singular values), "inf" and "-inf" (the largest and
// smallest absolute row sum), "1" and "-1" (the same for columns), and "2"
// and "-2" (the largest and smallest singular value). "fro", "inf", "-inf",
// "1" and "-1" run on the device; "nuc", "2" and "-2" take the singular
// values on the host ([Svdvals]). All are differentiable. An empty batch gives an empty result, and "fro" and "nuc" of
// an m×0 or 0×n matrix are 0, as are "inf" and "-inf" of an m×0 one and
// "1" and "-1" of a 0×n one. It panics with [ErrArgument] for another ord,
// with [ErrShape] for fewer than two dimensions and for the orders left
// without anything to pick ("inf" of a 0×n matrix, "1" of an m×0 one, "2"
// of either), as PyTorch raises, and with [ErrDType] for non-float dtypes.
// [MatrixNormDim] takes the matrices over other dimensions.
func MatrixNorm(a *Tensor, ord string, keepDim bool) *Tensor {
	return MatrixNormDim(a, ord, [2]int{-2, -1}, keepDim)
}

// MatrixNormDim is [MatrixNorm] over the matrices whose rows run along
// dim[0] and columns along dim[1] (torch.linalg.matrix_norm's dim), each
// of which may be negative, counting from the end: dim {0, 1} of a
// (m, n, …) tensor takes a[:, :, i…] as the matrices, and {-1, -2} the
// transposes of MatrixNorm's. Under keepDim both dimensions stay, of size
// 1, where they were. It panics as MatrixNorm does, and with [ErrIndex]
// for a dim out of range and [ErrArgument] for two equal dims.
func MatrixNormDim(a *Tensor, ord string, dim [2]int, keepDim bool) *Tensor {
	const op = "linalg.matrix_norm"
	notNil(op, a)
	defer pin(op, a).unpin()
	if len(a.shape) < 2 {
		fail(op, ErrShape, "the input must have at least 2 dimensions, got shape %v", Shape(a.shape))
	}
	r := len(a.shape)
	d0, d1 := a.axis(op, dim[0]), a.axis(op, dim[1])
	if d0 == d1 {
		fail(op, ErrArgument, "dims must be different, got (%d, %d) for shape %v", dim[0], dim[1], Shape(a.shape))
	}
	floatOnly(op, a)
	// The max and min orders take the largest or smallest of the row
	// sums ("inf"), column sums ("1") or singular values ("2"); as in
	// PyTorch, they are defined unless there are none of those to choose
	// from. The other sizes may be 0: a [2, 0] matrix has the "inf" norm 0.
	m, n := a.shape[d0], a.shape[d1]
	picked := map[string]int{"inf": m, "-inf": m, "1": n, "-1": n, "2": min(m, n), "-2": min(m, n)}
	if c, ok := picked[ord]; ok && c == 0 {
		fail(op, ErrShape, "the norm %q of a %d×%d matrix is not defined: it picks the extreme of none (shape %v)", ord, m, n, Shape(a.shape))
	}
	return composed(op, func() *Tensor {
		x := a
		if d0 != r-2 || d1 != r-1 {
			perm := make([]int, 0, r)
			for i := range r {
				if i != d0 && i != d1 {
					perm = append(perm, i)
				}
			}
			x = a.Permute(append(perm, d0, d1)...)
		}
		y := matrixNorm(op, x, ord)
		if keepDim {
			y = y.Unsqueeze(min(d0, d1)).Unsqueeze(max(d0, d1))
		}
		return y
	})
}

// matrixNorm returns the ord-norm of each matrix of x over its last two
// dimensions, which are removed.
func matrixNorm(op string, x *Tensor, ord string) *Tensor {
	r := len(x.shape)
	switch ord {
	case "fro":
		return x.Norm(2, []int{r - 2, r - 1}, false)
	case "inf":
		return x.Abs().Sum(-1).Max(-1)
	case "-inf":
		return x.Abs().Sum(-1).Min(-1)
	case "1":
		return x.Abs().Sum(-2).Max(-1)
	case "-1":
		return x.Abs().Sum(-2).Min(-1)
	case "nuc":
		return Svdvals(x).Sum(-1)
	case "2":
		return Svdvals(x).Max(-1)
	case "-2":
		return Svdvals(x).Min(-1)
	}
	fail(op, ErrArgument, "ord must be one of \"fro\", \"nuc\", \"inf\", \"-inf\", \"1\", \"-1\", \"2\" or \"-2\", got %q", ord)
	return nil
}

// VectorNorm returns the ord-norm of x over dims (all when empty), as
// torch.linalg.vector_norm; it is [Tensor.Norm] under torch.linalg's name,
// runs on the device and is differentiable. For PyTorch's dtype argument,
// Cast x first. Its panics are those of [Tensor.Norm].
func VectorNorm(x *Tensor, ord float64, dims []int, keepDim bool) *Tensor {
	notNil("linalg.vector_norm", x)
	defer asOp("linalg.vector_norm")
	return x.Norm(ord, dims, keepDim)
}

// MatrixPower returns a raised to the integer power k for each square
// matrix of a (torch.linalg.matrix_power): the identity for k = 0, repeated
// products on the device for k > 0, and powers of [Inv](a) for k < 0. It is
// differentiable. Its products are [Tensor.MatMul]'s, so under [Autocast]
// they run in the autocast dtype. It panics as [Inv] does for a singular matrix with a
// negative k, with [ErrShape] for non-square or fewer than two dimensions
// and with [ErrDType] for dtypes other than float32 and float64.
func MatrixPower(a *Tensor, k int) *Tensor {
	const op = "linalg.matrix_power"
	notNil(op, a)
	defer pin(op, a).unpin()
	if len(a.shape) < 2 || a.shape[len(a.shape)-1] != a.shape[len(a.shape)-2] {
		fail(op, ErrShape, "A must be batches of square matrices, got shape %v", Shape(a.shape))
	}
	if a.dtype != Float32 && a.dtype != Float64 {
		fail(op, ErrDType, "expected a float32 or float64 tensor, got %s; Cast it first", a.dtype)
	}
	return composed(op, func() *Tensor {
		n := a.shape[len(a.shape)-1]
		if k == 0 {
			// Identities of a's shape, written on the device: an empty
			// batch stays empty however large its matrices' side.
			eye := a.NewZeros(a.shape)
			if n > 0 {
				d := eye.Diagonal(0, -2, -1)
				d.fill(op, 1)
				d.Release()
			}
			return eye
		}
		base := a
		e := uint(k) // |k|, math.MinInt included
		if k < 0 {
			base = Inv(a)
			e = uint(-(k + 1)) + 1
		}
		var acc *Tensor
		for ; e > 0; e >>= 1 {
			if e&1 == 1 {
				if acc == nil {
					acc = base
				} else {
					acc = acc.MatMul(base)
				}
			}
			if e > 1 {
				base = base.MatMul(base)
			}
		}
		if acc == a {
			return a.Clone()
		}
		return acc
	})
}

// Trace returns the sum of the main diagonal of the 2-D tensor a, a 0-D
// tensor (torch.trace). It runs on the device and is differentiable. It
// panics with [ErrShape] unless a has two dimensions.
func Trace(a *Tensor) *Tensor {
	const op = "trace"
	notNil(op, a)
	defer pin(op, a).unpin()
	if len(a.shape) != 2 {
		fail(op, ErrShape, "expected a matrix, got shape %v", Shape(a.shape))
	}
	return composed(op, func() *Tensor { return a.Diagonal(0, 0, 1).Sum() })
}

// Outer is [Tensor.Outer] as a function (torch.outer(a, b)).
func Outer(a, b *Tensor) *Tensor { return a.Outer(b) }

// Kron returns the Kronecker product of a and b (torch.kron): the one with
// fewer dimensions gets leading dimensions of size 1, and the result has
// size a_i·b_i in each dimension i, with element (i·b_i + j) equal to
// a[i]·b[j]. It runs on the device and is differentiable; the dtypes
// promote.
func Kron(a, b *Tensor) *Tensor {
	const op = "kron"
	notNil(op, a, b)
	defer pin(op, a, b).unpin()
	deviceOf(op, a, b)
	return composed(op, func() *Tensor {
		r := max(len(a.shape), len(b.shape))
		as, bs := padShape(a.shape, r), padShape(b.shape, r)
		ai, bi := make([]int, 0, 2*r), make([]int, 0, 2*r)
		out := make([]int, r)
		for i := range r {
			ai = append(ai, as[i], 1)
			bi = append(bi, 1, bs[i])
			out[i] = as[i] * bs[i]
		}
		return a.Reshape(ai...).Mul(b.Reshape(bi...)).Reshape(out...)
	})
}

// padShape returns shape with leading 1s up to r dimensions.
func padShape(shape []int, r int) []int {
	out := make([]int, r-len(shape), r)
	for i := range out {
		out[i] = 1
	}
	return append(out, shape...)
}

// DiagEmbed returns the (…, n+|offset|, n+|offset|) tensor whose diagonal
// at offset (above the main one when positive, as in [Tensor.Diagonal])
// in its last two dimensions holds the last dimension of a (…, n), zeros
// elsewhere (torch.diag_embed with dim1 = -2, dim2 = -1). It runs on the
// device and is differentiable. It panics with [ErrShape] for a 0-D a or
// an offset whose matrix side would overflow an int.
func DiagEmbed(a *Tensor, offset int) *Tensor {
	const op = "diag_embed"
	notNil(op, a)
	defer pin(op, a).unpin()
	if len(a.shape) == 0 {
		fail(op, ErrShape, "the input must have at least 1 dimension, got a scalar")
	}
	n := a.shape[len(a.shape)-1]
	if offset > math.MaxInt-n || offset < -(math.MaxInt-n) {
		fail(op, ErrShape, "offset %d leaves no room for %d diagonal elements in an int-sized matrix", offset, n)
	}
	return composed(op, func() *Tensor {
		s := n + abs(offset)
		full := append(slices.Clone(a.shape[:len(a.shape)-1]), s, s)
		z := a.NewZeros(full, a.dtype)
		// a on the diagonal of an n×n block, framed by zeros to shift it
		// to the offset.
		// (…, n, n), a on the main diagonal; an empty a has nothing to
		// place, and no n×n identity is made for it.
		var d *Tensor
		if a.NumElements() == 0 {
			d = a.Unsqueeze(-1).Expand(append(slices.Clone(a.shape), n)...)
		} else {
			d = a.Unsqueeze(-1).Mul(eyeOf(a, n))
		}
		r0, c0 := 0, 0
		if offset > 0 {
			c0 = offset
		} else {
			r0 = -offset
		}
		parts := []*Tensor{}
		if r0 > 0 {
			parts = append(parts, z.Narrow(-2, 0, r0).Narrow(-1, 0, n))
		}
		parts = append(parts, d)
		if s-r0-n > 0 {
			parts = append(parts, z.Narrow(-2, 0, s-r0-n).Narrow(-1, 0, n))
		}
		col := Cat(parts, -2) // (…, s, n)
		cols := []*Tensor{}
		if c0 > 0 {
			cols = append(cols, z.Narrow(-1, 0, c0))
		}
		cols = append(cols, col)
		if s-c0-n > 0 {
			cols = append(cols, z.Narrow(-1, 0, s-c0-n))
		}
		return Cat(cols, -1)
	})
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Diag returns, for a 1-D a, the square matrix with a on its diagonal at
// offset (as [DiagEmbed]), and for a 2-D a, a copy of its diagonal at
// offset (torch.diag). It runs on the device and is differentiable. It
// panics with [ErrShape] for other ranks.
func Diag(a *Tensor, offset int) *Tensor {
	const op = "diag"
	notNil(op, a)
	defer pin(op, a).unpin()
	switch len(a.shape) {
	case 1:
		defer asOp(op)
		return DiagEmbed(a, offset)
	case 2:
		return composed(op, func() *Tensor { return a.Diagonal(offset, 0, 1).Contiguous() })
	}
	fail(op, ErrShape, "expected a 1-D or 2-D tensor, got shape %v", Shape(a.shape))
	return nil
}

// Lstsq returns the least-squares solution X of A·X ≈ B, the one of least
// norm when A is rank-deficient (the solution tensor of
// torch.linalg.lstsq; singular values at or below eps·max(m, n) times the
// largest count as zero, as the default gelsy driver's rcond). a is
// (…, m, n); b is (…, m, k), or a batch of vectors (…, m) when it is 1-D or
// has one dimension fewer than a and a's leading sizes; the batch dimensions broadcast, and X is
// (…, n, k) or (…, n). It runs on the host in float64. It is
// differentiable in both operands, as PyTorch's: X is [Pinv](a)·b, and the
// gradient flows through that product and Pinv's gradient, so it holds
// where A's rank does not change nearby (see [Pinv]), rank-deficient and
// wide A included; normal equations or a QR solve would square the
// condition number or need full column rank. It panics with [ErrShape] for
// shapes that do not fit and with [ErrDType] for dtypes other than float32
// and float64 or operands of different dtypes. Under [Autocast] it still
// computes in a's dtype.
func Lstsq(a, b *Tensor) *Tensor {
	const op = "linalg.lstsq"
	notNil(op, a, b)
	defer pin(op, a, b).unpin()
	deviceOf(op, a, b)
	if a.dtype != b.dtype {
		fail(op, ErrDType, "A is %s but B is %s; Cast one of them", a.dtype, b.dtype)
	}
	if len(a.shape) < 2 || len(b.shape) < 1 {
		fail(op, ErrShape, "expected A (…, m, n) and B (…, m, k) or (…, m), got %v and %v", Shape(a.shape), Shape(b.shape))
	}
	ra := len(a.shape)
	vector := len(b.shape) == 1 || len(b.shape) == ra-1 && slices.Equal(b.shape, a.shape[:ra-1])
	rows := b.shape[len(b.shape)-1]
	if !vector {
		rows = b.shape[len(b.shape)-2]
	}
	if rows != a.shape[ra-2] {
		fail(op, ErrShape, "A %v has %d rows but B %v has %d", Shape(a.shape), a.shape[ra-2], Shape(b.shape), rows)
	}
	return composed(op, func() (x *Tensor) {
		// One solver in a's dtype, as PyTorch's: Autocast does not lower
		// the product with the pseudo-inverse.
		withoutAutocast(func() {
			p := Pinv(a)
			if vector {
				x = p.MatMul(b.Unsqueeze(-1)).Squeeze(-1)
				return
			}
			x = p.MatMul(b)
		})
		return x
	})
}
