package cublas

import (
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/vramgo/vram/native/cuda"
)

// LtHandle is a cublasLtHandle_t.
type LtHandle uintptr

// MatmulDesc is a cublasLtMatmulDesc_t.
type MatmulDesc uintptr

// MatrixLayout is a cublasLtMatrixLayout_t.
type MatrixLayout uintptr

// MatmulPreference is a cublasLtMatmulPreference_t.
type MatmulPreference uintptr

// MatmulDescAttribute is a cublasLtMatmulDescAttributes_t.
type MatmulDescAttribute int32

// Matmul descriptor attributes (cublasLtMatmulDescAttributes_t), with the
// C type of each value.
const (
	MatmulDescComputeType MatmulDescAttribute = 0 // CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: int32
	MatmulDescScaleType   MatmulDescAttribute = 1 // CUBLASLT_MATMUL_DESC_SCALE_TYPE: int32
	MatmulDescPointerMode MatmulDescAttribute = 2 // CUBLASLT_MATMUL_DESC_POINTER_MODE: int32
	MatmulDescTransA      MatmulDescAttribute = 3 // CUBLASLT_MATMUL_DESC_TRANSA: int32 (Operation)
	MatmulDescTransB      MatmulDescAttribute = 4 // CUBLASLT_MATMUL_DESC_TRANSB: int32 (Operation)
	MatmulDescTransC      MatmulDescAttribute = 5 // CUBLASLT_MATMUL_DESC_TRANSC: int32 (Operation)
	MatmulDescEpilogue    MatmulDescAttribute = 7 // CUBLASLT_MATMUL_DESC_EPILOGUE: uint32
	MatmulDescBiasPointer MatmulDescAttribute = 8 // CUBLASLT_MATMUL_DESC_BIAS_POINTER: device pointer
)

// MatrixLayoutAttribute is a cublasLtMatrixLayoutAttribute_t.
type MatrixLayoutAttribute int32

// Matrix layout attributes (cublasLtMatrixLayoutAttribute_t).
const (
	MatrixLayoutType               MatrixLayoutAttribute = 0 // CUBLASLT_MATRIX_LAYOUT_TYPE: uint32 (DataType)
	MatrixLayoutOrder              MatrixLayoutAttribute = 1 // CUBLASLT_MATRIX_LAYOUT_ORDER: int32 (Order)
	MatrixLayoutRows               MatrixLayoutAttribute = 2 // CUBLASLT_MATRIX_LAYOUT_ROWS: uint64
	MatrixLayoutCols               MatrixLayoutAttribute = 3 // CUBLASLT_MATRIX_LAYOUT_COLS: uint64
	MatrixLayoutLD                 MatrixLayoutAttribute = 4 // CUBLASLT_MATRIX_LAYOUT_LD: int64
	MatrixLayoutBatchCount         MatrixLayoutAttribute = 5 // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: int32
	MatrixLayoutStridedBatchOffset MatrixLayoutAttribute = 6 // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: int64 (elements)
)

// Order is a cublasLtOrder_t, the value of MatrixLayoutOrder.
type Order int32

// Orders (cublasLtOrder_t).
const (
	OrderCol Order = 0 // CUBLASLT_ORDER_COL: column-major (the default)
	OrderRow Order = 1 // CUBLASLT_ORDER_ROW: row-major
)

// Epilogue is a cublasLtEpilogue_t, the value of MatmulDescEpilogue.
type Epilogue uint32

// Epilogues (cublasLtEpilogue_t).
const (
	EpilogueDefault  Epilogue = 1   // CUBLASLT_EPILOGUE_DEFAULT
	EpilogueReLU     Epilogue = 2   // CUBLASLT_EPILOGUE_RELU
	EpilogueBias     Epilogue = 4   // CUBLASLT_EPILOGUE_BIAS
	EpilogueReLUBias Epilogue = 6   // CUBLASLT_EPILOGUE_RELU_BIAS (RELU | BIAS)
	EpilogueGELU     Epilogue = 32  // CUBLASLT_EPILOGUE_GELU (tanh approximation)
	EpilogueGELUBias Epilogue = 36  // CUBLASLT_EPILOGUE_GELU_BIAS (GELU | BIAS)
	EpilogueBGradA   Epilogue = 256 // CUBLASLT_EPILOGUE_BGRADA: bias gradient, reducing A over k into a vector of D's rows
	EpilogueBGradB   Epilogue = 512 // CUBLASLT_EPILOGUE_BGRADB: bias gradient, reducing B over k into a vector of D's columns
)

// MatmulPreferenceAttribute is a cublasLtMatmulPreferenceAttributes_t.
type MatmulPreferenceAttribute int32

// Preference attributes (cublasLtMatmulPreferenceAttributes_t).
const (
	PrefSearchMode        MatmulPreferenceAttribute = 0 // CUBLASLT_MATMUL_PREF_SEARCH_MODE: uint32
	PrefMaxWorkspaceBytes MatmulPreferenceAttribute = 1 // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: uint64
)

// LtGetVersion returns cuBLASLt's version as major*10000 + minor*100 +
// patch (130100 for 13.1.0). It calls cublasLtGetVersion.
func LtGetVersion() (int, error) {
	if !ltLib.Ready() {
		return 0, ErrNotLoaded
	}
	return int(cublasLtGetVersion()), nil
}

// LtCreate creates a cuBLASLt handle. It calls cublasLtCreate. The handle
// must be destroyed with [LtDestroy].
func LtCreate() (LtHandle, error) {
	var h LtHandle
	err := callLt("cublasLtCreate", func() Status { return cublasLtCreate(&h) })
	return h, err
}

// LtDestroy destroys a handle from [LtCreate]. It calls cublasLtDestroy.
func LtDestroy(h LtHandle) error {
	return callLt("cublasLtDestroy", func() Status { return cublasLtDestroy(h) })
}

// LtMatmulDescCreate creates a matmul descriptor with the given compute
// type and scale type (the type of alpha and beta). It calls
// cublasLtMatmulDescCreate. Destroy it with [LtMatmulDescDestroy].
func LtMatmulDescCreate(compute ComputeType, scale DataType) (MatmulDesc, error) {
	var d MatmulDesc
	err := callLt("cublasLtMatmulDescCreate", func() Status { return cublasLtMatmulDescCreate(&d, compute, scale) })
	return d, err
}

// LtMatmulDescSetAttribute sets one attribute from the size bytes at buf
// (Go memory holding no Go pointers, read during the call only). It calls
// cublasLtMatmulDescSetAttribute.
func LtMatmulDescSetAttribute(d MatmulDesc, attr MatmulDescAttribute, buf unsafe.Pointer, size uint64) error {
	return callLt("cublasLtMatmulDescSetAttribute", func() Status { return cublasLtMatmulDescSetAttribute(d, attr, buf, size) })
}

// LtMatmulDescDestroy destroys a descriptor. It calls
// cublasLtMatmulDescDestroy.
func LtMatmulDescDestroy(d MatmulDesc) error {
	return callLt("cublasLtMatmulDescDestroy", func() Status { return cublasLtMatmulDescDestroy(d) })
}

// LtMatrixLayoutCreate describes a rows×cols matrix of type t with leading
// dimension ld (column-major unless MatrixLayoutOrder says otherwise). It
// calls cublasLtMatrixLayoutCreate. Destroy it with
// [LtMatrixLayoutDestroy].
func LtMatrixLayoutCreate(t DataType, rows, cols uint64, ld int64) (MatrixLayout, error) {
	var l MatrixLayout
	err := callLt("cublasLtMatrixLayoutCreate", func() Status { return cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld) })
	return l, err
}

// LtMatrixLayoutSetAttribute sets one layout attribute from the size bytes
// at buf. It calls cublasLtMatrixLayoutSetAttribute.
func LtMatrixLayoutSetAttribute(l MatrixLayout, attr MatrixLayoutAttribute, buf unsafe.Pointer, size uint64) error {
	return callLt("cublasLtMatrixLayoutSetAttribute", func() Status { return cublasLtMatrixLayoutSetAttribute(l, attr, buf, size) })
}

// LtMatrixLayoutDestroy destroys a layout. It calls
// cublasLtMatrixLayoutDestroy.
func LtMatrixLayoutDestroy(l MatrixLayout) error {
	return callLt("cublasLtMatrixLayoutDestroy", func() Status { return cublasLtMatrixLayoutDestroy(l) })
}

// LtMatmulPreferenceCreate creates an algorithm-search preference. It calls
// cublasLtMatmulPreferenceCreate. Destroy it with
// [LtMatmulPreferenceDestroy].
func LtMatmulPreferenceCreate() (MatmulPreference, error) {
	var p MatmulPreference
	err := callLt("cublasLtMatmulPreferenceCreate", func() Status { return cublasLtMatmulPreferenceCreate(&p) })
	return p, err
}

// LtMatmulPreferenceSetAttribute sets one preference from the size bytes
// at buf. It calls cublasLtMatmulPreferenceSetAttribute.
func LtMatmulPreferenceSetAttribute(p MatmulPreference, attr MatmulPreferenceAttribute, buf unsafe.Pointer, size uint64) error {
	return callLt("cublasLtMatmulPreferenceSetAttribute", func() Status { return cublasLtMatmulPreferenceSetAttribute(p, attr, buf, size) })
}

// LtMatmulPreferenceDestroy destroys a preference. It calls
// cublasLtMatmulPreferenceDestroy.
func LtMatmulPreferenceDestroy(p MatmulPreference) error {
	return callLt("cublasLtMatmulPreferenceDestroy", func() Status { return cublasLtMatmulPreferenceDestroy(p) })
}

// LtMatmulAlgoGetHeuristic fills results with up to len(results)
// algorithms for D = alpha*op(A)*op(B) + beta*C, best first, and returns
// how many it found (0 when none fits: then [ErrNotSupported]). It calls
// cublasLtMatmulAlgoGetHeuristic; an empty results fails with
// [ErrInvalidValue] without calling it.
func LtMatmulAlgoGetHeuristic(h LtHandle, desc MatmulDesc, a, b, c, d MatrixLayout, pref MatmulPreference, results []MatmulHeuristicResult) (int, error) {
	var n int32
	err := callLt("cublasLtMatmulAlgoGetHeuristic", func() Status {
		if len(results) == 0 {
			return ErrInvalidValue.Code
		}
		return cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, d, pref, int32(len(results)), &results[0], &n)
	})
	return int(n), err
}

// LtMatmul queues D = alpha*op(A)*op(B) + beta*C on stream s. alpha and
// beta point to host values of the descriptor's scale type; algo may be nil
// (cuBLASLt then chooses); workspace is device memory of workspaceBytes
// (0 and 0 for none). It calls cublasLtMatmul through purego.SyscallN.
func LtMatmul(h LtHandle, desc MatmulDesc, alpha unsafe.Pointer,
	a cuda.DevicePtr, aDesc MatrixLayout, b cuda.DevicePtr, bDesc MatrixLayout,
	beta unsafe.Pointer, c cuda.DevicePtr, cDesc MatrixLayout, d cuda.DevicePtr, dDesc MatrixLayout,
	algo *MatmulAlgo, workspace cuda.DevicePtr, workspaceBytes uint64, s cuda.Stream) error {
	return callLt("cublasLtMatmul", func() Status {
		return result(purego.SyscallN(addrLtMatmul, uintptr(h), uintptr(desc), uintptr(alpha),
			uintptr(a), uintptr(aDesc), uintptr(b), uintptr(bDesc), uintptr(beta),
			uintptr(c), uintptr(cDesc), uintptr(d), uintptr(dDesc),
			uintptr(unsafe.Pointer(algo)), uintptr(workspace), uintptr(workspaceBytes), uintptr(s)))
	})
}
