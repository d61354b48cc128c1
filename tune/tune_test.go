package tune_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/internal/memtest"
	"github.com/vramgo/vram/tune"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{64 << 20}}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

var dev = vram.Sim(0)

// rowFloats is the size of one sample's activations: 40,000 bytes, so that
// the largest fitting batch is no power of two.
const rowFloats = 10000

// panicking is a step that allocates in proportion to the batch (an input
// and an activation twice its size) and panics when it runs out of memory.
func panicking(batch int) error {
	x := vram.Zeros(vram.Shape{batch, rowFloats}, dev)
	h := vram.Zeros(vram.Shape{batch, 2 * rowFloats}, dev)
	_ = h.Add(h)
	x.Release()
	return nil
}

// returning is the same step, reporting running out of memory as an error.
func returning(batch int) error { return vram.Catch(func() { panicking(batch) }) }

// fits reports whether one step of batch runs on a clean allocator.
func fits(t *testing.T, batch int) bool {
	t.Helper()
	vram.EmptyCache(dev)
	err := vram.Catch(func() { vram.Tidy(func() { panicking(batch) }) })
	vram.EmptyCache(dev)
	if err != nil && !errors.Is(err, vram.ErrOutOfMemory) {
		t.Fatal(err)
	}
	return err == nil
}

func TestFindBatchSize(t *testing.T) {
	tests := []struct {
		name  string
		step  func(int) error
		opts  tune.Options
		check func(t *testing.T, got int, rep tune.Report)
	}{
		{"binsearch, step panics", panicking, tune.Options{}, exact},
		{"binsearch, step returns the error", returning, tune.Options{}, exact},
		{"binsearch from a large init", returning, tune.Options{Init: 5000}, exact},
		{"power", panicking, tune.Options{Mode: tune.Power}, func(t *testing.T, got int, rep tune.Report) {
			if got&(got-1) != 0 || !fits(t, got) || fits(t, 2*got) {
				t.Fatalf("power mode found %d, want the largest power of two that fits", got)
			}
		}},
		{"margin", panicking, tune.Options{Margin: 0.9}, func(t *testing.T, got int, rep tune.Report) {
			exactLargest(t, rep.Largest)
			if want := int(0.9 * float64(rep.Largest)); got != want || rep.Batch != want {
				t.Fatalf("with a margin of 0.9 got %d (report %d), want %d of %d", got, rep.Batch, want, rep.Largest)
			}
		}},
		{"max batch below the limit", panicking, tune.Options{MaxBatch: 100}, func(t *testing.T, got int, rep tune.Report) {
			if got != 100 {
				t.Fatalf("got %d, want MaxBatch 100", got)
			}
			for _, tr := range rep.Trials {
				if !tr.Fit || tr.Batch > 100 {
					t.Fatalf("trial %+v: want only fitting batches up to 100", tr)
				}
			}
		}},
		{"max trials", panicking, tune.Options{MaxTrials: 3}, func(t *testing.T, got int, rep tune.Report) {
			if got != 4 || len(rep.Trials) != 3 || !rep.Exhausted {
				t.Fatalf("got %d after %d trials (exhausted %v), want 4 after 3, exhausted", got, len(rep.Trials), rep.Exhausted)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vram.EmptyCache(dev)
			memtest.Settle(dev)
			base := vram.MemoryAllocated(dev)
			got, rep, err := tune.FindBatchSize(dev, tt.step, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if after := vram.MemoryAllocated(dev); after != base {
				t.Fatalf("%d bytes allocated after the search, want the baseline %d", after, base)
			}
			if n := len(rep.Trials); n > 30 {
				t.Fatalf("%d trials", n)
			}
			t.Logf("batch %d after %d trials", got, len(rep.Trials))
			tt.check(t, got, rep)
		})
	}
}

func exact(t *testing.T, got int, rep tune.Report) {
	t.Helper()
	if rep.Largest != got || rep.Batch != got {
		t.Fatalf("returned %d, report says largest %d, batch %d", got, rep.Largest, rep.Batch)
	}
	exactLargest(t, got)
}

func exactLargest(t *testing.T, b int) {
	t.Helper()
	if !fits(t, b) || fits(t, b+1) {
		t.Fatalf("found %d: fits %v, %d fits %v; want the largest batch that fits", b, fits(t, b), b+1, fits(t, b+1))
	}
}

func TestFindBatchSizeErrors(t *testing.T) {
	boom := errors.New("data loader failed")
	tests := []struct {
		name string
		step func(int) error
		opts tune.Options
		want error
	}{
		{"nil step", nil, tune.Options{}, vram.ErrArgument},
		{"negative init", returning, tune.Options{Init: -1}, vram.ErrArgument},
		{"negative max batch", returning, tune.Options{MaxBatch: -2}, vram.ErrArgument},
		{"init above max batch", returning, tune.Options{Init: 8, MaxBatch: 4}, vram.ErrArgument},
		{"negative max trials", returning, tune.Options{MaxTrials: -1}, vram.ErrArgument},
		{"margin above 1", returning, tune.Options{Margin: 1.5}, vram.ErrArgument},
		{"negative margin", returning, tune.Options{Margin: -0.1}, vram.ErrArgument},
		{"unknown mode", returning, tune.Options{Mode: 7}, vram.ErrArgument},
		{"nothing fits", func(int) error { return returning(1 << 20) }, tune.Options{}, vram.ErrOutOfMemory},
		{"trials run out before batch 1", func(int) error { return returning(1 << 20) }, tune.Options{Init: 1 << 10, MaxTrials: 2}, vram.ErrOutOfMemory},
		{"cancelled through the step's context", func() func(int) error {
			ctx, cancel := context.WithCancel(context.Background())
			return func(b int) error {
				if b > 8 {
					cancel()
				}
				return ctx.Err()
			}
		}(), tune.Options{}, context.Canceled},
		{"other step error", func(b int) error {
			if b > 8 {
				return boom
			}
			return nil
		}, tune.Options{}, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			memtest.Settle(dev)
			base := vram.MemoryAllocated(dev)
			got, rep, err := tune.FindBatchSize(dev, tt.step, tt.opts)
			if !errors.Is(err, tt.want) || got != 0 {
				t.Fatalf("got %d, %v; want 0 and an error matching %v", got, err, tt.want)
			}
			// An out-of-memory error says which way out applies: the
			// search reached batch 1, or ran out of trials first.
			if errors.Is(err, vram.ErrOutOfMemory) {
				last := rep.Trials[len(rep.Trials)-1].Batch
				if want := last > 1; strings.Contains(err.Error(), "MaxTrials") != want {
					t.Errorf("error %q after a last trial of batch %d; want MaxTrials mentioned: %v", err, last, want)
				}
			}
			if after := vram.MemoryAllocated(dev); after != base {
				t.Fatalf("%d bytes allocated after the search, want %d", after, base)
			}
		})
	}
}

// TestFindBatchSizeNeverOverflows checks that a step that always fits
// grows the batch up to the largest int, never past it into negative or
// zero batches.
func TestFindBatchSizeNeverOverflows(t *testing.T) {
	tests := []struct {
		name string
		opts tune.Options
		want int
	}{
		{"from 1", tune.Options{MaxTrials: 100}, math.MaxInt},
		{"from near the largest int", tune.Options{Init: math.MaxInt/2 + 1, MaxTrials: 10}, math.MaxInt},
		{"from the largest int", tune.Options{Init: math.MaxInt, MaxTrials: 10}, math.MaxInt},
		{"power mode", tune.Options{Mode: tune.Power, Init: 3, MaxTrials: 100}, math.MaxInt},
		{"bounded", tune.Options{Init: 3, MaxBatch: math.MaxInt - 1, MaxTrials: 100}, math.MaxInt - 1},
		{"margin", tune.Options{Init: math.MaxInt, MaxTrials: 1, Margin: 0.5}, math.MaxInt/2 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := 0
			step := func(b int) error {
				if b <= prev {
					t.Fatalf("batch %d after %d", b, prev)
				}
				prev = b
				return nil
			}
			got, rep, err := tune.FindBatchSize(dev, step, tt.opts)
			if err != nil || got != tt.want || rep.Batch != tt.want || rep.Exhausted {
				t.Fatalf("got %d (report %d, largest %d, exhausted %v), %v; want %d", got, rep.Batch, rep.Largest, rep.Exhausted, err, tt.want)
			}
		})
	}
}

// TestFindBatchSizeStepPanics checks that a step panicking with an error
// counts as returning it, whatever the error's type: one wrapping
// vram.ErrOutOfMemory is a batch that does not fit, another ends the
// search and is returned; a runtime error or a non-error panic goes on.
func TestFindBatchSizeStepPanics(t *testing.T) {
	oom := vram.Catch(func() { vram.Zeros(vram.Shape{1 << 30}, dev) })
	if !errors.Is(oom, vram.ErrOutOfMemory) {
		t.Fatalf("no out-of-memory error to test with: %v", oom)
	}
	boom := errors.New("data loader failed")
	above := func(limit int, v any) func(int) error {
		return func(b int) error {
			if b > limit {
				panic(v)
			}
			return nil
		}
	}
	tests := []struct {
		name      string
		step      func(int) error
		want      int
		wantErr   error
		wantPanic bool
	}{
		{"vram out-of-memory error", above(10, oom), 10, nil, false},
		{"wrapped out-of-memory error", above(10, fmt.Errorf("forward: %w", oom)), 10, nil, false},
		{"other error", above(10, boom), 0, boom, false},
		{"wrapped vram shape error", above(3, fmt.Errorf("step: %w", vram.Catch(func() { vram.Ones(vram.Shape{2}).Add(vram.Ones(vram.Shape{3})) }))), 0, vram.ErrShape, false},
		{"string", above(3, "bad"), 0, nil, true},
		{"runtime error", func(b int) error {
			var s []int
			if b > 3 {
				_ = s[b]
			}
			return nil
		}, 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			memtest.Settle(dev)
			base := vram.MemoryAllocated(dev)
			var got int
			var err error
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				got, _, err = tune.FindBatchSize(dev, func(b int) error {
					vram.Zeros(vram.Shape{b}, dev) // released by the search
					return tt.step(b)
				}, tune.Options{})
				return false
			}()
			if panicked != tt.wantPanic {
				t.Fatalf("panicked %v, want %v", panicked, tt.wantPanic)
			}
			if !tt.wantPanic && (got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil)) {
				t.Fatalf("got %d, %v; want %d, %v", got, err, tt.want, tt.wantErr)
			}
			memtest.Settle(dev)
			if after := vram.MemoryAllocated(dev); after != base {
				t.Fatalf("%d bytes allocated after the search, want %d", after, base)
			}
		})
	}
}

// TestFindBatchSizeUnavailableDevice checks that a search on a device that
// cannot be used fails at once, running no step, rather than reporting
// batches that a step on another device found.
func TestFindBatchSizeUnavailableDevice(t *testing.T) {
	for _, d := range []vram.Device{vram.Sim(7), {Kind: "tpu"}, {}} {
		t.Run(d.String(), func(t *testing.T) {
			ran := false
			got, rep, err := tune.FindBatchSize(d, func(int) error { ran = true; return nil }, tune.Options{MaxTrials: 3})
			if !errors.Is(err, vram.ErrUnavailable) || got != 0 || ran || len(rep.Trials) != 0 {
				t.Fatalf("got %d, %d trials, step ran %v, %v; want 0, none, an error matching vram.ErrUnavailable", got, len(rep.Trials), ran, err)
			}
		})
	}
}

// TestFindBatchSizeLeavesCacheEmpty checks that however a search ends
// (an answer, a step's error, no batch fitting, a step that panics with a
// bug or stops its goroutine) it leaves dev's allocator as it found it:
// nothing allocated and nothing of the steps' memory kept in the cache.
func TestFindBatchSizeLeavesCacheEmpty(t *testing.T) {
	boom := errors.New("data loader failed")
	tests := []struct {
		name string
		end  func(b int) error // called after the step allocated b rows
	}{
		{"answer", func(b int) error {
			if b > 8 {
				return returning(1 << 20)
			}
			return nil
		}},
		{"step error", func(b int) error {
			if b > 8 {
				return boom
			}
			return nil
		}},
		{"nothing fits", func(int) error { return returning(1 << 20) }},
		{"non-error panic", func(b int) error {
			if b > 8 {
				panic("bad batch")
			}
			return nil
		}},
		{"runtime error", func(b int) error {
			var s []int
			if b > 8 {
				_ = s[b]
			}
			return nil
		}},
		{"goroutine stopped", func(b int) error {
			if b > 8 {
				runtime.Goexit()
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vram.EmptyCache(dev)
			memtest.Settle(dev)
			if r := vram.MemoryReserved(dev); r != 0 {
				t.Fatalf("%d bytes reserved before the search", r)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { recover() }()
				tune.FindBatchSize(dev, func(b int) error {
					vram.Zeros(vram.Shape{b, rowFloats}, dev)
					return tt.end(b)
				}, tune.Options{})
			}()
			<-done
			memtest.Settle(dev)
			if a, r := vram.MemoryAllocated(dev), vram.MemoryReserved(dev); a != 0 || r != 0 {
				t.Fatalf("%d bytes allocated and %d reserved after the search, want none", a, r)
			}
		})
	}
}
