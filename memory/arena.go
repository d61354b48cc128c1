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

// RangeMapper is an optional interface of a [VirtualArena] that maps a run
// of adjacent chunks with one access grant: a cuMemCreate and a cuMemMap
// per chunk, then one cuMemSetAccess over the whole run (the driver accepts
// a range that spans several mappings, as long as all of it is mapped),
// where len(sizes) calls of Map would grant access once per chunk. The
// allocator uses it whenever it maps more than one chunk at once; each
// chunk is still one mapping, unmapped on its own with
// [VirtualArena.Unmap]. It makes fewer calls, not cheaper ones: the card
// charges one cuMemSetAccess over n mappings about n times one over a
// single mapping (measured on an H100, 2026-12-06; the cost model of
// [SimArena] follows it).
type RangeMapper interface {
	// MapRange backs len(sizes) adjacent ranges, the first at addr and
	// each next one where the one before ends, with one new piece of
	// physical memory each. It is all or nothing: on failure nothing it
	// mapped stays mapped, and when the device has too little free
	// memory the error wraps ErrArenaFull.
	MapRange(addr uint64, sizes []int64) error
}

// DeviceInfo is an optional hook for what only the device knows: its
// memory as the driver reports it. The allocator uses it for the
// [OutOfMemoryError] message alone. An Arena that implements it is used as
// the hook unless [WithDeviceInfo] gives another. A DeviceInfo may also
// implement [PeerInfo]. Devices of package backend implement it too, for
// vram.DeviceMemory.
type DeviceInfo interface {
	// MemoryInfo returns the device's total and free memory
	// (cuMemGetInfo), what this process holds on it and the other
	// processes there (from the driver's process list), with -1 and nil
	// for what is unknown. Its Reserved is 0: the allocator's reserve is
	// filled in by whoever knows the allocator.
	MemoryInfo() (DeviceMemory, error)
}

// PeerInfo is an optional interface of a [DeviceInfo] that knows the other
// devices of the machine of the same kind: the [OutOfMemoryError] then
// names those with room for the work.
type PeerInfo interface {
	// Peers returns the machine's other devices that this process can
	// use, each with its Device name, Total and Free (ThisProcess -1 and
	// Others nil where not known); nil if unknown.
	Peers() ([]DeviceMemory, error)
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
