package cublas

import (
	"unsafe"

	"github.com/vramgo/vram/native/internal/status"
	"github.com/vramgo/vram/native/load"
)

// Status is a cublasStatus_t.
type Status int32

// StatusSuccess is CUBLAS_STATUS_SUCCESS.
const StatusSuccess Status = 0

// statusNames maps cublasStatus_t values to their names in cublas_api.h.
var statusNames = map[Status]string{
	0:  "CUBLAS_STATUS_SUCCESS",
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// Name returns the status's name, e.g. "CUBLAS_STATUS_NOT_SUPPORTED";
// codes missing from the checked-in table are named "CUBLAS_STATUS_<code>".
func (s Status) Name() string { return status.Name(statusNames, "CUBLAS_STATUS_", s) }

// String returns the status's name.
func (s Status) String() string { return s.Name() }

// Error is a failed cuBLAS or cuBLASLt call: the numeric status, its name
// and the C function. errors.Is compares codes.
type Error struct {
	Code Status // the cublasStatus_t
	Name string // e.g. "CUBLAS_STATUS_NOT_SUPPORTED"
	Func string // the C symbol that failed; empty in sentinels
}

// Error returns "cublas: cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (15)".
func (e *Error) Error() string {
	return status.Message("cublas", e.Func, e.Name, int32(e.Code), "")
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func sentinel(code Status) *Error { return &Error{Code: code, Name: code.Name()} }

// Sentinels for the cuBLAS statuses; compare with errors.Is.
var (
	ErrNotInitialized  = sentinel(1)  // CUBLAS_STATUS_NOT_INITIALIZED
	ErrAllocFailed     = sentinel(3)  // CUBLAS_STATUS_ALLOC_FAILED
	ErrInvalidValue    = sentinel(7)  // CUBLAS_STATUS_INVALID_VALUE
	ErrArchMismatch    = sentinel(8)  // CUBLAS_STATUS_ARCH_MISMATCH
	ErrMappingError    = sentinel(11) // CUBLAS_STATUS_MAPPING_ERROR
	ErrExecutionFailed = sentinel(13) // CUBLAS_STATUS_EXECUTION_FAILED
	ErrInternalError   = sentinel(14) // CUBLAS_STATUS_INTERNAL_ERROR
	ErrNotSupported    = sentinel(15) // CUBLAS_STATUS_NOT_SUPPORTED
	ErrLicenseError    = sentinel(16) // CUBLAS_STATUS_LICENSE_ERROR
)

// ErrNotLoaded is returned by calls into a library that is not loaded.
var ErrNotLoaded = load.NotLoaded("cublas", "libcublasLt or libcublas", "cublas.LoadLt or cublas.LoadBLAS")

// check turns a cublasStatus_t from the C function fn into an error.
func check(fn string, s Status) error {
	if s == StatusSuccess {
		return nil
	}
	return &Error{Code: s, Name: s.Name(), Func: fn}
}

// DataType is a cudaDataType_t (library_types.h).
type DataType int32

// Data types (cudaDataType_t).
const (
	R32F  DataType = 0  // CUDA_R_32F: float
	R64F  DataType = 1  // CUDA_R_64F: double
	R16F  DataType = 2  // CUDA_R_16F: half
	R8I   DataType = 3  // CUDA_R_8I: int8
	R32I  DataType = 10 // CUDA_R_32I: int32
	R16BF DataType = 14 // CUDA_R_16BF: bfloat16
)

// ComputeType is a cublasComputeType_t.
type ComputeType int32

// Compute types (cublasComputeType_t).
const (
	Compute16F         ComputeType = 64 // CUBLAS_COMPUTE_16F
	Compute32F         ComputeType = 68 // CUBLAS_COMPUTE_32F: float accumulation, no TF32 unless allowed by math mode
	Compute32FPedantic ComputeType = 69 // CUBLAS_COMPUTE_32F_PEDANTIC
	Compute64F         ComputeType = 70 // CUBLAS_COMPUTE_64F
	Compute32I         ComputeType = 72 // CUBLAS_COMPUTE_32I
	Compute32FFast16F  ComputeType = 74 // CUBLAS_COMPUTE_32F_FAST_16F
	Compute32FFast16BF ComputeType = 75 // CUBLAS_COMPUTE_32F_FAST_16BF
	Compute32FFastTF32 ComputeType = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
)

// Operation is a cublasOperation_t.
type Operation int32

// Operations (cublasOperation_t).
const (
	OpN Operation = 0 // CUBLAS_OP_N: as stored
	OpT Operation = 1 // CUBLAS_OP_T: transposed
	OpC Operation = 2 // CUBLAS_OP_C: conjugate transposed
)

// Sizes of the structs handed to cuBLASLt by pointer (cublasLt.h).
const (
	sizeofMatmulAlgo            = 64
	sizeofMatmulHeuristicResult = 96
)

// MatmulAlgo is a cublasLtMatmulAlgo_t: 64 opaque bytes.
type MatmulAlgo struct {
	Data [8]uint64
}

// MatmulHeuristicResult is a cublasLtMatmulHeuristicResult_t: 96 bytes.
type MatmulHeuristicResult struct {
	Algo          MatmulAlgo // offset 0
	WorkspaceSize uint64     // offset 64: bytes of workspace the algorithm needs
	State         Status     // offset 72: CUBLAS_STATUS_SUCCESS for a usable result
	WavesCount    float32    // offset 76
	Reserved      [4]int32   // offset 80
}

var (
	_ [unsafe.Sizeof(MatmulAlgo{}) - sizeofMatmulAlgo]struct{}
	_ [sizeofMatmulAlgo - unsafe.Sizeof(MatmulAlgo{})]struct{}
	_ [unsafe.Sizeof(MatmulHeuristicResult{}) - sizeofMatmulHeuristicResult]struct{}
	_ [sizeofMatmulHeuristicResult - unsafe.Sizeof(MatmulHeuristicResult{})]struct{}
)

const (
	libLt   = "libcublasLt"
	libBLAS = "libcublas"
)

// SpecLt is how [LoadLt] searches: libcublasLt.so.13, then .so.12.
var SpecLt = load.Spec{Name: libLt, Sonames: []string{"libcublasLt.so.13", "libcublasLt.so.12"}}

// SpecBLAS is how [LoadBLAS] searches: libcublas.so.13, then .so.12.
var SpecBLAS = load.Spec{Name: libBLAS, Sonames: []string{"libcublas.so.13", "libcublas.so.12"}}

// ltLib and blasLib hold the loaded libraries and whether their bindings
// are ready; they share one table.
var (
	ltLib   = load.Loader{Spec: &SpecLt, Bindings: bindings}
	blasLib = load.Loader{Spec: &SpecBLAS, Bindings: bindings}
)

// LoadLt finds cuBLASLt (see [SpecLt]), resolves its bindings and returns
// the library. Once it has succeeded, later calls return the same library;
// after a failure the next call searches again. The error is a
// *load.NotFoundError when no cuBLASLt could be opened. It is safe for
// concurrent use.
func LoadLt() (*load.Library, error) { return ltLib.Load() }

// LoadBLAS finds the classic cuBLAS (see [SpecBLAS]), resolves its
// bindings and returns the library, as [LoadLt] does. It loads cuBLASLt
// first when it can, since libcublas links against it.
func LoadBLAS() (*load.Library, error) {
	_, _ = ltLib.Load() // libcublas needs it; a failure shows below
	return blasLib.Load()
}

// callLt returns [ErrNotLoaded] before [LoadLt] succeeded; else it calls
// c, which calls the cuBLASLt function fn, and turns the status into an
// error.
func callLt(fn string, c func() Status) error { return call(&ltLib, fn, c) }

// callBLAS is [callLt] for the classic cuBLAS, loaded by [LoadBLAS].
func callBLAS(fn string, c func() Status) error { return call(&blasLib, fn, c) }

// result is the status of a call through purego.SyscallN: the low 32
// bits of its first return value.
func result(r1, _, _ uintptr) Status { return Status(int32(r1)) }

// call returns [ErrNotLoaded] before l is loaded; else it calls c, which
// calls the C function fn, and turns the status into an error.
func call(l *load.Loader, fn string, c func() Status) error {
	if !l.Ready() {
		return ErrNotLoaded
	}
	return check(fn, c())
}
