package data_test

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

func TestMain(m *testing.M) {
	if err := vram.Configure(vram.Config{SimDevices: []int64{64 << 20, 64 << 20}}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// rowsDataset returns a TensorDataset of n samples on dev: x[i] = [i, -i]
// (float32) and y[i] = i (int64), with the tensors to release.
func rowsDataset(t *testing.T, n int, dev vram.Device) *data.TensorDataset {
	t.Helper()
	xs := make([]float32, 0, 2*n)
	ys := make([]int64, n)
	for i := range n {
		xs = append(xs, float32(i), float32(-i))
		ys[i] = int64(i)
	}
	x := vram.FromSlice(xs, vram.Shape{n, 2}, dev)
	y := vram.FromSlice(ys, vram.Shape{n}, dev)
	t.Cleanup(func() { x.Release(); y.Release() })
	ds, err := data.NewTensorDataset(x, y)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// epoch runs one epoch of l and returns the indices of each batch, after
// checking that each batch's tensors hold those samples.
func epoch(t *testing.T, l *data.Loader) [][]int {
	t.Helper()
	var got [][]int
	for b, err := range l.All() {
		if err != nil {
			t.Fatal(err)
		}
		x, y := b.Tensors[0].Float32s(), b.Tensors[1].Int64s()
		for n, i := range b.Indices {
			if x[2*n] != float32(i) || x[2*n+1] != float32(-i) || y[n] != int64(i) {
				t.Fatalf("batch %d, sample %d (index %d): x %v y %v", len(got), n, i, x, y)
			}
		}
		if s := b.Tensors[0].Shape(); s[0] != len(b.Indices) || s[1] != 2 {
			t.Fatalf("x has shape %v for %d samples", s, len(b.Indices))
		}
		got = append(got, slices.Clone(b.Indices))
	}
	return got
}

// settleGarbage collects what earlier tests left unreleased and waits for
// the cleanups to free it, so that a memory count taken next moves only with
// the test's own tensors: until the CPU's leak count (which the backstops
// raise some time after a collection) holds still for three collections,
// two seconds at most.
func settleGarbage() {
	last := vram.Storage(vram.CPU).Leaked
	deadline := time.Now().Add(2 * time.Second)
	for same := 0; same < 3 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		if n := vram.Storage(vram.CPU).Leaked; n != last {
			last, same = n, 0
		} else {
			same++
		}
	}
}

// settled waits until the number of goroutines is back to before, or fails.
func settled(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewTensorDatasetErrors(t *testing.T) {
	a := vram.Zeros(vram.Shape{4, 2})
	b := vram.Zeros(vram.Shape{5})
	gone := vram.Zeros(vram.Shape{4})
	gone.Release()
	defer a.Release()
	defer b.Release()
	for _, tc := range []struct {
		name string
		ts   []*vram.Tensor
		want error
	}{
		{"no tensors", nil, vram.ErrArgument},
		{"nil tensor", []*vram.Tensor{a, nil}, vram.ErrArgument},
		{"first dims differ", []*vram.Tensor{a, b}, vram.ErrShape},
		{"0-dimensional", []*vram.Tensor{vram.Scalar(1)}, vram.ErrShape},
		{"released", []*vram.Tensor{a, gone}, vram.ErrReleased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := data.NewTensorDataset(tc.ts...)
			if !errors.Is(err, tc.want) || ds != nil {
				t.Fatalf("got %v, %v; want an error matching %v", ds, err, tc.want)
			}
		})
	}
}

func TestNewLoaderErrors(t *testing.T) {
	ds := rowsDataset(t, 10, vram.CPU)
	empty, err := data.NewSubset(ds, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		ds    data.Dataset
		batch int
		opts  data.Options
		want  error
	}{
		{"batch size 0", ds, 0, data.Options{}, vram.ErrArgument},
		{"negative batch size", ds, -3, data.Options{}, vram.ErrArgument},
		{"nil dataset", nil, 2, data.Options{}, vram.ErrArgument},
		{"empty dataset", empty, 2, data.Options{}, vram.ErrArgument},
		{"negative workers", ds, 2, data.Options{NumWorkers: -1}, vram.ErrArgument},
		{"workers beyond memory", ds, 2, data.Options{NumWorkers: math.MaxInt}, vram.ErrArgument},
		{"workers beyond MaxWorkers", ds, 2, data.Options{NumWorkers: data.MaxWorkers + 1}, vram.ErrArgument},
		{"negative prefetch", ds, 2, data.Options{NumWorkers: 1, Prefetch: -1}, vram.ErrArgument},
		{"prefetch without workers", ds, 2, data.Options{Prefetch: 2}, vram.ErrArgument},
		{"prefetch beyond memory", ds, 2, data.Options{NumWorkers: 2, Prefetch: math.MaxInt}, vram.ErrArgument},
		{"shuffle and sampler", ds, 2, data.Options{Shuffle: true, Sampler: data.SequentialSampler{N: 10}}, vram.ErrArgument},
		{"negative sampler length", ds, 1, data.Options{Sampler: data.SequentialSampler{N: -5}}, vram.ErrArgument},
		{"negative number of samples", ds, 1, data.Options{Sampler: data.RandomSampler{N: 10, NumSamples: -5}, NumWorkers: 2}, vram.ErrArgument},
		{"negative number of samples, replacement", ds, 3, data.Options{Sampler: data.RandomSampler{N: 10, NumSamples: -1, Replacement: true}}, vram.ErrArgument},
		{"negative sampler N", ds, 3, data.Options{Sampler: data.RandomSampler{N: -1, NumSamples: 4}}, vram.ErrArgument},
		// PyTorch's RandomSampler raises drawing from an empty range
		// (torch.randint with high 0, or a division by zero without
		// replacement) rather than giving an empty epoch.
		{"samples drawn from no indices, replacement", ds, 3, data.Options{Sampler: data.RandomSampler{N: 0, NumSamples: 4, Replacement: true}}, vram.ErrArgument},
		{"samples drawn from no indices", ds, 3, data.Options{Sampler: &data.RandomSampler{N: 0, NumSamples: 4}}, vram.ErrArgument},
		{"random sampler of no indices", ds, 3, data.Options{Sampler: data.RandomSampler{}}, vram.ErrArgument},
		{"pin memory for the CPU", ds, 2, data.Options{PinMemory: true, Device: vram.CUDA(7)}, vram.ErrUnavailable},
		{"no such device", ds, 2, data.Options{Device: vram.Sim(9)}, vram.ErrUnavailable},
		{"no such kind", ds, 2, data.Options{Device: vram.Device{Kind: "tpu"}, NumWorkers: 2}, vram.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := data.NewLoader(tc.ds, tc.batch, tc.opts)
			if !errors.Is(err, tc.want) || l != nil {
				t.Fatalf("got %v, %v; want an error matching %v", l, err, tc.want)
			}
		})
	}
}

func TestLoaderOrder(t *testing.T) {
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		ds := rowsDataset(t, 10, dev)
		for _, tc := range []struct {
			name  string
			batch int
			opts  data.Options
			want  [][]int
			len   int
		}{
			{"batches of 4", 4, data.Options{}, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}, 3},
			{"drop last", 4, data.Options{DropLast: true}, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, 2},
			{"exact", 5, data.Options{DropLast: true}, [][]int{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}}, 2},
			{"larger than the dataset", 16, data.Options{}, [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}, 1},
			{"larger, drop last", 16, data.Options{DropLast: true}, nil, 0},
			{"the largest int", math.MaxInt, data.Options{NumWorkers: 2}, [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}, 1},
			{"one worker", 3, data.Options{NumWorkers: 1}, [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}}, 4},
			{"three workers, prefetch 1", 2, data.Options{NumWorkers: 3, Prefetch: 1}, [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}}, 5},
			{"largest prefetch", 4, data.Options{NumWorkers: 2, Prefetch: data.MaxPrefetch}, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}, 3},
			{"more workers than batches", 4, data.Options{NumWorkers: 8}, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}, 3},
			{"sampler", 2, data.Options{Sampler: data.SamplerFunc(func() iter.Seq[int] { return slices.Values([]int{9, 1, 1, 4, 0}) })},
				[][]int{{9, 1}, {1, 4}, {0}}, -1},
			{"device", 4, data.Options{Device: vram.Sim(1), NumWorkers: 2}, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}, 3},
		} {
			t.Run(dev.String()+"/"+tc.name, func(t *testing.T) {
				settleGarbage()
				before := vram.MemoryAllocated(vram.Sim(1))
				l, err := data.NewLoader(ds, tc.batch, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				if got := epoch(t, l); !slices.EqualFunc(got, tc.want, slices.Equal) {
					t.Errorf("batches %v, want %v", got, tc.want)
				}
				if l.Len() != tc.len {
					t.Errorf("Len %d, want %d", l.Len(), tc.len)
				}
				if after := vram.MemoryAllocated(vram.Sim(1)); after != before {
					t.Errorf("sim:1 holds %d bytes after the epoch, %d before", after, before)
				}
			})
		}
	}
}

// TestLoaderDevice: batches land on Options.Device, the samples' device
// without one.
func TestLoaderDevice(t *testing.T) {
	ds := rowsDataset(t, 6, vram.Sim(0))
	for _, tc := range []struct {
		name string
		dev  vram.Device
		want vram.Device
	}{
		{"samples' device", vram.Device{}, vram.Sim(0)},
		{"cpu", vram.CPU, vram.CPU},
		{"other sim", vram.Sim(1), vram.Sim(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := data.NewLoader(ds, 4, data.Options{Device: tc.dev})
			if err != nil {
				t.Fatal(err)
			}
			for b, err := range l.All() {
				if err != nil {
					t.Fatal(err)
				}
				for i, x := range b.Tensors {
					if x.Device() != tc.want {
						t.Errorf("tensor %d on %v, want %v", i, x.Device(), tc.want)
					}
				}
			}
		})
	}
}

func TestShuffle(t *testing.T) {
	ds := rowsDataset(t, 50, vram.CPU)
	run := func(workers, epochs int) [][][]int {
		l, err := data.NewLoader(ds, 8, data.Options{Shuffle: true, Generator: vram.NewGenerator(7), NumWorkers: workers})
		if err != nil {
			t.Fatal(err)
		}
		var all [][][]int
		for range epochs {
			all = append(all, epoch(t, l))
		}
		return all
	}
	ref := run(0, 3)
	for e, batches := range ref {
		var seen []int
		for _, b := range batches {
			seen = append(seen, b...)
		}
		if len(batches) != 7 || len(batches[6]) != 2 {
			t.Errorf("epoch %d: %d batches, the last of %d; want 7, the last of 2", e, len(batches), len(batches[len(batches)-1]))
		}
		sorted := slices.Sorted(slices.Values(seen))
		for i, v := range sorted {
			if v != i {
				t.Fatalf("epoch %d is not a permutation of 0..49: %v", e, seen)
			}
		}
		if slices.Equal(seen, sorted) {
			t.Errorf("epoch %d is not shuffled", e)
		}
	}
	if slices.EqualFunc(ref[0], ref[1], slices.Equal) {
		t.Error("epochs 1 and 2 came in the same order")
	}
	for _, workers := range []int{0, 1, 4} {
		got := run(workers, 3)
		for e := range ref {
			if !slices.EqualFunc(got[e], ref[e], slices.Equal) {
				t.Errorf("%d workers, epoch %d: %v, want %v (the same seed)", workers, e, got[e], ref[e])
			}
		}
	}
}

// TestShuffleDefaultGenerator: without a generator, vram.ManualSeed fixes
// the orders.
func TestShuffleDefaultGenerator(t *testing.T) {
	ds := rowsDataset(t, 20, vram.CPU)
	l, err := data.NewLoader(ds, 20, data.Options{Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	vram.ManualSeed(3)
	a := epoch(t, l)
	vram.ManualSeed(3)
	b := epoch(t, l)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Errorf("after ManualSeed(3): %v, then %v", a, b)
	}
}

func TestRandomSplit(t *testing.T) {
	ds := rowsDataset(t, 11, vram.CPU)
	for _, tc := range []struct {
		name      string
		lengths   []int
		fractions []float64
		want      []int
		err       error
	}{
		{"lengths", []int{3, 8}, nil, []int{3, 8}, nil},
		{"empty part", []int{0, 11}, nil, []int{0, 11}, nil},
		{"fractions with remainder", nil, []float64{0.5, 0.5}, []int{6, 5}, nil},
		{"three fractions", nil, []float64{0.3, 0.3, 0.4}, []int{4, 3, 4}, nil},
		{"lengths too short", []int{3, 7}, nil, nil, vram.ErrArgument},
		{"lengths too long", []int{3, 9}, nil, nil, vram.ErrArgument},
		{"negative length", []int{-1, 12}, nil, nil, vram.ErrArgument},
		{"fractions below 1", nil, []float64{0.5, 0.4}, nil, vram.ErrArgument},
		{"negative fraction", nil, []float64{1.5, -0.5}, nil, vram.ErrArgument},
		{"NaN fraction", nil, []float64{0.5, nan()}, nil, vram.ErrArgument},
		{"no fractions", nil, []float64{}, nil, vram.ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			split := func() ([]*data.Subset, error) {
				if tc.fractions != nil {
					return data.RandomSplitFractions(ds, tc.fractions, vram.NewGenerator(42))
				}
				return data.RandomSplit(ds, tc.lengths, vram.NewGenerator(42))
			}
			parts, err := split()
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want an error matching %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var all []int
			for i, p := range parts {
				if p.Len() != tc.want[i] {
					t.Errorf("part %d has %d elements, want %d", i, p.Len(), tc.want[i])
				}
				all = append(all, p.Indices...)
			}
			slices.Sort(all)
			for i, v := range all {
				if v != i {
					t.Fatalf("parts do not cover 0..10 once: %v", all)
				}
			}
			again, _ := split()
			for i := range parts {
				if !slices.Equal(parts[i].Indices, again[i].Indices) {
					t.Errorf("part %d differs with the same seed: %v, %v", i, parts[i].Indices, again[i].Indices)
				}
			}
		})
	}
}

func nan() float64 { var z float64; return z / z }

func TestSubset(t *testing.T) {
	ds := rowsDataset(t, 5, vram.CPU)
	if _, err := data.NewSubset(ds, []int{0, 5}); !errors.Is(err, vram.ErrIndex) {
		t.Errorf("index 5 of 5: %v, want ErrIndex", err)
	}
	s, err := data.NewSubset(ds, []int{4, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(2); !errors.Is(err, vram.ErrIndex) {
		t.Errorf("Get(2) of 2: %v, want ErrIndex", err)
	}
	l, err := data.NewLoader(s, 2, data.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for b, err := range l.All() {
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Tensors[1].Int64s(); !slices.Equal(got, []int64{4, 2}) {
			t.Errorf("y %v, want [4 2]", got)
		}
	}
}

// faulty is a dataset of n numbers whose Get fails at index bad, by
// returning err or, when err is nil, by panicking.
type faulty struct {
	n, bad int
	err    error
	none   bool // Get(bad) returns a nil sample and no error
	dev    vram.Device
}

func (f faulty) Len() int { return f.n }

func (f faulty) Get(i int) (data.Sample, error) {
	if i == f.bad {
		if f.none {
			return nil, nil
		}
		if f.err != nil {
			return nil, f.err
		}
		var s []int
		_ = s[i] // an index out of range: a runtime panic
	}
	return data.Sample{vram.Full(vram.Shape{1024}, float64(i), f.dev), i}, nil
}

// nilSamples is a dataset whose Get returns a nil sample and no error.
type nilSamples struct{}

func (nilSamples) Len() int { return 6 }

func (nilSamples) Get(int) (data.Sample, error) { return nil, nil }

// TestLoaderFailures: an error in Get, the collate function or the
// sampler comes out of the loop at its batch's place, after the batches
// before it, ends the epoch, stops every goroutine and frees all memory.
func TestLoaderFailures(t *testing.T) {
	dev := vram.Sim(0)
	errBad := errors.New("bad sample")
	outOfRange := data.SamplerFunc(func() iter.Seq[int] { return slices.Values([]int{0, 1, 2, 3, 99}) })
	panicky := data.SamplerFunc(func() iter.Seq[int] {
		return func(yield func(int) bool) {
			for i := range 5 {
				if !yield(i) {
					return
				}
			}
			panic("sampler broke")
		}
	})
	badCollate := func(s []data.Sample, d vram.Device) ([]*vram.Tensor, error) {
		if s[0][1].(int) >= 4 {
			return nil, fmt.Errorf("collate: %w", vram.ErrDType)
		}
		return data.Collate(s, d)
	}
	nilField := func(s []data.Sample, d vram.Device) ([]*vram.Tensor, error) {
		out, err := data.Collate(s, d)
		if err == nil && s[0][1].(int) >= 4 {
			out[1].Release()
			out[1] = nil
		}
		return out, err
	}
	releasedField := func(s []data.Sample, d vram.Device) ([]*vram.Tensor, error) {
		out, err := data.Collate(s, d)
		if err == nil && s[0][1].(int) >= 4 {
			out[0].Release()
		}
		return out, err
	}
	gone := vram.Zeros(vram.Shape{8, 3}, dev)
	released, err := data.NewTensorDataset(gone)
	if err != nil {
		t.Fatal(err)
	}
	gone.Release()
	for _, tc := range []struct {
		name    string
		ds      data.Dataset
		opts    data.Options
		batches int   // good batches before the error
		want    error // matched by errors.Is, or nil for a *PanicError
	}{
		{"get error", faulty{n: 20, bad: 5, err: errBad, dev: dev}, data.Options{}, 2, errBad},
		{"get panic", faulty{n: 20, bad: 7, dev: dev}, data.Options{}, 3, nil},
		// PyTorch's default_collate refuses a None sample; a nil one
		// was taken for a sample of no fields, which Collate refused as
		// one unlike the others, or batched into no tensors at all.
		{"get nil sample", faulty{n: 20, bad: 5, none: true, dev: dev}, data.Options{}, 2, vram.ErrArgument},
		{"get nil sample first", faulty{n: 20, bad: 6, none: true, dev: dev}, data.Options{}, 3, vram.ErrArgument},
		{"get nil samples only", nilSamples{}, data.Options{}, 0, vram.ErrArgument},
		{"out of range", faulty{n: 20, bad: -1, dev: dev}, data.Options{Sampler: outOfRange}, 2, vram.ErrIndex},
		{"sampler panic", faulty{n: 20, bad: -1, dev: dev}, data.Options{Sampler: panicky}, 2, nil},
		{"collate error", faulty{n: 20, bad: -1, dev: dev}, data.Options{Collate: badCollate}, 2, vram.ErrDType},
		{"collate nil tensor", faulty{n: 20, bad: -1, dev: dev}, data.Options{Collate: nilField}, 2, vram.ErrArgument},
		{"collate released tensor", faulty{n: 20, bad: -1, dev: dev}, data.Options{Collate: releasedField}, 2, vram.ErrArgument},
		{"tensor dataset index", nil, data.Options{Sampler: outOfRange}, 2, vram.ErrIndex},
		{"released tensor", released, data.Options{}, 0, vram.ErrReleased},
	} {
		for _, workers := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("%s/%d workers", tc.name, workers), func(t *testing.T) {
				ds := tc.ds
				if ds == nil {
					ds = rowsDataset(t, 8, dev)
				}
				settleGarbage()
				settleGarbage()
				mem := vram.MemoryAllocated(dev)
				before := runtime.NumGoroutine()
				opts := tc.opts
				opts.NumWorkers = workers
				l, err := data.NewLoader(ds, 2, opts)
				if err != nil {
					t.Fatal(err)
				}
				good := 0
				var got error
				for b, err := range l.All() {
					if err != nil {
						if b != nil {
							t.Error("a batch with the error")
						}
						got = err
						continue // the epoch must end by itself
					}
					good++
				}
				if good != tc.batches {
					t.Errorf("%d batches before the error, want %d", good, tc.batches)
				}
				var pe *data.PanicError
				switch {
				case got == nil:
					t.Fatal("no error")
				case tc.want == nil && !errors.As(got, &pe):
					t.Errorf("got %v, want a *data.PanicError", got)
				case tc.want != nil && !errors.Is(got, tc.want):
					t.Errorf("got %v, want an error matching %v", got, tc.want)
				}
				settled(t, before)
				if after := vram.MemoryAllocated(dev); after != mem {
					t.Errorf("%s holds %d bytes after the epoch, %d before", dev, after, mem)
				}
			})
		}
	}
}

// TestLoaderBreak: leaving the loop early stops the workers and frees the
// batches they prepared, also when the body panics.
func TestLoaderBreak(t *testing.T) {
	dev := vram.Sim(0)
	ds := faulty{n: 64, bad: -1, dev: dev}
	for _, workers := range []int{0, 1, 4} {
		for _, how := range []string{"break", "panic"} {
			t.Run(fmt.Sprintf("%s/%d workers", how, workers), func(t *testing.T) {
				settleGarbage()
				settleGarbage()
				mem := vram.MemoryAllocated(dev)
				before := runtime.NumGoroutine()
				l, err := data.NewLoader(ds, 2, data.Options{NumWorkers: workers, Prefetch: 3 * min(workers, 1)})
				if err != nil {
					t.Fatal(err)
				}
				func() {
					defer func() {
						if r := recover(); (r != nil) != (how == "panic") || r != nil && r != "body" {
							t.Errorf("recovered %v", r)
						}
					}()
					n := 0
					for _, err := range l.All() {
						if err != nil {
							t.Fatal(err)
						}
						if n++; n == 3 {
							if how == "panic" {
								panic("body")
							}
							break
						}
					}
				}()
				settled(t, before)
				if after := vram.MemoryAllocated(dev); after != mem {
					t.Errorf("%s holds %d bytes after the loop, %d before", dev, after, mem)
				}
			})
		}
	}
}

// TestBatchOwnership: the loader releases batches after the body, Keep
// hands them over.
func TestBatchOwnership(t *testing.T) {
	dev := vram.Sim(0)
	ds := rowsDataset(t, 8, dev)
	settleGarbage()
	mem := vram.MemoryAllocated(dev)
	l, err := data.NewLoader(ds, 4, data.Options{NumWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var seen, kept []*vram.Tensor
	for b, err := range l.All() {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, b.Tensors[0])
		if b.Indices[0] == 4 {
			kept = b.Keep()
		}
	}
	if !seen[0].Released() || seen[1].Released() {
		t.Errorf("released: %v and %v, want true and false (kept)", seen[0].Released(), seen[1].Released())
	}
	if got := kept[1].Int64s(); !slices.Equal(got, []int64{4, 5, 6, 7}) {
		t.Errorf("kept y %v", got)
	}
	for _, x := range kept {
		x.Release()
	}
	if after := vram.MemoryAllocated(dev); after != mem {
		t.Errorf("%s holds %d bytes, %d before", dev, after, mem)
	}
}

func TestCollate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []data.Sample
		dtypes  []vram.DType
		shapes  []vram.Shape
		err     error
	}{
		{"numbers", []data.Sample{{1.5, float32(2), 3, int32(4), int64(5), true}, {2.5, float32(3), 4, int32(5), int64(6), false}},
			[]vram.DType{vram.Float64, vram.Float32, vram.Int64, vram.Int32, vram.Int64, vram.Bool},
			[]vram.Shape{{2}, {2}, {2}, {2}, {2}, {2}}, nil},
		{"slices", []data.Sample{{[]float32{1, 2, 3}, []int64{1}}, {[]float32{4, 5, 6}, []int64{2}}},
			[]vram.DType{vram.Float32, vram.Int64}, []vram.Shape{{2, 3}, {2, 1}}, nil},
		{"tensors", []data.Sample{{vram.Zeros(vram.Shape{2, 3})}, {vram.Ones(vram.Shape{2, 3})}},
			[]vram.DType{vram.Float32}, []vram.Shape{{2, 2, 3}}, nil},
		{"no samples", nil, nil, nil, vram.ErrArgument},
		{"fields differ", []data.Sample{{1, 2}, {1}}, nil, nil, vram.ErrShape},
		{"types differ", []data.Sample{{1}, {1.5}}, nil, nil, vram.ErrDType},
		{"tensor and number", []data.Sample{{vram.Zeros(vram.Shape{2})}, {1.5}}, nil, nil, vram.ErrDType},
		{"unsupported", []data.Sample{{"a"}, {"b"}}, nil, nil, vram.ErrDType},
		{"nil field", []data.Sample{{nil}, {nil}}, nil, nil, vram.ErrDType},
		{"nil tensor first", []data.Sample{{(*vram.Tensor)(nil)}, {vram.Zeros(vram.Shape{2})}}, nil, nil, vram.ErrArgument},
		{"nil tensor later", []data.Sample{{vram.Zeros(vram.Shape{2})}, {(*vram.Tensor)(nil)}}, nil, nil, vram.ErrArgument},
		{"nil tensors", []data.Sample{{(*vram.Tensor)(nil)}, {(*vram.Tensor)(nil)}}, nil, nil, vram.ErrArgument},
		{"shapes differ", []data.Sample{{vram.Zeros(vram.Shape{2})}, {vram.Zeros(vram.Shape{3})}}, nil, nil, vram.ErrShape},
		{"devices differ", []data.Sample{{vram.Zeros(vram.Shape{2})}, {vram.Zeros(vram.Shape{2}, vram.Sim(0))}}, nil, nil, vram.ErrDevice},
		{"slice lengths differ", []data.Sample{{[]float64{1}}, {[]float64{1, 2}}}, nil, nil, vram.ErrShape},
		// PyTorch collates any integer type; vram has int8, and widens
		// the others it lacks to an integer dtype holding their values.
		{"small integers", []data.Sample{{int8(-1), uint8(200), int16(-300), uint16(60000), uint32(4e9)}, {int8(2), uint8(3), int16(4), uint16(5), uint32(6)}},
			[]vram.DType{vram.Int8, vram.Int32, vram.Int32, vram.Int32, vram.Int64},
			[]vram.Shape{{2}, {2}, {2}, {2}, {2}}, nil},
		{"slices of small integers", []data.Sample{{[]int8{-1, 2}, []uint8{255}, []int16{7}, []uint16{8}, []uint32{9}}, {[]int8{3, 4}, []uint8{0}, []int16{1}, []uint16{2}, []uint32{3}}},
			[]vram.DType{vram.Int8, vram.Int32, vram.Int32, vram.Int32, vram.Int64},
			[]vram.Shape{{2, 2}, {2, 1}, {2, 1}, {2, 1}, {2, 1}}, nil},
		{"small integer types differ", []data.Sample{{uint8(1)}, {int8(1)}}, nil, nil, vram.ErrDType},
		{"small integer and slice", []data.Sample{{uint8(1)}, {[]uint8{1}}}, nil, nil, vram.ErrDType},
		{"small integer slice lengths differ", []data.Sample{{[]uint8{1}}, {[]uint8{1, 2}}}, nil, nil, vram.ErrShape},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := data.Collate(tc.samples, vram.Device{})
			if tc.err != nil {
				if !errors.Is(err, tc.err) || out != nil {
					t.Fatalf("got %v, %v; want an error matching %v", out, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, x := range out {
				if x.DType() != tc.dtypes[i] || !slices.Equal(x.Shape(), tc.shapes[i]) {
					t.Errorf("field %d: %v %v, want %v %v", i, x.DType(), x.Shape(), tc.dtypes[i], tc.shapes[i])
				}
				x.Release()
			}
		})
	}
}

// TestCollateSmallIntegerValues checks the values of batched integers of
// the types vram has no dtype of, which must survive their widening.
func TestCollateSmallIntegerValues(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []data.Sample
		want    []float64
	}{
		{"int8", []data.Sample{{int8(-128)}, {int8(127)}}, []float64{-128, 127}},
		{"uint8", []data.Sample{{uint8(0)}, {uint8(255)}}, []float64{0, 255}},
		{"int16", []data.Sample{{int16(-32768)}, {int16(32767)}}, []float64{-32768, 32767}},
		{"uint16", []data.Sample{{uint16(65535)}, {uint16(1)}}, []float64{65535, 1}},
		{"uint32", []data.Sample{{uint32(4294967295)}, {uint32(0)}}, []float64{4294967295, 0}},
		{"[]uint8", []data.Sample{{[]uint8{1, 255}}, {[]uint8{128, 0}}}, []float64{1, 255, 128, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := data.Collate(tc.samples, vram.Sim(0))
			if err != nil {
				t.Fatal(err)
			}
			defer out[0].Release()
			if out[0].Device() != vram.Sim(0) {
				t.Errorf("batch on %v, want sim:0", out[0].Device())
			}
			if got := out[0].Float64s(); !slices.Equal(got, tc.want) {
				t.Errorf("values %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPinMemory: batches in pinned memory, on the CPU or copied to a sim
// device.
func TestPinMemory(t *testing.T) {
	ds := rowsDataset(t, 6, vram.CPU)
	for _, tc := range []struct {
		name   string
		dev    vram.Device
		pinned bool
	}{
		{"host", vram.CPU, true},
		{"sim", vram.Sim(0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := data.Options{PinMemory: true, Device: tc.dev, NumWorkers: 2}
			if tc.dev == vram.CPU {
				// Pinned for the current CUDA device: there is none here.
				if _, err := data.NewLoader(ds, 4, opts); !vram.CUDAAvailable() && !errors.Is(err, vram.ErrUnavailable) {
					t.Fatalf("PinMemory without a GPU: %v, want ErrUnavailable", err)
				}
				t.Skip("no CUDA device to pin host memory for")
			}
			settleGarbage()
			host, dev := vram.MemoryAllocated(vram.CPU), vram.MemoryAllocated(tc.dev)
			l, err := data.NewLoader(ds, 4, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := epoch(t, l)
			if len(got) != 2 {
				t.Errorf("batches %v", got)
			}
			if h, d := vram.MemoryAllocated(vram.CPU), vram.MemoryAllocated(tc.dev); h != host || d != dev {
				t.Errorf("after the epoch cpu holds %d bytes (%d before), %v %d (%d before)", h, host, tc.dev, d, dev)
			}
		})
	}
}

// TestConcurrentEpochs runs epochs of one loader with workers from several
// goroutines at once (for the race detector).
func TestConcurrentEpochs(t *testing.T) {
	ds := rowsDataset(t, 40, vram.Sim(0))
	l, err := data.NewLoader(ds, 3, data.Options{Shuffle: true, Generator: vram.NewGenerator(1), NumWorkers: 3, Device: vram.Sim(1)})
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2 {
				n := 0
				for b, err := range l.All() {
					if err != nil {
						t.Error(err)
						return
					}
					n += len(b.Indices)
					s := b.Tensors[0].Sum()
					_ = s.Item()
					s.Release()
				}
				if n != 40 {
					t.Errorf("an epoch of %d samples, want 40", n)
				}
			}
		})
	}
	wg.Wait()
	settled(t, before)
}

// TestTensorDatasetLayouts: batches of strided, channels-last and 16-bit
// tensors hold the rows of their samples.
func TestTensorDatasetLayouts(t *testing.T) {
	mk := func() *vram.Tensor { return vram.Arange(0, 5*2*3*2, 1).Reshape(5, 2, 3, 2) }
	for _, tc := range []struct {
		name string
		x    func() *vram.Tensor
	}{
		{"contiguous", mk},
		{"transposed", func() *vram.Tensor { return vram.Arange(0, 15, 1).Reshape(3, 5).T() }},
		{"channels last", func() *vram.Tensor { return mk().Contiguous(vram.ChannelsLast) }},
		{"bfloat16", func() *vram.Tensor { return mk().Cast(vram.BFloat16) }},
		{"int8", func() *vram.Tensor { return mk().Cast(vram.Int8) }},
		{"narrowed", func() *vram.Tensor { return vram.Arange(0, 40, 1).Reshape(8, 5).Narrow(1, 1, 3).Narrow(0, 2, 5) }},
	} {
		for _, workers := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/%d workers", tc.name, workers), func(t *testing.T) {
				var x *vram.Tensor
				vram.Tidy(func() { x = vram.Keep(tc.x()) })
				defer x.Release()
				ds, err := data.NewTensorDataset(x)
				if err != nil {
					t.Fatal(err)
				}
				l, err := data.NewLoader(ds, 2, data.Options{Shuffle: true, Generator: vram.NewGenerator(3), NumWorkers: workers})
				if err != nil {
					t.Fatal(err)
				}
				all := x.Float64s()
				row := len(all) / x.Size(0)
				for b, err := range l.All() {
					if err != nil {
						t.Fatal(err)
					}
					got := b.Tensors[0]
					if got.DType() != x.DType() || !slices.Equal(got.Shape()[1:], x.Shape()[1:]) {
						t.Fatalf("batch %v %v of samples %v %v", got.DType(), got.Shape(), x.DType(), x.Shape())
					}
					vals := got.Float64s()
					for n, i := range b.Indices {
						if !slices.Equal(vals[n*row:(n+1)*row], all[i*row:(i+1)*row]) {
							t.Errorf("sample %d: %v, want %v", i, vals[n*row:(n+1)*row], all[i*row:(i+1)*row])
						}
					}
				}
			})
		}
	}
}

// TestWorkersBounded: a loader starts no more workers than an epoch has
// batches, however many NumWorkers asks for.
func TestWorkersBounded(t *testing.T) {
	ds := rowsDataset(t, 10, vram.CPU)
	for _, tc := range []struct {
		workers, batch, want int
	}{
		{64, 4, 3},
		{2, 4, 2},
		{data.MaxWorkers, 1, 10},
	} {
		t.Run(fmt.Sprint(tc.workers, tc.batch), func(t *testing.T) {
			before := runtime.NumGoroutine()
			l, err := data.NewLoader(ds, tc.batch, data.Options{NumWorkers: tc.workers})
			if err != nil {
				t.Fatal(err)
			}
			most := 0
			for _, err := range l.All() {
				if err != nil {
					t.Fatal(err)
				}
				most = max(most, runtime.NumGoroutine()-before)
			}
			if most > tc.want+2 { // the workers, the producer and its pulled sampler
				t.Errorf("%d goroutines during the epoch, want at most %d", most, tc.want+2)
			}
			settled(t, before)
		})
	}
}

// shapesDataset gives sample i a tensor of i/4+1 elements: every batch of
// four agrees, and a batch that crosses a multiple of four does not.
type shapesDataset struct{ n int }

func (d shapesDataset) Len() int { return d.n }

func (d shapesDataset) Get(i int) (data.Sample, error) {
	return data.Sample{vram.Full(vram.Shape{i/4 + 1}, float64(i)), i}, nil
}

// TestCollateErrorsNameSamples: a field whose tensors differ in shape is
// refused with an error that names the samples by their place in the batch
// and, from a loader, by their dataset indices, so the odd one can be found.
func TestCollateErrorsNameSamples(t *testing.T) {
	for _, tc := range []struct {
		name      string
		batch     int
		sampler   data.Sampler
		wantParts []string
	}{
		{"second batch", 3, nil, []string{"batch 1", "dataset indices [3 4 5]", "field 0", "sample 1", "shape [2]", "sample 0", "[1]"}},
		{"chosen order", 2, data.SamplerFunc(func() iter.Seq[int] { return slices.Values([]int{9, 1}) }),
			[]string{"batch 0", "dataset indices [9 1]", "sample 1", "shape [1]", "[3]"}},
	} {
		for _, workers := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/%d workers", tc.name, workers), func(t *testing.T) {
				l, err := data.NewLoader(shapesDataset{n: 10}, tc.batch, data.Options{Sampler: tc.sampler, NumWorkers: workers})
				if err != nil {
					t.Fatal(err)
				}
				var got error
				for _, err := range l.All() {
					if err != nil {
						got = err
					}
				}
				if !errors.Is(got, vram.ErrShape) {
					t.Fatalf("got %v, want an error matching vram.ErrShape", got)
				}
				for _, part := range tc.wantParts {
					if !strings.Contains(got.Error(), part) {
						t.Errorf("the error %q does not say %q", got, part)
					}
				}
			})
		}
	}
}

// virtual is a dataset of n samples that it makes on demand: sample i is
// the number i, so n may be as large as an int goes.
type virtual struct{ n int }

func (d virtual) Len() int { return d.n }

func (d virtual) Get(i int) (data.Sample, error) { return data.Sample{int64(i)}, nil }

// TestHugeBatchSizes: a batch size and a dataset length near the largest
// int are taken at their word, with no slice sized by them before the
// sampler has yielded anything: a sampler that yields a few indices gives
// one short batch of them. A batch size or length of that order used to
// size the batch's slice of indices up front, which panicked (makeslice)
// or ran out of memory before reading a sample.
func TestHugeBatchSizes(t *testing.T) {
	want := []int64{5, 1<<62 - 1, 0}
	few := data.SamplerFunc(func() iter.Seq[int] { return slices.Values([]int{5, 1<<62 - 1, 0}) })
	for _, tc := range []struct {
		name  string
		n     int
		batch int
	}{
		{"largest int", math.MaxInt, math.MaxInt},
		{"batch 2^40", math.MaxInt, 1 << 40},
		{"dataset 2^62", 1 << 62, math.MaxInt - 1},
	} {
		for _, workers := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/%d workers", tc.name, workers), func(t *testing.T) {
				l, err := data.NewLoader(virtual{tc.n}, tc.batch, data.Options{Sampler: few, NumWorkers: workers})
				if err != nil {
					t.Fatal(err)
				}
				var got [][]int64
				err = vram.Catch(func() {
					for b, err := range l.All() {
						if err != nil {
							t.Fatal(err)
						}
						got = append(got, b.Tensors[0].Int64s())
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || !slices.Equal(got[0], want) {
					t.Errorf("batches %v, want one of %v", got, want)
				}
			})
		}
	}
}
