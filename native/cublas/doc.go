// Package cublas binds cuBLASLt (libcublasLt.so.13 or .12), the matrix
// multiply library vram's GEMMs go through, and the classic cuBLAS
// (libcublas.so.13 or .12) for its cublasGemmEx, with purego and without
// cgo.
//
// Bindings only: each function calls the C function its doc comment names
// and returns an error for a failed cublasStatus_t. For cuBLASLt start with
// [LoadLt] and [LtCreate], describe the operation with [LtMatmulDescCreate]
// and the matrices with [LtMatrixLayoutCreate], pick an algorithm with
// [LtMatmulAlgoGetHeuristic] and run [LtMatmul]. For the classic API:
// [LoadBLAS], [Create], [SetStream], [GemmEx]. Both are column-major, as
// BLAS is.
//
// # Threads and contexts
//
// Handles belong to the CUDA context that was current when they were
// created, and every call must run with that context current on the
// calling OS thread (see cuda.Context.Do). Device pointers and streams are
// the types of package cuda.
//
// # Errors
//
// A failed call returns an *[Error] with the numeric status, its name
// (CUBLAS_STATUS_NOT_SUPPORTED) and the C function; errors.Is matches the
// sentinels ([ErrNotSupported], [ErrInvalidValue], ...) by code. Calls made
// before the library is loaded return [ErrNotLoaded].
//
// # Calls through SyscallN
//
// cublasLtMatmul and cublasGemmEx, called once per operation, go through
// purego.SyscallN; the rest through purego.RegisterFunc. bindings.tsv
// lists every symbol and struct size, and a CPU test holds the Go
// declarations to it.
package cublas
