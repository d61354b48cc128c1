package data_test

import (
	"errors"
	"iter"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// fickle is a dataset of n samples (sample i is the number i) whose Len
// says n the first time and after the first ok calls changes its answer:
// to -1, or to a panic.
type fickle struct {
	n, ok int
	panic bool
	calls *atomic.Int64
}

func (d fickle) Len() int {
	if d.calls.Add(1) > int64(d.ok) {
		if d.panic {
			panic("Len broke")
		}
		return -1
	}
	return d.n
}

func (d fickle) Get(i int) (data.Sample, error) { return data.Sample{int64(i)}, nil }

// fickleSampler yields 0 to n-1 and says so in Len for its first ok calls;
// after those Len panics.
type fickleSampler struct {
	n, ok int
	calls *atomic.Int64
}

func (s fickleSampler) All() iter.Seq[int] { return data.SequentialSampler{N: s.n}.All() }

func (s fickleSampler) Len() int {
	if s.calls.Add(1) > int64(s.ok) {
		panic("sampler Len broke")
	}
	return s.n
}

// TestLenReadOnce: the constructors read a dataset's and a sampler's Len
// once and return its panic as a *data.PanicError, and an epoch with
// workers returns the panic of a sampler's Len as its error, as it does
// Get's. A Len whose second answer differed from its first made NewLoader
// keep the second, and a negative one made the epoch panic (makeslice) on
// the caller's goroutine; a panicking Len went through every constructor
// and through the loop.
func TestLenReadOnce(t *testing.T) {
	ds := func(ok int, panics bool) fickle { return fickle{n: 5, ok: ok, panic: panics, calls: new(atomic.Int64)} }
	newLoader := func(d data.Dataset, s data.Sampler, workers int) (*data.Loader, error) {
		return data.NewLoader(d, 2, data.Options{Sampler: s, NumWorkers: workers})
	}
	tests := []struct {
		name    string
		make    func() (*data.Loader, error)
		batches int  // good batches of the epoch, when make succeeds
		panics  bool // make's error, or the epoch's, is a *data.PanicError
	}{
		{"dataset Len turns negative", func() (*data.Loader, error) { return newLoader(ds(1, false), nil, 0) }, 3, false},
		{"dataset Len turns negative, workers", func() (*data.Loader, error) { return newLoader(ds(1, false), nil, 2) }, 3, false},
		{"dataset Len turns negative, shuffled", func() (*data.Loader, error) {
			return data.NewLoader(ds(1, false), 2, data.Options{Shuffle: true, Generator: vram.NewGenerator(1)})
		}, 3, false},
		{"dataset Len panics: NewLoader", func() (*data.Loader, error) { return newLoader(ds(0, true), nil, 0) }, 0, true},
		{"dataset Len panics: NewSubset", func() (*data.Loader, error) {
			_, err := data.NewSubset(ds(0, true), []int{0})
			return nil, err
		}, 0, true},
		{"dataset Len panics: NewConcatDataset", func() (*data.Loader, error) {
			_, err := data.NewConcatDataset(ds(1, false), ds(0, true))
			return nil, err
		}, 0, true},
		{"dataset Len panics: RandomSplit", func() (*data.Loader, error) {
			_, err := data.RandomSplit(ds(0, true), []int{2, 3}, vram.NewGenerator(1))
			return nil, err
		}, 0, true},
		{"dataset Len panics: RandomSplitFractions", func() (*data.Loader, error) {
			_, err := data.RandomSplitFractions(ds(0, true), []float64{0.5, 0.5}, vram.NewGenerator(1))
			return nil, err
		}, 0, true},
		{"sampler Len panics: NewLoader", func() (*data.Loader, error) {
			return newLoader(ds(9, false), fickleSampler{n: 5, calls: new(atomic.Int64)}, 0)
		}, 0, true},
		{"sampler Len panics in the epoch, workers", func() (*data.Loader, error) {
			return newLoader(ds(9, false), fickleSampler{n: 5, ok: 1, calls: new(atomic.Int64)}, 2)
		}, 0, true},
		{"sampler Len panics in the epoch, in line", func() (*data.Loader, error) {
			return newLoader(ds(9, false), fickleSampler{n: 5, ok: 1, calls: new(atomic.Int64)}, 0)
		}, 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			var l *data.Loader
			var err error
			if p := vram.Catch(func() { l, err = tc.make() }); p != nil {
				t.Fatalf("panicked with %v", p)
			}
			good := 0
			if l != nil {
				if p := vram.Catch(func() {
					for _, e := range l.All() {
						if e != nil {
							err = e
							continue // the epoch must end by itself
						}
						good++
					}
				}); p != nil {
					t.Fatalf("the epoch panicked with %v", p)
				}
			}
			var pe *data.PanicError
			switch {
			case tc.panics && !errors.As(err, &pe):
				t.Errorf("got %v, want a *data.PanicError", err)
			case !tc.panics && err != nil:
				t.Errorf("got %v, want no error", err)
			case good != tc.batches:
				t.Errorf("%d batches, want %d", good, tc.batches)
			}
			settled(t, before)
		})
	}
}
