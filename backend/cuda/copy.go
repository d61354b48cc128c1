package cuda

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

// Host copies. Small copies (under stageThreshold) go through
// cuMemcpyHtoDAsync and cuMemcpyDtoHAsync on the device's stream straight
// from Go memory: for pageable memory the driver stages the bytes before
// returning (host to device) or returns once they have arrived (device to
// host), so the Go slice is free when the call returns. Large copies from
// pageable memory run through two page-locked staging buffers of
// stageChunk bytes: while the copy engine moves one chunk, goroutines copy
// the next one into the other buffer. Memory from [Device.AllocHost] is
// already page-locked and is copied directly.
const (
	// stageThreshold is the size from which host copies are staged, in
	// bytes.
	stageThreshold = 1 << 20
	// stageChunk is the size of each staging buffer, in bytes.
	stageChunk = 16 << 20
	// memcpyGrain is the least each goroutine copies between Go memory
	// and a staging buffer, in bytes.
	memcpyGrain = 2 << 20
)

// stager holds a device's staging buffers. The mutex serialises large
// copies; it is held across driver calls.
type stager struct {
	mu     sync.Mutex
	bufs   [2]unsafe.Pointer // page-locked, stageChunk bytes each
	events [2]cuda.Event
	used   [2]bool // events[k] was recorded since the last wait
}

// ensure allocates the staging buffers; the context must be current.
func (s *stager) ensure() error {
	if s.bufs[0] != nil {
		return nil
	}
	for k := range s.bufs {
		p, err := cuda.MemAllocHost(stageChunk)
		if err != nil {
			return err
		}
		e, err := cuda.EventCreate(cuda.EventDisableTiming)
		if err != nil {
			cuda.MemFreeHost(p)
			return err
		}
		s.bufs[k], s.events[k] = p, e
	}
	return nil
}

// wait blocks until buffer k's last copy finished.
func (s *stager) wait(k int) error {
	if !s.used[k] {
		return nil
	}
	s.used[k] = false
	return cuda.EventSynchronize(s.events[k])
}

func (s *stager) buf(k, n int) []byte { return unsafe.Slice((*byte)(s.bufs[k]), n) }

// parallelCopy copies src into dst with up to 8 goroutines.
func parallelCopy(dst, src []byte) {
	n := len(src)
	p := min(runtime.GOMAXPROCS(0), 8, n/memcpyGrain)
	if p <= 1 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	step := (n + p - 1) / p
	for lo := 0; lo < n; lo += step {
		hi := min(n, lo+step)
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

// pinned is the registry of page-locked host memory from AllocHost.
var pinned struct {
	mu     sync.RWMutex
	ranges []pinnedRange // sorted by start
}

type pinnedRange struct{ start, end uintptr }

// isPinned reports whether [p, p+n) lies in memory from AllocHost.
func isPinned(p unsafe.Pointer, n int) bool {
	a := uintptr(p)
	pinned.mu.RLock()
	defer pinned.mu.RUnlock()
	i := sort.Search(len(pinned.ranges), func(i int) bool { return pinned.ranges[i].end > a })
	return i < len(pinned.ranges) && pinned.ranges[i].start <= a && a+uintptr(n) <= pinned.ranges[i].end
}

// HostAllocator is implemented by devices that hand out page-locked host
// memory. Copies between such memory and the device skip the staging
// buffers and run at the full speed of the bus (PyTorch's pin_memory).
type HostAllocator interface {
	// AllocHost returns nbytes of page-locked host memory. It must be given
	// back with FreeHost; the garbage collector does not free it.
	AllocHost(nbytes int) ([]byte, error)
	// FreeHost frees memory from AllocHost.
	FreeHost(b []byte) error
}

// AllocHost returns nbytes of page-locked host memory (cuMemAllocHost_v2),
// usable with every device. Free it with FreeHost.
func (d *Device) AllocHost(nbytes int) ([]byte, error) {
	if nbytes <= 0 {
		return nil, fmt.Errorf("cuda: AllocHost of %d bytes", nbytes)
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	p, err := cuda.MemAllocHost(uint64(nbytes))
	if err != nil {
		return nil, d.check(err)
	}
	r := pinnedRange{uintptr(p), uintptr(p) + uintptr(nbytes)}
	pinned.mu.Lock()
	i := sort.Search(len(pinned.ranges), func(i int) bool { return pinned.ranges[i].start > r.start })
	pinned.ranges = append(pinned.ranges, pinnedRange{})
	copy(pinned.ranges[i+1:], pinned.ranges[i:])
	pinned.ranges[i] = r
	pinned.mu.Unlock()
	return unsafe.Slice((*byte)(p), nbytes), nil
}

// FreeHost frees memory from AllocHost (cuMemFreeHost).
func (d *Device) FreeHost(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	pinned.mu.Lock()
	found := false
	for i, r := range pinned.ranges {
		if r.start == uintptr(p) {
			pinned.ranges = append(pinned.ranges[:i], pinned.ranges[i+1:]...)
			found = true
			break
		}
	}
	pinned.mu.Unlock()
	if !found {
		return fmt.Errorf("cuda: FreeHost of memory that AllocHost did not return")
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	return d.check(cuda.MemFreeHost(p))
}

// hostView checks a contiguous view for a host copy of nbytes and returns
// its device address.
func (d *Device) hostView(what string, v backend.View, nbytes int) (cuda.DevicePtr, int, error) {
	if err := checked(what, backend.CheckHostCopy(v, nbytes)); err != nil {
		return 0, 0, err
	}
	n := nbytes
	if n == 0 {
		return 0, 0, nil
	}
	p, err := d.ptrOf(what, v)
	return p, n, err
}

// CopyFromHost writes src into the contiguous view dst. It returns once
// src may be reused; the copy itself is ordered on the device's stream
// after the work queued before it.
func (dev *Device) CopyFromHost(s backend.Stream, dst backend.View, src []byte) error {
	d, qerr := dev.on(s)
	if qerr != nil {
		return qerr
	}
	direct := func(p cuda.DevicePtr, host unsafe.Pointer, n int) error {
		return cuda.MemcpyHtoDAsync(p, host, uint64(n), d.stream)
	}
	// Goroutines fill one buffer while the copy engine drains the other.
	staged := func(s *stager, p cuda.DevicePtr, n int) error {
		for i, off := 0, 0; off < n; i, off = i+1, off+stageChunk {
			c, k := min(stageChunk, n-off), i&1
			if err := s.wait(k); err != nil {
				return err
			}
			parallelCopy(s.buf(k, c), src[off:off+c])
			if err := cuda.MemcpyHtoDAsync(p+cuda.DevicePtr(off), s.bufs[k], uint64(c), d.stream); err != nil {
				return err
			}
			if err := cuda.EventRecord(s.events[k], d.stream); err != nil {
				return err
			}
			s.used[k] = true
		}
		return nil
	}
	return d.hostCopy("copy from host", dst, src, direct, staged)
}

// CopyToHost reads the contiguous view src into dst, after the work queued
// before it on the device's stream, and returns when dst holds the data.
func (dev *Device) CopyToHost(s backend.Stream, dst []byte, src backend.View) error {
	d, qerr := dev.on(s)
	if qerr != nil {
		return qerr
	}
	direct := func(p cuda.DevicePtr, host unsafe.Pointer, n int) error {
		return cuda.MemcpyDtoHAsync(host, p, uint64(n), d.stream)
	}
	// The copy engine runs up to two chunks ahead of the goroutines that
	// empty the buffers into dst.
	staged := func(s *stager, p cuda.DevicePtr, n int) error {
		chunks := (n + stageChunk - 1) / stageChunk
		issue := func(i int) error {
			off, k := i*stageChunk, i&1
			c := min(stageChunk, n-off)
			if err := s.wait(k); err != nil {
				return err
			}
			if err := cuda.MemcpyDtoHAsync(s.bufs[k], p+cuda.DevicePtr(off), uint64(c), d.stream); err != nil {
				return err
			}
			s.used[k] = true
			return cuda.EventRecord(s.events[k], d.stream)
		}
		for i := 0; i < min(2, chunks); i++ {
			if err := issue(i); err != nil {
				return err
			}
		}
		for i := range chunks {
			off, k := i*stageChunk, i&1
			c := min(stageChunk, n-off)
			if err := s.wait(k); err != nil {
				return err
			}
			parallelCopy(dst[off:off+c], s.buf(k, c))
			if i+2 < chunks {
				if err := issue(i + 2); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return d.hostCopy("copy to host", src, dst, direct, staged)
}

// hostCopy is what the two directions share: it resolves v against host,
// then copies directly (page-locked memory: one copy, then a wait; small
// copies: queued, as the driver stages them itself) or, for large pageable
// memory, calls staged with the device's staging buffers locked. direct and
// staged queue their copies on the device's stream.
func (d *queue) hostCopy(what string, v backend.View, host []byte,
	direct func(p cuda.DevicePtr, host unsafe.Pointer, n int) error, staged func(s *stager, p cuda.DevicePtr, n int) error) error {
	if err := d.refuseCaptured(what); err != nil {
		return err
	}
	p, n, err := d.hostView(what, v, len(host))
	if err != nil || n == 0 {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	h := unsafe.Pointer(unsafe.SliceData(host))
	switch {
	case isPinned(h, n):
		if err := direct(p, h, n); err != nil {
			return d.check(err)
		}
		return d.check(cuda.StreamSynchronize(d.stream))
	case n < stageThreshold:
		err := direct(p, h, n)
		runtime.KeepAlive(host)
		return d.check(err)
	}
	s := &d.stage
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensure(); err != nil {
		return d.check(err)
	}
	return d.check(staged(s, p, n))
}

// PeerCopier is implemented by devices that copy directly to another
// device of their kind (over NVLink or PCIe, without the host), as
// torch's cross-device copy_ does. The root package may use it for
// Tensor.To between GPUs; without it, such copies go through host memory.
type PeerCopier interface {
	// CopyPeer copies the contiguous view src of this device into the
	// contiguous view dst of device to, which has the same dtype and number
	// of elements. The copy runs on stream s of this device after the work
	// queued on s and on toStream (a stream of to) before it; work queued on
	// toStream afterwards runs after it. The call does not wait for it.
	CopyPeer(s backend.Stream, dst backend.View, to backend.Device, toStream backend.Stream, src backend.View) error
}

// enablePeer enables d's context to access peer's memory, once; the
// context must be current.
func (d *Device) enablePeer(peer *Device) error {
	d.peerMu.Lock()
	defer d.peerMu.Unlock()
	if d.peers[peer.index] {
		return nil
	}
	ok, err := cuda.DeviceCanAccessPeer(d.dev, peer.dev)
	if err != nil {
		return err
	}
	if ok {
		if err := cuda.CtxEnablePeerAccess(peer.ctx, 0); err != nil && !errorIs(err, cuda.ErrPeerAccessAlreadyEnabled) {
			return err
		}
	}
	d.peers[peer.index] = true
	return nil
}

// CopyPeer copies src on d to dst on device to (see [PeerCopier]) with
// cuMemcpyPeerAsync on stream s of d, after enabling peer access between
// the two contexts where the GPUs allow it (the driver stages through the
// host otherwise). Events order the copy after the work queued on toStream
// and make toStream's later work wait for it.
func (d *Device) CopyPeer(s backend.Stream, dst backend.View, to backend.Device, toStream backend.Stream, src backend.View) error {
	t, ok := to.(*Device)
	if !ok {
		return fmt.Errorf("cuda: copy to peer: destination device %T is not a CUDA device", to)
	}
	q, err := d.on(s)
	if err != nil {
		return err
	}
	tq, err := t.on(toStream)
	if err != nil {
		return err
	}
	if dst.DType != src.DType || dst.NumElements() != src.NumElements() {
		return fmt.Errorf("cuda: copy to peer: %d %s into %d %s", src.NumElements(), src.DType, dst.NumElements(), dst.DType)
	}
	sp, n, err := d.hostView("copy to peer", src, src.NumElements()*src.DType.Size())
	if err != nil || n == 0 {
		return err
	}
	dp, _, err := t.hostView("copy to peer", dst, n)
	if err != nil {
		return err
	}
	if t == d && q.stream == tq.stream {
		if err := d.enter(); err != nil {
			return err
		}
		defer d.exit()
		return d.check(cuda.MemcpyDtoDAsync(dp, sp, uint64(n), q.stream))
	}
	// The destination stream's queued work first.
	before, err := tq.recordEvent()
	if err != nil {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	err = func() error {
		defer d.exit()
		if t != d {
			if err := d.enablePeer(t); err != nil {
				return err
			}
		}
		if err := cuda.StreamWaitEvent(q.stream, before, 0); err != nil {
			return err
		}
		if t == d {
			return cuda.MemcpyDtoDAsync(dp, sp, uint64(n), q.stream)
		}
		return cuda.MemcpyPeerAsync(dp, t.ctx, sp, d.ctx, uint64(n), q.stream)
	}()
	t.destroyEvent(before)
	if err != nil {
		return d.check(err)
	}
	after, err := q.recordEvent()
	if err != nil {
		return err
	}
	defer d.destroyEvent(after)
	if err := t.enter(); err != nil {
		return err
	}
	defer t.exit()
	return t.check(cuda.StreamWaitEvent(tq.stream, after, 0))
}

// recordEvent creates an event and records it on the queue's stream.
func (d *queue) recordEvent() (cuda.Event, error) {
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.exit()
	e, err := cuda.EventCreate(cuda.EventDisableTiming)
	if err != nil {
		return 0, d.check(err)
	}
	if err := cuda.EventRecord(e, d.stream); err != nil {
		cuda.EventDestroy(e)
		return 0, d.check(err)
	}
	return e, nil
}

// destroyEvent destroys an event of d's context (the driver keeps it
// until pending waits on it are done).
func (d *Device) destroyEvent(e cuda.Event) {
	if d.enter() == nil {
		cuda.EventDestroy(e)
		d.exit()
	}
}
