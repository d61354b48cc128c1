package nccl

import (
	"unsafe"

	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
)

// The C functions, declared with Go types of the C widths: int and enums
// are int32, size_t is uint64, pointers are pointers or uintptr handles,
// and ncclUniqueId, passed by value, is a 128-byte struct. bindings.tsv
// lists the same signatures and a CPU test holds the two together.
var (
	ncclGetVersion         func(version *int32) Result
	ncclGetUniqueId        func(id *UniqueID) Result
	ncclCommInitRank       func(comm *Comm, nranks int32, id uniqueIDArg, rank int32) Result
	ncclCommInitRankConfig func(comm *Comm, nranks int32, id uniqueIDArg, rank int32, config *configArg) Result
	ncclCommInitAll        func(comms *Comm, ndev int32, devlist *int32) Result
	ncclCommFinalize       func(comm Comm) Result
	ncclCommDestroy        func(comm Comm) Result
	ncclCommAbort          func(comm Comm) Result
	ncclCommGetAsyncError  func(comm Comm, state *Result) Result
	ncclCommCount          func(comm Comm, count *int32) Result
	ncclCommCuDevice       func(comm Comm, device *int32) Result
	ncclCommUserRank       func(comm Comm, rank *int32) Result
	ncclGetErrorString     func(r Result) *byte
	ncclGetLastError       func(comm Comm) *byte
)

// The collectives, point-to-point calls and group calls, made once per
// operation, go through purego.SyscallN with these addresses. The sig*
// variables are never assigned: their types document the C signatures for
// bindings.tsv and its test.
var (
	addrAllReduce, addrBroadcast, addrReduce, addrAllGather, addrReduceScatter uintptr
	addrSend, addrRecv, addrGroupStart, addrGroupEnd                           uintptr

	sigAllReduce func(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, comm Comm, s cuda.Stream) Result
	sigBroadcast func(send, recv cuda.DevicePtr, count uint64, dt DataType, root int32, comm Comm, s cuda.Stream) Result
	sigReduce    func(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, root int32, comm Comm,
		s cuda.Stream) Result
	sigAllGather     func(send, recv cuda.DevicePtr, sendCount uint64, dt DataType, comm Comm, s cuda.Stream) Result
	sigReduceScatter func(send, recv cuda.DevicePtr, recvCount uint64, dt DataType, op RedOp, comm Comm,
		s cuda.Stream) Result
	sigSend       func(send cuda.DevicePtr, count uint64, dt DataType, peer int32, comm Comm, s cuda.Stream) Result
	sigRecv       func(recv cuda.DevicePtr, count uint64, dt DataType, peer int32, comm Comm, s cuda.Stream) Result
	sigGroupStart func() Result
	sigGroupEnd   func() Result
)

// sizeofConfigArg is the size of the configuration handed to NCCL.
const sizeofConfigArg = unsafe.Sizeof(configArg{})

const libName = "libnccl"

// bindings is every NCCL symbol bound. NCCL's symbols carry no version
// suffix; every one exists from NCCL 2.14.3 on.
var bindings = []load.Binding{
	{Lib: libName, Names: []string{"ncclGetErrorString"}, Fn: &ncclGetErrorString},
	{Lib: libName, Names: []string{"ncclGetLastError"}, Fn: &ncclGetLastError},
	{Lib: libName, Names: []string{"ncclGetVersion"}, Fn: &ncclGetVersion},
	{Lib: libName, Names: []string{"ncclGetUniqueId"}, Fn: &ncclGetUniqueId},
	{Lib: libName, Names: []string{"ncclCommInitRank"}, Fn: &ncclCommInitRank},
	{Lib: libName, Names: []string{"ncclCommInitRankConfig"}, Fn: &ncclCommInitRankConfig},
	{Lib: libName, Names: []string{"ncclCommInitAll"}, Fn: &ncclCommInitAll},
	{Lib: libName, Names: []string{"ncclCommFinalize"}, Fn: &ncclCommFinalize},
	{Lib: libName, Names: []string{"ncclCommDestroy"}, Fn: &ncclCommDestroy},
	{Lib: libName, Names: []string{"ncclCommAbort"}, Fn: &ncclCommAbort},
	{Lib: libName, Names: []string{"ncclCommGetAsyncError"}, Fn: &ncclCommGetAsyncError},
	{Lib: libName, Names: []string{"ncclCommCount"}, Fn: &ncclCommCount},
	{Lib: libName, Names: []string{"ncclCommCuDevice"}, Fn: &ncclCommCuDevice},
	{Lib: libName, Names: []string{"ncclCommUserRank"}, Fn: &ncclCommUserRank},
	{Lib: libName, Names: []string{"ncclAllReduce"}, Fn: &sigAllReduce, Addr: &addrAllReduce},
	{Lib: libName, Names: []string{"ncclBroadcast"}, Fn: &sigBroadcast, Addr: &addrBroadcast},
	{Lib: libName, Names: []string{"ncclReduce"}, Fn: &sigReduce, Addr: &addrReduce},
	{Lib: libName, Names: []string{"ncclAllGather"}, Fn: &sigAllGather, Addr: &addrAllGather},
	{Lib: libName, Names: []string{"ncclReduceScatter"}, Fn: &sigReduceScatter, Addr: &addrReduceScatter},
	{Lib: libName, Names: []string{"ncclSend"}, Fn: &sigSend, Addr: &addrSend},
	{Lib: libName, Names: []string{"ncclRecv"}, Fn: &sigRecv, Addr: &addrRecv},
	{Lib: libName, Names: []string{"ncclGroupStart"}, Fn: &sigGroupStart, Addr: &addrGroupStart},
	{Lib: libName, Names: []string{"ncclGroupEnd"}, Fn: &sigGroupEnd, Addr: &addrGroupEnd},
}

// Spec is how [Load] searches for NCCL: libnccl.so.2 in VRAM_CUDA_LIBS,
// the loader's search (the libnccl2 package of Debian and Ubuntu), the
// CUDA toolkit's folders, then the nvidia/*/lib folders of Python
// environments, where the pip wheels that PyTorch depends on
// (nvidia-nccl-cu12, nvidia-nccl-cu13) put it: .../site-packages/nvidia/nccl/lib.
var Spec = load.Spec{Name: libName, Sonames: []string{"libnccl.so.2"}}

// lib holds the loaded libnccl.so.2 and whether the bindings are ready.
var lib = load.Loader{Spec: &Spec, Bindings: bindings}

// Load finds libnccl.so.2 as package load describes, resolves every
// binding and returns the library it loaded. Once it has succeeded, later
// calls return the same library at once; after a failure the next call
// searches again.
//
// The error is a *load.NotFoundError when no libnccl.so.2 could be
// opened, or a *load.MissingSymbolError when the library is older than
// NCCL 2.14.3.
//
// Load is safe for concurrent use.
func Load() (*load.Library, error) { return lib.Load() }

// Resolved returns, for each bound C symbol, the name found in the loaded
// library, or nil before [Load] succeeded. For diagnostics.
func Resolved() map[string]string { return lib.Resolved() }

// call returns [ErrNotLoaded] before [Load] succeeded; else it calls c,
// which calls the C function fn, and turns the ncclResult_t into an error.
func call(fn string, c func() Result) error {
	if !lib.Ready() {
		return ErrNotLoaded
	}
	return check(fn, c())
}

// result is the ncclResult_t of a call through purego.SyscallN: the low 32
// bits of its first return value.
func result(r1, _, _ uintptr) Result { return Result(int32(r1)) }

// goString copies a C string owned by NCCL.
func goString(p *byte) string { return load.GoString(p) }
