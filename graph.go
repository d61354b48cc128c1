package vram

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vramgo/vram/backend"
)

// ErrCapturing is wrapped by the errors of work that a graph capture cannot
// record (see [CaptureGraph]); errors.Is(err, vram.ErrCapturing) matches
// them.
var ErrCapturing = backend.ErrCapturing

// capturingDetail explains an ErrCapturing error to the caller.
const capturingDetail = "this cannot be recorded in a graph: it waits for the device or copies between host and device " +
	"(Item, printing, reading a tensor, moving one to or from the CPU, random numbers, synchronizing); " +
	"do it before the capture (inputs into tensors the graph reads) or after a replay"

// Graph is work recorded once and replayed with a single launch, like
// torch.cuda.CUDAGraph: every kernel of a training step, say, queued by one
// call instead of one launch per operation, which takes the host out of a
// step bound by it. Replays run on the memory the capture used: write new
// inputs into the tensors the captured work read (CopyFrom), replay, and
// read the results from the tensors it produced. A Graph is safe for
// concurrent use; replays queue on the calling goroutine's current stream
// of its device and run in turn.
type Graph struct {
	dev   Device
	ds    *devState
	g     backend.Graph
	mu    sync.Mutex
	freed bool
}

// CaptureGraph runs fn once with the work it queues on device d recorded
// instead of run (torch.cuda.graph), and returns the graph to replay. The
// work is recorded from the calling goroutine's current stream of d (see
// [WithStream]); fn should queue its work there only, from this goroutine.
//
// Warm up first: run fn's work once or twice outside the capture, so that
// kernels are compiled, cuDNN's benchmark mode has chosen its algorithms
// and optimizers have made their state. The capture starts by giving back
// the device's cached free memory (as [EmptyCache] does), which the graph's
// pool then takes again. During the capture:
//   - tensors allocated on d come from a private pool of the caching
//     allocator, which keeps their memory for the graph's lifetime even
//     once they are released (a replay writes them again); peak memory
//     therefore grows by what the captured work allocates;
//   - anything that waits for the device or copies between host and
//     device memory fails with an error wrapping [ErrCapturing]: Item,
//     printing or reading a tensor, moving one to or from the CPU, random
//     numbers (drawn on the host), [Synchronize];
//   - scalars are recorded as they are: a learning rate changed later does
//     not reach the replays of a captured optimizer step.
//
// Tensors that existed before the capture and that it reads (inputs,
// parameters, optimizer state) must stay alive and in place while the
// graph is used; tensors it created stay valid after it, and each replay
// recomputes them. When fn panics with a vram error or an operation in it
// cannot be recorded, CaptureGraph ends the capture, discards it and
// returns the error; other panics are passed on after the capture ended.
//
// CUDA devices record CUDA graphs (cuStreamBeginCapture, relaxed mode);
// sim devices record the kernels, with CUDA's rules; the CPU has no graphs
// (ErrUnavailable).
func CaptureGraph(d Device, fn func()) (g *Graph, err error) {
	const op = "capture graph"
	if fn == nil {
		return nil, &Error{Op: op, Kind: ErrArgument, Detail: "nil function"}
	}
	ds, err := deviceFor(d)
	if err != nil {
		return nil, opError(op, err)
	}
	gc, ok := ds.bd.(backend.GraphCapturer)
	if !ok {
		return nil, &Error{Op: op, Kind: ErrUnavailable, Detail: fmt.Sprintf("%s does not record graphs (CUDA and sim devices do)", d)}
	}
	var bs backend.Stream
	if ferr := Catch(func() { bs = ds.stream() }); ferr != nil {
		return nil, ferr
	}
	// The graph's pool cannot take the device's cached free memory: give
	// it back first, so that the pool maps it again rather than adding to
	// it (the peak reserve stays near what the work needs).
	if a := allocatorOf(d); a != nil {
		a.EmptyCache() // not EmptyCache(d): the device's tables stay
	}
	if err := gc.BeginCapture(bs); err != nil {
		return nil, &Error{Op: op, Kind: ErrBackend, Detail: "starting the capture on " + d.String(), Err: err}
	}
	ended := false
	end := func() (backend.Graph, error) {
		ended = true
		return gc.EndCapture(bs)
	}
	defer func() {
		if !ended { // fn panicked with something other than a vram error
			if bg, eerr := end(); eerr == nil {
				bg.Release()
			}
		}
	}()
	ferr := Catch(fn)
	bg, eerr := end()
	switch {
	case ferr != nil:
		if eerr == nil {
			bg.Release()
		}
		return nil, ferr
	case eerr != nil:
		detail := "the capture failed on " + d.String()
		if errors.Is(eerr, backend.ErrCapturing) {
			detail = capturingDetail
		}
		return nil, &Error{Op: op, Kind: ErrBackend, Detail: detail, Err: eerr}
	}
	return &Graph{dev: d, ds: ds, g: bg}, nil
}

// Replay queues the recorded work once more on the calling goroutine's
// current stream of the graph's device (torch.cuda.CUDAGraph.replay) and
// returns without waiting for it. It returns an [*Error] of kind
// [ErrReleased] after Release and of kind [ErrBackend] when the device
// refuses.
func (g *Graph) Replay() error {
	const op = "graph replay"
	if g == nil {
		return &Error{Op: op, Kind: ErrArgument, Detail: "nil *Graph"}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		return &Error{Op: op, Kind: ErrReleased, Detail: "the graph was released"}
	}
	var bs backend.Stream
	if err := Catch(func() { bs = g.ds.stream() }); err != nil {
		return err
	}
	if err := g.g.Replay(bs); err != nil {
		return &Error{Op: op, Kind: ErrBackend, Detail: g.dev.String(), Err: err}
	}
	return nil
}

// Nodes returns the number of kernels, copies and other operations the
// graph recorded.
func (g *Graph) Nodes() int {
	if g == nil {
		return 0
	}
	return g.g.Nodes()
}

// Device returns the device the graph runs on.
func (g *Graph) Device() Device { return g.dev }

// Release frees the graph and gives its memory pool back to the caching
// allocator; tensors the capture created and that are still alive keep
// their memory until they are released. Replays already queued still run.
// Releasing twice does nothing.
func (g *Graph) Release() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		return
	}
	g.freed = true
	g.g.Release()
}
