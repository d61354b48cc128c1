package memory

import (
	"errors"
	"fmt"
)

// Private pools and held releases: what a graph capture needs of the
// allocator.
//
// A captured graph replays its kernels on the addresses they had when they
// were recorded, so the memory the capture used must stay the graph's for
// as long as the graph lives, even after the buffers in it are freed (a
// replay writes them again), and must never be handed to other work. The
// allocator keys its free and unmapped blocks by stream; a private pool is
// a key that no real stream has (the top bit set), which the device uses
// instead of the capturing stream's while the capture lasts. Its blocks are
// then reused only by the capture itself, in the order the capture queued
// its work, which is the order the replays run it in. While the pool is
// kept, nothing gives its free memory back: not EmptyCache, not the retry
// after a failed request, not garbage collection, not policy:vram's
// unmapping to stay within its budget.
//
// Giving memory back waits for the device (cuMemFree and the virtual
// arena's unmap synchronize the context first), which a stream under
// capture forbids: HoldReleases stops every release until
// ResumeReleases, so that a capture that runs out of cached memory maps
// or allocates more instead of failing the capture. PyTorch's CUDA graphs
// take their memory from a private pool of the caching allocator in the
// same way (torch.cuda.graph_pool_handle).

// privateBit marks the keys of private pools: real streams are CUDA
// stream handles (pointers) or small numbers on simulated devices.
const privateBit Stream = 1 << 63

// errKept is returned by the release of memory the allocator keeps.
var errKept = errors.New("memory: memory of a kept private pool, or releases are held")

// NewPrivatePool returns the key of a new private pool, kept from now on:
// the stream to pass to Alloc for requests that must come from it. Its
// free memory is given back only after ReleasePool.
func (a *Allocator) NewPrivatePool() Stream {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextPrivate++
	s := privateBit | a.nextPrivate
	if a.kept == nil {
		a.kept = map[Stream]bool{}
	}
	a.kept[s] = true
	return s
}

// IsPrivatePool reports whether s is the key of a private pool.
func IsPrivatePool(s Stream) bool { return s&privateBit != 0 }

// StreamName names s for messages: "stream N", or "graph pool N" for the
// N-th private pool of an allocator.
func StreamName(s Stream) string {
	if IsPrivatePool(s) {
		return fmt.Sprintf("graph pool %d", uint64(s&^privateBit))
	}
	return fmt.Sprintf("stream %d", uint64(s))
}

// ReleasePool stops keeping the private pool s and gives back its free
// memory (subject to HoldReleases). Blocks of the pool still allocated
// return to its cache when freed, where EmptyCache and the retry after a
// failed request find them.
func (a *Allocator) ReleasePool(s Stream) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.kept[s] {
		return
	}
	delete(a.kept, s)
	if a.holds > 0 {
		return
	}
	var free []*Block
	for _, p := range a.pools {
		p.free.each(func(b *Block) bool {
			if b.seg.stream == s {
				free = append(free, b)
			}
			return true
		})
	}
	for _, b := range free {
		a.release(b)
	}
	if a.mode != modeFixed {
		var empty []*segment
		for _, seg := range a.segs {
			if seg.virtual && seg.stream == s && seg.mapped == 0 {
				empty = append(empty, seg)
			}
		}
		for _, seg := range empty {
			a.releaseVirtualSegment(seg)
		}
	}
}

// HoldReleases stops the allocator from giving memory back to the device
// until the matching ResumeReleases: requests that find no cached memory
// get new memory, or fail, without releasing any. Calls nest.
func (a *Allocator) HoldReleases() {
	a.mu.Lock()
	a.holds++
	a.mu.Unlock()
}

// ResumeReleases undoes one HoldReleases.
func (a *Allocator) ResumeReleases() {
	a.mu.Lock()
	if a.holds > 0 {
		a.holds--
	}
	a.mu.Unlock()
}

// keeps reports whether the memory of segment seg must not be given back
// now. a.mu is held.
func (a *Allocator) keeps(seg *segment) bool {
	return a.holds > 0 || (a.kept != nil && a.kept[seg.stream])
}
