// Package nccl binds NCCL, NVIDIA's collective communication library
// (libnccl.so.2, 2.14.3 or later), with purego and without cgo:
// communicators for one process driving several GPUs ([CommInitAll]) and
// for one rank per process ([GetUniqueID], [CommInitRank]), all-reduce,
// broadcast, reduce, all-gather, reduce-scatter, send and receive, group
// calls, and the fault handling calls ([CommGetAsyncError], [CommAbort]).
//
// Bindings only: each function calls the C function its doc comment names
// and returns an error for a failed ncclResult_t; the package keeps no
// state beyond the loaded library. Package parallel builds its NCCL
// communicators, with timeouts and tensors, on these calls.
//
//	if _, err := nccl.Load(); err != nil {
//		return err // *load.NotFoundError: pip install nvidia-nccl-cu12 (or -cu13)
//	}
//	id, err := nccl.GetUniqueID() // on rank 0; send it to every rank
//	...
//	err = ctx.Do(func() error { // the rank's device context, current on a locked thread
//		comm, err := nccl.CommInitRank(nranks, id, rank)
//		if err != nil {
//			return err
//		}
//		defer nccl.CommDestroy(comm)
//		if err := nccl.AllReduce(buf, buf, n, nccl.Float32, nccl.Sum, comm, stream); err != nil {
//			return err
//		}
//		return cuda.StreamSynchronize(stream)
//	})
//
// # Threads and devices
//
// NCCL works on the CUDA device of the calling thread's current context,
// as the CUDA runtime sees it: [CommInitRank] binds the communicator to
// that device, and a collective's stream must belong to the
// communicator's device. Call them from a goroutine locked to its thread
// with the device's primary context current (cuda.Context.Do does both).
// Group calls ([GroupStart], [GroupEnd]) keep their state per thread, so
// the calls of one group must come from one locked thread. One thread may
// issue collectives for several communicators inside one group; without a
// group, each communicator's calls must come from its own thread, running
// concurrently, since a blocking communicator's first collective waits on
// the host for its peers.
//
// # The unique id by value
//
// ncclCommInitRank takes ncclUniqueId, a struct of 128 chars, by value.
// On linux/amd64 the System V ABI passes such a struct in memory, copied
// onto the stack after the register arguments; purego.RegisterFunc does
// the same for a Go struct of that layout (it does not take arrays), which
// is why the binding declares a 128-byte struct and bindings.tsv records
// the width 128. This was checked on an H200 with NCCL 2.28.
//
// # Errors
//
// A failed call returns an *[Error] holding the numeric ncclResult_t, its
// name in nccl.h (ncclInvalidUsage), the C function, NCCL's text for the
// code and its message for the last error (ncclGetLastError); errors.Is
// matches the sentinels ([ErrInvalidArgument], [ErrRemoteError],
// [ErrInProgress], ...) by code. Calls made before [Load] succeeded return
// [ErrNotLoaded]. Collectives return once queued: a peer that fails or
// never comes shows up later, as a kernel that does not finish and as an
// error of [CommGetAsyncError]; [CommAbort] then ends the kernels.
//
// # Calls through SyscallN
//
// The calls made once per operation (the collectives, [Send], [Recv],
// [GroupStart], [GroupEnd]) go through purego.SyscallN with the symbol's
// address; the rest through purego.RegisterFunc. The file bindings.tsv
// lists every symbol with its argument widths, return width, call style
// and fallback names, and the size of each struct handed over; a CPU test
// holds the Go declarations to it.
package nccl
