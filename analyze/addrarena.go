package analyze

import (
	"fmt"
	"math"
	"time"

	"github.com/google/btree"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/memory/trace"
)

// Replays that follow the recorded addresses.
//
// PyTorch's allocator picks, among the free blocks of the best size, the
// one at the lowest address, and which segment a block is carved from
// decides which segments end up wholly free, and so which ones it can
// give back to the device under a limit. The addresses come from the
// driver: cudaMalloc hands large segments out at falling addresses and
// small ones from ranges of their own, and reuses the address of a freed
// segment. A simulated device that hands out rising addresses breaks the
// ties the other way, and a replay of a real run under its own limit then
// drifts from it: it fails before the point where the run failed, or
// gives back other segments. A replay with fixed segments therefore
// places each new segment where the recorded run's driver placed the
// next segment of that size, when that range is free in the replay, and
// elsewhere only when it is not (the replay took another path).

// maxRecordedSegments bounds the segment addresses kept from a history:
// beyond them, segments get addresses of the replay's own.
const maxRecordedSegments = 1 << 20

// segmentAddrs is the recorded address of each segment the history
// allocated, by size, oldest first.
type segmentAddrs map[int64][]uint64

// recordedSegments collects the addresses of the history's segment_alloc
// events (fixed segments: cudaMalloc), up to maxRecordedSegments.
func recordedSegments(h trace.History) (segmentAddrs, error) {
	out := segmentAddrs{}
	n := 0
	err := h.Each(func(e *trace.Event) error {
		if e.Action != trace.ActionSegmentAlloc || e.Size <= 0 {
			return nil
		}
		if n == maxRecordedSegments {
			return stopPrefix
		}
		n++
		out[e.Size] = append(out[e.Size], e.Addr)
		return nil
	})
	if err == stopPrefix {
		err = nil
	}
	return out, err
}

// addrRange is a range of addresses [addr, end) that the arena handed
// out, with the address the simulated device gave it.
type addrRange struct {
	addr, end uint64
	sim       uint64
}

// addrArena is a [memory.Arena] that accounts memory and driver time on a
// [memory.SimArena] but hands the allocator the recorded addresses of the
// segments (see above). It is not a [memory.VirtualArena]: it serves
// fixed segments only.
type addrArena struct {
	sim   *memory.SimArena
	queue segmentAddrs             // recorded addresses still to hand out, by size
	live  *btree.BTreeG[addrRange] // ranges handed out and not freed, by address
	fresh uint64                   // where the next address of the replay's own is sought
}

// newAddrArena returns an arena of capacity bytes that follows recorded.
// recorded is not modified.
func newAddrArena(capacity int64, recorded segmentAddrs) *addrArena {
	q := make(segmentAddrs, len(recorded))
	var top uint64
	for size, addrs := range recorded {
		q[size] = addrs // consumed by reslicing; the backing array is not written
		for _, a := range addrs {
			if e := a + uint64(size); e > a && e > top {
				top = e
			}
		}
	}
	return &addrArena{
		sim:   memory.NewSimArena(capacity),
		queue: q,
		live:  btree.NewG(16, func(a, b addrRange) bool { return a.addr < b.addr }),
		fresh: top,
	}
}

// free reports whether [addr, addr+size) lies in the address space and
// overlaps no range handed out; when it does not, it returns where the
// overlapping range ends.
func (a *addrArena) free(addr uint64, size int64) (bool, uint64) {
	end := addr + uint64(size)
	if end < addr || addr == 0 {
		return false, 0
	}
	var hit *addrRange
	a.live.DescendLessOrEqual(addrRange{addr: end - 1}, func(r addrRange) bool {
		if r.end > addr {
			hit = &r
		}
		return false
	})
	if hit != nil {
		return false, hit.end
	}
	return true, 0
}

// Alloc takes size bytes of the simulated device and places them at the
// next recorded address of that size, else at a free address of its own.
func (a *addrArena) Alloc(size int64) (uint64, error) {
	sim, err := a.sim.Alloc(size)
	if err != nil {
		return 0, err
	}
	addr, ok := uint64(0), false
	if q := a.queue[size]; len(q) > 0 {
		if ok, _ = a.free(q[0], size); ok {
			addr = q[0]
			a.queue[size] = q[1:]
		}
	}
	if !ok {
		addr, ok = a.ownAddr(size)
	}
	if !ok {
		_ = a.sim.Free(sim, size)
		return 0, memory.ErrArenaFull
	}
	a.live.ReplaceOrInsert(addrRange{addr: addr, end: addr + uint64(size), sim: sim})
	return addr, nil
}

// ownAddr finds a free range of size bytes for a segment the recording
// did not place: above every recorded segment when there is room there,
// else from the bottom of the address space up.
func (a *addrArena) ownAddr(size int64) (uint64, bool) {
	const align = 2 << 20
	try := func(c uint64) (uint64, bool) {
		for i := 0; i <= a.live.Len(); i++ {
			c = (c + align - 1) &^ (align - 1)
			if c == 0 || c > math.MaxUint64-uint64(size) {
				return 0, false
			}
			ok, end := a.free(c, size)
			if ok {
				return c, true
			}
			c = end
		}
		return 0, false
	}
	if c, ok := try(a.fresh); ok {
		a.fresh = c + uint64(size)
		return c, true
	}
	return try(align)
}

// Free gives back a range that Alloc returned.
func (a *addrArena) Free(addr uint64, size int64) error {
	r, ok := a.live.Get(addrRange{addr: addr})
	if !ok || r.end-r.addr != uint64(size) {
		return fmt.Errorf("analyze: replay: Free of %d bytes at 0x%x, which the arena did not hand out", size, addr)
	}
	if err := a.sim.Free(r.sim, size); err != nil {
		return err
	}
	a.live.Delete(r)
	return nil
}

// Capacity returns the simulated device's memory.
func (a *addrArena) Capacity() int64 { return a.sim.Capacity() }

// DriverTime returns the modelled driver time of the calls so far.
func (a *addrArena) DriverTime() time.Duration { return a.sim.DriverTime() }

// replayArena returns the device a fix check replays cfg on under limit:
// one that follows the recorded segment addresses when cfg uses PyTorch's
// fixed segments, a plain simulated device otherwise.
func replayArena(cfg memory.Config, limit int64, recorded segmentAddrs) memory.Arena {
	if cfg.Policy == memory.PolicyPyTorch && !cfg.ExpandableSegments && len(recorded) > 0 {
		return newAddrArena(limit, recorded)
	}
	return memory.NewSimArena(limit)
}
