package cuda

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cublas"
	"github.com/vramgo/vram/native/cuda"
)

// GEMMs go through cuBLASLt, which is column-major: a row-major product
// D = A·B is computed as the column-major D^T = B^T·A^T, reading each
// operand in place with a transpose flag when one of its strides is 1 and
// copying it to a contiguous buffer otherwise. Plans (descriptors, layouts
// and the algorithm the heuristic picked) are cached per shape, strides,
// alignment and dtype.

// workspaceBytes is the cuBLASLt workspace of each device (PyTorch gives
// cuBLASLt 32 MiB on Hopper).
const workspaceBytes = 32 << 20

// WorkspaceRegion is the region label of the cuBLASLt workspace, which the
// first matrix product on a device allocates through its caching allocator
// and keeps for good: summaries, snapshots and out-of-memory errors show it
// under this name.
const WorkspaceRegion = "cublaslt workspace"

// maxPlans bounds the plan cache; it is emptied when full.
const maxPlans = 4096

var allowTF32 atomic.Bool

// SetAllowTF32 lets float32 matrix products use TF32 tensor cores
// (CUBLAS_COMPUTE_32F_FAST_TF32): about 8 times faster, with 10-bit
// mantissas in the products. It is off by default, as PyTorch's
// torch.backends.cuda.matmul.allow_tf32; the setting is process-wide and
// applies to products queued after the call.
func SetAllowTF32(on bool) { allowTF32.Store(on) }

// AllowTF32 reports the setting of [SetAllowTF32].
func AllowTF32() bool { return allowTF32.Load() }

// Preference attributes of cuBLASLt that native/cublas does not name
// (cublasLtMatmulPreferenceAttributes_t): the alignment in bytes that the
// chosen algorithm may assume of each pointer, as uint32.
const (
	prefMinAlignmentA cublas.MatmulPreferenceAttribute = 5 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES
	prefMinAlignmentB cublas.MatmulPreferenceAttribute = 6 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES
	prefMinAlignmentC cublas.MatmulPreferenceAttribute = 7 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES
	prefMinAlignmentD cublas.MatmulPreferenceAttribute = 8 // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES
)

var (
	ltOnce sync.Once
	ltErr  error
)

func loadLt() error {
	ltOnce.Do(func() {
		if _, err := cublas.LoadLt(); err != nil {
			ltErr = missingLibrary("cuBLASLt (libcublasLt)", "nvidia-cublas", err)
		}
	})
	return ltErr
}

// blasState is a device's cuBLASLt handle, workspace and plan cache.
type blasState struct {
	once   sync.Once
	err    error
	handle cublas.LtHandle
	ws     *Buffer

	mu    sync.Mutex
	plans map[planKey]*plan
}

// planKey identifies a product for the plan cache.
type planKey struct {
	dt             backend.DType
	tf32           bool
	transP, transQ bool
	m, n, k        int
	ldP, ldQ, ldD  int
	batch          int
	sP, sQ, sD     int64 // batch strides, elements
	aP, aQ, aD     uint32
	epi            cublas.Epilogue // 0: none
}

// plan is what cublasLtMatmul needs for one planKey.
type plan struct {
	desc       cublas.MatmulDesc
	lP, lQ, lD cublas.MatrixLayout
	algo       cublas.MatmulAlgo
	f64        bool
	// mu guards the descriptor's vector pointer, set before each product
	// of a plan with an epilogue.
	mu sync.Mutex
}

func (d *Device) initBLAS() error {
	b := &d.blas
	b.once.Do(func() {
		if b.err = loadLt(); b.err != nil {
			return
		}
		h, err := cublas.LtCreate()
		if err != nil {
			b.err = fmt.Errorf("cuda: cuda:%d: cublasLtCreate: %w", d.index, err)
			return
		}
		ws, err := d.Alloc(workspaceBytes, nil, WorkspaceRegion)
		if err != nil {
			cublas.LtDestroy(h)
			b.err = fmt.Errorf("cuda: cuda:%d: cuBLASLt workspace: %w", d.index, err)
			return
		}
		b.handle, b.ws, b.plans = h, ws.(*Buffer), map[planKey]*plan{}
	})
	return b.err
}

// colMajor tells how a rows×cols matrix with strides (sr, sc) reads as
// op(X) for a column-major X with leading dimension ld: X itself (trans
// false) or X transposed.
func colMajor(rows, cols, sr, sc int) (trans bool, ld int, ok bool) {
	if sr == 1 || rows == 1 {
		ld := sc
		if cols == 1 {
			ld = max(rows, 1)
		}
		if ld >= max(1, rows) {
			return false, ld, true
		}
	}
	if sc == 1 || cols == 1 {
		ld := sr
		if rows == 1 {
			ld = max(cols, 1)
		}
		if ld >= max(1, cols) {
			return true, ld, true
		}
	}
	return false, 0, false
}

// alignment returns the largest power of two, up to 256, dividing p.
func alignment(p cuda.DevicePtr) uint32 {
	a := uint32(256)
	for a > 1 && uint64(p)%uint64(a) != 0 {
		a >>= 1
	}
	return a
}

func blasType(dt backend.DType) (cublas.DataType, bool) {
	switch dt {
	case backend.Float32:
		return cublas.R32F, true
	case backend.Float64:
		return cublas.R64F, true
	case backend.Float16:
		return cublas.R16F, true
	case backend.BFloat16:
		return cublas.R16BF, true
	}
	return 0, false
}

// MatMul computes dst[b] = a[b] x b[b] for a [B,M,K], b [B,K,N], dst
// [B,M,N] with cuBLASLt, in float32 arithmetic for float16, bfloat16 and
// float32 (TF32 when [SetAllowTF32] allows it) and float64 for float64.
func (dev *Device) MatMul(s backend.Stream, dst, a, b backend.View) error {
	const what = "matmul"
	d, err := dev.begin(s, what, backend.CheckMatMul(dst, a, b))
	if err != nil {
		return err
	}
	if _, ok := blasType(dst.DType); !ok {
		return notImplemented(what, dst.DType)
	}
	bn, m, n, k := dst.Shape[0], dst.Shape[1], dst.Shape[2], a.Shape[2]
	if bn == 0 || m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		return d.Fill(d.st, dst, 0)
	}
	if err := d.run(d.initBLAS); err != nil {
		return err
	}
	return d.run(func() error {
		err := d.matmul(dst, a, b, false)
		var pe *planError
		if errors.As(err, &pe) {
			// No algorithm for these strides or alignments: retry on
			// contiguous copies.
			err = d.matmul(dst, a, b, true)
		}
		return err
	})
}

// planError is a product for which cuBLASLt has no plan.
type planError struct{ err error }

func (e *planError) Error() string { return e.err.Error() }
func (e *planError) Unwrap() error { return e.err }

// gemmSide is one operand of the column-major product, as cuBLASLt sees it.
type gemmSide struct {
	ptr   cuda.DevicePtr
	trans bool
	ld    int
	bst   int64 // batch stride, elements
}

// matmul queues the product; with force, it first copies a and b to
// contiguous buffers and computes into a contiguous one.
func (d *queue) matmul(dst, a, b backend.View, force bool) error {
	bn, m, n, k := dst.Shape[0], dst.Shape[1], dst.Shape[2], a.Shape[2]
	dt := dst.DType
	size := dt.Size()
	// Temporaries come from the pool of the stream the product runs on:
	// freed, they are reused only by that stream's later work (and, under
	// a graph capture, they are the graph's).
	var temps []*Buffer
	defer func() {
		for _, t := range temps {
			d.Free(t, d.st)
		}
	}()
	// contiguous returns a contiguous copy of v.
	contiguous := func(v backend.View) (backend.View, error) {
		buf, err := d.Alloc(int64(v.NumElements()*size), d.st, "")
		if err != nil {
			return v, err
		}
		temps = append(temps, buf.(*Buffer))
		c := backend.View{Buf: buf, DType: dt, Shape: v.Shape, Strides: backend.ContiguousStrides(v.Shape)}
		ops, err := d.ops("matmul", c, v)
		if err != nil {
			return v, err
		}
		return c, d.copyLocked(c, v, ops)
	}

	if force {
		var err error
		if a, err = contiguous(a); err != nil {
			return err
		}
		if b, err = contiguous(b); err != nil {
			return err
		}
	}
	// The output: D^T (the usual, row-major dst) or D (a transposed dst),
	// else a contiguous temporary copied into dst afterwards.
	out := dst
	mp, np := n, m // rows and columns of the column-major product
	tr, ldD, ok := colMajor(n, m, dst.Strides[2], dst.Strides[1])
	swap := false
	if force && !(dst.IsContiguous() && dst.Strides[0] != 0) {
		ok = false
	}
	if !ok || tr {
		if tr2, ld2, ok2 := colMajor(m, n, dst.Strides[1], dst.Strides[2]); ok2 && !tr2 {
			swap, ldD, mp, np = true, ld2, m, n
		}
		if !swap || force {
			swap, mp, np = false, n, m
			c, err := d.Alloc(int64(dst.NumElements()*size), d.st, "")
			if err != nil {
				return err
			}
			temps = append(temps, c.(*Buffer))
			out = backend.View{Buf: c, DType: dt, Shape: dst.Shape, Strides: backend.ContiguousStrides(dst.Shape)}
			ldD = n
		}
	}
	// side resolves operand v (shape [B, r, c] in row-major terms) as the
	// column-major factor of rows×cols = (r, c) or its transpose.
	side := func(v backend.View, transposed bool) (gemmSide, error) {
		for try := 0; ; try++ {
			rows, cols, sr, sc := v.Shape[1], v.Shape[2], v.Strides[1], v.Strides[2]
			if transposed {
				rows, cols, sr, sc = cols, rows, sc, sr
			}
			t, ld, ok := colMajor(rows, cols, sr, sc)
			if ok {
				p, err := d.ptrOf("matmul", v)
				return gemmSide{ptr: p, trans: t, ld: ld, bst: int64(v.Strides[0])}, err
			}
			if try > 0 {
				return gemmSide{}, fmt.Errorf("cuda: matmul: internal: contiguous operand %v %v not usable", v.Shape, v.Strides)
			}
			var err error
			if v, err = contiguous(v); err != nil {
				return gemmSide{}, err
			}
		}
	}
	var P, Q gemmSide
	var err error
	if swap { // D = A·B
		if P, err = side(a, false); err != nil {
			return err
		}
		Q, err = side(b, false)
	} else { // D^T = B^T·A^T
		if P, err = side(b, true); err != nil {
			return err
		}
		Q, err = side(a, true)
	}
	if err != nil {
		return err
	}
	dptr, err := d.ptrOf("matmul", out)
	if err != nil {
		return err
	}
	dbst := int64(out.Strides[0])
	if bn == 1 {
		P.bst, Q.bst, dbst = 0, 0, 0
	}
	// cuBLASLt's strided batches need a nonzero output stride; broadcast
	// inputs (stride 0) run one product per batch.
	batches, perCall := 1, bn
	if bn > 1 && (P.bst == 0 || Q.bst == 0 || dbst == 0) {
		batches, perCall = bn, 1
	}
	for i := range batches {
		off := int64(i)
		p := gemmSide{ptr: P.ptr + cuda.DevicePtr(off*P.bst*int64(size)), trans: P.trans, ld: P.ld, bst: P.bst}
		q := gemmSide{ptr: Q.ptr + cuda.DevicePtr(off*Q.bst*int64(size)), trans: Q.trans, ld: Q.ld, bst: Q.bst}
		dp := dptr + cuda.DevicePtr(off*dbst*int64(size))
		dst := dbst
		if perCall == 1 {
			p.bst, q.bst, dst = 0, 0, 0
		}
		if err := d.gemm(dt, mp, np, k, perCall, p, q, dp, ldD, dst, 0, 0); err != nil {
			return err
		}
	}
	if out.Buf != dst.Buf {
		ops, err := d.ops("matmul", dst, out)
		if err != nil {
			return err
		}
		return d.copyLocked(dst, out, ops)
	}
	return nil
}

// gemm queues D(m×n, column-major, ld ldD) = op(P)(m×k)·op(Q)(k×n) for
// batch products, with epilogue epi (0 for none) reading or writing the
// vector at vp.
func (d *queue) gemm(dt backend.DType, m, n, k, batch int, P, Q gemmSide, dp cuda.DevicePtr, ldD int, dbst int64,
	epi cublas.Epilogue, vp cuda.DevicePtr) error {
	key := planKey{dt: dt, tf32: dt == backend.Float32 && allowTF32.Load(), transP: P.trans, transQ: Q.trans,
		m: m, n: n, k: k, ldP: P.ld, ldQ: Q.ld, ldD: ldD, batch: batch, sP: P.bst, sQ: Q.bst, sD: dbst,
		aP: alignment(P.ptr), aQ: alignment(Q.ptr), aD: alignment(dp), epi: epi}
	pl, err := d.plan(key)
	if err != nil {
		return err
	}
	if epi != 0 {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		if err := cublas.LtMatmulDescSetAttribute(pl.desc, cublas.MatmulDescBiasPointer, unsafe.Pointer(&vp), 8); err != nil {
			return fmt.Errorf("cuda: cuda:%d: matmul epilogue vector: %w", d.index, err)
		}
	}
	b := &d.blas
	var alpha, beta unsafe.Pointer
	if pl.f64 {
		one, zero := 1.0, 0.0
		alpha, beta = unsafe.Pointer(&one), unsafe.Pointer(&zero)
	} else {
		one, zero := float32(1), float32(0)
		alpha, beta = unsafe.Pointer(&one), unsafe.Pointer(&zero)
	}
	ws, err := d.workspace()
	if err != nil {
		return err
	}
	err = cublas.LtMatmul(b.handle, pl.desc, alpha, P.ptr, pl.lP, Q.ptr, pl.lQ, beta, dp, pl.lD, dp, pl.lD,
		&pl.algo, ws, workspaceBytes, d.stream)
	if err != nil {
		return fmt.Errorf("cuda: cuda:%d: matmul %s %dx%dx%d (batch %d): %w", d.index, dt, m, n, k, batch, err)
	}
	return nil
}

// plan returns the cached plan for key, creating it (descriptors, layouts
// and the heuristic's best algorithm) on first use.
func (d *Device) plan(key planKey) (*plan, error) {
	b := &d.blas
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.plans[key]; ok {
		if p == nil {
			return nil, &planError{fmt.Errorf("cuda: cuda:%d: matmul %s %dx%dx%d (batch %d, epilogue %d): cuBLASLt has no algorithm", d.index, key.dt, key.m, key.n, key.k, key.batch, key.epi)}
		}
		return p, nil
	}
	if len(b.plans) >= maxPlans {
		for k, p := range b.plans {
			if p != nil {
				p.destroy()
			}
			delete(b.plans, k)
		}
	}
	p, err := newPlan(b.handle, key)
	if err != nil {
		b.plans[key] = nil // remembered: the heuristic is not asked again
		return nil, &planError{fmt.Errorf("cuda: cuda:%d: matmul %s %dx%dx%d (batch %d): %w", d.index, key.dt, key.m, key.n, key.k, key.batch, err)}
	}
	b.plans[key] = p
	return p, nil
}

func newPlan(h cublas.LtHandle, key planKey) (*plan, error) {
	t, _ := blasType(key.dt)
	compute, scale := cublas.Compute32F, cublas.R32F
	switch {
	case key.dt == backend.Float64:
		compute, scale = cublas.Compute64F, cublas.R64F
	case key.tf32:
		compute = cublas.Compute32FFastTF32
	}
	p := &plan{f64: key.dt == backend.Float64}
	var err error
	if p.desc, err = cublas.LtMatmulDescCreate(compute, scale); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			p.destroy()
		}
	}()
	op := func(tr bool) int32 {
		if tr {
			return int32(cublas.OpT)
		}
		return int32(cublas.OpN)
	}
	opP, opQ := op(key.transP), op(key.transQ)
	if err := cublas.LtMatmulDescSetAttribute(p.desc, cublas.MatmulDescTransA, unsafe.Pointer(&opP), 4); err != nil {
		return nil, err
	}
	if err := cublas.LtMatmulDescSetAttribute(p.desc, cublas.MatmulDescTransB, unsafe.Pointer(&opQ), 4); err != nil {
		return nil, err
	}
	if key.epi != 0 {
		epi := uint32(key.epi)
		if err := cublas.LtMatmulDescSetAttribute(p.desc, cublas.MatmulDescEpilogue, unsafe.Pointer(&epi), 4); err != nil {
			return nil, err
		}
	}
	layout := func(rows, cols, ld int, bst int64) (cublas.MatrixLayout, error) {
		l, err := cublas.LtMatrixLayoutCreate(t, uint64(rows), uint64(cols), int64(ld))
		if err != nil {
			return 0, err
		}
		if key.batch > 1 {
			bc := int32(key.batch)
			if err := cublas.LtMatrixLayoutSetAttribute(l, cublas.MatrixLayoutBatchCount, unsafe.Pointer(&bc), 4); err != nil {
				cublas.LtMatrixLayoutDestroy(l)
				return 0, err
			}
			if err := cublas.LtMatrixLayoutSetAttribute(l, cublas.MatrixLayoutStridedBatchOffset, unsafe.Pointer(&bst), 8); err != nil {
				cublas.LtMatrixLayoutDestroy(l)
				return 0, err
			}
		}
		return l, nil
	}
	rP, cP := key.m, key.k
	if key.transP {
		rP, cP = key.k, key.m
	}
	rQ, cQ := key.k, key.n
	if key.transQ {
		rQ, cQ = key.n, key.k
	}
	if p.lP, err = layout(rP, cP, key.ldP, key.sP); err != nil {
		return nil, err
	}
	if p.lQ, err = layout(rQ, cQ, key.ldQ, key.sQ); err != nil {
		return nil, err
	}
	if p.lD, err = layout(key.m, key.n, key.ldD, key.sD); err != nil {
		return nil, err
	}
	pref, err := cublas.LtMatmulPreferenceCreate()
	if err != nil {
		return nil, err
	}
	defer cublas.LtMatmulPreferenceDestroy(pref)
	ws := uint64(workspaceBytes)
	if err := cublas.LtMatmulPreferenceSetAttribute(pref, cublas.PrefMaxWorkspaceBytes, unsafe.Pointer(&ws), 8); err != nil {
		return nil, err
	}
	for attr, al := range map[cublas.MatmulPreferenceAttribute]uint32{prefMinAlignmentA: key.aP, prefMinAlignmentB: key.aQ,
		prefMinAlignmentC: key.aD, prefMinAlignmentD: key.aD} {
		if err := cublas.LtMatmulPreferenceSetAttribute(pref, attr, unsafe.Pointer(&al), 4); err != nil {
			return nil, err
		}
	}
	var res [1]cublas.MatmulHeuristicResult
	cnt, err := cublas.LtMatmulAlgoGetHeuristic(h, p.desc, p.lP, p.lQ, p.lD, p.lD, pref, res[:])
	if err != nil {
		return nil, err
	}
	if cnt == 0 {
		return nil, fmt.Errorf("cuBLASLt found no algorithm")
	}
	p.algo = res[0].Algo
	ok = true
	return p, nil
}

func (p *plan) destroy() {
	if p.lP != 0 {
		cublas.LtMatrixLayoutDestroy(p.lP)
	}
	if p.lQ != 0 {
		cublas.LtMatrixLayoutDestroy(p.lQ)
	}
	if p.lD != 0 {
		cublas.LtMatrixLayoutDestroy(p.lD)
	}
	if p.desc != 0 {
		cublas.LtMatmulDescDestroy(p.desc)
	}
}

var _ backend.FusedMatMul = (*Device)(nil)

// MatMulBias computes dst = a·b + bias, then ReLU when relu is set, in one
// cuBLASLt product with the bias (and ReLU) epilogue. It implements
// [backend.FusedMatMul].
func (dev *Device) MatMulBias(s backend.Stream, dst, a, b, bias backend.View, relu bool) error {
	d, err := dev.begin(s, "matmul_bias", backend.CheckMatMulBias(dst, a, b, bias))
	if err != nil {
		return err
	}
	epi := cublas.EpilogueBias
	if relu {
		epi = cublas.EpilogueReLUBias
	}
	return d.fusedMatMul("matmul_bias", dst, a, b, bias, epi)
}

// MatMulRowSum computes dst = a·b and rowSum[i] = Σ_k a[i,k] in one
// cuBLASLt product with the bias-gradient epilogue. It implements
// [backend.FusedMatMul].
func (dev *Device) MatMulRowSum(s backend.Stream, dst, a, b, rowSum backend.View) error {
	d, err := dev.begin(s, "matmul_rowsum", backend.CheckMatMulRowSum(dst, a, b, rowSum))
	if err != nil {
		return err
	}
	return d.fusedMatMul("matmul_rowsum", dst, a, b, rowSum, cublas.EpilogueBGradB)
}

// fusedMatMul runs the 2-D product dst = a·b with an epilogue whose vector
// vec has dst's columns (bias) or a's rows (bias gradient). In cuBLASLt's
// column-major terms the product is D^T = B^T·A^T: the bias has one entry
// per row of D^T, and the rows of A are the columns of its B operand, which
// the BGRADB epilogue reduces over k. The caller has checked the operands
// with backend.CheckMatMulBias or CheckMatMulRowSum.
func (d *queue) fusedMatMul(what string, dst, a, b, vec backend.View, epi cublas.Epilogue) error {
	m, k, n := a.Shape[0], a.Shape[1], b.Shape[1]
	dt := dst.DType
	if _, ok := blasType(dt); !ok || dt == backend.Float64 || m == 0 || n == 0 || k == 0 ||
		!dst.IsContiguous() || !vec.IsContiguous() {
		return notImplemented(what, dt)
	}
	pt, pld, ok1 := colMajor(n, k, b.Strides[1], b.Strides[0])
	qt, qld, ok2 := colMajor(k, m, a.Strides[1], a.Strides[0])
	if !ok1 || !ok2 {
		return notImplemented(what, dt)
	}
	if err := d.run(d.initBLAS); err != nil {
		return err
	}
	return d.run(func() error {
		var ptrs [4]cuda.DevicePtr
		for i, v := range []backend.View{b, a, dst, vec} {
			p, err := d.ptrOf(what, v)
			if err != nil {
				return err
			}
			ptrs[i] = p
		}
		if alignment(ptrs[3]) < 16 {
			return notImplemented(what, dt)
		}
		err := d.gemm(dt, n, m, k, 1, gemmSide{ptr: ptrs[0], trans: pt, ld: pld}, gemmSide{ptr: ptrs[1], trans: qt, ld: qld},
			ptrs[2], n, 0, epi, ptrs[3])
		var pe *planError
		if errors.As(err, &pe) {
			return fmt.Errorf("%w (%w)", err, backend.ErrNotImplemented)
		}
		return err
	})
}
