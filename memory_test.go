package vram

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func liveOn(d Device) int64 { return Storage(d).LiveBytes }

// quiet is a simulated device that only the byte-exact tests below use, so
// that no other test's garbage changes its counts.
var quiet = Sim(2)

// testConfig is the configuration of the package's tests: four small sim
// devices.
var testConfig = Config{SimDevices: []int64{256 << 20, 256 << 20, 256 << 20, 256 << 20}}

func TestMain(m *testing.M) {
	// A test's child process (see inChild) starts unconfigured, as a
	// program that never calls Configure does.
	if os.Getenv(childEnv) == "" {
		if err := Configure(testConfig); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

func TestReleaseSemantics(t *testing.T) {
	d := quiet
	base := liveOn(d)
	x := Zeros(Shape{256}, Float32, d) // 1 KiB
	if got := liveOn(d) - base; got != 1024 {
		t.Fatalf("live after alloc: %d", got)
	}
	v := x.Narrow(0, 0, 10) // a view shares the storage
	x.Release()
	x.Release() // idempotent
	if got := liveOn(d) - base; got != 1024 {
		t.Fatalf("a view must keep the storage alive: %d", got)
	}
	if err := Catch(func() { x.Add(x) }); !errors.Is(err, ErrReleased) {
		t.Fatalf("use after release: %v", err)
	}
	v.Release()
	if got := liveOn(d) - base; got != 0 {
		t.Fatalf("storage not freed after the last reference: %d", got)
	}
}

func TestGraphKeepsSavedTensorsUntilBackward(t *testing.T) {
	base := liveOn(quiet)
	w := Ones(Shape{64}, Float32, WithGrad(), quiet) // 256 B
	x := Ones(Shape{64}, Float32, quiet)             // 256 B
	y := w.Mul(x)                                    // 256 B, saves w and x
	loss := y.Sum()                                  // 4 B
	x.Release()
	if got := liveOn(quiet) - base; got != 256*3+4 {
		t.Fatalf("x must stay alive while the graph saved it: %d", got)
	}
	loss.Backward()
	// x's storage is gone; w, y, loss and w.grad remain.
	if got := liveOn(quiet) - base; got != 256*3+4 {
		t.Fatalf("after backward: %d", got)
	}
	if err := Catch(func() { loss.Backward() }); !errors.Is(err, ErrAutograd) {
		t.Fatalf("second backward without RetainGraph: %v", err)
	}
	for _, tt := range []*Tensor{w, y, loss} {
		tt.Release()
	}
	if got := liveOn(quiet) - base; got != 0 {
		t.Fatalf("after releasing everything: %d", got)
	}
}

func TestRetainGraphAccumulates(t *testing.T) {
	w := FromSlice([]float64{2}, nil, WithGrad())
	loss := w.Mul(w).Sum()
	loss.Backward(RetainGraph())
	loss.Backward()
	if g := w.Grad().Item(); g != 8 {
		t.Fatalf("accumulated gradient %v, want 8", g)
	}
	w.ZeroGrad()
	if w.Grad() != nil {
		t.Fatal("ZeroGrad should clear the gradient")
	}
	out := w.MulScalar(3)
	out.Backward(Gradient(FromSlice([]float64{2}, nil)))
	if g := w.Grad().Item(); g != 6 {
		t.Fatalf("gradient with a seed: %v", g)
	}
	if err := Catch(func() { FromSlice([]float64{1, 2}, nil, WithGrad()).MulScalar(2).Backward() }); !errors.Is(err, ErrShape) {
		t.Fatalf("implicit gradient of a vector: %v", err)
	}
	if err := Catch(func() { Ones(Shape{1}).Backward() }); !errors.Is(err, ErrAutograd) {
		t.Fatalf("backward of a constant: %v", err)
	}
	d := w.MulScalar(2).Detach()
	if d.RequiresGrad() || !d.IsLeaf() {
		t.Fatal("Detach must cut the graph")
	}
}

func TestNoGradIsPerGoroutine(t *testing.T) {
	w := Ones(Shape{2}, WithGrad())
	inside := make(chan struct{})
	done := make(chan bool)
	go func() {
		NoGrad(func() {
			close(inside)
			<-done
		})
	}()
	<-inside
	y := w.MulScalar(2) // this goroutine still records
	if !y.RequiresGrad() {
		t.Fatal("another goroutine's NoGrad turned off gradients here")
	}
	NoGrad(func() {
		if w.MulScalar(2).RequiresGrad() || GradEnabled() {
			t.Error("NoGrad did not apply to its own goroutine")
		}
	})
	done <- true
	if !GradEnabled() {
		t.Fatal("grad mode not restored")
	}
}

func TestTidyReleasesTemporaries(t *testing.T) {
	base := liveOn(quiet)
	var kept *Tensor
	Tidy(func() {
		a := Ones(Shape{100}, quiet)
		b := a.MulScalar(2).AddScalar(1).Exp()
		kept = Keep(b.Sum())
	})
	if got := liveOn(quiet) - base; got != 4 {
		t.Fatalf("after Tidy %d bytes live, want only the kept scalar's 4", got)
	}
	kept.Release()
	// A panic inside still releases.
	func() {
		defer func() { recover() }()
		Tidy(func() {
			Ones(Shape{100}, quiet)
			panic("x")
		})
	}()
	if got := liveOn(quiet) - base; got != 0 {
		t.Fatalf("after a panicking Tidy: %d", got)
	}
}

// A 1,000-step training loop of a two-layer network, manual SGD, each step in
// Tidy: memory is flat from the second step on, with no runtime.GC call.
func TestTrainingLoopHoldsFlatMemory(t *testing.T) {
	settleGarbage() // earlier tests' unreleased tensors, not this loop's
	g := NewGenerator(1)
	var w1, w2, x, yt *Tensor
	Tidy(func() { // set-up temporaries are released too
		w1 = Keep(Randn(Shape{8, 16}, WithGenerator(g)).MulScalar(0.3).SetRequiresGrad(true))
		w2 = Keep(Randn(Shape{16, 1}, WithGenerator(g)).MulScalar(0.3).SetRequiresGrad(true))
		x = Keep(Randn(Shape{32, 8}, WithGenerator(g)))
		yt = Keep(x.Sum(1).Unsqueeze(1).Tanh())
	})
	var after2 int64
	var first, last float64
	leaked := Storage(CPU).Leaked
	for step := range 1000 {
		Tidy(func() {
			pred := x.MatMul(w1).Tanh().MatMul(w2)
			loss := MSELoss(pred, yt)
			loss.Backward()
			NoGrad(func() {
				for _, w := range []*Tensor{w1, w2} {
					w.AddScaledInPlace(w.Grad(), -0.1)
					w.ZeroGrad()
				}
			})
			if step == 0 {
				first = loss.Item()
			}
			last = loss.Item()
		})
		// Live bytes may fall below step 2's when the collector finalizes
		// an earlier test's unreleased tensors during the loop (they share
		// the CPU's count); they must never rise.
		switch live := liveOn(CPU); {
		case step == 1 || step > 1 && live < after2:
			after2 = live
		case step > 1 && live > after2:
			t.Fatalf("step %d: %d bytes live, %d after step 2", step, live, after2)
		}
	}
	if n := Storage(CPU).Leaked - leaked; n != 0 {
		t.Errorf("%d tensors of the loop were left to the garbage collector", n)
	}
	if !(last < first/4) {
		t.Fatalf("loss did not fall: %v -> %v", first, last)
	}
}

// settleGarbage collects what earlier tests left unreleased and waits for
// the cleanups to free it: until the CPU's leak count (the process's, which
// the backstops raise some time after a collection) holds still for three
// collections, two seconds at most.
func settleGarbage() {
	last := Storage(CPU).Leaked
	deadline := time.Now().Add(2 * time.Second)
	for same := 0; same < 3 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		if n := Storage(CPU).Leaked; n != last {
			last, same = n, 0
		} else {
			same++
		}
	}
}

func TestGraphGrowthWarning(t *testing.T) {
	var mu sync.Mutex
	var got []Warning
	old := SetWarningHandler(func(w Warning) {
		mu.Lock()
		got = append(got, w)
		mu.Unlock()
	})
	defer SetWarningHandler(old)
	growthWarned = sync.Map{}
	total := Zeros(Shape{}, Float64)
	for range 300 {
		iterLoss := Randn(Shape{3, 4}, Float64).Mean().Detach().SetRequiresGrad(true)
		total = total.Add(iterLoss) // the mistake: should be total += iterLoss.Item()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("got %d warnings, want exactly 1: %v", len(got), got)
	}
	if !strings.Contains(got[0].Location, "memory_test.go") || !strings.Contains(got[0].Message, "Item()") {
		t.Fatalf("warning should say where and suggest Item(): %+v", got[0])
	}
}

// TestLeakBackstop: tensors never released are freed by the garbage
// collector and counted as leaked, whether made outside any Tidy, kept out
// of one with Keep (the backstop is armed then), or saved by a graph that
// is dropped; tensors a Tidy releases are not counted.
func TestLeakBackstop(t *testing.T) {
	before := Storage(CPU)
	func() {
		for range 4 {
			Ones(Shape{1000}) // never released
		}
		Tidy(func() {
			for range 4 {
				Keep(Ones(Shape{1000})) // kept, then never released
			}
			for range 8 {
				Ones(Shape{1000}) // released by the Tidy: not a leak
			}
		})
		x := Ones(Shape{1000}).SetRequiresGrad(true)
		Tidy(func() {
			// Exp saves its output for the backward pass; the graph is
			// dropped without Backward, and x is never released.
			Keep(x.Exp()).Sum()
		})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		if Storage(CPU).Leaked-before.Leaked >= 10 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("leaked count %d, want at least 10 more than %d", Storage(CPU).Leaked, before.Leaked)
}

func TestMoveToKeepsIdentity(t *testing.T) {
	if !Sim(0).Available() {
		t.Skip("no sim devices")
	}
	w := Ones(Shape{3}, WithGrad())
	w.MulScalar(2).Sum().Backward()
	p := w
	w.MoveTo(Sim(0))
	if p != w || w.Device() != Sim(0) || w.Grad().Device() != Sim(0) {
		t.Fatalf("MoveTo: %v %v", w.Device(), w.Grad().Device())
	}
	if got := w.CPU().Float64s(); got[0] != 1 {
		t.Fatalf("values after move: %v", got)
	}
	runtime.GC()
	runtime.GC()
	if got := w.CPU().Float64s(); got[2] != 1 {
		t.Fatalf("values after GC: %v", got)
	}
}

func TestConcurrentOps(t *testing.T) {
	w := Randn(Shape{16, 16}, WithGrad())
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				Tidy(func() {
					w.MatMul(w).Tanh().Sum().Backward()
				})
			}
		}()
	}
	wg.Wait()
	if w.Grad() == nil {
		t.Fatal("no gradient")
	}
}

func TestLongTidyStaysSmall(t *testing.T) {
	Tidy(func() {
		for range 10000 {
			Ones(Shape{1}, quiet).Release()
		}
		g := current()
		if n := len(g.scopes[len(g.scopes)-1].tensors); n > 512 {
			t.Fatalf("a Tidy whose tensors were released holds %d entries", n)
		}
	})
}
