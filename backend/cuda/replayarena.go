package cuda

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
)

// ReplayArena is GPU memory for replaying an allocation trace on the real
// device (vram replay --device): a fresh arena, apart from the device's own
// allocator, whose every driver call is timed, so that the cost model of
// DESIGN.md can be checked against the card. Alloc and Free are one
// cuMemAlloc_v2 and one cuMemFree_v2; on a GPU with virtual memory
// management, Map is a cuMemCreate, a cuMemMap and a cuMemSetAccess, Unmap a
// cuMemUnmap and a cuMemRelease, Reserve and Unreserve a
// cuMemAddressReserve and a cuMemAddressFree. Each is timed alone (wall
// time around the call, after the thread is pinned and the context made
// current), into [ReplayArena.Times]. Unlike the device's arena it does not
// synchronise the context before freeing: a replay queues no work.
//
// Use [ReplayArena.Arena] as the allocator's arena, then
// [ReplayArena.Close] to give back what the replay still holds; Close times
// its calls too, apart ([ReplayArena.CloseTimes]), so that the calls a
// replay never makes before its end (cuMemFree, cuMemUnmap, cuMemRelease,
// cuMemAddressFree on a trace that only grows) are measured as well. It is
// safe for concurrent use.
type ReplayArena struct {
	d       *Device
	virtual bool
	gran    int64
	prop    cuda.MemAllocationProp
	access  []cuda.MemAccessDesc
	times   memory.CallTimes
	closing memory.CallTimes // the calls of Close

	mu       sync.Mutex
	allocs   map[uint64]int64
	maps     map[uint64]replayMapping
	reserves map[uint64]int64
	spent    time.Duration // the sum of every timed call
	closed   bool
}

type replayMapping struct {
	size int64
	h    cuda.MemHandle
}

// NewReplayArena opens GPU index (see [Open]) and returns a replay arena
// over its memory.
func NewReplayArena(index int) (*ReplayArena, error) {
	d, err := Open(index)
	if err != nil {
		return nil, err
	}
	r := &ReplayArena{d: d, allocs: map[uint64]int64{}, maps: map[uint64]replayMapping{}, reserves: map[uint64]int64{}}
	if va, ok := d.arena.(*virtualArena); ok {
		r.virtual, r.gran, r.prop, r.access = true, va.gran, va.prop, va.access
	}
	return r, nil
}

// Device returns the GPU.
func (r *ReplayArena) Device() *Device { return r.d }

// Virtual reports whether the GPU has virtual memory management, so that
// [ReplayArena.Arena] is a [memory.VirtualArena].
func (r *ReplayArena) Virtual() bool { return r.virtual }

// Times returns the measured calls so far, those of Close left out.
func (r *ReplayArena) Times() *memory.CallTimes { return &r.times }

// CloseTimes returns the measured calls of Close: giving back what the
// replay held at its end.
func (r *ReplayArena) CloseTimes() *memory.CallTimes { return &r.closing }

// Arena returns the arena to give the allocator: a [memory.VirtualArena]
// when the GPU has virtual memory management, else a plain [memory.Arena].
// It also implements [memory.DriverTimer] with the measured time, so that
// the allocator's driver time is the measured one.
func (r *ReplayArena) Arena() memory.Arena {
	if r.virtual {
		return replayVirtual{replayPlain{r}}
	}
	return replayPlain{r}
}

// Close gives back every allocation, mapping and reservation the replay
// left, timing each call into [ReplayArena.CloseTimes] (not into Times nor
// the arena's driver time), and reports every failure. The arena is
// unusable afterwards; closing twice does nothing.
func (r *ReplayArena) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if err := r.d.enter(); err != nil {
		return err
	}
	defer r.d.exit()
	var errs []error
	timed := func(c memory.DriverCall, size int64, f func() error) {
		start := time.Now()
		err := f()
		if err == nil {
			r.closing.Add(c, size, time.Since(start))
		}
		errs = append(errs, err)
	}
	for addr, size := range r.allocs {
		timed(memory.CallFree, size, func() error { return cuda.MemFree(cuda.DevicePtr(addr)) })
	}
	for addr, m := range r.maps {
		timed(memory.CallUnmap, m.size, func() error { return cuda.MemUnmap(cuda.DevicePtr(addr), uint64(m.size)) })
		timed(memory.CallRelease, m.size, func() error { return cuda.MemRelease(m.h) })
	}
	for base, size := range r.reserves {
		timed(memory.CallUnreserve, size, func() error { return cuda.MemAddressFree(cuda.DevicePtr(base), uint64(size)) })
	}
	clear(r.allocs)
	clear(r.maps)
	clear(r.reserves)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cuda: cuda:%d: giving back a replay's memory: %w", r.d.index, r.d.check(err))
	}
	return nil
}

// timed runs f, one driver call of size bytes, and records its time.
// r.mu must be held.
func (r *ReplayArena) timed(c memory.DriverCall, size int64, f func() error) error {
	return r.timedRange(c, size, 1, f)
}

// timedRange is timed for a call over a range that covers mappings
// mappings (a cuMemSetAccess of a run), which the cost model prices per
// mapping.
func (r *ReplayArena) timedRange(c memory.DriverCall, size int64, mappings int, f func() error) error {
	start := time.Now()
	err := f()
	d := time.Since(start)
	r.spent += d
	if err == nil {
		r.times.AddRange(c, size, mappings, d)
	}
	return err
}

// use checks that the arena is open and enters the device; the caller
// calls r.d.exit afterwards. r.mu must be held.
func (r *ReplayArena) use() error {
	if r.closed {
		return fmt.Errorf("cuda: cuda:%d: the replay arena is closed", r.d.index)
	}
	return r.d.enter()
}

// replayPlain is a ReplayArena as a memory.Arena.
type replayPlain struct{ r *ReplayArena }

// replayVirtual is a ReplayArena as a memory.VirtualArena.
type replayVirtual struct{ replayPlain }

var (
	_ memory.Arena        = replayPlain{}
	_ memory.DriverTimer  = replayPlain{}
	_ memory.VirtualArena = replayVirtual{}
)

// Capacity returns the GPU's memory in bytes.
func (a replayPlain) Capacity() int64 { return a.r.d.total }

// DriverTime returns the measured time of every call so far.
func (a replayPlain) DriverTime() time.Duration {
	a.r.mu.Lock()
	defer a.r.mu.Unlock()
	return a.r.spent
}

// Alloc calls cuMemAlloc_v2.
func (a replayPlain) Alloc(size int64) (uint64, error) {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.use(); err != nil {
		return 0, err
	}
	defer r.d.exit()
	var p cuda.DevicePtr
	err := r.timed(memory.CallAlloc, size, func() (err error) {
		p, err = cuda.MemAlloc(uint64(size))
		return err
	})
	if err != nil {
		return 0, arenaFull(r.d.check(err))
	}
	r.allocs[uint64(p)] = size
	return uint64(p), nil
}

// Free calls cuMemFree_v2.
func (a replayPlain) Free(addr uint64, size int64) error {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.allocs[addr]; !ok {
		return fmt.Errorf("cuda: cuda:%d: replay Free of %#x, which Alloc did not return", r.d.index, addr)
	}
	if err := r.use(); err != nil {
		return err
	}
	defer r.d.exit()
	if err := r.timed(memory.CallFree, size, func() error { return cuda.MemFree(cuda.DevicePtr(addr)) }); err != nil {
		return r.d.check(err)
	}
	delete(r.allocs, addr)
	return nil
}

// Granularity returns the mapping granularity (2 MiB on an H200).
func (a replayVirtual) Granularity() int64 { return a.r.gran }

// Reserve calls cuMemAddressReserve.
func (a replayVirtual) Reserve(size int64) (uint64, error) {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.use(); err != nil {
		return 0, err
	}
	defer r.d.exit()
	var p cuda.DevicePtr
	err := r.timed(memory.CallReserve, size, func() (err error) {
		p, err = cuda.MemAddressReserve(uint64(size), uint64(r.gran), 0, 0)
		return err
	})
	if err != nil {
		return 0, arenaFull(r.d.check(err))
	}
	r.reserves[uint64(p)] = size
	return uint64(p), nil
}

// Unreserve calls cuMemAddressFree.
func (a replayVirtual) Unreserve(base uint64, size int64) error {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.reserves[base]; !ok {
		return fmt.Errorf("cuda: cuda:%d: replay Unreserve of %#x, which Reserve did not return", r.d.index, base)
	}
	if err := r.use(); err != nil {
		return err
	}
	defer r.d.exit()
	if err := r.timed(memory.CallUnreserve, size, func() error { return cuda.MemAddressFree(cuda.DevicePtr(base), uint64(size)) }); err != nil {
		return r.d.check(err)
	}
	delete(r.reserves, base)
	return nil
}

// Map calls cuMemCreate, cuMemMap and cuMemSetAccess, each timed; on
// failure nothing stays mapped.
func (a replayVirtual) Map(addr uint64, size int64) error {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.use(); err != nil {
		return err
	}
	defer r.d.exit()
	var h cuda.MemHandle
	err := r.timed(memory.CallCreate, size, func() (err error) {
		h, err = cuda.MemCreate(uint64(size), &r.prop, 0)
		return err
	})
	if err != nil {
		return arenaFull(r.d.check(err))
	}
	p := cuda.DevicePtr(addr)
	if err := r.timed(memory.CallMap, size, func() error { return cuda.MemMap(p, uint64(size), 0, h, 0) }); err != nil {
		cuda.MemRelease(h)
		return arenaFull(r.d.check(err))
	}
	if err := r.timed(memory.CallSetAccess, size, func() error { return cuda.MemSetAccess(p, uint64(size), r.access) }); err != nil {
		cuda.MemUnmap(p, uint64(size))
		cuda.MemRelease(h)
		return arenaFull(r.d.check(err))
	}
	r.maps[addr] = replayMapping{size, h}
	return nil
}

// MapRange calls cuMemCreate and cuMemMap for each of the adjacent ranges
// of sizes, the first at addr, then one cuMemSetAccess for the whole run
// (see [memory.RangeMapper]), each timed; on failure nothing stays mapped.
func (a replayVirtual) MapRange(addr uint64, sizes []int64) error {
	r := a.r
	if len(sizes) == 0 {
		return fmt.Errorf("cuda: cuda:%d: replay MapRange at %#x of no ranges", r.d.index, addr)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.use(); err != nil {
		return err
	}
	defer r.d.exit()
	type mapped struct {
		p    cuda.DevicePtr
		size int64
		h    cuda.MemHandle
	}
	var done []mapped
	undo := func() {
		for _, m := range done {
			cuda.MemUnmap(m.p, uint64(m.size))
			cuda.MemRelease(m.h)
		}
	}
	at := addr
	for _, size := range sizes {
		var h cuda.MemHandle
		err := r.timed(memory.CallCreate, size, func() (err error) {
			h, err = cuda.MemCreate(uint64(size), &r.prop, 0)
			return err
		})
		if err != nil {
			undo()
			return arenaFull(r.d.check(err))
		}
		p := cuda.DevicePtr(at)
		if err := r.timed(memory.CallMap, size, func() error { return cuda.MemMap(p, uint64(size), 0, h, 0) }); err != nil {
			cuda.MemRelease(h)
			undo()
			return arenaFull(r.d.check(err))
		}
		done = append(done, mapped{p, size, h})
		at += uint64(size)
	}
	total := int64(at - addr)
	if err := r.timedRange(memory.CallSetAccess, total, len(sizes), func() error {
		return cuda.MemSetAccess(cuda.DevicePtr(addr), uint64(total), r.access)
	}); err != nil {
		undo()
		return arenaFull(r.d.check(err))
	}
	for _, m := range done {
		r.maps[uint64(m.p)] = replayMapping{m.size, m.h}
	}
	return nil
}

// Unmap calls cuMemUnmap and cuMemRelease, each timed.
func (a replayVirtual) Unmap(addr uint64, size int64) error {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.maps[addr]
	if !ok || m.size != size {
		return fmt.Errorf("cuda: cuda:%d: replay Unmap of [%#x, +%d), which is not one earlier mapping", r.d.index, addr, size)
	}
	if err := r.use(); err != nil {
		return err
	}
	defer r.d.exit()
	if err := r.timed(memory.CallUnmap, size, func() error { return cuda.MemUnmap(cuda.DevicePtr(addr), uint64(size)) }); err != nil {
		return r.d.check(err)
	}
	delete(r.maps, addr)
	if err := r.timed(memory.CallRelease, size, func() error { return cuda.MemRelease(m.h) }); err != nil {
		return r.d.check(err)
	}
	return nil
}
