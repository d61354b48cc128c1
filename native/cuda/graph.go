package cuda

import "github.com/ebitengine/purego"

// Graph is a CUgraph handle: work recorded by stream capture.
type Graph uintptr

// GraphExec is a CUgraphExec handle: a [Graph] instantiated for launch.
type GraphExec uintptr

// GraphNode is a CUgraphNode handle.
type GraphNode uintptr

// StreamCaptureMode is a CUstreamCaptureMode: which API calls other
// threads may make while a stream is captured.
type StreamCaptureMode int32

// Capture modes (cuda.h's CUstreamCaptureMode).
const (
	// CaptureModeGlobal forbids potentially unsafe calls in every thread
	// while any capture not begun in relaxed mode is under way
	// (CU_STREAM_CAPTURE_MODE_GLOBAL).
	CaptureModeGlobal StreamCaptureMode = 0
	// CaptureModeThreadLocal forbids them in the capturing thread only
	// (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).
	CaptureModeThreadLocal StreamCaptureMode = 1
	// CaptureModeRelaxed forbids nothing beyond what cannot be captured:
	// synchronizing with or querying the captured work
	// (CU_STREAM_CAPTURE_MODE_RELAXED).
	CaptureModeRelaxed StreamCaptureMode = 2
)

// StreamCaptureStatus is a CUstreamCaptureStatus.
type StreamCaptureStatus int32

// Capture states (cuda.h's CUstreamCaptureStatus).
const (
	CaptureStatusNone        StreamCaptureStatus = 0 // CU_STREAM_CAPTURE_STATUS_NONE
	CaptureStatusActive      StreamCaptureStatus = 1 // CU_STREAM_CAPTURE_STATUS_ACTIVE
	CaptureStatusInvalidated StreamCaptureStatus = 2 // CU_STREAM_CAPTURE_STATUS_INVALIDATED
)

// StreamBeginCapture starts recording the work queued on s into a graph
// instead of running it. It calls cuStreamBeginCapture_v2. s must not be
// the legacy NULL stream.
func StreamBeginCapture(s Stream, mode StreamCaptureMode) error {
	return call("cuStreamBeginCapture_v2", func() Result { return cuStreamBeginCapture(s, mode) })
}

// StreamEndCapture ends the capture of s and returns the graph recorded.
// It calls cuStreamEndCapture. When the capture was invalidated (a
// forbidden call during it), the error is the driver's
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph is returned; the
// stream is no longer capturing either way.
func StreamEndCapture(s Stream) (Graph, error) {
	var g Graph
	err := call("cuStreamEndCapture", func() Result { return cuStreamEndCapture(s, &g) })
	return g, err
}

// StreamIsCapturing returns the capture status of s. It calls
// cuStreamIsCapturing.
func StreamIsCapturing(s Stream) (StreamCaptureStatus, error) {
	var st StreamCaptureStatus
	err := call("cuStreamIsCapturing", func() Result { return cuStreamIsCapturing(s, &st) })
	return st, err
}

// GraphInstantiate makes an executable graph of g (flags 0 for none). It
// calls cuGraphInstantiateWithFlags. g may be destroyed afterwards; the
// executable graph stays valid.
func GraphInstantiate(g Graph, flags uint64) (GraphExec, error) {
	var e GraphExec
	err := call("cuGraphInstantiateWithFlags", func() Result { return cuGraphInstantiateWithFlags(&e, g, flags) })
	return e, err
}

// GraphNodeCount returns the number of nodes of g. It calls cuGraphGetNodes
// with no array, which returns the count.
func GraphNodeCount(g Graph) (int, error) {
	var n uint64
	err := call("cuGraphGetNodes", func() Result { return cuGraphGetNodes(g, nil, &n) })
	return int(n), err
}

// GraphLaunch queues the whole executable graph on s. It calls
// cuGraphLaunch through purego.SyscallN. A graph runs one launch at a
// time: a launch queued while the previous one still runs waits for it.
func GraphLaunch(e GraphExec, s Stream) error {
	return call("cuGraphLaunch", func() Result {
		return result(purego.SyscallN(addrGraphLaunch, uintptr(e), uintptr(s)))
	})
}

// GraphExecDestroy destroys an executable graph. It calls
// cuGraphExecDestroy.
func GraphExecDestroy(e GraphExec) error {
	return call("cuGraphExecDestroy", func() Result { return cuGraphExecDestroy(e) })
}

// GraphDestroy destroys a graph. It calls cuGraphDestroy.
func GraphDestroy(g Graph) error {
	return call("cuGraphDestroy", func() Result { return cuGraphDestroy(g) })
}
