package memory

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// fuzzConfigs are the settings FuzzAllocator and the random test cycle
// through.
var fuzzConfigs = []string{
	"",
	"policy:pytorch",
	"policy:pytorch,expandable_segments:True",
	"policy:pytorch,max_split_size_mb:40",
	"policy:pytorch,roundup_power2_divisions:[1:2,16:4,>:8],garbage_collection_threshold:0.5",
	"garbage_collection_threshold:0.7,per_process_memory_fraction:0.8",
	"policy:pytorch,expandable_segments:True,per_process_memory_fraction:0.6",
}

// opRunner applies decoded operations to an allocator and checks it after
// each one.
type opRunner struct {
	t    testing.TB
	a    *Allocator
	sim  *SimArena
	ev   *fakeEvents
	live []*Block
}

// newOpRunner returns a runner for the settings conf; with quick, its
// out-of-memory errors skip the (slow) fix check.
func newOpRunner(t testing.TB, conf string, quick bool) *opRunner {
	ev := newFakeEvents()
	var src EventSource = ev
	if len(conf)%2 == 1 { // some configurations get a source that can wait
		src = waitingEvents{ev}
	}
	opts := []Option{WithEvents(src)}
	if quick {
		opts = append(opts, withQuickOOM())
	}
	a, sim := newTestAllocator(t, conf, 256*mib, opts...)
	return &opRunner{t: t, a: a, sim: sim, ev: ev}
}

// sizeFor maps a byte pair to a request size spread over the interesting
// ranges: tiny, small pool, medium, large.
func sizeFor(kind, v byte) int64 {
	switch kind % 4 {
	case 0:
		return int64(v) * 8
	case 1:
		return int64(v) * 4096
	case 2:
		return int64(v) * 80 * 1024
	default:
		return int64(v) * 512 * 1024
	}
}

// step runs one operation encoded in op and arg.
func (r *opRunner) step(op, arg, arg2 byte) {
	switch op % 8 {
	case 0, 1, 2:
		b, err := r.a.Alloc(sizeFor(arg, arg2), Stream(arg%3), "fuzz")
		var oom *OutOfMemoryError
		switch {
		case err == nil:
			r.live = append(r.live, b)
		case errors.As(err, &oom):
		default:
			r.t.Fatalf("Alloc: %v", err)
		}
	case 3, 4:
		if len(r.live) > 0 {
			i := int(arg) % len(r.live)
			r.a.Free(r.live[i])
			r.live[i] = r.live[len(r.live)-1]
			r.live = r.live[:len(r.live)-1]
		}
	case 5:
		if len(r.live) > 0 {
			r.a.RecordStream(r.live[int(arg)%len(r.live)], Stream(arg2%4))
		}
	case 6:
		if arg%4 == 0 {
			r.a.EmptyCache()
		} else {
			r.ev.completeAll()
		}
	case 7:
		switch arg % 4 {
		case 0:
			r.a.ResetPeakStats()
		case 1:
			r.a.ResetAccumulatedStats()
		case 2:
			if snap := r.a.Snapshot(); snap.Validate() != nil {
				r.t.Fatalf("invalid snapshot: %v", snap.Validate())
			}
		default:
			r.a.SetHistory(arg2%2 == 0, int(arg2), false)
		}
	}
	check(r.t, r.a, r.sim)
}

// finish frees everything, empties the cache and checks nothing is left.
func (r *opRunner) finish() {
	for _, b := range r.live {
		r.a.Free(b)
	}
	r.live = nil
	r.ev.completeAll()
	r.a.EmptyCache()
	check(r.t, r.a, r.sim)
	s := r.a.Stats()
	if s.ReservedBytes[StatAll].Current != 0 || s.Active[StatAll].Current != 0 || r.sim.Used() != 0 {
		r.t.Fatalf("after freeing everything: reserved %d active %d arena %d", s.ReservedBytes[StatAll].Current, s.Active[StatAll].Current, r.sim.Used())
	}
}

// FuzzAllocator decodes an operation sequence from the input (the first
// byte picks the settings, then three bytes per operation) and checks the
// allocator's invariants after every step.
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{0, 0, 1, 10, 3, 0, 0})
	f.Add([]byte{2, 0, 3, 200, 0, 3, 90, 5, 0, 1, 3, 1, 0, 6, 0, 0})
	f.Add([]byte{1, 0, 2, 255, 0, 2, 255, 0, 2, 255, 4, 0, 0, 0, 1, 3})
	f.Add([]byte{4, 0, 1, 7, 5, 0, 2, 3, 0, 0, 6, 1, 0, 0, 2, 100, 7, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		r := newOpRunner(t, fuzzConfigs[int(data[0])%len(fuzzConfigs)], data[0]&8 != 0)
		for i := 1; i+2 < len(data); i += 3 {
			r.step(data[i], data[i+1], data[i+2])
		}
		r.finish()
	})
}

// TestRandomOps runs long random operation sequences under every setting.
func TestRandomOps(t *testing.T) {
	n := 3000
	if testing.Short() || raceOn {
		n = 600
	}
	for i, conf := range fuzzConfigs {
		t.Run(conf, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			r := newOpRunner(t, conf, i%2 == 1)
			for j := 0; j < n; j++ {
				op := byte(rng.IntN(256))
				if rng.IntN(10) < 6 && len(r.live) > 40 {
					op = 3 // keep the live set bounded
				}
				r.step(op, byte(rng.IntN(256)), byte(rng.IntN(256)))
			}
			r.finish()
		})
	}
}

// TestConcurrent allocates and frees from several goroutines at once,
// with a hook and a checker running beside them; run it with -race.
func TestConcurrent(t *testing.T) {
	for i, conf := range []string{"policy:pytorch", "policy:pytorch,expandable_segments:True", ""} {
		t.Run(conf, func(t *testing.T) {
			ev := newFakeEvents()
			opts := []Option{WithEvents(ev)}
			if i != 0 { // out-of-memory fix checks in one of them only: they are slow
				opts = append(opts, withQuickOOM())
			}
			a, sim := newTestAllocator(t, conf, 512*mib, opts...)
			a.OnOOM(func() { ev.completeAll() })
			a.SetHistory(true, 1000, false)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var checkErr error
			var checkOnce sync.Once
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := a.checkInvariants(); err != nil {
						checkOnce.Do(func() { checkErr = err })
					}
					_ = a.Summary()
					_ = a.Snapshot()
				}
			}()
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					var live []*Block
					for i := 0; i < 1500; i++ {
						if len(live) > 0 && (rng.IntN(2) == 0 || len(live) > 30) {
							k := rng.IntN(len(live))
							if rng.IntN(4) == 0 {
								a.RecordStream(live[k], Stream(rng.IntN(3)))
							}
							a.Free(live[k])
							live[k] = live[len(live)-1]
							live = live[:len(live)-1]
							continue
						}
						b, err := a.Alloc(sizeFor(byte(rng.IntN(4)), byte(rng.IntN(256))), Stream(g%2), "g")
						if err != nil {
							var oom *OutOfMemoryError
							if !errors.As(err, &oom) {
								t.Error(err)
								return
							}
							continue
						}
						_ = b.Addr() + uint64(b.Size()) // read while held
						live = append(live, b)
					}
					for _, b := range live {
						a.Free(b)
					}
				}(g)
			}
			wg.Wait()
			close(stop)
			if checkErr != nil {
				t.Fatal(checkErr)
			}
			ev.completeAll()
			a.EmptyCache()
			check(t, a, sim)
			if r := a.Stats().ReservedBytes[StatAll].Current; r != 0 {
				t.Fatalf("%d bytes left reserved", r)
			}
		})
	}
}
