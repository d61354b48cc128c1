// Package nvrtc binds NVRTC, CUDA's run-time compiler (libnvrtc.so.13 or
// libnvrtc.so.12), with purego and without cgo: it compiles CUDA C++ source
// to PTX or, for a real architecture (-arch=sm_90), to a CUBIN that
// cuda.ModuleLoadData loads.
//
// Bindings only: each function calls the NVRTC function its doc comment
// names and returns an error for a failed nvrtcResult. Start with [Load],
// then [CreateProgram], [CompileProgram], [GetCUBIN] (or [GetPTX]) and
// [DestroyProgram]; on [ErrCompilation], [GetProgramLog] says why.
//
// # Errors
//
// A failed call returns an *[Error] holding the numeric nvrtcResult, its
// name (NVRTC_ERROR_COMPILATION) and the C function; errors.Is matches the
// sentinels ([ErrCompilation], [ErrInvalidOption], ...) by code. Calls made
// before [Load] succeeded return [ErrNotLoaded].
//
// # Concurrency
//
// NVRTC functions are thread-safe for distinct programs; one program must
// not be used from two goroutines at once. No OS thread or CUDA context is
// needed.
package nvrtc
