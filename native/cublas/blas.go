package cublas

import (
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/vramgo/vram/native/cuda"
)

// Handle is a cublasHandle_t of the classic cuBLAS API.
type Handle uintptr

// MathMode is a cublasMath_t.
type MathMode int32

// Math modes (cublasMath_t).
const (
	DefaultMath                       MathMode = 0  // CUBLAS_DEFAULT_MATH
	PedanticMath                      MathMode = 2  // CUBLAS_PEDANTIC_MATH
	TF32TensorOpMath                  MathMode = 3  // CUBLAS_TF32_TENSOR_OP_MATH: float32 GEMMs may use TF32
	DisallowReducedPrecisionReduction MathMode = 16 // CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (a flag to OR in)
)

// GemmAlgo is a cublasGemmAlgo_t.
type GemmAlgo int32

// GemmDefault is CUBLAS_GEMM_DEFAULT: cuBLAS chooses.
const GemmDefault GemmAlgo = -1

// Create creates a cuBLAS handle in the current context. It calls
// cublasCreate_v2. Destroy it with [Destroy].
func Create() (Handle, error) {
	var h Handle
	err := callBLAS("cublasCreate_v2", func() Status { return cublasCreate(&h) })
	return h, err
}

// Destroy destroys a handle. It calls cublasDestroy_v2.
func Destroy(h Handle) error {
	return callBLAS("cublasDestroy_v2", func() Status { return cublasDestroy(h) })
}

// GetVersion returns cuBLAS's version as major*10000 + minor*100 + patch.
// It calls cublasGetVersion_v2.
func GetVersion(h Handle) (int, error) {
	var v int32
	err := callBLAS("cublasGetVersion_v2", func() Status { return cublasGetVersion(h, &v) })
	return int(v), err
}

// SetStream makes the handle queue its work on s. It calls
// cublasSetStream_v2.
func SetStream(h Handle, s cuda.Stream) error {
	return callBLAS("cublasSetStream_v2", func() Status { return cublasSetStream(h, s) })
}

// SetMathMode sets the handle's math mode. It calls cublasSetMathMode.
func SetMathMode(h Handle, mode MathMode) error {
	return callBLAS("cublasSetMathMode", func() Status { return cublasSetMathMode(h, mode) })
}

// GemmEx queues C = alpha*op(A)*op(B) + beta*C (column-major; op(A) is
// m×k, op(B) k×n, C m×n) with the given data and compute types. alpha and
// beta point to host values of the compute type's scale (float for
// Compute32F). It calls cublasGemmEx through purego.SyscallN.
func GemmEx(h Handle, transA, transB Operation, m, n, k int32,
	alpha unsafe.Pointer, a cuda.DevicePtr, aType DataType, lda int32,
	b cuda.DevicePtr, bType DataType, ldb int32,
	beta unsafe.Pointer, c cuda.DevicePtr, cType DataType, ldc int32,
	compute ComputeType, algo GemmAlgo) error {
	return callBLAS("cublasGemmEx", func() Status {
		return result(purego.SyscallN(addrGemmEx, uintptr(h), uintptr(transA), uintptr(transB),
			uintptr(m), uintptr(n), uintptr(k), uintptr(alpha),
			uintptr(a), uintptr(aType), uintptr(lda), uintptr(b), uintptr(bType), uintptr(ldb),
			uintptr(beta), uintptr(c), uintptr(cType), uintptr(ldc), uintptr(compute), uintptr(uint32(algo))))
	})
}
