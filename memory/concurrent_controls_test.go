package memory

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestConcurrentControls runs the allocator's settings and readers
// (SetMemoryFraction, SetHistory, ResetPeakStats, OnOOM, HoldReleases, NewPrivatePool and ReleasePool, Snapshot, Summary,
// Stats, Limit, Config) on goroutines beside ones that allocate, record
// streams and free, for the race detector: the other concurrent tests
// leave these out. Afterwards every block is freed and the allocator must
// be consistent and give all its memory back.
func TestConcurrentControls(t *testing.T) {
	steps := 1500
	if testing.Short() || raceOn {
		steps = 300
	}
	for _, conf := range []string{"", "policy:pytorch", "policy:pytorch,expandable_segments:True,garbage_collection_threshold:0.5"} {
		t.Run(conf, func(t *testing.T) {
			ev := newFakeEvents()
			a, sim := newTestAllocator(t, conf, 128*mib, WithEvents(ev), withQuickOOM())
			a.OnOOM(ev.completeAll)
			stop := make(chan struct{})
			var ctl sync.WaitGroup
			controls := []func(i int){
				func(i int) {
					if err := a.SetMemoryFraction([]float64{1, 0.5, 0.9}[i%3]); err != nil {
						t.Error(err)
					}
				},
				func(i int) { a.SetHistory(i%2 == 0, 1+i%64, false) },
				// ResetAccumulatedStats is left out: it breaks the
				// Current == Allocated-Freed that consistent checks.
				func(int) { a.ResetPeakStats() },
				func(i int) {
					a.HoldReleases()
					p := a.NewPrivatePool()
					if b, err := a.Alloc(int64(1+i%8)*mib, p, "pool"); err == nil {
						a.Free(b)
					}
					a.ResumeReleases()
					a.ReleasePool(p)
				},
				func(i int) {
					if err := snapshotAddsUp(a.snapshotAndStats()); err != nil {
						t.Error(err)
					}
					_ = a.Summary()
					_, _ = a.Limit(), a.Config()
					if err := consistent(a.Stats()); err != nil {
						t.Error(err)
					}
				},
			}
			for _, f := range controls {
				ctl.Add(1)
				go func() {
					defer ctl.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						f(i)
					}
				}()
			}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					var live []*Block
					for range steps {
						if len(live) > 0 && (rng.IntN(2) == 0 || len(live) > 16) {
							k := rng.IntN(len(live))
							a.Free(live[k])
							live[k] = live[len(live)-1]
							live = live[:len(live)-1]
							continue
						}
						b, err := a.Alloc(rng.Int64N(4*mib)+1, Stream(g), "work")
						if err != nil {
							var oom *OutOfMemoryError
							if !errors.As(err, &oom) {
								t.Error(err)
								return
							}
							continue
						}
						if rng.IntN(4) == 0 {
							a.RecordStream(b, Stream(g+1))
						}
						live = append(live, b)
					}
					for _, b := range live {
						a.Free(b)
					}
				}()
			}
			wg.Wait()
			close(stop)
			ctl.Wait()
			ev.completeAll()
			a.EmptyCache()
			check(t, a, sim)
			if r := a.Stats().ReservedBytes[StatAll].Current; r != 0 {
				t.Fatalf("%d bytes reserved after every block was freed and the cache emptied", r)
			}
		})
	}
}
