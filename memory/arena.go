package memory

import (
	"errors"
	"time"
)

// ErrArenaFull is the error an [Arena] or [VirtualArena] wraps when it has
// no physical memory left for a request (CUDA_ERROR_OUT_OF_MEMORY). The
// allocator reacts to it by freeing its cache and retrying; any other arena
// error is returned to the caller of [Allocator.Alloc] at once.
var ErrArenaFull = errors.New("memory: arena out of memory")

// Arena is the device memory an [Allocator] carves blocks from: the narrow,
// driver-style contract a device implements (see the package documentation,
// "# Implementing"). Sizes are bytes and addresses are device addresses.
//
// The allocator serialises its calls under its own lock, so an Arena used by
// one Allocator needs no locking of its own; [SimArena] locks anyway.
type Arena interface {
	// Alloc takes size bytes of physical memory (cuMemAlloc) and returns
	// its address, aligned to at least 512 bytes. When the device has too
	// little free memory the error wraps ErrArenaFull.
	Alloc(size int64) (addr uint64, err error)
	// Free returns memory obtained from Alloc (cuMemFree); size is the
	// size given to Alloc.
	Free(addr uint64, size int64) error
	// Capacity returns the device's total memory in bytes.
	Capacity() int64
}

// VirtualArena is an [Arena] that can also reserve address ranges and back
// them with physical memory piece by piece (CUDA virtual memory management:
// cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess). The allocator
// needs it for expandable segments and for the vram policy; with a plain
// Arena, policy:vram falls back to the PyTorch policy and
// expandable_segments:True is a configuration error.
//
// Every address and size passed to Reserve, Map and Unmap is a multiple of
// Granularity.
type VirtualArena interface {
	Arena
	// Granularity returns the mapping granularity in bytes
	// (cuMemGetAllocationGranularity; 2 MiB on an H200).
	Granularity() int64
	// Reserve reserves size bytes of address space with no memory behind
	// it (cuMemAddressReserve) and returns its base.
	Reserve(size int64) (base uint64, err error)
	// Unreserve gives back a range obtained from Reserve
	// (cuMemAddressFree); nothing in it may still be mapped.
	Unreserve(base uint64, size int64) error
	// Map backs [addr, addr+size), inside a reserved range and not mapped
	// yet, with one new piece of physical memory (one cuMemCreate of size
	// bytes, one cuMemMap, one cuMemSetAccess). When the device has too
	// little free memory the error wraps ErrArenaFull and nothing is
	// mapped.
	Map(addr uint64, size int64) error
	// Unmap undoes exactly one earlier Map(addr, size): it unmaps the
	// range and releases its physical memory (cuMemUnmap, cuMemRelease).
	// The allocator never unmaps part of a mapping or several mappings in
	// one call.
	Unmap(addr uint64, size int64) error
}

// DeviceInfo is an optional hook for what only the device knows. The
// allocator uses it for the [OutOfMemoryError] message alone. An Arena
// that implements it is used as the hook unless [WithDeviceInfo] gives
// another. A DeviceInfo may also implement [ProcessInfo] and [PeerInfo].
type DeviceInfo interface {
	// FreeMemory returns the bytes free on the device and its total
	// memory, as the driver reports them (cuMemGetInfo).
	FreeMemory() (free, total int64, err error)
	// OtherProcesses returns the memory held on the device by other
	// processes (from NVML), largest first; nil if unknown.
	OtherProcesses() ([]ProcessMemory, error)
}

// ProcessMemory is the device memory one process holds.
type ProcessMemory struct {
	PID   int    // process id
	Name  string // process name, "" if unknown
	Bytes int64  // device memory it holds
}

// ProcessInfo is an optional interface of a [DeviceInfo] that knows what
// this process holds on the device in all, as the driver's process list
// counts it (NVML): the allocator's reserve plus what lies outside it (the
// CUDA context, libraries, memory allocated around the allocator). The
// [OutOfMemoryError] then tells that part apart from other processes.
type ProcessInfo interface {
	// ThisProcess returns the device memory this process holds, -1 when
	// the process list does not show it (a container with its own PID
	// namespace).
	ThisProcess() (int64, error)
}

// PeerInfo is an optional interface of a [DeviceInfo] that knows the other
// devices of the machine of the same kind: the [OutOfMemoryError] then
// names those with room for the work.
type PeerInfo interface {
	// Peers returns the machine's other devices that this process can
	// use, with their memory; nil if unknown.
	Peers() ([]PeerMemory, error)
}

// PeerMemory is the memory of another device of the machine.
type PeerMemory struct {
	Name  string // the device as vram names it: "cuda:1", "sim:1"
	Free  int64  // bytes free, as its driver reports them
	Total int64  // bytes of memory
}

// DriverTimer is an optional interface of an [Arena] that prices its own
// driver calls, as [SimArena] does with the cost model. The allocator's
// [Stats.DriverTime] then comes from it; for other arenas the allocator
// measures the wall-clock time of each arena call.
type DriverTimer interface {
	// DriverTime returns the total time of all driver calls so far.
	DriverTime() time.Duration
}

// Stream identifies a stream of work on the device (a cudaStream_t value);
// 0 is the default stream. Blocks belong to the stream they were allocated
// on and are reused only on that stream unless [Allocator.RecordStream] says
// otherwise.
type Stream uint64

// Event is an opaque handle from an [EventSource]: a marker recorded on a
// stream that completes when the work queued before it finishes.
type Event uint64

// EventSource records and queries events for cross-stream frees. When a
// block used on other streams (see [Allocator.RecordStream]) is freed, the
// allocator records one event on each of those streams and reuses the block
// only once every one has completed, as PyTorch does. It queries events at
// the start of each allocation and before [Allocator.EmptyCache]. After
// Query returns true the allocator never uses that event again, so the
// source may recycle it.
//
// The allocator calls an EventSource with its lock held: its methods must
// not call back into the allocator.
type EventSource interface {
	// Record records an event on stream s (cudaEventRecord).
	Record(s Stream) Event
	// Query reports whether e has completed (cudaEventQuery).
	Query(e Event) bool
}

// EventWaiter is an optional interface of an [EventSource] that can block
// until an event completes (cudaEventSynchronize). When the source has it,
// the allocator waits for all outstanding events before releasing its whole
// cache in the out-of-memory path, so that blocks pending on other streams
// can be released too; without it those blocks stay cached until a Query
// reports them done.
type EventWaiter interface {
	// Wait blocks until e has completed (cudaEventSynchronize).
	Wait(e Event)
}
