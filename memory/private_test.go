package memory

import (
	"errors"
	"sync"
	"testing"
)

// TestPrivatePool checks, under each policy, that a private pool's memory
// is reused only by its own requests and kept through every release path
// until ReleasePool, and that held releases give nothing back.
func TestPrivatePool(t *testing.T) {
	for _, conf := range []string{"", "expandable_segments:True", "policy:vram"} {
		t.Run(conf, func(t *testing.T) {
			a, sim := newTestAllocator(t, conf, 1<<30)
			pool := a.NewPrivatePool()
			if !IsPrivatePool(pool) || IsPrivatePool(0) || IsPrivatePool(1<<40) {
				t.Fatalf("IsPrivatePool wrong for %#x", uint64(pool))
			}
			if other := a.NewPrivatePool(); other == pool {
				t.Fatal("two private pools share a key")
			}
			sizes := []int64{512, 3 * mib, 40 * mib}
			var addrs []uint64
			for _, n := range sizes {
				b := mustAlloc(t, a, n, pool)
				addrs = append(addrs, b.Addr())
				a.Free(b)
			}
			kept := a.Stats().ReservedBytes[StatAll].Current
			if kept == 0 {
				t.Fatal("nothing reserved for the pool")
			}
			a.EmptyCache()
			if got := a.Stats().ReservedBytes[StatAll].Current; got != kept {
				t.Fatalf("EmptyCache gave back a kept pool's memory: %d of %d bytes left", got, kept)
			}
			check(t, a, sim)
			// Requests on a real stream never get the pool's memory.
			for _, n := range sizes {
				b := mustAlloc(t, a, n, 0)
				for _, ad := range addrs {
					if b.Addr() <= ad && ad < b.Addr()+uint64(b.Size()) {
						t.Fatalf("a stream's request of %d bytes got the pool's address %#x", n, ad)
					}
				}
				a.Free(b)
			}
			// The pool's own requests reuse its memory.
			for i, n := range sizes {
				b := mustAlloc(t, a, n, pool)
				if b.Addr() != addrs[i] {
					t.Fatalf("pool request %d at %#x, was at %#x", i, b.Addr(), addrs[i])
				}
				a.Free(b)
			}
			// Held releases: nothing goes back, not even the stream's cache.
			a.HoldReleases()
			before := a.Stats().ReservedBytes[StatAll].Current
			a.EmptyCache()
			a.ReleasePool(pool)
			if got := a.Stats().ReservedBytes[StatAll].Current; got != before {
				t.Fatalf("memory given back while releases were held: %d of %d", got, before)
			}
			a.ResumeReleases()
			a.EmptyCache()
			if got := a.Stats().ReservedBytes[StatAll].Current; got != 0 {
				t.Fatalf("%d bytes still reserved after the pool's release and EmptyCache", got)
			}
			check(t, a, sim)
		})
	}
}

// TestReleasePoolFrees checks that ReleasePool gives back the pool's free
// memory at once and that a block still allocated returns to the cache
// when freed.
func TestReleasePoolFrees(t *testing.T) {
	for _, conf := range []string{"", "policy:vram"} {
		t.Run(conf, func(t *testing.T) {
			a, sim := newTestAllocator(t, conf, 1<<30)
			pool := a.NewPrivatePool()
			live := mustAlloc(t, a, 30*mib, pool)
			a.Free(mustAlloc(t, a, 50*mib, pool))
			a.ReleasePool(pool)
			if got, max := a.Stats().ReservedBytes[StatAll].Current, int64(40*mib); got > max {
				t.Fatalf("%d bytes reserved after ReleasePool with 30 MiB live", got)
			}
			a.Free(live)
			a.EmptyCache()
			if got := a.Stats().ReservedBytes[StatAll].Current; got != 0 {
				t.Fatalf("%d bytes reserved at the end", got)
			}
			check(t, a, sim)
			a.ReleasePool(pool) // twice: nothing
		})
	}
}

// TestPrivatePoolConcurrent makes pools and allocates from them and from
// streams on several goroutines, for the race detector.
func TestPrivatePoolConcurrent(t *testing.T) {
	a, sim := newTestAllocator(t, "policy:vram", 1<<30)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s := Stream(g)
				if i%2 == 0 {
					s = a.NewPrivatePool()
					a.HoldReleases()
				}
				b, err := a.Alloc(int64(1+i)*mib/4, s, "")
				if err != nil {
					t.Error(err)
					return
				}
				a.Free(b)
				if IsPrivatePool(s) {
					a.ResumeReleases()
					a.ReleasePool(s)
				}
			}
		}()
	}
	wg.Wait()
	a.EmptyCache()
	check(t, a, sim)
}

func TestStreamName(t *testing.T) {
	for _, tc := range []struct {
		s    Stream
		want string
	}{{0, "stream 0"}, {0x7f00aa, "stream 8323242"}, {privateBit | 1, "graph pool 1"}, {privateBit | 12, "graph pool 12"}} {
		if got := StreamName(tc.s); got != tc.want {
			t.Errorf("StreamName(%#x) = %q, want %q", uint64(tc.s), got, tc.want)
		}
	}
}

// TestOOMLargestFreePrivate checks the largest free block that an
// out-of-memory error reports: another private pool's free blocks never
// serve the request, so they do not count, while the request's own pool's
// do.
func TestOOMLargestFreePrivate(t *testing.T) {
	for _, conf := range []string{"", "expandable_segments:True", "policy:vram"} {
		t.Run(conf, func(t *testing.T) {
			a, _ := newTestAllocator(t, conf, 256*mib)
			pool := a.NewPrivatePool()
			a.Free(mustAlloc(t, a, 100*mib, pool)) // kept, free, for the pool only
			live := mustAlloc(t, a, 40*mib, 0)
			defer a.Free(live)
			for _, tc := range []struct {
				stream Stream
				want   int64 // at most
			}{
				{0, 20 * mib},     // the pool's 100 MiB is not for stream 0
				{pool, 256 * mib}, // the pool's own request sees it
			} {
				_, err := a.Alloc(250*mib, tc.stream, "")
				var oom *OutOfMemoryError
				if !errors.As(err, &oom) {
					t.Fatalf("stream %#x: want an out-of-memory error, got %v", uint64(tc.stream), err)
				}
				if oom.LargestFree > tc.want {
					t.Errorf("stream %#x: largest free block %d, want at most %d", uint64(tc.stream), oom.LargestFree, tc.want)
				}
				if tc.stream == pool && oom.LargestFree < 100*mib {
					t.Errorf("the pool's own request: largest free block %d, want its 100 MiB block", oom.LargestFree)
				}
			}
		})
	}
}
