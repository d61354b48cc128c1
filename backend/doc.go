// Package backend defines the contract between vram's tensors and the
// devices that run them, and the registry of device kinds.
//
// Applications never import this package: they use the root package vram,
// which validates every operation once and then calls a [Device]'s kernels.
// Implementers import only this package, as database/sql drivers import only
// database/sql/driver.
//
// # Implementing
//
// A backend provides a [Backend] (a device kind with a name and a device
// count) and registers it with [Register] from an init function. Each
// [Device] implements four small interfaces:
//
//   - [Streams]: the default [Stream], new streams with priorities, [Event]s
//     that order them, and a device-wide Synchronize. Every kernel and copy
//     takes the stream it runs on as its first argument.
//   - [Memory]: Alloc, Free and RecordStream of [Buffer]s, bound to a
//     [Stream]. Devices with a caching allocator return its out-of-memory
//     error from Alloc.
//   - [Copier]: raw bytes in and out of contiguous views.
//   - [Kernels]: a closed set of about ten kernels (fill, copy with cast,
//     unary, binary, scalar, where, reduce, matmul, gather, scatter-add) from
//     which the root package composes every tensor operation, its gradient
//     included.
//
// Kernels receive [View]s that are already checked and broadcast; a kernel
// may return [ErrNotImplemented] (wrapped) for an op or dtype it lacks.
// Each kernel still runs its argument check from this package first
// ([CheckUnary], [CheckReduce], [CheckMatMul], ...: one for every kernel,
// fused op and host copy), so that every backend refuses the same
// arguments for the same reasons; it then relies on what the check
// documents, and checks only what is its own (buffers, alignment, limits
// of its kernels).
// Buffers that live in host memory may implement [HostBuffer] so that the
// root package reads them without a copy. Optional abilities are found by
// type assertion: [AsyncCopier] (pinned host memory and copies that do not
// wait), the fused ops of fused.go, the int8-weight kernels of quant.go
// ([Int8Linear], [Int8Dequantizer]), [Sorter] (without it the root
// package sorts a host copy), [GraphCapturer] (recording a stream's work
// into a [Graph] that replays with one launch), and, for a device that knows its memory
// (total, free, the processes on it),
// [github.com/vramgo/vram/memory.DeviceInfo], the hook its caching
// allocator uses too; vram.DeviceMemory reports it.
//
// # Files
//
// backend.go holds the contract (Backend, Device, Memory, Copier, View,
// Kernels), stream.go the streams, events and pinned copies, ops.go the op
// names, shape.go shape arithmetic, fused.go the optional fused kernels,
// quant.go the optional int8-weight kernels, sort.go the optional sort,
// graph.go the optional graph capture and registry.go the registry.
//
// # Errors
//
// Every method returns an error rather than panicking; the root package turns
// errors into typed panics. Devices that run asynchronously may report an
// error from a later call or from [Stream.Synchronize].
//
// # Concurrency
//
// Registration happens in init. Devices must be safe for concurrent use.
package backend
