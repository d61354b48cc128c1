package cublas

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/internal/bindtest"
	"github.com/vramgo/vram/native/internal/cudatest"
)

func TestBindingTable(t *testing.T) {
	bindtest.Table(t, bindings, map[string]uintptr{
		"cublasLtMatmulAlgo_t":            unsafe.Sizeof(MatmulAlgo{}),
		"cublasLtMatmulHeuristicResult_t": unsafe.Sizeof(MatmulHeuristicResult{}),
	})
}

// TestSymbolsNamed checks that every wrapper reports the C symbol of the
// binding it calls, and checks that the symbol's own library is loaded.
func TestSymbolsNamed(t *testing.T) {
	bindtest.Uses(t, bindings, map[string]string{"callLt": libLt, "callBLAS": libBLAS},
		"call", "callLt", "callBLAS", "LtGetVersion")
}

// TestNotLoaded checks that every wrapper fails with ErrNotLoaded, instead
// of calling through a nil function or address, before its library is
// loaded.
func TestNotLoaded(t *testing.T) {
	if ltLib.Ready() || blasLib.Ready() {
		t.Skip("a library is loaded")
	}
	bindtest.NotLoaded(t, ErrNotLoaded, []any{
		LtGetVersion, LtCreate, LtDestroy, LtMatmulDescCreate, LtMatmulDescSetAttribute,
		LtMatmulDescDestroy, LtMatrixLayoutCreate, LtMatrixLayoutSetAttribute, LtMatrixLayoutDestroy,
		LtMatmulPreferenceCreate, LtMatmulPreferenceSetAttribute, LtMatmulPreferenceDestroy,
		LtMatmulAlgoGetHeuristic, LtMatmul,
		Create, Destroy, GetVersion, SetStream, SetMathMode, GemmEx,
	}, "LoadLt", "LoadBLAS")
}

func TestHeuristicResultLayout(t *testing.T) {
	var r MatmulHeuristicResult
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"algo", unsafe.Offsetof(r.Algo), 0},
		{"workspaceSize", unsafe.Offsetof(r.WorkspaceSize), 64},
		{"state", unsafe.Offsetof(r.State), 72},
		{"wavesCount", unsafe.Offsetof(r.WavesCount), 76},
		{"reserved", unsafe.Offsetof(r.Reserved), 80},
	} {
		if tc.got != tc.want {
			t.Errorf("%s at %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	bindtest.Errors[Status, *Error](t, "cublas", check, StatusSuccess, ErrInternalError, false, []bindtest.ErrorCase[Status]{
		{Code: 15, Name: "CUBLAS_STATUS_NOT_SUPPORTED", Sentinel: ErrNotSupported},
		{Code: 7, Name: "CUBLAS_STATUS_INVALID_VALUE", Sentinel: ErrInvalidValue},
		{Code: 3, Name: "CUBLAS_STATUS_ALLOC_FAILED", Sentinel: ErrAllocFailed},
		{Code: 14, Name: "CUBLAS_STATUS_INTERNAL_ERROR", Sentinel: ErrInternalError},
		{Code: 99, Name: "CUBLAS_STATUS_99"},
	})
	if got := check("cublasLtMatmul", 15).Error(); got != "cublas: cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (15)" {
		t.Errorf("message %q", got)
	}
}

// TestStatusNamesUnique guards the checked-in table against copy slips.
func TestStatusNamesUnique(t *testing.T) {
	bindtest.Names(t, statusNames, "CUBLAS_STATUS_")
}

// gemmCase holds column-major float32 inputs, their float64 reference and
// the error bound per element (1e-4 of the sum of absolute products, plus
// an absolute part).
type gemmCase struct {
	m, n, k  int
	a, b     []float32
	ref, tol []float64
}

func newGemmCase(m, n, k int, seed uint64) *gemmCase {
	r := rand.New(rand.NewPCG(seed, 1))
	g := &gemmCase{m: m, n: n, k: k, a: make([]float32, m*k), b: make([]float32, k*n),
		ref: make([]float64, m*n), tol: make([]float64, m*n)}
	for i := range g.a {
		g.a[i] = float32(r.NormFloat64())
	}
	for i := range g.b {
		g.b[i] = float32(r.NormFloat64())
	}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			var s, abs float64
			for p := 0; p < k; p++ {
				v := float64(g.a[i+p*m]) * float64(g.b[p+j*k])
				s += v
				abs += math.Abs(v)
			}
			g.ref[i+j*m], g.tol[i+j*m] = s, 1e-4*abs+1e-6
		}
	}
	return g
}

func (g *gemmCase) check(t *testing.T, got []float32) {
	t.Helper()
	bad := 0
	for i, v := range got {
		if d := math.Abs(float64(v) - g.ref[i]); !(d <= g.tol[i]) { // NaN fails
			if bad++; bad <= 3 {
				t.Errorf("C[%d] = %v, want %v ± %.2g", i, v, g.ref[i], g.tol[i])
			}
		}
	}
}

// devBuf copies host floats to a new device buffer.
func devBuf(t *testing.T, ctx cuda.Context, host []float32) cuda.DevicePtr {
	t.Helper()
	n := uint64(len(host) * 4)
	p, err := cuda.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Do(func() error { return cuda.MemFree(p) }); err != nil {
			t.Error(err)
		}
	})
	if err := cuda.MemcpyHtoD(p, unsafe.Pointer(&host[0]), n); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLtMatmul(t *testing.T) {
	devs := cudatest.Require(t)
	if _, err := LoadLt(); err != nil {
		cudatest.SkipOrFail(t, "no cuBLASLt: %v", err)
	}
	v, err := LtGetVersion()
	if err != nil || v < 120000 {
		t.Fatalf("cublasLtGetVersion: %d, %v", v, err)
	}
	t.Logf("cuBLASLt %d from %s", v, ltLib.Library().Path)
	ctx := cudatest.Context(t, devs[0])
	err = ctx.Do(func() error {
		g := newGemmCase(96, 80, 112, 7)
		a, b := devBuf(t, ctx, g.a), devBuf(t, ctx, g.b)
		poison := make([]float32, g.m*g.n)
		for i := range poison {
			poison[i] = float32(math.NaN())
		}
		c := devBuf(t, ctx, poison)
		stream, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		defer cuda.StreamDestroy(stream)
		const wsBytes = 4 << 20
		ws, err := cuda.MemAlloc(wsBytes)
		if err != nil {
			return err
		}
		defer cuda.MemFree(ws)

		h, err := LtCreate()
		if err != nil {
			return err
		}
		defer LtDestroy(h)
		desc, err := LtMatmulDescCreate(Compute32F, R32F)
		if err != nil {
			return err
		}
		defer LtMatmulDescDestroy(desc)
		op := OpN
		if err := LtMatmulDescSetAttribute(desc, MatmulDescTransA, unsafe.Pointer(&op), 4); err != nil {
			return err
		}
		la, _ := LtMatrixLayoutCreate(R32F, uint64(g.m), uint64(g.k), int64(g.m))
		lb, _ := LtMatrixLayoutCreate(R32F, uint64(g.k), uint64(g.n), int64(g.k))
		lc, err := LtMatrixLayoutCreate(R32F, uint64(g.m), uint64(g.n), int64(g.m))
		if err != nil {
			return err
		}
		defer LtMatrixLayoutDestroy(la)
		defer LtMatrixLayoutDestroy(lb)
		defer LtMatrixLayoutDestroy(lc)
		order := OrderCol
		if err := LtMatrixLayoutSetAttribute(lc, MatrixLayoutOrder, unsafe.Pointer(&order), 4); err != nil {
			return err
		}
		pref, err := LtMatmulPreferenceCreate()
		if err != nil {
			return err
		}
		defer LtMatmulPreferenceDestroy(pref)
		wsMax := uint64(wsBytes)
		if err := LtMatmulPreferenceSetAttribute(pref, PrefMaxWorkspaceBytes, unsafe.Pointer(&wsMax), 8); err != nil {
			return err
		}
		results := make([]MatmulHeuristicResult, 4)
		n, err := LtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, results)
		if err != nil || n == 0 {
			t.Fatalf("heuristic: %d results, %v", n, err)
		}
		alpha, beta := float32(1), float32(0)
		if err := LtMatmul(h, desc, unsafe.Pointer(&alpha), a, la, b, lb, unsafe.Pointer(&beta), c, lc, c, lc,
			&results[0].Algo, ws, wsBytes, stream); err != nil {
			return err
		}
		if err := cuda.StreamSynchronize(stream); err != nil {
			return err
		}
		got := make([]float32, g.m*g.n)
		if err := cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), c, uint64(len(got)*4)); err != nil {
			return err
		}
		g.check(t, got)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestGemmEx(t *testing.T) {
	devs := cudatest.Require(t)
	if _, err := LoadBLAS(); err != nil {
		cudatest.SkipOrFail(t, "no cuBLAS: %v", err)
	}
	ctx := cudatest.Context(t, devs[0])
	err := ctx.Do(func() error {
		h, err := Create()
		if err != nil {
			return err
		}
		defer Destroy(h)
		v, err := GetVersion(h)
		if err != nil || v < 120000 {
			t.Errorf("cublasGetVersion_v2: %d, %v", v, err)
		}
		t.Logf("cuBLAS %d from %s", v, blasLib.Library().Path)
		stream, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		defer cuda.StreamDestroy(stream)
		if err := SetStream(h, stream); err != nil {
			return err
		}
		if err := SetMathMode(h, DefaultMath); err != nil {
			return err
		}
		g := newGemmCase(64, 48, 72, 11)
		a, b := devBuf(t, ctx, g.a), devBuf(t, ctx, g.b)
		c := devBuf(t, ctx, make([]float32, g.m*g.n))
		if err := cuda.MemsetD8(c, 0xff, uint64(g.m*g.n*4)); err != nil { // NaN poison
			return err
		}
		alpha, beta := float32(1), float32(0)
		if err := GemmEx(h, OpN, OpN, int32(g.m), int32(g.n), int32(g.k), unsafe.Pointer(&alpha),
			a, R32F, int32(g.m), b, R32F, int32(g.k), unsafe.Pointer(&beta), c, R32F, int32(g.m),
			Compute32F, GemmDefault); err != nil {
			return err
		}
		if err := cuda.StreamSynchronize(stream); err != nil {
			return err
		}
		got := make([]float32, g.m*g.n)
		if err := cuda.MemcpyDtoH(unsafe.Pointer(&got[0]), c, uint64(len(got)*4)); err != nil {
			return err
		}
		g.check(t, got)

		// A negative size is CUBLAS_STATUS_INVALID_VALUE.
		err = GemmEx(h, OpN, OpN, -1, 1, 1, unsafe.Pointer(&alpha), a, R32F, 1, b, R32F, 1,
			unsafe.Pointer(&beta), c, R32F, 1, Compute32F, GemmDefault)
		var e *Error
		if !errors.Is(err, ErrInvalidValue) || !errors.As(err, &e) || e.Func != "cublasGemmEx" {
			t.Errorf("m = -1: %v, want CUBLAS_STATUS_INVALID_VALUE", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
