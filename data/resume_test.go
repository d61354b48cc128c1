package data_test

import (
	"errors"
	"iter"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// countingDataset counts the calls of Get.
type countingDataset struct {
	data.Dataset
	gets *atomic.Int64
}

func (d countingDataset) Get(i int) (data.Sample, error) {
	d.gets.Add(1)
	return d.Dataset.Get(i)
}

// labels collects the labels (field 1) of each batch of seq.
func labels(t *testing.T, seq iter.Seq2[*data.Batch, error]) [][]int64 {
	t.Helper()
	var out [][]int64
	for b, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Tensors[1].Int64s())
	}
	return out
}

// TestLoaderAllFrom: an epoch started at batch k, with the loader's
// generator in the state it had before an epoch, gives that epoch's
// batches from k on, whatever the kind of loader and the number of
// workers, reads no sample of a skipped batch of a dataset, and leaves
// nothing running.
func TestLoaderAllFrom(t *testing.T) {
	dev := vram.Sim(0)
	const n, size = 10, 3 // batches of 3, 3, 3, 1
	tests := []struct {
		name    string
		stream  int // 0: a dataset, 1: a stream, 2: a sharded stream
		workers int
		drop    bool
		start   int
	}{
		{"dataset from 0", 0, 0, false, 0},
		{"dataset from 1", 0, 0, false, 1},
		{"dataset from the short batch", 0, 0, false, 3},
		{"dataset past the end", 0, 0, false, 4},
		{"dataset far past the end", 0, 0, false, 1 << 40},
		{"dataset drop last from 3", 0, 0, true, 3},
		{"dataset workers from 1", 0, 2, false, 1},
		{"dataset workers from 2", 0, 3, false, 2},
		{"dataset workers past the end", 0, 2, false, 9},
		{"stream from 2", 1, 0, false, 2},
		{"stream workers from 1", 1, 2, false, 1},
		{"stream from the end", 1, 0, false, 4},
		{"sharded from 1", 2, 2, false, 1},
		{"sharded from 3", 2, 2, false, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			gets := new(atomic.Int64)
			var l *data.Loader
			var err error
			gen := vram.NewGenerator(3)
			opts := data.Options{NumWorkers: tc.workers, DropLast: tc.drop}
			switch tc.stream {
			case 0:
				opts.Shuffle, opts.Generator = true, gen
				l, err = data.NewLoader(countingDataset{rowsDataset(t, n, dev), gets}, size, opts)
			case 1:
				l, err = data.NewIterableLoader(newRowStream(n, dev), size, opts)
			default:
				l, err = data.NewIterableLoader(shardedStream{newRowStream(n, dev)}, size, opts)
			}
			if err != nil {
				t.Fatal(err)
			}
			labels(t, l.All()) // an epoch before
			st := gen.State()
			want := labels(t, l.All())
			if err := gen.SetState(st); err != nil {
				t.Fatal(err)
			}
			gets.Store(0)
			got := labels(t, l.AllFrom(tc.start))
			wantFrom := want[min(tc.start, len(want)):]
			if !slices.EqualFunc(got, wantFrom, slices.Equal) {
				t.Errorf("AllFrom(%d) gave %v, want %v (the epoch: %v)", tc.start, got, wantFrom, want)
			}
			if tc.stream == 0 {
				read := 0
				for _, b := range wantFrom {
					read += len(b)
				}
				if g := gets.Load(); g != int64(read) {
					t.Errorf("Get was called %d times for %d samples", g, read)
				}
			}
			after := gen.State()
			if err := gen.SetState(st); err != nil {
				t.Fatal(err)
			}
			labels(t, l.All())
			if !slices.Equal(after, gen.State()) {
				t.Errorf("AllFrom left the generator in another state than All does")
			}
			settled(t, before)
		})
	}
}

// TestLoaderAllFromNegative: a negative start is an error matching
// vram.ErrArgument, and reads nothing.
func TestLoaderAllFromNegative(t *testing.T) {
	for _, start := range []int{-1, -1 << 40} {
		gets := new(atomic.Int64)
		l, err := data.NewLoader(countingDataset{rowsDataset(t, 4, vram.CPU), gets}, 2, data.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for b, err := range l.AllFrom(start) {
			n++
			if b != nil || !errors.Is(err, vram.ErrArgument) {
				t.Errorf("AllFrom(%d) yielded %v, %v; want an error matching vram.ErrArgument", start, b, err)
			}
		}
		if n != 1 || gets.Load() != 0 {
			t.Errorf("AllFrom(%d) yielded %d times and read %d samples; want one error and none", start, n, gets.Load())
		}
	}
}

// TestLoaderAllFromErrorInSkipped: a sampler or stream that fails within
// the batches AllFrom skips ends the epoch with its error, with workers or
// without, rather than crashing the process from the goroutine that hands
// out the batches.
func TestLoaderAllFromErrorInSkipped(t *testing.T) {
	const n = 10
	outOfRange := data.SamplerFunc(func() iter.Seq[int] {
		return func(yield func(int) bool) { _ = yield(0) && yield(n) }
	})
	panicking := data.SamplerFunc(func() iter.Seq[int] {
		return func(yield func(int) bool) {
			if yield(0) && yield(1) {
				panic("sampler broke")
			}
		}
	})
	failing := data.StreamFunc(func() iter.Seq2[data.Sample, error] {
		return func(yield func(data.Sample, error) bool) {
			_ = yield(data.Sample{1.0}, nil) && yield(nil, errors.New("read failed"))
		}
	})
	nilSample := data.StreamFunc(func() iter.Seq2[data.Sample, error] {
		return func(yield func(data.Sample, error) bool) {
			_ = yield(data.Sample{1.0}, nil) && yield(nil, nil)
		}
	})
	tests := []struct {
		name    string
		sampler data.Sampler         // for a dataset, when stream is nil
		stream  data.IterableDataset // else
		workers int
		start   int
		want    error // what the error matches, nil for any
	}{
		{"index out of range, serial", outOfRange, nil, 0, 3, vram.ErrIndex},
		{"index out of range, 2 workers", outOfRange, nil, 2, 3, vram.ErrIndex},
		{"index out of range, 3 workers from 1", outOfRange, nil, 3, 1, vram.ErrIndex},
		{"sampler panic, 2 workers", panicking, nil, 2, 4, nil},
		{"stream error, 2 workers", nil, failing, 2, 3, nil},
		{"stream nil sample, 3 workers", nil, nilSample, 3, 2, vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			l := sourceLoader(t, tc.sampler, tc.stream, n, tc.workers)
			var errs []error
			for b, err := range l.AllFrom(tc.start) {
				if b != nil {
					t.Errorf("AllFrom(%d) yielded a batch of indices %v", tc.start, b.Indices)
				}
				errs = append(errs, err)
			}
			if len(errs) != 1 || errs[0] == nil || tc.want != nil && !errors.Is(errs[0], tc.want) {
				t.Fatalf("AllFrom(%d) yielded the errors %v; want one matching %v", tc.start, errs, tc.want)
			}
			settled(t, before)
		})
	}
}
