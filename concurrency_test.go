package vram

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vramgo/vram/internal/quiesce"
)

// The tests below release tensors on one goroutine while seven others run
// operations on them, and check what the issue of a corrupted count was
// about: every failure is ErrReleased (no crash, no other error), a use
// that starts after Release returns fails, and the device's counts return
// exactly to where they were (bytes live, allocations equal to frees,
// nothing left for the garbage collector), never going negative meanwhile.
// Run them with -race: a kernel reading a buffer that another goroutine
// frees is a reported race.

// raceDevices are the devices the stress tests run on: the CPU, the
// simulated device that only exact-count tests use and, on a machine with
// one, the first GPU.
func raceDevices(t *testing.T) []Device {
	ds := []Device{CPU}
	if quiet.Available() {
		ds = append(ds, quiet)
	}
	if CUDAAvailable() {
		ds = append(ds, CUDA(0))
	}
	return ds
}

// settle waits until no cleanup changes the storage counts of ds any more
// ([quiesce.Wait]), so that garbage other tests left behind does not change
// them during a test.
func settle(ds ...Device) {
	quiesce.Wait(func() []StorageStats {
		st := make([]StorageStats, len(ds))
		for i, d := range ds {
			st[i] = Storage(d)
		}
		return st
	})
}

// counts is what a stress test compares before and after.
type counts struct {
	storage   StorageStats
	allocated int64 // MemoryAllocated: the allocator's count, on sim
}

// countsOf reads d's counts. The allocator's count is compared on sim
// only: on a GPU it also holds what the backend keeps for itself (the
// cuBLASLt workspace of the first product), which tensors do not free.
func countsOf(d Device) counts {
	c := counts{storage: Storage(d)}
	if d.Kind == "sim" {
		c.allocated = MemoryAllocated(d)
	}
	return c
}

// checkBalanced fails t unless d's counts are back to base and every
// storage made since was freed once, by Release (leaks: by the collector).
func checkBalanced(t *testing.T, d Device, base counts, leaks bool) {
	t.Helper()
	now := countsOf(d)
	s, b := now.storage, base.storage
	if s.LiveBytes != b.LiveBytes || now.allocated != base.allocated {
		t.Errorf("%s: %d bytes live (allocator: %d), want %d (%d) as before", d, s.LiveBytes, now.allocated, b.LiveBytes, base.allocated)
	}
	if s.Allocs-b.Allocs != s.Frees-b.Frees {
		t.Errorf("%s: %d storages made, %d freed", d, s.Allocs-b.Allocs, s.Frees-b.Frees)
	}
	if !leaks && s.Leaked != b.Leaked {
		t.Errorf("%s: %d storages left to the garbage collector", d, s.Leaked-b.Leaked)
	}
}

// watchCounts samples d's counts until stop is closed and reports the
// first impossible reading: bytes below zero, or more frees than
// allocations.
func watchCounts(stop <-chan struct{}, ds ...Device) <-chan error {
	out := make(chan error, 1)
	go func() {
		defer close(out)
		for {
			for _, d := range ds {
				frees := Storage(d).Frees // read first: frees can only grow
				s := Storage(d)
				if s.LiveBytes < 0 || MemoryAllocated(d) < 0 || frees > s.Allocs {
					out <- fmt.Errorf("%s: impossible reading: %+v, allocated %d", d, s, MemoryAllocated(d))
					return
				}
			}
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	return out
}

// raceCase is one stress test: make builds the shared tensors on d, work
// runs one use of them (rng picks what), and release lets them go. With
// tidy, the shared tensors are made inside a Tidy on the releasing
// goroutine, and leaving it releases them.
type raceCase struct {
	name    string
	make    func(d Device) []*Tensor
	work    func(d Device, shared []*Tensor, rng *rand.Rand)
	release func(shared []*Tensor, rng *rand.Rand)
	tidy    bool
	other   bool // the work copies to otherDevice(d), whose counts are checked too
}

// releaseAll releases the tensors in a random order.
func releaseAll(shared []*Tensor, rng *rand.Rand) {
	for _, i := range rng.Perm(len(shared)) {
		shared[i].Release()
	}
}

// pick returns one of the shared tensors.
func pick(shared []*Tensor, rng *rand.Rand) *Tensor { return shared[rng.IntN(len(shared))] }

// runRace runs c on d: seven workers loop over c.work, each under Tidy,
// while an eighth goroutine lets the tensors go after the workers have
// succeeded a few times. A worker stops after its first use that started
// after the release returned, which must fail.
func runRace(t *testing.T, c raceCase, d Device, rounds int) {
	devs := []Device{d}
	if c.other {
		devs = append(devs, otherDevice(d))
	}
	settle(devs...)
	base := make([]counts, len(devs))
	for i, dv := range devs {
		base[i] = countsOf(dv)
	}
	stop := make(chan struct{})
	watch := watchCounts(stop, devs...)
	var released, failed atomic.Int64
	for round := range rounds {
		const workers = 7
		var succeeded, running atomic.Int64
		running.Store(workers)
		var gone atomic.Bool // the release returned
		ready := make(chan []*Tensor, 1)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var bad []error
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(round), 0))
			// Release once the workers have done some real work.
			wait := func() {
				for succeeded.Load() < int64(1+round%4*workers) && running.Load() > 0 {
					runtime.Gosched()
				}
			}
			if c.tidy {
				Tidy(func() {
					ready <- c.make(d)
					wait()
				})
			} else {
				var shared []*Tensor
				Tidy(func() { shared = c.make(d); Keep(shared...) })
				ready <- shared
				wait()
				c.release(shared, rng)
			}
			gone.Store(true)
		}()
		shared := <-ready
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer running.Add(-1)
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w+1)))
				for i := 0; ; i++ {
					after := gone.Load()
					var err error
					Tidy(func() { err = Catch(func() { c.work(d, shared, rng) }) })
					switch {
					case err == nil:
						succeeded.Add(1)
					case errors.Is(err, ErrReleased):
						failed.Add(1)
					default:
						mu.Lock()
						bad = append(bad, err)
						mu.Unlock()
					}
					if after {
						if err == nil {
							mu.Lock()
							bad = append(bad, errors.New("a use that started after Release returned succeeded"))
							mu.Unlock()
						}
						return
					}
					if i > 100000 {
						mu.Lock()
						bad = append(bad, errors.New("the release never came"))
						mu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
		released.Add(1)
		for _, err := range bad {
			t.Errorf("%s round %d: %v", d, round, err)
		}
		if t.Failed() {
			break
		}
	}
	close(stop)
	if err := <-watch; err != nil {
		t.Error(err)
	}
	for i, dv := range devs {
		checkBalanced(t, dv, base[i], false)
	}
	if failed.Load() == 0 {
		t.Errorf("%s: no use lost the race in %d rounds", d, released.Load())
	}
}

// otherDevice is a device to copy to from d.
func otherDevice(d Device) Device {
	if d == CPU {
		return tight
	}
	return CPU
}

func raceCases() []raceCase {
	leaf := func(d Device) []*Tensor { return []*Tensor{Randn(Shape{16, 16}, WithGrad(), d)} }
	return []raceCase{{
		// The case: a leaf released while forward passes run on it.
		name: "leaf forward",
		make: leaf,
		work: func(d Device, sh []*Tensor, _ *rand.Rand) {
			x := Randn(Shape{4, 16}, d)
			_ = x.MatMul(sh[0]).Relu().Mean().Item()
		},
		release: releaseAll,
	}, {
		// Backward accumulating into the gradient of a leaf that is
		// zeroed and released meanwhile.
		name: "leaf backward",
		make: leaf,
		work: func(d Device, sh []*Tensor, _ *rand.Rand) {
			x := Randn(Shape{4, 16}, d)
			x.MatMul(sh[0]).Tanh().Sum().Backward()
		},
		release: func(sh []*Tensor, rng *rand.Rand) {
			sh[0].ZeroGrad()
			releaseAll(sh, rng)
		},
	}, {
		// A base and its views, which share one storage: each released
		// in turn while the others are read, viewed again and copied.
		name: "views",
		make: func(d Device) []*Tensor {
			b := Randn(Shape{8, 16}, d)
			return []*Tensor{b, b.Narrow(0, 2, 4), b.T(), b.Reshape(16, 8), b.Select(0, 3),
				b.Unsqueeze(0).Expand(3, 8, 16), b.Slice(1, 0, 16, 3), b.Permute(1, 0).Flatten(0, 1)}
		},
		work: func(d Device, sh []*Tensor, rng *rand.Rand) {
			v := pick(sh, rng)
			switch rng.IntN(6) {
			case 0:
				_ = v.Contiguous().Sum().Item()
			case 1:
				_ = v.Float32s()
			case 2:
				_ = v.Narrow(0, 0, 1).Detach().Clone().Max().Item()
			case 3:
				_ = v.Reshape(-1).Unsqueeze(1).Squeeze().Mean().Item()
			case 4:
				_ = v.String() // never panics: a released tensor prints as one
				_ = v.Sum().Item()
			default:
				_ = v.Transpose(0, -1).Abs().Sum().Item()
			}
		},
		release: releaseAll,
	}, {
		// A recorded graph whose output and leaf are released while
		// backward passes run through it (the graph keeps what they saved).
		name: "graph",
		make: func(d Device) []*Tensor {
			w := Randn(Shape{16, 16}, WithGrad(), d)
			x := Randn(Shape{4, 16}, d)
			h := x.MatMul(w).Tanh().Mul(x.Sigmoid().MatMul(w))
			return []*Tensor{h, w}
		},
		work: func(d Device, sh []*Tensor, rng *rand.Rand) {
			switch v := pick(sh, rng); {
			case rng.IntN(2) == 0:
				v.Square().Mean().Backward(RetainGraph())
			default:
				v.Sum().Backward(RetainGraph())
			}
		},
		release: releaseAll,
	}, {
		// Copies to another device and back to the host.
		name: "transfer",
		make: func(d Device) []*Tensor {
			a := Randn(Shape{8, 8}, WithGrad(), d)
			return []*Tensor{a, a.Narrow(1, 2, 3)}
		},
		work: func(d Device, sh []*Tensor, rng *rand.Rand) {
			v := pick(sh, rng)
			switch rng.IntN(4) {
			case 0:
				v.To(otherDevice(d)).Sum().Backward(RetainGraph())
			case 1:
				_ = v.CPU().Float64s()
			case 2:
				_ = v.Sum().Item()
			default:
				_ = v.To(otherDevice(d)).To(d).Int64s()
			}
		},
		release: releaseAll,
		other:   true,
	}, {
		// Tensors made in a Tidy on one goroutine, used on others, and
		// released when that Tidy returns.
		name: "tidy on another goroutine",
		make: func(d Device) []*Tensor {
			w := Randn(Shape{8, 8}, WithGrad(), d)
			return []*Tensor{w, w.MulScalar(2), w.Narrow(0, 1, 2)}
		},
		work: func(d Device, sh []*Tensor, rng *rand.Rand) {
			v := pick(sh, rng)
			v.Exp().Sum().Backward(RetainGraph())
		},
		tidy: true,
	}, {
		// Every kind of operation, on a shared input, a shared weight and a
		// view of it.
		name: "ops",
		make: func(d Device) []*Tensor {
			x := Randn(Shape{4, 8}, WithGrad(), d)
			w := Randn(Shape{8, 8}, WithGrad(), d)
			// A leaf that is a view of w's storage.
			return []*Tensor{x, w, w.Detach().Narrow(0, 0, 4).SetRequiresGrad(true)}
		},
		work: func(d Device, sh []*Tensor, rng *rand.Rand) {
			raceOp(d, pick(sh, rng), sh[1], rng.IntN(len(raceOps)))
		},
		release: releaseAll,
	}}
}

// raceOps are operations of every kind run on a tensor a of shape [4, 8]
// (or a view of [4, 8]) and a weight w of shape [8, 8], the tensors that
// another goroutine releases.
var raceOps = []func(d Device, a, w *Tensor){
	func(d Device, a, w *Tensor) { a.Add(a).Sub(a).Mul(a).Div(a.AddScalar(3)).Sum().Backward() },
	func(d Device, a, w *Tensor) { a.Pow(a.Abs()).Maximum(a).Minimum(a).Mean().Backward() },
	func(d Device, a, w *Tensor) { _ = a.Eq(a).LogicalAnd(a.Gt(a)).Float32s() },
	func(d Device, a, w *Tensor) {
		a.AddScalar(1).RSubScalar(2).MulScalar(3).DivScalar(4).RDivScalar(5).Sum().Backward()
	},
	func(d Device, a, w *Tensor) { a.Clamp(-0.5, 0.5).Exp().Log1p().Sum().Backward() },
	func(d Device, a, w *Tensor) { Where(a.GtScalar(0), a, a.Neg()).Sum().Backward() },
	func(d Device, a, w *Tensor) { a.Cast(Float64).Half().Float().Sum().Backward() },
	func(d Device, a, w *Tensor) { a.Softmax(-1).LogSoftmax(0).Sum().Backward() },
	func(d Device, a, w *Tensor) { a.Var(nil, 1, false).Add(a.Std([]int{0}, 0, false).Sum()).Backward() },
	func(d Device, a, w *Tensor) {
		_ = a.ArgMax(-1, false).Int64s()
		a.Max(-1).Add(a.Min(0).Sum()).Sum().Backward()
	},
	func(d Device, a, w *Tensor) { Cat([]*Tensor{a, a}, 0).Sum().Backward() },
	func(d Device, a, w *Tensor) { Stack([]*Tensor{a, a, a, a}, 1).Mean().Backward() },
	func(d Device, a, w *Tensor) { a.MatMul(w.Narrow(0, 0, a.Size(-1))).Sum().Backward() },
	func(d Device, a, w *Tensor) { Linear(a, w.Narrow(1, 0, a.Size(-1)), nil).Gelu().Sum().Backward() },
	func(d Device, a, w *Tensor) {
		LinearAct(a.Narrow(1, 0, 4), w.Narrow(1, 0, 4), w.Select(0, 0), ActReLU).Sum().Backward()
	},
	func(d Device, a, w *Tensor) {
		BiasAct(a, w.Select(0, 1).Narrow(0, 0, a.Size(-1)), ActGELU).Sum().Backward()
	},
	func(d Device, a, w *Tensor) {
		n := a.Size(-1)
		LayerNorm(a, []int{n}, w.Select(0, 0).Narrow(0, 0, n), w.Select(0, 1).Narrow(0, 0, n), 1e-5).Sum().Backward()
	},
	func(d Device, a, w *Tensor) {
		idx := FromSlice([]int64{0, 1, 0, 1}, Shape{4, 1}, d)
		a.Gather(1, idx).Sum().Backward()
	},
	func(d Device, a, w *Tensor) {
		idx := FromSlice([]int64{3, 1, 2}, Shape{3}, d)
		Embedding(idx, w).Add(a.Narrow(0, 0, 3)).Sum().Backward()
	},
	func(d Device, a, w *Tensor) {
		tgt := FromSlice([]int64{0, 1, 2, 3}, Shape{4}, d)
		CrossEntropy(a, tgt).Backward()
	},
	func(d Device, a, w *Tensor) { MSELoss(a, a.Detach().MulScalar(0.5)).Backward() },
	func(d Device, a, w *Tensor) { a.Permute(1, 0).Contiguous().View(-1).Expand(2, -1).Sum().Backward() },
	func(d Device, a, w *Tensor) {
		ps := append(a.Chunk(3, -1), a.Split(3, 0)...)
		ps = append(ps, a.T().Unbind(0)...)
		ps = append(ps, a.SplitSizes([]int{1, 0, a.Size(0) - 1}, 0)...)
		for i, p := range ps {
			ps[i] = p.Reshape(-1)
		}
		r := a.Unflatten(0, 1, -1).Repeat(2, 1, 1).Tile(2)
		r = r.MaskedFill(r.GtScalar(1), 0)
		Cat(ps, 0).Sum().Add(r.Sum()).Backward()
	},
	func(d Device, a, w *Tensor) {
		a.Sqrt().Rsqrt().Sin().Cos().Tanh().Sigmoid().Silu().Erf().Sum().Backward()
	},
	func(d Device, a, w *Tensor) {
		NoGrad(func() {
			c := a.Clone()
			c.AddInPlace(a).MulScalarInPlace(2).AddScaledInPlace(a, 0.5).CopyFrom(a).FillInPlace(1)
		})
	},
	func(d Device, a, w *Tensor) {
		_ = a.NewZeros(Shape{2}).Add(a.Flatten(0, -1).Narrow(0, 0, 2)).Float64s()
	},
}

// raceOp runs raceOps[k] on a (or, for a weight-shaped a, its first four
// rows) and w.
func raceOp(d Device, a, w *Tensor, k int) {
	if a.Size(0) != 4 {
		a = a.Narrow(0, 0, 4)
	}
	raceOps[k](d, a, w)
}

func TestReleaseRacesUse(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for _, c := range raceCases() {
		for _, d := range raceDevices(t) {
			t.Run(c.name+"/"+d.String(), func(t *testing.T) {
				if c.other && !otherDevice(d).Available() {
					t.Skipf("%s is not available", otherDevice(d))
				}
				runRace(t, c, d, rounds)
			})
		}
	}
}

// TestRaceOpsRun checks that each of raceOps runs when nothing is
// released, so that the stress tests' failures come from the race only.
func TestRaceOpsRun(t *testing.T) {
	for _, d := range raceDevices(t) {
		for k := range raceOps {
			t.Run(fmt.Sprintf("%s/%d", d, k), func(t *testing.T) {
				settle(d)
				base := countsOf(d)
				Tidy(func() {
					a := Randn(Shape{4, 8}, WithGrad(), d)
					w := Randn(Shape{8, 8}, WithGrad(), d)
					if err := Catch(func() { raceOp(d, a, w, k); raceOp(d, w, w, k) }); err != nil {
						t.Fatal(err)
					}
				})
				checkBalanced(t, d, base, false)
			})
		}
	}
}

// TestCleanupRacesRelease leaves temporaries to the garbage collector while
// it runs, and releases views of storages whose bases the collector frees:
// the cleanup backstop and Release drop references to the same storages at
// once, and each storage is still freed exactly once.
func TestCleanupRacesRelease(t *testing.T) {
	iters := 200
	if testing.Short() {
		iters = 50
	}
	for _, d := range raceDevices(t) {
		t.Run(d.String(), func(t *testing.T) {
			settle(d)
			base := countsOf(d)
			stop := make(chan struct{})
			watch := watchCounts(stop, d)
			w := Randn(Shape{8, 8}, d)
			var gcs sync.WaitGroup
			gcs.Add(1)
			go func() {
				defer gcs.Done()
				for {
					select {
					case <-stop:
						return
					default:
						runtime.GC()
					}
				}
			}()
			var wg sync.WaitGroup
			for range 7 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range iters {
						// Temporaries nobody releases: the collector frees
						// them, possibly while the next kernel still runs.
						_ = w.Add(w).Mul(w).Narrow(0, 1, 2).Sum().Item()
						// A view outlives its base, which is never
						// released: the cleanup of the base and the
						// Release of the view race on the storage.
						v := w.MulScalar(2).Narrow(0, 0, 4)
						runtime.Gosched()
						_ = v.Sum().Item()
						v.Release()
					}
				}()
			}
			wg.Wait()
			w.Release()
			close(stop)
			gcs.Wait()
			if err := <-watch; err != nil {
				t.Error(err)
			}
			settle(d)
			checkBalanced(t, d, base, true)
			if leaked := Storage(d).Leaked - base.storage.Leaked; leaked == 0 {
				t.Errorf("%s: the collector freed nothing; the test did not test the cleanup", d)
			}
		})
	}
}

// TestRetainGraphRacesFreeingBackward runs backward passes that keep the
// graph beside ones that free it, and releases the output meanwhile: a
// closure never runs on saved tensors that are gone (the free waits for
// it), and the graph is freed exactly once.
func TestRetainGraphRacesFreeingBackward(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 6
	}
	for _, d := range raceDevices(t) {
		t.Run(d.String(), func(t *testing.T) {
			settle(d)
			base := countsOf(d)
			for round := range rounds {
				var w, loss *Tensor
				Tidy(func() {
					w = Keep(Randn(Shape{8, 8}, WithGrad(), d))
					x := Randn(Shape{4, 8}, d)
					loss = Keep(x.MatMul(w).Tanh().Square().Mean())
				})
				var wg sync.WaitGroup
				errs := make(chan error, 8)
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var err error
						Tidy(func() {
							err = Catch(func() {
								switch {
								case g == 7:
									loss.Release()
								case (g+round)%3 == 0:
									loss.Backward()
								default:
									loss.Backward(RetainGraph())
								}
							})
						})
						if err != nil {
							errs <- err
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					// Losing to the release, or to a Backward that freed
					// the graph first, are the two ways to fail.
					if !errors.Is(err, ErrReleased) && !errors.Is(err, ErrAutograd) {
						t.Errorf("round %d: %v", round, err)
					}
				}
				loss.Release()
				w.Release()
			}
			checkBalanced(t, d, base, false)
		})
	}
}

func TestReleasedUsesFailWithErrReleased(t *testing.T) {
	// Sequentially, every kind of use of a released tensor is ErrReleased,
	// and nothing of it is freed twice.
	d := quiet
	settle(d)
	base := countsOf(d)
	for k := range raceOps {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			for _, which := range []string{"input", "weight"} {
				Tidy(func() {
					a := Randn(Shape{4, 8}, WithGrad(), d)
					w := Randn(Shape{8, 8}, WithGrad(), d)
					if which == "input" {
						a.Release()
					} else {
						w.Release()
					}
					err := Catch(func() { raceOp(d, a, w, k) })
					// Every op reads a; a few do not read w.
					if err == nil && which == "input" || err != nil && !errors.Is(err, ErrReleased) {
						t.Errorf("%s released: got %v, want ErrReleased", which, err)
					}
				})
			}
		})
	}
	checkBalanced(t, d, base, false)
}

func TestStorageIsNeverRevived(t *testing.T) {
	// A storage whose count reached zero refuses a new reference, so a
	// view made through a stale path fails instead of freeing it again.
	d := quiet
	settle(d)
	base := countsOf(d)
	x := Zeros(Shape{4}, d)
	st := x.ref.st
	x.Release()
	if n := st.refs.Load(); n != 0 {
		t.Fatalf("refs %d after the last release", n)
	}
	if err := Catch(func() { st.retain("view") }); !errors.Is(err, ErrReleased) {
		t.Fatalf("retain of a freed storage: %v, want ErrReleased", err)
	}
	if n := st.refs.Load(); n != 0 {
		t.Fatalf("refs %d after a refused retain", n)
	}
	// A tensor held by an operation is freed by the operation's unpin,
	// once, when it is released meanwhile.
	y := Zeros(Shape{4}, d)
	p := pin("test", y)
	y.Release()
	y.Release()
	if got := Storage(d).LiveBytes - base.storage.LiveBytes; got != 16 {
		t.Fatalf("a pinned tensor's storage went while pinned: %d bytes live", got)
	}
	if err := Catch(func() { pin("test", y) }); !errors.Is(err, ErrReleased) {
		t.Fatalf("pin of a released tensor: %v", err)
	}
	p.unpin()
	checkBalanced(t, d, base, false)
}

func TestGradientsOfReleasedTensors(t *testing.T) {
	// The sequential forms of the races above: what Backward does with a
	// leaf, or a leaf's gradient, that is gone by the time it arrives.
	tests := []struct {
		name string
		run  func(t *testing.T, w *Tensor, loss func() *Tensor)
	}{
		{"leaf released before backward", func(t *testing.T, w *Tensor, loss func() *Tensor) {
			l := loss()
			w.Release()
			l.Backward()
			if g := w.Grad(); g != nil {
				t.Fatalf("a released leaf took a gradient: %v", g)
			}
		}},
		{"gradient released behind the leaf's back", func(t *testing.T, w *Tensor, loss func() *Tensor) {
			loss().Backward()
			w.Grad().Release()
			loss().Backward()
			if got := w.Grad().Float64s(); got[0] != 2 {
				t.Fatalf("gradient %v, want a fresh one of 2s", got)
			}
		}},
		{"released tensor as a gradient", func(t *testing.T, w *Tensor, _ func() *Tensor) {
			g := w.NewOnes(Shape{4})
			g.Release()
			if err := Catch(func() { w.SetGrad(g) }); !errors.Is(err, ErrReleased) {
				t.Fatalf("SetGrad of a released tensor: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		for _, d := range raceDevices(t) {
			t.Run(tc.name+"/"+d.String(), func(t *testing.T) {
				settle(d)
				base := countsOf(d)
				Tidy(func() {
					w := Ones(Shape{4}, WithGrad(), d)
					tc.run(t, w, func() *Tensor { return w.MulScalar(2).Sum() })
					w.Release()
				})
				checkBalanced(t, d, base, false)
			})
		}
	}
}
