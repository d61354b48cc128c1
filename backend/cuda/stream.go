package cuda

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
)

// Streams. Each device has its default stream (a non-blocking CUDA stream
// created with the device, so that it never synchronizes with the legacy
// NULL stream) and streams made by NewStream, each with a priority. Every
// kernel and copy names the stream it runs on; a queue is a device seen
// through one stream, and the launch helpers are its methods, so that no
// launch can reach a stream other than the one the caller named.
//
// cuBLASLt shares one handle per device; each stream has its own 32 MiB
// workspace (the default stream's is made with the handle, the others' at
// their first product), since two products running at once on one
// workspace would corrupt each other.

// Stream is a CUDA stream of a [Device].
type Stream struct {
	d        *Device
	cs       cuda.Stream
	priority int
	def      bool

	wsOnce sync.Once
	ws     *Buffer // cuBLASLt workspace of a non-default stream
	wsErr  error

	destroyed atomic.Bool
	capture   atomic.Pointer[capture] // set while captured into a graph

	q queue // the device seen through this stream, made once
}

var (
	_ backend.Stream = (*Stream)(nil)
	_ backend.Event  = (*Event)(nil)
)

// queue is a device seen through one of its streams.
type queue struct {
	*Device
	stream cuda.Stream // shadows nothing: Device keeps its default as defStream
	st     *Stream
}

// on returns d seen through s; nil is the default stream. A stream of
// another device, or a destroyed one, is an error.
func (d *Device) on(s backend.Stream) (*queue, error) {
	st := d.def
	if s != nil {
		var ok bool
		st, ok = s.(*Stream)
		if !ok || st.d != d {
			return nil, fmt.Errorf("cuda: cuda:%d: %s: %w", d.index, describeStream(s), backend.ErrStreamDevice)
		}
		if st.destroyed.Load() {
			return nil, fmt.Errorf("cuda: cuda:%d: stream was destroyed", d.index)
		}
	}
	return &st.q, nil
}

// newStream returns a Stream of d over cs.
func newStream(d *Device, cs cuda.Stream, priority int, def bool) *Stream {
	s := &Stream{d: d, cs: cs, priority: priority, def: def}
	s.q = queue{Device: d, stream: cs, st: s}
	return s
}

func describeStream(s backend.Stream) string {
	if st, ok := s.(*Stream); ok {
		return fmt.Sprintf("a stream of cuda:%d", st.d.index)
	}
	return fmt.Sprintf("a stream of type %T", s)
}

// DefaultStream returns the device's default stream. Its Synchronize
// waits for the work queued on it and returns asynchronous errors: a
// kernel fault (the context is then lost: see [ContextLostError]) or an
// index or division error a kernel reported (see [KernelError]).
func (d *Device) DefaultStream() backend.Stream { return d.def }

// Stream returns the device's default CUDA stream.
func (d *Device) Stream() cuda.Stream { return d.def.cs }

// StreamPriorities returns the context's range of stream priorities
// (cuCtxGetStreamPriorityRange): 0 and -5 on an H200.
func (d *Device) StreamPriorities() (lowest, highest int) { return d.prioLow, d.prioHigh }

// NewStream creates a non-blocking stream of the given priority, clamped
// to the device's range (cuStreamCreateWithPriority).
func (d *Device) NewStream(priority int) (backend.Stream, error) {
	priority = max(d.prioHigh, min(d.prioLow, priority))
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	cs, err := cuda.StreamCreateWithPriority(cuda.StreamNonBlocking, priority)
	if err != nil {
		return nil, d.check(err)
	}
	return newStream(d, cs, priority, false), nil
}

// Priority returns the stream's priority.
func (s *Stream) Priority() int { return s.priority }

// Handle returns the CUDA stream.
func (s *Stream) Handle() cuda.Stream { return s.cs }

// Synchronize waits for the work queued on the stream and returns the
// first asynchronous error (see [Device.DefaultStream]). An index or
// division error reported by a kernel of another stream of the device may
// be returned here too: kernels of one device report them in one place.
func (s *Stream) Synchronize() error {
	d := s.d
	if err := s.q.refuseCaptured("synchronize"); err != nil {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	if err := d.check(cuda.StreamSynchronize(s.cs)); err != nil {
		return err
	}
	return d.kernelErrorLocked()
}

// Query reports whether the stream's work has finished (cuStreamQuery).
func (s *Stream) Query() (bool, error) {
	d := s.d
	if err := s.q.refuseCaptured("query"); err != nil {
		return false, err
	}
	if err := d.enter(); err != nil {
		return false, err
	}
	defer d.exit()
	return ready(d, cuda.StreamQuery(s.cs))
}

// ready turns the result of a query into done or not, or an error.
func ready(d *Device, err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, cuda.ErrNotReady):
		return false, nil
	}
	return false, d.check(err)
}

// WaitEvent makes the stream's later work wait for e, an event of any
// CUDA device (cuStreamWaitEvent).
func (s *Stream) WaitEvent(e backend.Event) error {
	ev, ok := e.(*Event)
	if !ok {
		return fmt.Errorf("cuda: wait on an event of type %T: %w", e, backend.ErrStreamDevice)
	}
	if !ev.recorded.Load() {
		return nil
	}
	d := s.d
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return d.check(cuda.StreamWaitEvent(s.cs, ev.ce, 0))
}

// Destroy waits for the stream's queued work, then releases the stream
// (cuStreamDestroy_v2) and its cuBLASLt workspace. The default stream is
// never destroyed.
func (s *Stream) Destroy() error {
	if s.def || s.destroyed.Swap(true) {
		return nil
	}
	d := s.d
	if s.ws != nil {
		// The allocator keeps the block from reuse until the stream's
		// work is done: the workspace was allocated on this stream.
		d.Free(s.ws, s)
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	// Wait for the stream's work first: the allocator's pool for this
	// stream keeps the blocks freed on it, and a stream created later may
	// get the same handle, so none of its work may still be running.
	if err := d.check(cuda.StreamSynchronize(s.cs)); err != nil {
		return err
	}
	return d.check(cuda.StreamDestroy(s.cs))
}

// workspace returns the cuBLASLt workspace of the queue's stream.
func (q *queue) workspace() (cuda.DevicePtr, error) {
	st := q.st
	if st.def {
		return q.blas.ws.ptr, nil
	}
	st.wsOnce.Do(func() {
		ws, err := q.Alloc(workspaceBytes, st, WorkspaceRegion)
		if err != nil {
			st.wsErr = fmt.Errorf("cuda: cuda:%d: cuBLASLt workspace of a stream: %w", q.index, err)
			return
		}
		st.ws = ws.(*Buffer)
	})
	if st.wsErr != nil {
		return 0, st.wsErr
	}
	return st.ws.ptr, nil
}

// Synchronize waits for the work of every stream of the device
// (cuCtxSynchronize) and returns the first asynchronous error.
func (d *Device) Synchronize() error {
	if err := d.refuseCapturing("synchronize"); err != nil {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	if err := d.check(cuda.CtxSynchronize()); err != nil {
		return err
	}
	return d.kernelErrorLocked()
}

// Event is a CUDA event of a [Device].
type Event struct {
	d        *Device
	ce       cuda.Event
	timing   bool
	recorded atomic.Bool
}

// NewEvent creates an event (cuEventCreate), with timing or with
// CU_EVENT_DISABLE_TIMING.
func (d *Device) NewEvent(timing bool) (backend.Event, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	flags := uint32(cuda.EventDisableTiming)
	if timing {
		flags = cuda.EventDefault
	}
	ce, err := cuda.EventCreate(flags)
	if err != nil {
		return nil, d.check(err)
	}
	return &Event{d: d, ce: ce, timing: timing}, nil
}

// Record records the event on s, a stream of the event's device
// (cuEventRecord).
func (e *Event) Record(s backend.Stream) error {
	q, err := e.d.on(s)
	if err != nil {
		return err
	}
	if err := e.d.enter(); err != nil {
		return err
	}
	defer e.d.exit()
	if err := e.d.check(cuda.EventRecord(e.ce, q.stream)); err != nil {
		return err
	}
	e.recorded.Store(true)
	return nil
}

// Query reports whether the event has completed (cuEventQuery).
func (e *Event) Query() (bool, error) {
	if !e.recorded.Load() {
		return true, nil
	}
	if err := e.d.enter(); err != nil {
		return false, err
	}
	defer e.d.exit()
	return ready(e.d, cuda.EventQuery(e.ce))
}

// Synchronize waits for the event (cuEventSynchronize).
func (e *Event) Synchronize() error {
	if !e.recorded.Load() {
		return nil
	}
	if err := e.d.enter(); err != nil {
		return err
	}
	defer e.d.exit()
	return e.d.check(cuda.EventSynchronize(e.ce))
}

// Elapsed returns the time from start to e (cuEventElapsedTime, whose
// resolution is about half a microsecond).
func (e *Event) Elapsed(start backend.Event) (time.Duration, error) {
	st, ok := start.(*Event)
	if !ok || st.d != e.d {
		return 0, fmt.Errorf("cuda: elapsed time between events of different devices: %w", backend.ErrStreamDevice)
	}
	if !e.timing || !st.timing {
		return 0, errors.New("cuda: elapsed time needs two events created with timing")
	}
	if !e.recorded.Load() || !st.recorded.Load() {
		return 0, errors.New("cuda: elapsed time of an event never recorded")
	}
	if err := e.d.enter(); err != nil {
		return 0, err
	}
	defer e.d.exit()
	el, err := cuda.EventElapsedTime(st.ce, e.ce)
	if errors.Is(err, cuda.ErrNotReady) {
		return 0, errors.New("cuda: elapsed time of an event not yet completed; synchronize it first")
	}
	return el, e.d.check(err)
}

// Destroy releases the event (cuEventDestroy_v2; waits already queued on
// it still hold).
func (e *Event) Destroy() error {
	if err := e.d.enter(); err != nil {
		return err
	}
	defer e.d.exit()
	return e.d.check(cuda.EventDestroy(e.ce))
}

// RecordStream marks b as used by the work queued on s, for the
// allocator's cross-stream frees.
func (d *Device) RecordStream(b backend.Buffer, s backend.Stream) {
	cb, ok := b.(*Buffer)
	q, err := d.on(s)
	if !ok || cb.block == nil || err != nil {
		return
	}
	d.alloc.RecordStream(cb.block, memory.Stream(q.stream))
}

// Pinned host memory for non-blocking copies. A buffer from AllocPinned
// remembers the streams its copies were queued on; FreePinned records an
// event on each and frees the memory only when they have completed
// (checked at the next AllocPinned or FreePinned), so a copy still in
// flight never reads or writes freed memory.

// PinnedBuffer is page-locked host memory from [Device.AllocPinned].
type PinnedBuffer struct {
	d     *Device
	bytes []byte
	mu    sync.Mutex
	used  []*Stream // streams that queued copies on it
}

var (
	_ backend.AsyncCopier = (*Device)(nil)
	_ backend.Pinned      = (*PinnedBuffer)(nil)
)

// Bytes returns the buffer's size.
func (b *PinnedBuffer) Bytes() int64 { return int64(len(b.bytes)) }

// Host returns the buffer's memory.
func (b *PinnedBuffer) Host() []byte { return b.bytes }

// PinnedBy returns the device that allocated the buffer.
func (b *PinnedBuffer) PinnedBy() backend.Device { return b.d }

// pendingPinned is a freed pinned buffer waiting for its copies.
type pendingPinned struct {
	mem    []byte
	events []cuda.Event
}

// AllocPinned returns nbytes of page-locked host memory
// (cuMemAllocHost_v2 through AllocHost).
func (d *Device) AllocPinned(nbytes int64) (backend.HostBuffer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("cuda: cuda:%d: negative pinned allocation size %d", d.index, nbytes)
	}
	d.reapPinned()
	if nbytes == 0 {
		return &PinnedBuffer{d: d, bytes: []byte{}}, nil
	}
	mem, err := d.AllocHost(int(nbytes))
	if err != nil {
		return nil, fmt.Errorf("cuda: cuda:%d: %d bytes of pinned host memory: %w", d.index, nbytes, err)
	}
	return &PinnedBuffer{d: d, bytes: mem}, nil
}

// FreePinned frees a buffer from AllocPinned once the copies queued on it
// have completed.
func (d *Device) FreePinned(hb backend.HostBuffer) {
	b, ok := hb.(*PinnedBuffer)
	if !ok || b.d != d || len(b.bytes) == 0 {
		return
	}
	b.mu.Lock()
	mem, used := b.bytes, b.used
	b.bytes, b.used = nil, nil
	b.mu.Unlock()
	p := pendingPinned{mem: mem}
	if d.enter() == nil {
		for _, s := range used {
			if e, err := cuda.EventCreate(cuda.EventDisableTiming); err == nil {
				if cuda.EventRecord(e, s.cs) == nil {
					p.events = append(p.events, e)
				} else {
					cuda.EventDestroy(e)
				}
			}
		}
		d.exit()
	}
	d.pinMu.Lock()
	d.pinPending = append(d.pinPending, p)
	d.pinMu.Unlock()
	d.reapPinned()
}

// reapPinned frees the pending pinned buffers whose copies completed.
func (d *Device) reapPinned() {
	d.pinMu.Lock()
	defer d.pinMu.Unlock()
	if len(d.pinPending) == 0 || d.enter() != nil {
		return
	}
	defer d.exit()
	kept := d.pinPending[:0]
	for _, p := range d.pinPending {
		done := true
		for _, e := range p.events {
			if err := cuda.EventQuery(e); errors.Is(err, cuda.ErrNotReady) {
				done = false
				break
			}
		}
		if !done {
			kept = append(kept, p)
			continue
		}
		for _, e := range p.events {
			cuda.EventDestroy(e)
		}
		d.FreeHost(p.mem)
	}
	clear(d.pinPending[len(kept):])
	d.pinPending = kept
}

// pinnedView checks that v is a contiguous view of pinned memory of this
// device and returns its address and size in bytes.
func (q *queue) pinnedView(what string, v backend.View) (*PinnedBuffer, unsafe.Pointer, int, error) {
	b, ok := v.Buf.(*PinnedBuffer)
	if !ok || b.d != q.Device {
		return nil, nil, 0, fmt.Errorf("cuda: cuda:%d: %s: host buffer %T is not pinned memory of this device: %w", q.index, what, v.Buf, backend.ErrNotImplemented)
	}
	if !v.IsContiguous() {
		return nil, nil, 0, fmt.Errorf("cuda: cuda:%d: %s: host view is not contiguous", q.index, what)
	}
	n := v.NumElements() * v.DType.Size()
	b.mu.Lock()
	defer b.mu.Unlock()
	off := v.Offset * v.DType.Size()
	if b.bytes == nil || off < 0 || off+n > len(b.bytes) {
		return nil, nil, 0, fmt.Errorf("cuda: cuda:%d: %s: view outside the pinned buffer (or the buffer was freed)", q.index, what)
	}
	found := false
	for _, s := range b.used {
		found = found || s == q.st
	}
	if !found {
		b.used = append(b.used, q.st)
	}
	if n == 0 {
		return b, nil, 0, nil
	}
	return b, unsafe.Pointer(&b.bytes[off]), n, nil
}

// CopyFromPinned queues a copy of pinned src into dst on s
// (cuMemcpyHtoDAsync_v2) and returns at once.
func (d *Device) CopyFromPinned(s backend.Stream, dst, src backend.View) error {
	return d.pinnedCopy("copy from pinned memory", s, dst, src, func(p cuda.DevicePtr, h unsafe.Pointer, n uint64, cs cuda.Stream) error {
		return cuda.MemcpyHtoDAsync(p, h, n, cs)
	})
}

// CopyToPinned queues a copy of src into pinned dst on s
// (cuMemcpyDtoHAsync_v2) and returns at once.
func (d *Device) CopyToPinned(s backend.Stream, dst, src backend.View) error {
	return d.pinnedCopy("copy to pinned memory", s, src, dst, func(p cuda.DevicePtr, h unsafe.Pointer, n uint64, cs cuda.Stream) error {
		return cuda.MemcpyDtoHAsync(h, p, n, cs)
	})
}

// pinnedCopy checks the device view dev and the pinned host view host of
// one copy and queues it with copy on s's CUDA stream.
func (d *Device) pinnedCopy(what string, s backend.Stream, dev, host backend.View, copy func(p cuda.DevicePtr, h unsafe.Pointer, n uint64, cs cuda.Stream) error) error {
	q, err := d.on(s)
	if err != nil {
		return err
	}
	if err := q.refuseCaptured(what); err != nil {
		return err
	}
	_, h, n, err := q.pinnedView(what, host)
	if err != nil {
		return err
	}
	p, _, err := d.hostView(what, dev, n)
	if err != nil || n == 0 {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return d.check(copy(p, h, uint64(n), q.stream))
}
