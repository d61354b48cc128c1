package sim

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
)

// Graphs on a simulated GPU (backend.GraphCapturer), with CUDA's rules.
// While a stream is captured, the kernels queued on it are kept instead of
// run, the stream's requests come from a private pool of the allocator,
// and what a GPU could not record (a copy between host and device on the
// stream, a synchronization of it or of the device, a query) fails with
// backend.ErrCapturing. A replay runs the kept kernels in order on the
// stream it is queued on, over the same buffers. The host memory of a
// buffer allocated during the capture outlives the buffer's Free until the
// graph is released, as the GPU memory of the private pool does.

// capture is the state of a stream under capture; guarded by qmu.
type capture struct {
	pool   memory.Stream
	consts memory.Stream // the pool of the constants written at capture time
	ops    []func() error
	err    error            // the first refusal during the capture
	keep   []backend.Buffer // host memory of its buffers freed during it
}

// Graph is a captured graph of a simulated device.
type Graph struct {
	d      *Device
	pool   memory.Stream
	consts memory.Stream
	ops    []func() error

	mu       sync.Mutex
	released bool
	// keep holds the host memory of buffers of the graph's pool freed
	// while the graph lives; Release gives it back.
	keep []backend.Buffer
}

var (
	_ backend.GraphCapturer = (*Device)(nil)
	_ backend.Graph         = (*Graph)(nil)
)

// BeginCapture starts recording the work queued on s.
func (d *Device) BeginCapture(s backend.Stream) error {
	st, err := d.stream("begin capture", s)
	if err != nil {
		return err
	}
	// Work already queued runs first: it is not part of the graph.
	qmu.Lock()
	defer qmu.Unlock()
	if st.capture != nil {
		return fmt.Errorf("sim:%d: the stream is already being captured: %w", d.index, backend.ErrCapturing)
	}
	if st.destroyed {
		return fmt.Errorf("sim:%d: capture of destroyed stream %d", d.index, st.id)
	}
	st.runTo(st.queuedN)
	st.capture = &capture{pool: d.alloc.NewPrivatePool(), consts: d.alloc.NewPrivatePool()}
	d.alloc.HoldReleases()
	d.capturing.Add(1)
	return nil
}

// EndCapture ends the capture of s and returns its graph, or the first
// refusal that happened during it.
func (d *Device) EndCapture(s backend.Stream) (backend.Graph, error) {
	st, err := d.stream("end capture", s)
	if err != nil {
		return nil, err
	}
	qmu.Lock()
	c := st.capture
	if c != nil {
		st.capture = nil
		d.capturing.Add(-1)
	}
	qmu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("sim:%d: EndCapture of a stream that is not being captured", d.index)
	}
	d.alloc.ResumeReleases()
	if c.err != nil {
		for _, b := range c.keep {
			d.host.Free(b, d.host.DefaultStream())
		}
		d.alloc.ReleasePool(c.pool)
		d.alloc.ReleasePool(c.consts)
		return nil, fmt.Errorf("sim:%d: the capture failed (an operation that cannot be recorded ran during it): %w", d.index, c.err)
	}
	g := &Graph{d: d, pool: c.pool, consts: c.consts, ops: c.ops, keep: c.keep}
	d.graphs.Store(c.pool, g)
	return g, nil
}

// refuse returns an error wrapping backend.ErrCapturing when st is being
// captured, and remembers it as the capture's failure. qmu is held.
func (st *Stream) refuse(what string) error {
	c := st.capture
	if c == nil {
		return nil
	}
	err := fmt.Errorf("sim:%d: %s: %w", st.d.index, what, backend.ErrCapturing)
	if c.err == nil {
		c.err = err
	}
	return err
}

// refuseCapturing is refuse for work on the whole device. qmu is held.
func (d *Device) refuseCapturing(what string) error {
	if d.capturing.Load() == 0 {
		return nil
	}
	var err error
	for _, st := range d.st.byID {
		if st.capture != nil {
			err = st.refuse(what + " while a stream of the device is captured")
		}
	}
	return err
}

// Replay queues the graph's kernels on s.
func (g *Graph) Replay(s backend.Stream) error {
	st, err := g.d.stream("replay", s)
	if err != nil {
		return err
	}
	g.mu.Lock()
	released := g.released
	g.mu.Unlock()
	if released {
		return errors.New("sim: replay of a released graph")
	}
	qmu.Lock()
	capturing := st.capture != nil
	qmu.Unlock()
	if capturing {
		return fmt.Errorf("sim:%d: replay of a graph on a stream being captured: %w", g.d.index, backend.ErrCapturing)
	}
	for _, op := range g.ops {
		if err := st.submit(nil, op); err != nil {
			return err
		}
	}
	return nil
}

// Nodes returns the number of kernels recorded.
func (g *Graph) Nodes() int { return len(g.ops) }

// Release forgets the graph and gives back its pool and the host memory of
// its freed buffers. Releasing twice does nothing.
func (g *Graph) Release() error {
	g.mu.Lock()
	if g.released {
		g.mu.Unlock()
		return nil
	}
	g.released = true
	keep := g.keep
	g.keep, g.ops = nil, nil
	g.mu.Unlock()
	g.d.graphs.Delete(g.pool)
	// Replays already queued on another stream must run before the
	// memory goes.
	if err := g.d.Synchronize(); err != nil && !errors.Is(err, backend.ErrCapturing) {
		return err
	}
	for _, b := range keep {
		g.d.host.Free(b, g.d.host.DefaultStream())
	}
	g.d.alloc.ReleasePool(g.pool)
	g.d.alloc.ReleasePool(g.consts)
	return nil
}

// keepFreed holds the host data of a freed buffer of a private pool while
// its graph lives; it reports false when the pool has no graph (its
// capture failed or its graph was released), and the caller frees it.
func (d *Device) keepFreed(b *buffer) bool {
	v, ok := d.graphs.Load(b.block.Stream())
	if !ok {
		qmu.Lock()
		defer qmu.Unlock()
		// Still capturing: the graph does not exist yet.
		for _, st := range d.st.byID {
			if c := st.capture; c != nil && c.pool == b.block.Stream() {
				c.keep = append(c.keep, b.data)
				return true
			}
		}
		return false
	}
	g := v.(*Graph)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return false
	}
	g.keep = append(g.keep, b.data)
	return true
}

// refuseHostCopy refuses a copy between host and device on st, or on the
// default stream that copies to the host run on, while it is captured.
func (d *Device) refuseHostCopy(what string, st *Stream) error {
	if d.capturing.Load() == 0 {
		return nil
	}
	qmu.Lock()
	defer qmu.Unlock()
	if err := st.refuse(what); err != nil {
		return err
	}
	return d.st.def.refuse(what)
}

var _ backend.ConstantWriter = (*Device)(nil)

// NewConstant returns a buffer of the capture's pool of constants holding
// src, written at once (no data in shape-only mode).
func (d *Device) NewConstant(s backend.Stream, src []byte, region string) (backend.Buffer, error) {
	st, err := d.stream("new constant", s)
	if err != nil {
		return nil, err
	}
	qmu.Lock()
	c := st.capture
	qmu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("sim:%d: NewConstant outside a capture of the stream", d.index)
	}
	b, err := d.newBuffer(int64(len(src)), st, c.consts, region)
	if err != nil {
		return nil, err
	}
	if b.data != nil {
		copy(b.data.(backend.HostBuffer).Host(), src)
	}
	return b, nil
}
