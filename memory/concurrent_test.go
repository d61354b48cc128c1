package memory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentStatsBalance allocates and frees from eight goroutines
// while others read the statistics and empty the cache; run it with -race.
// Every reading must be a consistent one (no Current below zero or above
// its Peak, Current equal to increases minus decreases), and at the end the
// allocations and frees balance exactly.
func TestConcurrentStatsBalance(t *testing.T) {
	steps := 2000
	if testing.Short() || raceOn {
		steps = 400
	}
	for _, conf := range []string{"", "policy:pytorch", "expandable_segments:True", "max_split_size_mb:32"} {
		t.Run(conf, func(t *testing.T) {
			a, sim := newTestAllocator(t, conf, 256*mib)
			var allocs, frees atomic.Int64
			stop := make(chan struct{})
			var readers sync.WaitGroup
			var readErr error
			var readOnce sync.Once
			report := func(err error) { readOnce.Do(func() { readErr = err }) }
			readers.Add(2)
			go func() {
				defer readers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := consistent(a.Stats()); err != nil {
						report(err)
						return
					}
				}
			}()
			go func() {
				defer readers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					a.EmptyCache()
					_ = a.Summary()
				}
			}()
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 99))
					var live []*Block
					for range steps {
						if len(live) > 0 && (rng.IntN(2) == 0 || len(live) > 24) {
							k := rng.IntN(len(live))
							a.Free(live[k])
							frees.Add(1)
							live[k] = live[len(live)-1]
							live = live[:len(live)-1]
							continue
						}
						size := int64(1 + rng.IntN(4*mib))
						if rng.IntN(8) == 0 {
							size = int64(1 + rng.IntN(512)) // the small pool
						}
						b, err := a.Alloc(size, Stream(g%2), "stress")
						if err != nil {
							var oom *OutOfMemoryError
							if !errors.As(err, &oom) {
								t.Error(err)
								return
							}
							continue
						}
						allocs.Add(1)
						live = append(live, b)
					}
					for _, b := range live {
						a.Free(b)
						frees.Add(1)
					}
				}()
			}
			wg.Wait()
			close(stop)
			readers.Wait()
			if readErr != nil {
				t.Fatal(readErr)
			}
			st := a.Stats()
			if err := consistent(st); err != nil {
				t.Fatal(err)
			}
			all := StatAll
			if n := allocs.Load(); st.Allocation[all].Allocated != n || st.Allocation[all].Freed != frees.Load() || n != frees.Load() {
				t.Fatalf("allocation stat %+v, want %d allocations and as many frees (made %d frees)", st.Allocation[all], n, frees.Load())
			}
			for name, s := range map[string]Stat{
				"allocation": st.Allocation[all], "allocated_bytes": st.AllocatedBytes[all],
				"active": st.Active[all], "active_bytes": st.ActiveBytes[all], "requested_bytes": st.RequestedBytes[all],
			} {
				if s.Current != 0 || s.Allocated != s.Freed {
					t.Errorf("%s after every block was freed: %+v", name, s)
				}
			}
			a.EmptyCache()
			check(t, a, sim)
			if r := a.Stats().ReservedBytes[all].Current; r != 0 {
				t.Fatalf("%d bytes left reserved after EmptyCache", r)
			}
		})
	}
}

// consistent checks one reading of the statistics.
func consistent(st Stats) error {
	for name, arr := range map[string]StatArray{
		"allocation": st.Allocation, "segment": st.Segment, "active": st.Active,
		"allocated_bytes": st.AllocatedBytes, "reserved_bytes": st.ReservedBytes,
		"active_bytes": st.ActiveBytes, "requested_bytes": st.RequestedBytes,
	} {
		for i, s := range arr {
			if s.Current < 0 || s.Current > s.Peak || s.Current != s.Allocated-s.Freed {
				return fmt.Errorf("%s[%d] is inconsistent: %+v", name, i, s)
			}
		}
	}
	if st.AllocatedBytes[StatAll].Current > st.ReservedBytes[StatAll].Current {
		return fmt.Errorf("allocated %d bytes, more than the %d reserved", st.AllocatedBytes[StatAll].Current, st.ReservedBytes[StatAll].Current)
	}
	return nil
}
