package cuda

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
)

// plainArena gives the allocator device memory through cuMemAlloc_v2 and
// cuMemFree_v2 (fixed segments, PyTorch's default).
type plainArena struct{ d *Device }

var (
	_ memory.Arena        = (*plainArena)(nil)
	_ memory.DeviceInfo   = (*plainArena)(nil)
	_ memory.PeerInfo     = (*plainArena)(nil)
	_ memory.VirtualArena = (*virtualArena)(nil)
	_ memory.EventSource  = (*eventSource)(nil)
	_ memory.EventWaiter  = (*eventSource)(nil)
)

// arenaFull wraps a driver out-of-memory error so that the allocator sees
// memory.ErrArenaFull.
func arenaFull(err error) error {
	if errors.Is(err, cuda.ErrOutOfMemory) {
		return fmt.Errorf("%w: %v", memory.ErrArenaFull, err)
	}
	return err
}

// Alloc calls cuMemAlloc_v2.
func (a *plainArena) Alloc(size int64) (uint64, error) {
	if err := a.d.enter(); err != nil {
		return 0, err
	}
	defer a.d.exit()
	p, err := cuda.MemAlloc(uint64(size))
	if err != nil {
		return 0, arenaFull(a.d.check(err))
	}
	return uint64(p), nil
}

// Free waits for the device's stream (queued work may still use the
// memory) and calls cuMemFree_v2.
func (a *plainArena) Free(addr uint64, size int64) error {
	if err := a.d.enter(); err != nil {
		return err
	}
	defer a.d.exit()
	if err := cuda.CtxSynchronize(); err != nil {
		return a.d.check(err)
	}
	return a.d.check(cuda.MemFree(cuda.DevicePtr(addr)))
}

// Capacity returns the GPU's memory in bytes.
func (a *plainArena) Capacity() int64 { return a.d.total }

// MemoryInfo reports the GPU's memory and the processes on it (see
// [Device.MemoryInfo]), for the allocator's out-of-memory errors.
func (a *plainArena) MemoryInfo() (memory.DeviceMemory, error) { return a.d.MemoryInfo() }

// Peers returns the machine's other GPUs that this process sees, with the
// memory NVML reports for them; nil without NVML.
func (a *plainArena) Peers() ([]memory.DeviceMemory, error) { return a.d.peerMemory(), nil }

// virtualArena adds CUDA virtual memory management to plainArena, for
// expandable segments and the vram policy: address ranges reserved with
// cuMemAddressReserve and backed piece by piece with cuMemCreate, cuMemMap
// and cuMemSetAccess.
type virtualArena struct {
	plainArena
	gran   int64
	prop   cuda.MemAllocationProp
	access []cuda.MemAccessDesc // this device and every peer that can reach it

	mu      sync.Mutex
	handles map[uint64]cuda.MemHandle // by mapped address
}

func newVirtualArena(d *Device) (*virtualArena, error) {
	va := &virtualArena{plainArena: plainArena{d: d}, handles: map[uint64]cuda.MemHandle{}}
	va.prop = cuda.MemAllocationProp{
		Type:     cuda.MemAllocationPinned,
		Location: cuda.MemLocation{Type: cuda.MemLocationDevice, ID: int32(d.index)},
	}
	g, err := cuda.MemGetAllocationGranularity(&va.prop, cuda.GranularityMinimum)
	if err != nil {
		return nil, err
	}
	va.gran = int64(g)
	// Memory mapped with cuMemMap is reachable only from the devices that
	// cuMemSetAccess names, whatever cuCtxEnablePeerAccess says: grant every
	// GPU that can reach this one, so that peer copies (Tensor.To between
	// GPUs) go over NVLink or PCIe instead of through the host.
	va.access = []cuda.MemAccessDesc{{Location: va.prop.Location, Flags: cuda.MemAccessReadWrite}}
	n, err := cuda.DeviceGetCount()
	if err != nil {
		return nil, err
	}
	for j := range n {
		if j == d.index {
			continue
		}
		peer, err := cuda.DeviceGet(j)
		if err != nil {
			return nil, err
		}
		if ok, err := cuda.DeviceCanAccessPeer(peer, d.dev); err == nil && ok {
			va.access = append(va.access, cuda.MemAccessDesc{
				Location: cuda.MemLocation{Type: cuda.MemLocationDevice, ID: int32(j)},
				Flags:    cuda.MemAccessReadWrite,
			})
		}
	}
	return va, nil
}

// Granularity returns the mapping granularity (2 MiB on an H200).
func (a *virtualArena) Granularity() int64 { return a.gran }

// Reserve calls cuMemAddressReserve.
func (a *virtualArena) Reserve(size int64) (uint64, error) {
	if err := a.d.enter(); err != nil {
		return 0, err
	}
	defer a.d.exit()
	p, err := cuda.MemAddressReserve(uint64(size), uint64(a.gran), 0, 0)
	if err != nil {
		return 0, arenaFull(a.d.check(err))
	}
	return uint64(p), nil
}

// Unreserve calls cuMemAddressFree.
func (a *virtualArena) Unreserve(base uint64, size int64) error {
	if err := a.d.enter(); err != nil {
		return err
	}
	defer a.d.exit()
	return a.d.check(cuda.MemAddressFree(cuda.DevicePtr(base), uint64(size)))
}

// Map backs [addr, addr+size) with new memory: cuMemCreate, cuMemMap,
// cuMemSetAccess. On failure nothing stays mapped.
func (a *virtualArena) Map(addr uint64, size int64) error {
	if err := a.d.enter(); err != nil {
		return err
	}
	defer a.d.exit()
	h, err := cuda.MemCreate(uint64(size), &a.prop, 0)
	if err != nil {
		return arenaFull(a.d.check(err))
	}
	p := cuda.DevicePtr(addr)
	if err := cuda.MemMap(p, uint64(size), 0, h, 0); err != nil {
		cuda.MemRelease(h)
		return arenaFull(a.d.check(err))
	}
	if err := cuda.MemSetAccess(p, uint64(size), a.access); err != nil {
		cuda.MemUnmap(p, uint64(size))
		cuda.MemRelease(h)
		return arenaFull(a.d.check(err))
	}
	a.mu.Lock()
	a.handles[addr] = h
	a.mu.Unlock()
	return nil
}

// MapRange backs the adjacent ranges of sizes, the first at addr, with new
// memory each (cuMemCreate and cuMemMap per range), then grants access to
// the whole run with one cuMemSetAccess (see [memory.RangeMapper]). On
// failure nothing stays mapped.
func (a *virtualArena) MapRange(addr uint64, sizes []int64) error {
	if len(sizes) == 0 {
		return fmt.Errorf("cuda: cuda:%d: MapRange at %#x of no ranges", a.d.index, addr)
	}
	if err := a.d.enter(); err != nil {
		return err
	}
	defer a.d.exit()
	type mapped struct {
		p    cuda.DevicePtr
		size uint64
		h    cuda.MemHandle
	}
	var done []mapped
	undo := func() {
		for _, m := range done {
			cuda.MemUnmap(m.p, m.size)
			cuda.MemRelease(m.h)
		}
	}
	at := addr
	for _, size := range sizes {
		h, err := cuda.MemCreate(uint64(size), &a.prop, 0)
		if err != nil {
			undo()
			return arenaFull(a.d.check(err))
		}
		p := cuda.DevicePtr(at)
		if err := cuda.MemMap(p, uint64(size), 0, h, 0); err != nil {
			cuda.MemRelease(h)
			undo()
			return arenaFull(a.d.check(err))
		}
		done = append(done, mapped{p, uint64(size), h})
		at += uint64(size)
	}
	if err := cuda.MemSetAccess(cuda.DevicePtr(addr), at-addr, a.access); err != nil {
		undo()
		return arenaFull(a.d.check(err))
	}
	a.mu.Lock()
	for _, m := range done {
		a.handles[uint64(m.p)] = m.h
	}
	a.mu.Unlock()
	return nil
}

// Unmap waits for the device's stream, then calls cuMemUnmap and
// cuMemRelease.
func (a *virtualArena) Unmap(addr uint64, size int64) error {
	a.mu.Lock()
	h, ok := a.handles[addr]
	delete(a.handles, addr)
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: cuda:%d: unmap of %#x, which is not mapped", a.d.index, addr)
	}
	if err := a.d.enter(); err != nil {
		return err
	}
	defer a.d.exit()
	if err := cuda.CtxSynchronize(); err != nil {
		return a.d.check(err)
	}
	if err := cuda.MemUnmap(cuda.DevicePtr(addr), uint64(size)); err != nil {
		return a.d.check(err)
	}
	return a.d.check(cuda.MemRelease(h))
}

// eventSource records CUDA events for the allocator's cross-stream frees,
// recycling completed events.
type eventSource struct {
	d    *Device
	mu   sync.Mutex
	free []cuda.Event
}

// Record records an event on stream s (0 when the driver fails: the
// allocator then treats the event as complete at its first query, which
// is safe here because the failure means the context is lost).
func (e *eventSource) Record(s memory.Stream) memory.Event {
	if err := e.d.enter(); err != nil {
		return 0
	}
	defer e.d.exit()
	e.mu.Lock()
	var ev cuda.Event
	if n := len(e.free); n > 0 {
		ev, e.free = e.free[n-1], e.free[:n-1]
	}
	e.mu.Unlock()
	if ev == 0 {
		var err error
		if ev, err = cuda.EventCreate(cuda.EventDisableTiming); err != nil {
			e.d.check(err)
			return 0
		}
	}
	if err := cuda.EventRecord(ev, cuda.Stream(s)); err != nil {
		e.d.check(err)
		return 0
	}
	return memory.Event(ev)
}

// Query reports whether the event completed, recycling it if so.
func (e *eventSource) Query(ev memory.Event) bool {
	if ev == 0 {
		return true
	}
	if err := e.d.enter(); err != nil {
		return true
	}
	defer e.d.exit()
	err := cuda.EventQuery(cuda.Event(ev))
	if errors.Is(err, cuda.ErrNotReady) {
		return false
	}
	e.d.check(err)
	e.mu.Lock()
	e.free = append(e.free, cuda.Event(ev))
	e.mu.Unlock()
	return true
}

// Wait blocks until the event completed.
func (e *eventSource) Wait(ev memory.Event) {
	if ev == 0 {
		return
	}
	if err := e.d.enter(); err != nil {
		return
	}
	defer e.d.exit()
	e.d.check(cuda.EventSynchronize(cuda.Event(ev)))
}
