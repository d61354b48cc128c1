// Package cuda binds the CUDA driver API (libcuda.so.1) with purego, without
// cgo: devices, primary contexts, device and page-locked host memory,
// copies, streams (with priorities), events, modules and kernel launches,
// peer access and virtual memory management (cuMemCreate, cuMemMap, ...).
//
// It holds bindings and nothing else: every function calls one C function
// (its doc comment names the exact symbol, with its _v2 suffix), returns an
// error for a failed CUresult, and keeps no state beyond the loaded
// library. Start with [Load], then [Init], [DeviceGet] and
// [DevicePrimaryCtxRetain]; run work inside [Context.Do].
//
// # Threads and contexts
//
// The driver's current context belongs to the calling OS thread, and the Go
// scheduler moves goroutines between threads at any moment: after a
// successful cuCtxSetCurrent, a later cuMemAlloc in the same goroutine can
// run on another thread and fail with CUDA_ERROR_INVALID_CONTEXT (this was
// seen on the H200 machines). So every call that works on the current
// context must come from a goroutine that has called runtime.LockOSThread
// and then made the context current on that thread. [Context.Do] does both
// for the length of one function:
//
//	ctx, err := cuda.DevicePrimaryCtxRetain(dev)
//	...
//	err = ctx.Do(func() error {
//		p, err := cuda.MemAlloc(1 << 20)
//		if err != nil {
//			return err
//		}
//		return cuda.MemFree(p)
//	})
//
// Use primary contexts, which cuBLAS, NCCL and the CUDA runtime share, and
// a long-lived goroutine locked to its thread for a device's steady work.
//
// # Errors
//
// A failed call returns an *[Error] holding the numeric CUresult, the
// driver's name for it (CUDA_ERROR_OUT_OF_MEMORY) and the C function that
// failed; errors.Is matches it against the sentinels ([ErrOutOfMemory],
// [ErrInvalidContext], [ErrNotInitialized], [ErrNoDevice], ...) by code.
// Every call made before [Load] succeeded returns [ErrNotLoaded].
// Kernel faults are asynchronous: they surface at a later synchronisation
// or query, possibly in an unrelated call, and some (CUDA_ERROR_ILLEGAL_ADDRESS,
// CUDA_ERROR_LAUNCH_FAILED) are sticky: every later call in that context
// fails the same way.
//
// # Memory ownership
//
// Device memory is addressed by [DevicePtr], a plain integer the garbage
// collector never sees: whoever allocates it frees it. Go memory handed to
// the driver follows the cgo pointer rules: it holds no Go pointers, and
// when the driver keeps using it after the call returns (asynchronous
// copies, registered host memory) the caller pins it with runtime.Pinner
// and keeps it alive until the work is done. [KernelArgs] packs launch
// arguments in pinned memory for that reason.
//
// # Calls through SyscallN
//
// The calls made once per operation (asynchronous copies and memsets,
// [LaunchKernel], [EventRecord], [EventQuery], [StreamQuery],
// [StreamWaitEvent]) go through purego.SyscallN with the symbol's address
// (about 0.1 µs a call); the rest through purego.RegisterFunc. The file
// bindings.tsv lists every symbol with its argument widths, return width,
// call style and fallback names, and the size of each struct passed by
// pointer; a CPU test holds the Go declarations to it.
package cuda
