// Package cpu implements the "cpu" backend: one device whose buffers live
// in host memory and whose kernels are plain Go (no cgo).
//
// Importing the package registers the backend with [backend.Register]:
//
//	import _ "github.com/vramgo/vram/backend/cpu"
//
// # Execution
//
// Kernels run synchronously: when a kernel returns, its work is done, so
// the device's stream has nothing to wait for. Elementwise kernels convert
// blocks of elements to a compute type (float32 for float32, float16 and
// bfloat16; float64; int32 or int64; bool as 0 and 1), compute, and convert
// back, reading contiguous float32, float64, int32 and int64 data in place.
// Any strides work, including 0 (broadcast), as do offsets, empty views and
// 0-d views. Matrix products use gonum's pure-Go Sgemm and Dgemm.
//
// # Parallelism and determinism
//
// A kernel with more than about 32K elements of work is split across
// runtime.GOMAXPROCS(0) goroutines; smaller ones run on the calling
// goroutine. Results are bit-identical whatever the number of CPUs:
// elementwise kernels compute each element independently; each output of a
// reduction folds its inputs in a fixed order, long reductions in fixed
// chunks of 16K elements whose partial results are combined in chunk
// order; ScatterAdd adds into each element in the order of the source; and
// gonum computes each block of a matrix product in a fixed order. Sums of
// float32, float16 and bfloat16 accumulate in float64 and round once, to
// the destination's dtype (float32 for a widened Sum or Prod of a 16-bit
// float, [backend.WidensReduce]).
//
// # Fused ops
//
// The device implements [backend.FusedMatMul], [backend.FusedAdam],
// [backend.FusedSGD] and [backend.FusedUnscale] with the arithmetic of the CUDA backend's kernels, so
// that a sim device computes what a GPU computes: the fused product adds
// the bias to the float32 product and rounds once, and the optimizer steps
// compute float16 and bfloat16 parameters in float32, operation by
// operation, rounding the moments and the momentum buffer to their dtype
// when stored.
//
// # Memory
//
// The device counts the bytes of its live buffers, allocated and not yet
// freed, and refuses an allocation that would take them past a limit with
// an [*OutOfMemoryError] that names what was asked, what is live and the
// limit: the machine's physical memory (RAM without swap) unless
// [Configure] sets another ([Options.MemoryLimit]; vram.Config's
// CPUMemoryLimit and VRAM_CPU_MEMORY_LIMIT lead there), and none where
// the physical memory is unknown. Concurrent allocations never carry the
// total past the limit. [Device.Free] gives a buffer's bytes back; a
// buffer handed to the garbage collector with [Device.Abandon] gives them
// back when it is reclaimed. A single buffer larger than the machine's
// RAM and swap is an error wrapping memory.ErrTooLarge, whatever the
// limit. The check is two atomic operations an allocation.
//
// A panic inside a kernel, on any goroutine, is recovered and returned as
// an error.
package cpu
