package backend

import "errors"

// GraphCapturer is implemented by devices that can record the work queued
// on a stream into a graph and replay it with one launch, as CUDA graphs
// do. Callers find it with a type assertion.
//
// Between BeginCapture and EndCapture the work queued on the stream is
// recorded, not run. The device's allocator serves the stream's requests
// from a pool of the capture's own, and keeps that pool's memory (the
// addresses the recorded work reads and writes) for as long as the graph
// lives, even when the buffers in it are freed: a replay writes them
// again. Anything that would have to wait for the recorded work or copy
// through host memory (a synchronization of the stream or the device, a
// copy to or from the host, an event query) fails with an error wrapping
// [ErrCapturing] and leaves the capture to be ended and discarded.
type GraphCapturer interface {
	// BeginCapture starts recording the work queued on s. A stream
	// records one capture at a time; the device's other streams run
	// their work as usual.
	BeginCapture(s Stream) error
	// EndCapture ends the capture of s and returns the graph it
	// recorded. After a failure during the capture it returns that
	// failure, gives back the capture's pool and leaves s as it was
	// before BeginCapture.
	EndCapture(s Stream) (Graph, error)
}

// Graph is recorded work that replays as one launch.
type Graph interface {
	// Replay queues the recorded work on s, a stream of the graph's
	// device, once more. It runs on the same memory each time: inputs
	// are written into the buffers the capture read, before Replay, and
	// outputs read from the buffers it wrote, after.
	Replay(s Stream) error
	// Nodes returns the number of kernels, copies and other operations
	// recorded.
	Nodes() int
	// Release frees the graph once its queued replays have finished, and
	// lets the allocator reuse the free memory of its pool; buffers of
	// the pool still in use return to the cache when freed.
	Release() error
}

// ErrCapturing is wrapped by the errors of work that a stream being
// captured cannot record: waiting for the stream or the device, copies
// between host and device memory, and queries of its events.
var ErrCapturing = errors.New("not possible while the stream is captured into a graph")

// ConstantWriter is implemented by devices that record graphs. While s is
// captured, NewConstant returns a buffer that holds src, written at once
// rather than recorded, from memory of the capture's own that no recorded
// work is given (a pool apart from the capture's other memory, kept with
// the graph), so that the values are in place for every replay. The root
// package uses it for the constant tables (gather indices, divisors) that
// composed operations make during a capture, where a copy from the host
// cannot be recorded. The buffer is freed with Free, as any other. Outside
// a capture it returns an error: memory of a stream's pool may still be in
// use by work queued on it, which a write at once would race.
type ConstantWriter interface {
	NewConstant(s Stream, src []byte, region string) (Buffer, error)
}
