package vram

import (
	"errors"
	"fmt"
	"slices"
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
	kept  *captureState // what the recorded work reads, kept until Release
	// on holds the streams replays were queued on, which the streams of
	// the kept storages wait for before their memory is reused.
	on []backend.Stream
}

// captureState is what a capture under way collects and its graph keeps:
// the constant tables that composed operations wrote during it (tableOn),
// and a reference to every storage made before the capture that the
// captured work uses (the model's parameters, its inputs, optimizer
// state), so that releasing such a tensor while the graph lives cannot
// hand its memory to other work under the replays. The storages the
// capture makes come from the graph's private pool, which the allocator
// keeps anyway; holding them would keep the capture from reusing their
// memory for later tensors of the same capture.
type captureState struct {
	stream backend.Stream // the stream the capture records
	mu     sync.Mutex
	held   []*Tensor
	used   map[*storage]bool
}

// capturing returns the capture under way on ds when the calling
// goroutine's current stream of ds is the one it records, and nil
// otherwise: the work other goroutines (or other streams) queue on ds
// during a capture runs as usual, and its tensors are none of the graph's.
func (ds *devState) capturing() *captureState {
	c := ds.capture.Load()
	if c == nil {
		return nil
	}
	if s := ds.currentStream(); s == nil || s.bs != c.stream {
		return nil
	}
	return c
}

// IsCurrentStreamCapturing reports whether the calling goroutine's current
// stream of d is being captured into a graph by [CaptureGraph]
// (torch.cuda.is_current_stream_capturing): work queued now is recorded,
// not run. It is false for devices without graphs and for the other
// goroutines and streams of a device under capture.
func IsCurrentStreamCapturing(d Device) bool {
	ds, err := deviceFor(d)
	return err == nil && ds.capturing() != nil
}

// use keeps a reference to st for the graph, once, unless the capture
// made it. Graph references count as apart (storage.go): they are no
// alias for autograd.
func (c *captureState) use(st *storage) {
	if st.born == c {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used[st] {
		return
	}
	if c.used == nil {
		c.used = map[*storage]bool{}
	}
	st.retain("capture graph")
	st.apart.Add(1)
	c.used[st] = true
}

// release releases the tables and the storages kept.
func (c *captureState) release() {
	c.mu.Lock()
	held, used := c.held, c.used
	c.held, c.used = nil, nil
	c.mu.Unlock()
	for _, t := range held {
		t.Release()
	}
	for st := range used {
		st.apart.Add(-1)
		st.release()
	}
}

// tableOn returns data as a tensor of the given shape and dtype on ds, for
// the constant tables of composed operations (gather indices, divisors):
// FromSlice, which copies from the host on the current stream. While a
// capture runs on ds, the device writes the values at once into memory of
// the capture's own ([backend.ConstantWriter]), which the capture does not
// record, and the graph keeps the table: its replays read it.
func tableOn[T Element](ds *devState, data []T, shape Shape, dt DType) *Tensor {
	if c := ds.capturing(); c != nil {
		if w, ok := ds.bd.(backend.ConstantWriter); ok {
			const op = "table"
			_, nbytes := checkShape(op, shape, dt)
			raw := encode(data, dt)
			if int64(len(raw)) != nbytes {
				panic(fmt.Sprintf("vram: internal: table of %d bytes for %d", len(raw), nbytes))
			}
			stream := ds.stream()
			buf, err := w.NewConstant(stream, raw, currentRegion())
			check(op, err)
			st := &storage{ds: ds, buf: buf, bytes: nbytes, stream: stream, born: c}
			st.refs.Store(1)
			ds.counted(nbytes)
			t := wrapStorage(st, dt, shape)
			var held *Tensor
			NoGrad(func() { held = Keep(t.view(t.shape, t.strides, t.offset)) })
			c.mu.Lock()
			c.held = append(c.held, held)
			c.mu.Unlock()
			return t
		}
	}
	return FromSlice(data, shape, ds.dev, dt)
}

// CaptureGraph runs fn once with the work it queues on device d recorded
// instead of run (torch.cuda.graph), and returns the graph to replay. As
// torch.cuda.graph does, fn runs with a side stream of d's as its current
// stream (see [WithStream]), which waits first for the work queued on the
// calling goroutine's current stream, and which that stream waits for
// after; the work of other goroutines and of other streams is not
// recorded. fn should queue its work on d from the calling goroutine.
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
//   - scalars are recorded as they are: a learning rate changed later (by
//     SetLR or a schedule) does not reach the replays of a captured
//     optimizer step;
//   - the optimizers of package optim refuse, with an error wrapping
//     ErrCapturing, a step that would not replay as it ran: a parameter's
//     first step, which makes its state (warm up first), and any step of
//     those whose step count lives on the host (Adam, AdamW, Adamax,
//     NAdam, RAdam, ASGD, Adagrad with a rate decay); SGD, RMSprop,
//     Adadelta, Rprop and Adagrad without decay replay as they run.
//
// The graph keeps a reference to every tensor's memory that existed before
// the capture and that the recorded work uses (inputs, parameters,
// optimizer state), until Release, so that releasing one cannot hand its
// memory to other work under the replays; replace an input's values in
// place (CopyFrom), never by a new tensor. Tensors the capture created stay
// valid after it, and each replay recomputes them. When fn panics with a vram error or an operation in it
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
	var cur *Stream
	if ferr := Catch(func() { cur = CurrentStream(d); ds.stream() }); ferr != nil {
		return nil, ferr
	}
	side, err := ds.captureStream()
	if err != nil {
		return nil, err
	}
	bs := side.bs
	cs := &captureState{stream: bs}
	if !ds.capture.CompareAndSwap(nil, cs) {
		return nil, &Error{Op: op, Kind: ErrArgument, Detail: "a capture is already under way on " + d.String() + " (graphs are captured one at a time per device)"}
	}
	// The graph's pool cannot take the device's cached free memory: give
	// it back first, so that the pool maps it again rather than adding to
	// it (the peak reserve stays near what the work needs).
	if a := allocatorOf(d); a != nil {
		a.EmptyCache()
	}
	// The capture stream starts after the work queued so far.
	if ferr := Catch(func() { side.WaitStream(cur) }); ferr != nil {
		ds.capture.Store(nil)
		return nil, ferr
	}
	if err := gc.BeginCapture(bs); err != nil {
		ds.capture.Store(nil)
		return nil, &Error{Op: op, Kind: ErrBackend, Detail: "starting the capture on " + d.String(), Err: err}
	}
	ended := false
	end := func() (backend.Graph, error) {
		ended = true
		ds.capture.Store(nil)
		bg, err := gc.EndCapture(bs)
		Catch(func() { cur.WaitStream(side) })
		return bg, err
	}
	defer func() {
		if !ended { // fn panicked with something other than a vram error
			if bg, eerr := end(); eerr == nil {
				bg.Release()
			}
			cs.release()
		}
	}()
	var ferr error
	WithStream(side, func() { ferr = Catch(fn) })
	bg, eerr := end()
	switch {
	case ferr != nil:
		if eerr == nil {
			bg.Release()
		}
		cs.release()
		return nil, ferr
	case eerr != nil:
		detail := "the capture failed on " + d.String()
		if errors.Is(eerr, backend.ErrCapturing) {
			detail = capturingDetail
		}
		cs.release()
		return nil, &Error{Op: op, Kind: ErrBackend, Detail: detail, Err: eerr}
	}
	return &Graph{dev: d, ds: ds, g: bg, kept: cs}, nil
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
	if g.g == nil {
		return &Error{Op: op, Kind: ErrArgument, Detail: "zero Graph, which recorded nothing; get one from CaptureGraph"}
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
	if !slices.Contains(g.on, bs) {
		g.on = append(g.on, bs)
	}
	return nil
}

// Nodes returns the number of kernels, copies and other operations the
// graph recorded.
func (g *Graph) Nodes() int {
	if g == nil || g.g == nil {
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
	if g == nil || g.g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.freed {
		return
	}
	g.freed = true
	// The storages made before the capture return to their own pools once
	// their tensors are released too: their streams first wait, on the
	// device, for the replays queued on other streams, since the
	// allocator reuses a block freed on a stream for that stream's later
	// work. The tables go into the graph's pool, given back with it; the
	// backend's Release waits for the replays before that memory goes.
	g.kept.after(g.ds, g.on)
	g.kept.release()
	g.g.Release()
}

// after makes the stream of every kept storage wait for the work queued so
// far on the streams on. A failure to order them (a lost device) leaves
// them unordered: nothing runs there any more.
func (c *captureState) after(ds *devState, on []backend.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range on {
		waited := map[backend.Stream]bool{}
		var ev backend.Event
		for st := range c.used {
			if st.stream == r || waited[st.stream] {
				continue
			}
			if ev == nil {
				var err error
				if ev, err = ds.bd.NewEvent(false); err != nil {
					return
				}
				defer ev.Destroy()
				if ev.Record(r) != nil {
					return
				}
			}
			st.stream.WaitEvent(ev)
			waited[st.stream] = true
		}
	}
}

// rampFrom returns lo, lo+1, ..., lo+n-1, for tables made with tableOn.
func rampFrom(lo, n int) []int64 {
	r := make([]int64, n)
	for i := range r {
		r[i] = int64(lo + i)
	}
	return r
}

// rampOf returns 1, 2, ..., n as float64s.
func rampOf(n int) []float64 {
	r := make([]float64, n)
	for i := range r {
		r[i] = float64(i + 1)
	}
	return r
}

// captureStream returns ds's stream for captures, made on first use and
// kept.
func (ds *devState) captureStream() (*Stream, error) {
	ds.capMu.Lock()
	defer ds.capMu.Unlock()
	if ds.capStream == nil {
		s, err := NewStream(ds.dev)
		if err != nil {
			return nil, err
		}
		ds.capStream = s
	}
	return ds.capStream, nil
}
