package vram

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestBackwardBadOptions: options Backward cannot use fail with a vram
// error that Catch returns, and leave the graph usable.
func TestBackwardBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts func() []BackwardOption
		kind error
	}{
		{"nil option", func() []BackwardOption { return []BackwardOption{nil} }, ErrArgument},
		{"nil after a good one", func() []BackwardOption { return []BackwardOption{RetainGraph(), nil} }, ErrArgument},
		{"gradient of another shape", func() []BackwardOption { return []BackwardOption{Gradient(Ones(Shape{2}))} }, ErrShape},
		{"gradient on another device", func() []BackwardOption { return []BackwardOption{Gradient(Ones(Shape{}, Sim(0)))} }, ErrDevice},
		{"integer gradient", func() []BackwardOption { return []BackwardOption{Gradient(Ones(Shape{}, Int64))} }, ErrDType},
		{"bool gradient", func() []BackwardOption { return []BackwardOption{Gradient(Ones(Shape{}, Bool))} }, ErrDType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2}, nil, WithGrad())
				loss := w.Mul(w).Sum()
				err := Catch(func() { loss.Backward(tc.opts()...) })
				if !errors.Is(err, tc.kind) {
					t.Fatalf("got %v, want %v", err, tc.kind)
				}
				loss.Backward()
				if got := w.Grad().Float64s(); got[0] != 2 || got[1] != 4 {
					t.Errorf("gradient after the refused call %v, want [2 4]", got)
				}
			})
		})
	}
}

// TestRetainGrad follows torch.Tensor.retain_grad: a computed tensor that
// called it gets the gradient with respect to it (summed over its uses,
// accumulated across Backward calls, after its hooks), others get none.
func TestRetainGrad(t *testing.T) {
	tests := []struct {
		name string
		// run builds a graph from w = [1, 2], marks tensors, runs Backward
		// and returns the tensor whose gradient is checked.
		run  func(w *Tensor) *Tensor
		want []float64 // nil: no gradient
	}{
		{"used twice", func(w *Tensor) *Tensor {
			h := w.MulScalar(3)
			h.RetainGrad()
			h.Mul(h).Sum().Add(h.Sum()).Backward() // d/dh = 2h + 1
			return h
		}, []float64{7, 13}},
		{"the root", func(w *Tensor) *Tensor {
			loss := w.Sum()
			loss.RetainGrad()
			loss.Backward()
			return loss
		}, []float64{1}},
		{"accumulates across calls", func(w *Tensor) *Tensor {
			h := w.MulScalar(2)
			h.RetainGrad()
			loss := h.Sum()
			loss.Backward(RetainGraph())
			loss.Backward()
			return h
		}, []float64{2, 2}},
		{"a view", func(w *Tensor) *Tensor {
			v := w.MulScalar(1).Reshape(2, 1)
			v.RetainGrad()
			v.MulScalar(5).Sum().Backward()
			return v
		}, []float64{5, 5}},
		{"after its hook", func(w *Tensor) *Tensor {
			h := w.MulScalar(1)
			h.RetainGrad() // before the hook: still sees its result
			h.RegisterHook(func(g *Tensor) *Tensor { return g.MulScalar(10) })
			h.Sum().Backward()
			return h
		}, []float64{10, 10}},
		{"not retained", func(w *Tensor) *Tensor {
			h := w.MulScalar(3)
			h.Sum().Backward()
			return h
		}, nil},
		{"a leaf", func(w *Tensor) *Tensor {
			w.RetainGrad()
			if w.RetainsGrad() {
				t.Error("RetainsGrad of a leaf is true")
			}
			w.MulScalar(4).Sum().Backward()
			return w
		}, []float64{4, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2}, nil, WithGrad())
				got := tc.run(w).Grad()
				switch {
				case tc.want == nil && got != nil:
					t.Errorf("gradient %v, want none", got.Float64s())
				case tc.want != nil && got == nil:
					t.Errorf("no gradient, want %v", tc.want)
				case tc.want != nil && !slices.Equal(got.Float64s(), tc.want):
					t.Errorf("gradient %v, want %v", got.Float64s(), tc.want)
				}
			})
		})
	}
	err := Catch(func() { Ones(Shape{2}).RetainGrad() })
	if !errors.Is(err, ErrAutograd) {
		t.Errorf("RetainGrad of a tensor that does not require grad: %v, want ErrAutograd", err)
	}
}

// TestRetainGradMemory: a retained gradient is the tensor's, released with
// it, and a retaining tensor released before Backward takes none.
func TestRetainGradMemory(t *testing.T) {
	d := Sim(0)
	w := Ones(Shape{64}, d, WithGrad())
	defer w.Release()
	settle(d)
	base := MemoryAllocated(d)
	h := w.MulScalar(2)
	h.RetainGrad()
	gone := w.MulScalar(3)
	gone.RetainGrad()
	var loss *Tensor
	Tidy(func() { loss = Keep(h.Add(gone).Sum()) })
	gone.Release()
	loss.Backward()
	if h.Grad() == nil || !h.RetainsGrad() {
		t.Fatal("no retained gradient")
	}
	if gone.Grad() != nil {
		t.Error("a released tensor got a retained gradient")
	}
	loss.Release()
	h.Release()
	w.ZeroGrad()
	if got := MemoryAllocated(d); got != base {
		t.Errorf("%d bytes allocated after releasing everything, want %d", got, base)
	}
}

// TestRegisterHook follows torch.Tensor.register_hook: a hook sees the
// complete gradient with respect to its tensor and may replace it for
// everything upstream.
func TestRegisterHook(t *testing.T) {
	times := func(k float64, calls *int) func(*Tensor) *Tensor {
		return func(g *Tensor) *Tensor { *calls++; return g.MulScalar(k) }
	}
	tests := []struct {
		name      string
		run       func(w *Tensor, calls *int) // w = [1, 2]
		wantGrad  []float64
		wantCalls int
	}{
		{"computed tensor, replaced", func(w *Tensor, calls *int) {
			h := w.MulScalar(3)
			h.RegisterHook(times(10, calls))
			h.Mul(h).Sum().Backward() // d/dh = 2h = [6 12]
		}, []float64{180, 360}, 1},
		{"passes through on nil", func(w *Tensor, calls *int) {
			h := w.MulScalar(3)
			h.RegisterHook(func(g *Tensor) *Tensor { *calls++; return nil })
			h.Sum().Backward()
		}, []float64{3, 3}, 1},
		{"hooks chain in order", func(w *Tensor, calls *int) {
			h := w.MulScalar(1)
			h.RegisterHook(func(g *Tensor) *Tensor { *calls++; return g.AddScalar(1) })
			h.RegisterHook(times(10, calls))
			h.Sum().Backward() // (1+1)*10
		}, []float64{20, 20}, 2},
		{"leaf used twice: once, with the sum", func(w *Tensor, calls *int) {
			w.RegisterHook(func(g *Tensor) *Tensor {
				*calls++
				if got := g.Float64s(); !slices.Equal(got, []float64{3, 5}) {
					t.Errorf("leaf hook saw %v, want the sum [3 5]", got)
				}
				return g.MulScalar(2)
			})
			post := 0
			w.RegisterPostAccumulateGradHook(func(w *Tensor) {
				post++
				if got := w.Grad().Float64s(); !slices.Equal(got, []float64{6, 10}) {
					t.Errorf("post-accumulate hook saw %v, want the replaced [6 10]", got)
				}
			})
			w.Mul(w).Sum().Add(w.Sum()).Backward()
			if post != 1 {
				t.Errorf("post-accumulate hook ran %d times, want 1", post)
			}
		}, []float64{6, 10}, 1},
		{"leaf as the root", func(w *Tensor, calls *int) {
			w.RegisterHook(times(-1, calls))
			w.Backward(Gradient(FromSlice([]float64{1, 2}, nil)))
		}, []float64{-1, -2}, 1},
		{"removed", func(w *Tensor, calls *int) {
			h := w.MulScalar(1)
			remove := h.RegisterHook(times(10, calls))
			remove()
			w.RegisterHook(times(10, calls))()
			h.Sum().Backward()
		}, []float64{1, 1}, 0},
		{"tensor released before backward", func(w *Tensor, calls *int) {
			h := w.MulScalar(2)
			h.RegisterHook(times(10, calls))
			loss := h.Sum()
			h.Release()
			loss.Backward()
		}, []float64{20, 20}, 1},
		{"float32 result for a float64 tensor", func(w *Tensor, calls *int) {
			h := w.MulScalar(1)
			h.RegisterHook(func(g *Tensor) *Tensor { *calls++; return Full(Shape{2}, 7, Float32) })
			h.Sum().Backward()
		}, []float64{7, 7}, 1},
		{"returns a tensor the caller keeps", func(w *Tensor, calls *int) {
			mine := FromSlice([]float64{4, 5}, nil)
			h := w.MulScalar(1)
			h.RegisterHook(func(*Tensor) *Tensor { *calls++; return mine })
			h.Sum().Backward()
			if mine.Released() || !slices.Equal(mine.Float64s(), []float64{4, 5}) {
				t.Error("the hook's returned tensor was released or changed")
			}
		}, []float64{4, 5}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := FromSlice([]float64{1, 2}, nil, WithGrad())
				calls := 0
				tc.run(w, &calls)
				if calls != tc.wantCalls {
					t.Errorf("%d hook calls, want %d", calls, tc.wantCalls)
				}
				if g := w.Grad(); g == nil || !slices.Equal(g.Float64s(), tc.wantGrad) {
					t.Errorf("w's gradient %v, want %v", g, tc.wantGrad)
				}
			})
		})
	}
}

// TestRegisterHookFailures: a hook that cannot be registered, or whose
// result cannot be used, fails with a vram error, a hook that panics lets
// the panic through, and in every case Backward leaves no memory behind.
func TestRegisterHookFailures(t *testing.T) {
	d := Sim(0)
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		hook func(g *Tensor) *Tensor
		leaf bool // on the leaf rather than on a computed tensor
		want error
	}{
		{"wrong shape", func(g *Tensor) *Tensor { return Ones(Shape{3}, d) }, false, ErrShape},
		{"wrong shape on a leaf", func(g *Tensor) *Tensor { return Ones(Shape{3}, d) }, true, ErrShape},
		{"wrong device", func(g *Tensor) *Tensor { return Ones(Shape{2}) }, false, ErrDevice},
		{"not float", func(g *Tensor) *Tensor { return Ones(Shape{2}, Int32, d) }, false, ErrDType},
		{"panics after a replacement", func(g *Tensor) *Tensor { panic(errBoom) }, false, errBoom},
		{"panics on a leaf", func(g *Tensor) *Tensor { panic(errBoom) }, true, errBoom},
		{"releases its gradient", func(g *Tensor) *Tensor { g.Release(); return nil }, false, ErrReleased},
		{"releases its gradient on a leaf", func(g *Tensor) *Tensor { g.Release(); return nil }, true, ErrReleased},
		{"returns its released gradient", func(g *Tensor) *Tensor { g.Release(); return g }, false, ErrReleased},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := Ones(Shape{2}, d, WithGrad())
			defer w.Release()
			settle(d)
			base := MemoryAllocated(d)
			h := w.MulScalar(2)
			h.RegisterHook(func(g *Tensor) *Tensor { return g.MulScalar(2) }) // runs first
			target := h
			if tc.leaf {
				target = w
			}
			remove := target.RegisterHook(tc.hook)
			var loss *Tensor
			Tidy(func() { loss = Keep(h.Mul(h).Sum()) })
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err, _ = r.(error)
					}
				}()
				err = Catch(func() { loss.Backward(RetainGraph()) })
			}()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			remove()
			w.ZeroGrad()
			loss.Backward() // the graph is still whole
			if g := w.Grad().Float32s(); g[0] != 16 {
				t.Errorf("gradient after the failure %v, want 16s", g)
			}
			w.ZeroGrad()
			loss.Release()
			h.Release()
			if got := MemoryAllocated(d); got != base {
				t.Errorf("%d bytes allocated after releasing everything, want %d", got, base)
			}
		})
	}
	for _, tc := range []struct {
		name string
		call func()
		want error
	}{
		{"nil hook", func() { Ones(Shape{2}, WithGrad()).RegisterHook(nil) }, ErrArgument},
		{"no grad", func() { Ones(Shape{2}).RegisterHook(func(g *Tensor) *Tensor { return nil }) }, ErrAutograd},
	} {
		if err := Catch(tc.call); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestConcurrentBackwardWithHooks runs Backward on several goroutines at
// once, over graphs of their own that share a parameter and over one
// shared graph, with hooks registered and removed meanwhile (run it with
// -race): every gradient is the sum of all the passes.
func TestConcurrentBackwardWithHooks(t *testing.T) {
	const workers, steps = 4, 20
	w := FromSlice([]float64{1, 2}, nil, WithGrad())
	defer w.Release()
	var leafCalls atomic.Int64
	w.RegisterHook(func(g *Tensor) *Tensor { leafCalls.Add(1); return nil })
	shared := w.MulScalar(2)
	defer shared.Release()
	shared.RetainGrad()
	var sharedCalls atomic.Int64
	shared.RegisterHook(func(g *Tensor) *Tensor { sharedCalls.Add(1); return g.MulScalar(2) })
	sharedLoss := shared.Sum()
	defer sharedLoss.Release()
	var wg sync.WaitGroup
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() { // hooks come and go while the passes run
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
				w.RegisterHook(func(*Tensor) *Tensor { return nil })()
				shared.RegisterHook(func(*Tensor) *Tensor { return nil })()
			}
		}
	}()
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range steps {
				Tidy(func() {
					h := w.MulScalar(3) // a graph of its own
					h.RetainGrad()
					h.Sum().Backward()
					if g := h.Grad().Float64s(); g[0] != 1 || g[1] != 1 {
						errs <- fmt.Errorf("own graph's retained gradient %v, want ones", g)
					}
					sharedLoss.Backward(RetainGraph())
				})
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-stopped
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const passes = workers * steps
	// Each own graph adds 3, each shared pass 2·2 (its hook doubles).
	if g := w.Grad().Float64s(); g[0] != 7*passes || g[1] != 7*passes {
		t.Errorf("w's gradient %v, want %d each", g, 7*passes)
	}
	if g := shared.Grad().Float64s(); g[0] != 2*passes {
		t.Errorf("shared's retained gradient %v, want %d each", g, 2*passes)
	}
	if leafCalls.Load() != 2*passes || sharedCalls.Load() != passes {
		t.Errorf("hook calls: leaf %d, shared %d; want %d and %d", leafCalls.Load(), sharedCalls.Load(), 2*passes, passes)
	}
}

// TestSetGradMismatch: a gradient that does not fit its tensor (or that
// Backward could not add to in place) fails with the kind of the mismatch
// and leaves the gradient that was there.
func TestSetGradMismatch(t *testing.T) {
	tests := []struct {
		name string
		g    func(w *Tensor) *Tensor
		want error
	}{
		{"shape", func(*Tensor) *Tensor { return Zeros(Shape{3}) }, ErrShape},
		{"device", func(*Tensor) *Tensor { return Zeros(Shape{2}, Sim(0)) }, ErrDevice},
		{"dtype", func(*Tensor) *Tensor { return Zeros(Shape{2}, Float64) }, ErrDType},
		{"expanded", func(*Tensor) *Tensor { return Zeros(Shape{1}).Expand(2) }, ErrArgument},
		{"itself", func(w *Tensor) *Tensor { return w }, ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				w := Ones(Shape{2}, WithGrad())
				w.SetGrad(Full(Shape{2}, 5))
				err := Catch(func() { w.SetGrad(tc.g(w)) })
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				if g := w.Grad(); g == nil || g.Float32s()[0] != 5 {
					t.Errorf("gradient after the refusal %v, want the old fives", g)
				}
			})
		})
	}
}

// TestDeepGraph backpropagates through a chain of many operations whose
// intermediate tensors were all released, and frees the whole chain when
// the last tensor goes, with no recursion limit in the way.
func TestDeepGraph(t *testing.T) {
	depth := 10000
	if testing.Short() {
		depth = 3000
	}
	d := Sim(0)
	w := Ones(Shape{1}, d, WithGrad())
	defer w.Release()
	settle(d)
	base := MemoryAllocated(d)
	y := w.MulScalar(1)
	for range depth - 1 {
		next := y.MulScalar(1)
		y.Release()
		y = next
	}
	y.Backward(RetainGraph())
	y.Backward()
	if g := w.Grad().Float32s(); g[0] != 2 {
		t.Errorf("gradient through %d operations %v, want 2", depth, g)
	}
	w.ZeroGrad()
	y.Release()
	if got := MemoryAllocated(d); got != base {
		t.Errorf("%d bytes allocated after releasing the chain, want %d", got, base)
	}
}

// TestClearedGradient: every way of dropping a leaf's gradient (ZeroGrad,
// SetGrad(nil), releasing the gradient itself, also from a post-accumulate
// hook) leaves Grad nil rather than a released tensor, and the next
// Backward stores a fresh gradient rather than adding to the old one.
func TestClearedGradient(t *testing.T) {
	for _, d := range []Device{CPU, Sim(0)} {
		tests := []struct {
			name  string
			clear func(w *Tensor)
			hook  bool // clear from a post-accumulate hook instead
		}{
			{"zero grad", func(w *Tensor) { w.ZeroGrad() }, false},
			{"set grad nil", func(w *Tensor) { w.SetGrad(nil) }, false},
			{"release the gradient", func(w *Tensor) { w.Grad().Release() }, false},
			{"release in a hook", func(w *Tensor) { w.Grad().Release() }, true},
		}
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					w := FromSlice([]float64{1, 2}, nil, d, WithGrad())
					if tc.hook {
						w.RegisterPostAccumulateGradHook(tc.clear)
					}
					w.Mul(w).Sum().Backward()
					if !tc.hook {
						tc.clear(w)
					}
					if g := w.Grad(); g != nil {
						t.Fatalf("Grad after clearing it is %v, want nil", g)
					}
					if tc.hook {
						return
					}
					w.Mul(w).Sum().Backward()
					if g := w.Grad().Float64s(); g[0] != 2 || g[1] != 4 {
						t.Errorf("gradient after clearing and one Backward %v, want [2 4]", g)
					}
				})
			})
		}
	}
}

// TestMixedDTypeGradientsKeepTheirTensorsDType: an operation on tensors of
// two float dtypes computes in the wider one; the gradient with respect to
// the narrower input goes on in that input's dtype, as in PyTorch, so its
// hooks and RetainGrad see the tensor's own dtype, and the values match.
func TestMixedDTypeGradientsKeepTheirTensorsDType(t *testing.T) {
	ops := []struct {
		name string
		f    func(h, b *Tensor) *Tensor
		dh   func(b float64) float64 // d f / d h, elementwise
	}{
		{"mul", func(h, b *Tensor) *Tensor { return h.Mul(b) }, func(b float64) float64 { return b }},
		{"div", func(h, b *Tensor) *Tensor { return h.Div(b) }, func(b float64) float64 { return 1 / b }},
		{"add", func(h, b *Tensor) *Tensor { return h.Add(b) }, func(float64) float64 { return 1 }},
		{"sub", func(h, b *Tensor) *Tensor { return b.Sub(h) }, func(float64) float64 { return -1 }},
		{"where", func(h, b *Tensor) *Tensor { return Where(b.GtScalar(3.5), h, b) }, func(b float64) float64 {
			if b > 3.5 {
				return 1
			}
			return 0
		}},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, dt := range []DType{Float16, BFloat16} {
			for _, op := range ops {
				t.Run(fmt.Sprintf("%s/%s/%s", d, dt, op.name), func(t *testing.T) {
					Tidy(func() {
						bv := []float64{3, 4}
						a := FromSlice([]float64{1, 2}, nil, d, dt, WithGrad())
						b := FromSlice(bv, nil, d, Float32)
						h := a.MulScalar(2)
						h.RetainGrad()
						var seen DType
						h.RegisterHook(func(g *Tensor) *Tensor { seen = g.DType(); return nil })
						op.f(h, b).Sum().Add(h.Sum().Cast(Float32)).Backward()
						if seen != dt {
							t.Errorf("the hook got a %s gradient for a %s tensor", seen, dt)
						}
						got := h.Grad().Float64s()
						for i, b := range bv {
							if want := op.dh(b) + 1; math.Abs(got[i]-want) > 1e-2*(1+math.Abs(want)) {
								t.Errorf("gradient %v, element %d want %v", got, i, want)
							}
						}
					})
				})
			}
		}
	}
}

// TestConcurrentBackwardSharedLeaves runs Backward on several goroutines
// at once over diamond-shaped graphs of their own that share two leaves,
// seeded implicitly or with a Gradient, and over one shared retained graph
// (run it with -race): each leaf's gradient is exactly the sum of every
// pass's contribution.
func TestConcurrentBackwardSharedLeaves(t *testing.T) {
	const workers, steps = 4, 15
	for _, d := range []Device{CPU, Sim(0)} {
		t.Run(d.String(), func(t *testing.T) {
			av, bv := []float64{1, 2, 3}, []float64{0.5, 1, 2}
			a := FromSlice(av, nil, d, WithGrad())
			b := FromSlice(bv, nil, d, WithGrad())
			defer a.Release()
			defer b.Release()
			var shared *Tensor
			Tidy(func() { shared = Keep(a.Mul(b).Sum()) })
			defer shared.Release()
			var wg sync.WaitGroup
			for i := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range steps {
						Tidy(func() {
							h := a.Mul(b).Add(a) // used twice below
							l := h.Mul(h).Sum().Add(h.Sum())
							if i%2 == 0 {
								l.Backward()
							} else {
								l.Backward(Gradient(Scalar(2, d, Float64)))
							}
							shared.Backward(RetainGraph())
						})
					}
				}()
			}
			wg.Wait()
			// l = sum(h² + h) with h = a·b + a: dl/dh = 2h + 1, seeded with
			// 1 by half the workers and 2 by the other half; the shared
			// graph adds b to a's gradient and a to b's.
			const n = workers * steps
			ga, gb := a.Grad().Float64s(), b.Grad().Float64s()
			for j := range av {
				h := av[j]*bv[j] + av[j]
				wa := (2*h+1)*(bv[j]+1)*1.5*n + bv[j]*n
				wb := (2*h+1)*av[j]*1.5*n + av[j]*n
				if ga[j] != wa || gb[j] != wb {
					t.Errorf("element %d: gradients %v and %v, want %v and %v", j, ga[j], gb[j], wa, wb)
				}
			}
		})
	}
}
