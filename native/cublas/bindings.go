package cublas

import (
	"unsafe"

	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
)

// The C functions, declared with Go types of the C widths (enums int32,
// size_t uint64, handles and pointers pointer-sized).
var (
	cublasLtGetVersion                   func() uint64
	cublasLtCreate                       func(h *LtHandle) Status
	cublasLtDestroy                      func(h LtHandle) Status
	cublasLtMatmulDescCreate             func(d *MatmulDesc, compute ComputeType, scale DataType) Status
	cublasLtMatmulDescSetAttribute       func(d MatmulDesc, attr MatmulDescAttribute, buf unsafe.Pointer, size uint64) Status
	cublasLtMatmulDescDestroy            func(d MatmulDesc) Status
	cublasLtMatrixLayoutCreate           func(l *MatrixLayout, t DataType, rows, cols uint64, ld int64) Status
	cublasLtMatrixLayoutSetAttribute     func(l MatrixLayout, attr MatrixLayoutAttribute, buf unsafe.Pointer, size uint64) Status
	cublasLtMatrixLayoutDestroy          func(l MatrixLayout) Status
	cublasLtMatmulPreferenceCreate       func(p *MatmulPreference) Status
	cublasLtMatmulPreferenceSetAttribute func(p MatmulPreference, attr MatmulPreferenceAttribute, buf unsafe.Pointer, size uint64) Status
	cublasLtMatmulPreferenceDestroy      func(p MatmulPreference) Status
	cublasLtMatmulAlgoGetHeuristic       func(h LtHandle, desc MatmulDesc, a, b, c, d MatrixLayout, pref MatmulPreference,
		requested int32, results *MatmulHeuristicResult, returned *int32) Status

	cublasCreate      func(h *Handle) Status
	cublasDestroy     func(h Handle) Status
	cublasGetVersion  func(h Handle, v *int32) Status
	cublasSetStream   func(h Handle, s cuda.Stream) Status
	cublasSetMathMode func(h Handle, mode MathMode) Status
)

// Hot calls through purego.SyscallN; the sig* variables only document the
// C signatures for bindings.tsv.
var (
	addrLtMatmul, addrGemmEx uintptr

	sigLtMatmul func(h LtHandle, desc MatmulDesc, alpha unsafe.Pointer,
		a cuda.DevicePtr, aDesc MatrixLayout, b cuda.DevicePtr, bDesc MatrixLayout,
		beta unsafe.Pointer, c cuda.DevicePtr, cDesc MatrixLayout, d cuda.DevicePtr, dDesc MatrixLayout,
		algo *MatmulAlgo, workspace cuda.DevicePtr, workspaceBytes uint64, s cuda.Stream) Status
	sigGemmEx func(h Handle, transA, transB Operation, m, n, k int32,
		alpha unsafe.Pointer, a cuda.DevicePtr, aType DataType, lda int32,
		b cuda.DevicePtr, bType DataType, ldb int32,
		beta unsafe.Pointer, c cuda.DevicePtr, cType DataType, ldc int32,
		compute ComputeType, algo GemmAlgo) Status
)

var bindings = []load.Binding{
	{Lib: libLt, Names: []string{"cublasLtGetVersion"}, Fn: &cublasLtGetVersion},
	{Lib: libLt, Names: []string{"cublasLtCreate"}, Fn: &cublasLtCreate},
	{Lib: libLt, Names: []string{"cublasLtDestroy"}, Fn: &cublasLtDestroy},
	{Lib: libLt, Names: []string{"cublasLtMatmulDescCreate"}, Fn: &cublasLtMatmulDescCreate},
	{Lib: libLt, Names: []string{"cublasLtMatmulDescSetAttribute"}, Fn: &cublasLtMatmulDescSetAttribute},
	{Lib: libLt, Names: []string{"cublasLtMatmulDescDestroy"}, Fn: &cublasLtMatmulDescDestroy},
	{Lib: libLt, Names: []string{"cublasLtMatrixLayoutCreate"}, Fn: &cublasLtMatrixLayoutCreate},
	{Lib: libLt, Names: []string{"cublasLtMatrixLayoutSetAttribute"}, Fn: &cublasLtMatrixLayoutSetAttribute},
	{Lib: libLt, Names: []string{"cublasLtMatrixLayoutDestroy"}, Fn: &cublasLtMatrixLayoutDestroy},
	{Lib: libLt, Names: []string{"cublasLtMatmulPreferenceCreate"}, Fn: &cublasLtMatmulPreferenceCreate},
	{Lib: libLt, Names: []string{"cublasLtMatmulPreferenceSetAttribute"}, Fn: &cublasLtMatmulPreferenceSetAttribute},
	{Lib: libLt, Names: []string{"cublasLtMatmulPreferenceDestroy"}, Fn: &cublasLtMatmulPreferenceDestroy},
	{Lib: libLt, Names: []string{"cublasLtMatmulAlgoGetHeuristic"}, Fn: &cublasLtMatmulAlgoGetHeuristic},
	{Lib: libLt, Names: []string{"cublasLtMatmul"}, Fn: &sigLtMatmul, Addr: &addrLtMatmul},
	{Lib: libBLAS, Names: []string{"cublasCreate_v2"}, Fn: &cublasCreate},
	{Lib: libBLAS, Names: []string{"cublasDestroy_v2"}, Fn: &cublasDestroy},
	{Lib: libBLAS, Names: []string{"cublasGetVersion_v2"}, Fn: &cublasGetVersion},
	{Lib: libBLAS, Names: []string{"cublasSetStream_v2"}, Fn: &cublasSetStream},
	{Lib: libBLAS, Names: []string{"cublasSetMathMode"}, Fn: &cublasSetMathMode},
	{Lib: libBLAS, Names: []string{"cublasGemmEx"}, Fn: &sigGemmEx, Addr: &addrGemmEx},
}
