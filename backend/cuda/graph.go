package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
)

// CUDA graphs (backend.GraphCapturer). A capture records the work queued
// on one stream with cuStreamBeginCapture_v2 in relaxed mode (other
// goroutines, on other OS threads, keep using the device's other streams)
// and instantiates it with cuGraphInstantiateWithFlags; a replay is one
// cuGraphLaunch. While a stream is captured, its requests come from a
// private pool of the caching allocator (memory.Allocator.NewPrivatePool),
// kept until the graph is released, and the allocator gives nothing back to
// the driver (HoldReleases): cuMemFree and cuMemUnmap wait for the context,
// which would end the capture. Host copies and synchronizations of the
// stream or the device are refused with backend.ErrCapturing before they
// reach the driver.

// capture is the state of a stream under capture.
type capture struct {
	pool   memory.Stream // the allocator's private pool for its requests
	consts memory.Stream // another, for the constants written at capture time
}

var (
	_ backend.GraphCapturer = (*Device)(nil)
	_ backend.Graph         = (*Graph)(nil)
)

// BeginCapture starts recording the work queued on s (nil: the default
// stream).
func (d *Device) BeginCapture(s backend.Stream) error {
	q, err := d.on(s)
	if err != nil {
		return err
	}
	st := q.st
	c := &capture{}
	if !st.capture.CompareAndSwap(nil, c) {
		return fmt.Errorf("cuda: cuda:%d: the stream is already being captured: %w", d.index, backend.ErrCapturing)
	}
	c.pool, c.consts = d.alloc.NewPrivatePool(), d.alloc.NewPrivatePool()
	d.alloc.HoldReleases()
	if err := d.enter(); err != nil {
		d.undoCapture(st, c)
		return err
	}
	defer d.exit()
	if err := cuda.StreamBeginCapture(st.cs, cuda.CaptureModeRelaxed); err != nil {
		d.undoCapture(st, c)
		return d.check(err)
	}
	d.capturing.Add(1)
	return nil
}

// undoCapture forgets a capture that did not start.
func (d *Device) undoCapture(st *Stream, c *capture) {
	st.capture.Store(nil)
	d.alloc.ResumeReleases()
	d.alloc.ReleasePool(c.pool)
	d.alloc.ReleasePool(c.consts)
}

// EndCapture ends the capture of s and instantiates the graph it recorded.
func (d *Device) EndCapture(s backend.Stream) (backend.Graph, error) {
	q, err := d.on(s)
	if err != nil {
		return nil, err
	}
	st := q.st
	c := st.capture.Load()
	if c == nil {
		return nil, fmt.Errorf("cuda: cuda:%d: EndCapture of a stream that is not being captured", d.index)
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	g, err := cuda.StreamEndCapture(st.cs)
	st.capture.Store(nil)
	d.capturing.Add(-1)
	d.alloc.ResumeReleases()
	if err != nil {
		d.alloc.ReleasePool(c.pool)
		d.alloc.ReleasePool(c.consts)
		return nil, fmt.Errorf("cuda: cuda:%d: the capture failed (an operation that cannot be recorded ran during it): %w", d.index, d.check(err))
	}
	nodes, err := cuda.GraphNodeCount(g)
	if err == nil {
		var exec cuda.GraphExec
		if exec, err = cuda.GraphInstantiate(g, 0); err == nil {
			cuda.GraphDestroy(g)
			return &Graph{d: d, exec: exec, pool: c.pool, consts: c.consts, nodes: nodes}, nil
		}
	}
	cuda.GraphDestroy(g)
	d.alloc.ReleasePool(c.pool)
	d.alloc.ReleasePool(c.consts)
	return nil, d.check(err)
}

// Graph is an instantiated CUDA graph of a [Device].
type Graph struct {
	d      *Device
	pool   memory.Stream
	consts memory.Stream
	nodes  int

	mu   sync.Mutex
	exec cuda.GraphExec // 0 once released
}

// Replay launches the graph on s (cuGraphLaunch).
func (g *Graph) Replay(s backend.Stream) error {
	d := g.d
	q, err := d.on(s)
	if err != nil {
		return err
	}
	if q.st.capture.Load() != nil {
		return fmt.Errorf("cuda: cuda:%d: replay of a graph on a stream being captured: %w", d.index, backend.ErrCapturing)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exec == 0 {
		return errors.New("cuda: replay of a released graph")
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	if err := cuda.GraphLaunch(g.exec, q.stream); err != nil {
		return d.check(err)
	}
	// The recorded kernels may report index errors again.
	d.armed.Store(true)
	return nil
}

// Nodes returns the number of operations recorded.
func (g *Graph) Nodes() int { return g.nodes }

// Release destroys the executable graph (launches already queued still
// run) and gives the allocator back the graph's private pool; giving its
// memory to the driver waits for the context first. Releasing twice does
// nothing.
func (g *Graph) Release() error {
	g.mu.Lock()
	exec := g.exec
	g.exec = 0
	g.mu.Unlock()
	if exec == 0 {
		return nil
	}
	d := g.d
	if err := d.enter(); err != nil {
		return err
	}
	err := d.check(cuda.GraphExecDestroy(exec))
	d.exit()
	d.alloc.ReleasePool(g.pool)
	d.alloc.ReleasePool(g.consts)
	return err
}

// refuseCaptured returns an error wrapping backend.ErrCapturing when the
// queue's stream is being captured.
func (q *queue) refuseCaptured(what string) error {
	if q.st.capture.Load() != nil {
		return fmt.Errorf("cuda: cuda:%d: %s: %w", q.index, what, backend.ErrCapturing)
	}
	return nil
}

// refuseCapturing returns an error wrapping backend.ErrCapturing when any
// stream of d is being captured.
func (d *Device) refuseCapturing(what string) error {
	if d.capturing.Load() > 0 {
		return fmt.Errorf("cuda: cuda:%d: %s while a stream of the device is captured: %w", d.index, what, backend.ErrCapturing)
	}
	return nil
}

var _ backend.ConstantWriter = (*Device)(nil)

// NewConstant allocates len(src) bytes from the capture's pool of
// constants and copies src into them with cuMemcpyHtoD_v2: synchronous,
// and on the legacy stream, which the device's non-blocking streams do not
// wait for, so that the capture is not disturbed. The memory is fresh:
// nothing queued uses it.
func (d *Device) NewConstant(s backend.Stream, src []byte, region string) (backend.Buffer, error) {
	q, err := d.on(s)
	if err != nil {
		return nil, err
	}
	c := q.st.capture.Load()
	if c == nil {
		return nil, fmt.Errorf("cuda: cuda:%d: NewConstant outside a capture of the stream", d.index)
	}
	blk, err := d.alloc.Alloc(int64(len(src)), c.consts, region)
	if err != nil {
		return nil, err
	}
	b := &Buffer{block: blk, ptr: cuda.DevicePtr(blk.Addr()), bytes: int64(len(src)), dev: d}
	if len(src) == 0 {
		return b, nil
	}
	if err := d.enter(); err != nil {
		d.Free(b, s)
		return nil, err
	}
	defer d.exit()
	err = cuda.MemcpyHtoD(b.ptr, unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)))
	runtime.KeepAlive(src)
	if err != nil {
		d.Free(b, s)
		return nil, d.check(err)
	}
	return b, nil
}
