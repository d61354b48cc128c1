package data_test

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/data"
)

// rowStream is a stream of n samples (x = [i, -i] as a new float32 tensor
// on dev, i as an int). At index failAt it yields err, or panics when err
// is nil; failAt -1 never fails. It counts the passes that start and
// those that return.
type rowStream struct {
	n, failAt       int
	err             error
	dev             vram.Device
	started, closed *atomic.Int64
}

func newRowStream(n int, dev vram.Device) rowStream {
	return rowStream{n: n, failAt: -1, dev: dev, started: new(atomic.Int64), closed: new(atomic.Int64)}
}

// rows yields the samples start, start+step, ...
func (s rowStream) rows(start, step int) iter.Seq2[data.Sample, error] {
	return func(yield func(data.Sample, error) bool) {
		s.started.Add(1)
		defer s.closed.Add(1)
		for i := start; i < s.n; i += step {
			if i == s.failAt {
				if s.err == nil {
					panic("stream broke")
				}
				yield(nil, s.err)
				return
			}
			x := vram.FromSlice([]float32{float32(i), float32(-i)}, vram.Shape{2}, s.dev)
			if !yield(data.Sample{x, i}, nil) {
				return
			}
		}
	}
}

func (s rowStream) All() iter.Seq2[data.Sample, error] { return s.rows(0, 1) }

// shardedStream splits a rowStream by index modulo the number of workers.
type shardedStream struct{ rowStream }

func (s shardedStream) Shard(w data.WorkerInfo) iter.Seq2[data.Sample, error] {
	return s.rows(w.ID, w.NumWorkers)
}

// streamEpoch runs one epoch of l and returns the sample numbers of each
// batch, after checking that x holds those samples.
func streamEpoch(t *testing.T, l *data.Loader) [][]int {
	t.Helper()
	var got [][]int
	for b, err := range l.All() {
		if err != nil {
			t.Fatal(err)
		}
		if b.Indices != nil {
			t.Errorf("a stream's batch has indices %v", b.Indices)
		}
		x, y := b.Tensors[0].Float32s(), b.Tensors[1].Int64s()
		var idx []int
		for n, i := range y {
			if x[2*n] != float32(i) || x[2*n+1] != float32(-i) {
				t.Fatalf("batch %d, sample %d: x %v y %v", len(got), n, x, y)
			}
			idx = append(idx, int(i))
		}
		got = append(got, idx)
	}
	return got
}

func batchesOf(n, size int, dropLast bool) [][]int {
	var out [][]int
	for i := 0; i < n; i += size {
		if i+size > n && dropLast {
			break
		}
		var b []int
		for j := i; j < min(i+size, n); j++ {
			b = append(b, j)
		}
		out = append(out, b)
	}
	return out
}

// TestIterableLoader: a shared stream gives its samples once each, in
// order, in batches of the batch size, whatever the number of workers.
func TestIterableLoader(t *testing.T) {
	dev := vram.Sim(0)
	for _, tc := range []struct {
		name      string
		n, batch  int
		dropLast  bool
		wantShort bool
	}{
		{"even", 12, 4, false, false},
		{"short last batch", 10, 4, false, true},
		{"drop last", 10, 4, true, false},
		{"batch larger than the stream", 5, 64, false, true},
		{"batch larger than the stream, drop last", 5, 64, true, false},
		{"empty stream", 0, 3, false, false},
	} {
		for _, workers := range []int{0, 1, 3, 16} {
			t.Run(fmt.Sprintf("%s/%d workers", tc.name, workers), func(t *testing.T) {
				mem := vram.MemoryAllocated(dev)
				before := runtime.NumGoroutine()
				s := newRowStream(tc.n, dev)
				l, err := data.NewIterableLoader(s, tc.batch, data.Options{NumWorkers: workers, DropLast: tc.dropLast})
				if err != nil {
					t.Fatal(err)
				}
				if l.Len() != -1 || l.Dataset() != nil || l.Stream() == nil {
					t.Errorf("Len %d, Dataset %v, Stream %v", l.Len(), l.Dataset(), l.Stream())
				}
				want := batchesOf(tc.n, tc.batch, tc.dropLast)
				for e := range 2 { // a loader runs several epochs
					got := streamEpoch(t, l)
					if !slices.EqualFunc(got, want, slices.Equal) {
						t.Errorf("epoch %d: batches %v, want %v", e, got, want)
					}
				}
				if st, cl := s.started.Load(), s.closed.Load(); st != 2 || cl != 2 {
					t.Errorf("%d passes over the stream started, %d ended; want 2 and 2", st, cl)
				}
				settled(t, before)
				if after := vram.MemoryAllocated(dev); after != mem {
					t.Errorf("%s holds %d bytes after the epochs, %d before", dev, after, mem)
				}
			})
		}
	}
}

// TestShardedLoader: each worker reads its own shard and batches it; the
// batches come from the workers in turn, every sample once.
func TestShardedLoader(t *testing.T) {
	dev := vram.Sim(0)
	for _, tc := range []struct {
		name              string
		n, batch, workers int
		dropLast          bool
		want              [][]int
	}{
		{"no workers reads All", 5, 2, 0, false, [][]int{{0, 1}, {2, 3}, {4}}},
		{"one worker", 5, 2, 1, false, [][]int{{0, 1}, {2, 3}, {4}}},
		// shards: {0 2 4 6 8} and {1 3 5 7 9}
		{"two workers", 10, 2, 2, false, [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8}, {9}}},
		{"two workers, drop last", 10, 2, 2, true, [][]int{{0, 2}, {1, 3}, {4, 6}, {5, 7}}},
		// shards: {0 3 6} {1 4} {2 5}: worker 0 goes on alone
		{"uneven shards", 7, 1, 3, false, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}}},
		{"uneven shards, batches of 2", 7, 2, 3, false, [][]int{{0, 3}, {1, 4}, {2, 5}, {6}}},
		{"more workers than samples", 3, 4, 8, false, [][]int{{0}, {1}, {2}}},
		{"empty stream", 0, 4, 3, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vram.MemoryAllocated(dev)
			before := runtime.NumGoroutine()
			s := shardedStream{newRowStream(tc.n, dev)}
			l, err := data.NewIterableLoader(s, tc.batch, data.Options{NumWorkers: tc.workers, DropLast: tc.dropLast, Prefetch: min(tc.workers, 3)})
			if err != nil {
				t.Fatal(err)
			}
			if got := streamEpoch(t, l); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("batches %v, want %v", got, tc.want)
			}
			if st := s.started.Load(); st != int64(max(tc.workers, 1)) {
				t.Errorf("%d passes started, want one per worker", st)
			}
			settled(t, before)
			if after := vram.MemoryAllocated(dev); after != mem {
				t.Errorf("%s holds %d bytes after the epoch, %d before", dev, after, mem)
			}
		})
	}
}

// TestIterableLoaderFailures: an error or a panic of the stream, or of the
// collate function, ends the epoch at its batch, with nothing leaked.
func TestIterableLoaderFailures(t *testing.T) {
	dev := vram.Sim(0)
	errBad := errors.New("bad record")
	badCollate := func(s []data.Sample, d vram.Device) ([]*vram.Tensor, error) {
		if s[0][1].(int) >= 4 {
			return nil, fmt.Errorf("collate: %w", vram.ErrDType)
		}
		return data.Collate(s, d)
	}
	nilSample := data.StreamFunc(func() iter.Seq2[data.Sample, error] {
		return func(yield func(data.Sample, error) bool) {
			for i := range 10 {
				var s data.Sample // nil at 5
				if i != 5 {
					s = data.Sample{vram.FromSlice([]float32{float32(i), float32(-i)}, vram.Shape{2}, dev), i}
				}
				if !yield(s, nil) {
					return
				}
			}
		}
	})
	for _, tc := range []struct {
		name    string
		failAt  int
		err     error
		collate data.CollateFunc
		ds      data.IterableDataset // instead of a rowStream
		batches int                  // good batches before the error, without shards
		want    error                // matched by errors.Is, or nil for a *PanicError
	}{
		{"stream error", 5, errBad, nil, nil, 2, errBad},
		{"stream panic", 7, nil, nil, nil, 3, nil},
		{"collate error", -1, nil, badCollate, nil, 2, vram.ErrDType},
		{"nil sample", -1, nil, nil, nilSample, 2, vram.ErrArgument},
	} {
		for _, workers := range []int{0, 1, 3} {
			for _, shard := range []bool{false, true} {
				if shard && tc.ds != nil {
					continue
				}
				t.Run(fmt.Sprintf("%s/%d workers/sharded %v", tc.name, workers, shard), func(t *testing.T) {
					mem := vram.MemoryAllocated(dev)
					before := runtime.NumGoroutine()
					s := newRowStream(10, dev)
					s.failAt, s.err = tc.failAt, tc.err
					var ds data.IterableDataset = s
					if shard {
						ds = shardedStream{s}
					}
					if tc.ds != nil {
						ds = tc.ds
					}
					l, err := data.NewIterableLoader(ds, 2, data.Options{NumWorkers: workers, Collate: tc.collate})
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
					if !shard && good != tc.batches {
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
					if tc.ds == nil && s.started.Load() != s.closed.Load() {
						t.Errorf("%d passes started, %d ended", s.started.Load(), s.closed.Load())
					}
					if after := vram.MemoryAllocated(dev); after != mem {
						t.Errorf("%s holds %d bytes after the epoch, %d before", dev, after, mem)
					}
				})
			}
		}
	}
}

// TestIterableLoaderBreak: leaving the loop early, by break or a panic,
// ends every pass over the stream, stops the workers and frees what they
// read ahead.
func TestIterableLoaderBreak(t *testing.T) {
	dev := vram.Sim(0)
	for _, workers := range []int{0, 1, 4} {
		for _, shard := range []bool{false, true} {
			for _, how := range []string{"break", "panic"} {
				t.Run(fmt.Sprintf("%s/%d workers/sharded %v", how, workers, shard), func(t *testing.T) {
					mem := vram.MemoryAllocated(dev)
					before := runtime.NumGoroutine()
					s := newRowStream(200, dev)
					var ds data.IterableDataset = s
					if shard {
						ds = shardedStream{s}
					}
					l, err := data.NewIterableLoader(ds, 3, data.Options{NumWorkers: workers, Prefetch: 3 * min(workers, 1)})
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
					if st, cl := s.started.Load(), s.closed.Load(); st != cl || st == 0 {
						t.Errorf("%d passes started, %d ended", st, cl)
					}
					if after := vram.MemoryAllocated(dev); after != mem {
						t.Errorf("%s holds %d bytes after the loop, %d before", dev, after, mem)
					}
				})
			}
		}
	}
}

// TestIterableLoaderOwnership: tensors that a collate function returns
// as they came in a sample stay alive; the rest of the samples' tensors
// are released.
func TestIterableLoaderOwnership(t *testing.T) {
	dev := vram.Sim(0)
	mem := vram.MemoryAllocated(dev)
	var seen []*vram.Tensor
	var mu sync.Mutex
	first := func(s []data.Sample, _ vram.Device) ([]*vram.Tensor, error) {
		x := s[0][0].(*vram.Tensor)
		mu.Lock()
		seen = append(seen, x)
		mu.Unlock()
		return []*vram.Tensor{x, vram.Scalar(float64(s[0][1].(int)), dev)}, nil
	}
	l, err := data.NewIterableLoader(newRowStream(6, dev), 1, data.Options{Collate: first, NumWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for b, err := range l.All() {
		if err != nil {
			t.Fatal(err)
		}
		if b.Tensors[0].Released() {
			t.Fatal("the batch's tensor was released with its sample")
		}
		i := int(b.Tensors[1].Item())
		if got := b.Tensors[0].Float32s(); !slices.Equal(got, []float32{float32(i), float32(-i)}) {
			t.Errorf("sample %d: %v", i, got)
		}
	}
	for _, x := range seen {
		if !x.Released() {
			t.Error("a batch's tensor outlived the loop")
		}
	}
	if after := vram.MemoryAllocated(dev); after != mem {
		t.Errorf("%s holds %d bytes after the epoch, %d before", dev, after, mem)
	}
}

func TestNewIterableLoaderErrors(t *testing.T) {
	s := newRowStream(4, vram.CPU)
	for _, tc := range []struct {
		name  string
		ds    data.IterableDataset
		batch int
		opts  data.Options
		want  error
	}{
		{"nil dataset", nil, 2, data.Options{}, vram.ErrArgument},
		{"batch size 0", s, 0, data.Options{}, vram.ErrArgument},
		{"shuffle", s, 2, data.Options{Shuffle: true}, vram.ErrArgument},
		{"sampler", s, 2, data.Options{Sampler: data.SequentialSampler{N: 4}}, vram.ErrArgument},
		{"negative workers", s, 2, data.Options{NumWorkers: -1}, vram.ErrArgument},
		// A stream's length is unknown, so every worker would start:
		// a goroutine and two channels each, which made the epoch panic
		// (makeslice) at the largest int.
		{"workers beyond memory", s, 2, data.Options{NumWorkers: math.MaxInt}, vram.ErrArgument},
		{"workers beyond MaxWorkers", s, 2, data.Options{NumWorkers: data.MaxWorkers + 1}, vram.ErrArgument},
		{"prefetch without workers", s, 2, data.Options{Prefetch: 2}, vram.ErrArgument},
		{"no such device", s, 2, data.Options{Device: vram.Sim(9)}, vram.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := data.NewIterableLoader(tc.ds, tc.batch, tc.opts)
			if !errors.Is(err, tc.want) || l != nil {
				t.Fatalf("got %v, %v; want an error matching %v", l, err, tc.want)
			}
		})
	}
}

// TestIterableLoaderDevice: batches of a stream land on Options.Device.
func TestIterableLoaderDevice(t *testing.T) {
	for _, tc := range []struct {
		workers int
		pin     bool
	}{{0, false}, {2, false}, {0, true}, {2, true}} {
		workers := tc.workers
		l, err := data.NewIterableLoader(shardedStream{newRowStream(7, vram.CPU)}, 3, data.Options{Device: vram.Sim(1), NumWorkers: workers, PinMemory: tc.pin})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for b, err := range l.All() {
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range b.Tensors {
				if x.Device() != vram.Sim(1) {
					t.Errorf("%d workers: a batch on %v", workers, x.Device())
				}
			}
			n += b.Tensors[0].Size(0)
		}
		if n != 7 {
			t.Errorf("%d workers: %d samples, want 7", workers, n)
		}
	}
}

// TestConcurrentStreamEpochs runs epochs of one stream loader from several
// goroutines at once (for the race detector).
func TestConcurrentStreamEpochs(t *testing.T) {
	for _, shard := range []bool{false, true} {
		s := newRowStream(30, vram.Sim(0))
		var ds data.IterableDataset = s
		if shard {
			ds = shardedStream{s}
		}
		l, err := data.NewIterableLoader(ds, 4, data.Options{NumWorkers: 3, Device: vram.Sim(1)})
		if err != nil {
			t.Fatal(err)
		}
		before := runtime.NumGoroutine()
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for range 2 {
					var got []int
					for b, err := range l.All() {
						if err != nil {
							t.Error(err)
							return
						}
						for _, i := range b.Tensors[1].Int64s() {
							got = append(got, int(i))
						}
					}
					slices.Sort(got)
					if len(got) != 30 || got[0] != 0 || got[29] != 29 || len(slices.Compact(got)) != 30 {
						t.Errorf("an epoch of samples %v, want 0 to 29 once each", got)
					}
				}
			})
		}
		wg.Wait()
		settled(t, before)
	}
}

// panickingShards is a sharded stream whose Shard panics.
type panickingShards struct{ rowStream }

func (panickingShards) Shard(data.WorkerInfo) iter.Seq2[data.Sample, error] { panic("no shards today") }

// nilShards is a sharded stream whose Shard returns a nil sequence.
type nilShards struct{ rowStream }

func (nilShards) Shard(data.WorkerInfo) iter.Seq2[data.Sample, error] { return nil }

// TestLoaderEpochOpenPanics: a sampler's All, a stream's All or a sharded
// stream's Shard that panics instead of returning the epoch's sequence
// ends the epoch with a *data.PanicError, with workers or without, as a
// panic of the sequence itself does, rather than crashing the process
// from a worker's goroutine. One that returns a nil sequence ends it with
// an error matching vram.ErrArgument that says so: it was a *PanicError of
// a nil dereference, raised when the sequence was pulled.
func TestLoaderEpochOpenPanics(t *testing.T) {
	sampler := data.SamplerFunc(func() iter.Seq[int] { panic("no epoch today") })
	stream := data.StreamFunc(func() iter.Seq2[data.Sample, error] { panic("no stream today") })
	nilSampler := data.SamplerFunc(func() iter.Seq[int] { return nil })
	nilStream := data.StreamFunc(func() iter.Seq2[data.Sample, error] { return nil })
	tests := []struct {
		name    string
		sampler data.Sampler         // for a dataset, when stream is nil
		stream  data.IterableDataset // else
		workers int
		start   int
		want    error // matched by errors.Is, or nil for a *PanicError
	}{
		{"sampler, serial", sampler, nil, 0, 0, nil},
		{"sampler, 2 workers", sampler, nil, 2, 0, nil},
		{"sampler, 2 workers from 3", sampler, nil, 2, 3, nil},
		{"stream, serial", nil, stream, 0, 0, nil},
		{"stream, 2 workers", nil, stream, 2, 0, nil},
		{"stream, 3 workers from 1", nil, stream, 3, 1, nil},
		{"shards, 2 workers", nil, panickingShards{newRowStream(4, vram.CPU)}, 2, 0, nil},
		{"nil sampler sequence, serial", nilSampler, nil, 0, 0, vram.ErrArgument},
		{"nil sampler sequence, 2 workers from 1", nilSampler, nil, 2, 1, vram.ErrArgument},
		{"nil stream sequence, serial", nil, nilStream, 0, 0, vram.ErrArgument},
		{"nil stream sequence, 2 workers", nil, nilStream, 2, 0, vram.ErrArgument},
		{"nil shard sequence, 2 workers", nil, nilShards{newRowStream(4, vram.CPU)}, 2, 0, vram.ErrArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			l := sourceLoader(t, tc.sampler, tc.stream, 4, tc.workers)
			var errs []error
			for b, err := range l.AllFrom(tc.start) {
				if b != nil {
					t.Errorf("a batch of indices %v", b.Indices)
				}
				errs = append(errs, err)
			}
			var pe *data.PanicError
			switch {
			case tc.want == nil && (len(errs) != 1 || !errors.As(errs[0], &pe)):
				t.Fatalf("the epoch yielded the errors %v; want one *data.PanicError", errs)
			case tc.want != nil && (len(errs) != 1 || !errors.Is(errs[0], tc.want) || errors.As(errs[0], &pe)):
				t.Fatalf("the epoch yielded the errors %v; want one matching %v", errs, tc.want)
			}
			settled(t, before)
		})
	}
}

// sourceLoader returns a loader of batches of 2 with workers workers: of
// stream when it is not nil, else of n rows drawn by sampler.
func sourceLoader(t *testing.T, sampler data.Sampler, stream data.IterableDataset, n, workers int) *data.Loader {
	t.Helper()
	var l *data.Loader
	var err error
	opts := data.Options{NumWorkers: workers}
	if stream != nil {
		l, err = data.NewIterableLoader(stream, 2, opts)
	} else {
		opts.Sampler = sampler
		l, err = data.NewLoader(rowsDataset(t, n, vram.CPU), 2, opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLoaderErrorsSayDataOnce: an error of a batch, of a stream or of a
// worker names the package once, however many places it passed through.
func TestLoaderErrorsSayDataOnce(t *testing.T) {
	broken := newRowStream(6, vram.CPU)
	broken.failAt, broken.err = 3, fmt.Errorf("disk gone")
	mixed := data.StreamFunc(func() iter.Seq2[data.Sample, error] {
		return func(yield func(data.Sample, error) bool) {
			if yield(data.Sample{1}, nil) {
				yield(data.Sample{"a"}, nil)
			}
		}
	})
	ds, err := data.NewTensorDataset(vram.Zeros(vram.Shape{4, 2}))
	if err != nil {
		t.Fatal(err)
	}
	bad := func(samples []data.Sample, dev vram.Device) ([]*vram.Tensor, error) {
		return data.Collate([]data.Sample{{1}, {"a"}}, dev)
	}
	tests := []struct {
		name    string
		stream  data.IterableDataset // nil for ds
		workers int
		collate data.CollateFunc
	}{
		{"stream error", broken, 0, nil},
		{"stream error in a worker", shardedStream{broken}, 2, nil},
		{"collate of a stream", mixed, 0, nil},
		{"collate of a dataset", nil, 0, bad},
		{"collate of a dataset in a worker", nil, 2, bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := data.Options{NumWorkers: tt.workers, Collate: tt.collate}
			var l *data.Loader
			var err error
			if tt.stream != nil {
				l, err = data.NewIterableLoader(tt.stream, 2, opts)
			} else {
				l, err = data.NewLoader(ds, 2, opts)
			}
			if err != nil {
				t.Fatal(err)
			}
			var got error
			for b, err := range l.All() {
				if err != nil {
					got = err
					break
				}
				b.Release()
			}
			if got == nil {
				t.Fatal("no error")
			}
			if n := strings.Count(got.Error(), "data:"); n != 1 {
				t.Errorf("error %q says \"data:\" %d times, want once", got, n)
			}
		})
	}
}

// stubborn yields the numbers 0 to n-1 as samples, all of its shards
// alike, and panics when told to stop (its yield returned false), as a
// stream whose cleanup fails might.
type stubborn struct{ n int }

func (s stubborn) All() iter.Seq2[data.Sample, error] {
	return func(yield func(data.Sample, error) bool) {
		for i := range s.n {
			if !yield(data.Sample{int64(i)}, nil) {
				panic("closing the stream failed")
			}
		}
	}
}

func (s stubborn) Shard(data.WorkerInfo) iter.Seq2[data.Sample, error] { return s.All() }

// TestStopPanics: a sampler or a stream that panics when the loop stops it
// panics the loop's goroutine once every goroutine of the loader has
// returned, with workers as without them, so that the caller can recover
// it. With workers it ended the process from the goroutine that pulled the
// sequence.
func TestStopPanics(t *testing.T) {
	sampler := data.SamplerFunc(func() iter.Seq[int] {
		return func(yield func(int) bool) {
			for i := range 1000 {
				if !yield(i) {
					panic("closing the stream failed")
				}
			}
		}
	})
	tests := []struct {
		name    string
		sampler data.Sampler         // for a dataset, when stream is nil
		stream  data.IterableDataset // else
	}{
		{"sampler", sampler, nil},
		{"stream", nil, data.StreamFunc(stubborn{1000}.All)},
		{"sharded stream", nil, stubborn{1000}},
	}
	for _, tc := range tests {
		for _, workers := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("%s/%d workers", tc.name, workers), func(t *testing.T) {
				before := runtime.NumGoroutine()
				// Longer than the workers can read ahead, so that the
				// sequences are stopped, not finished, when the loop breaks.
				l := sourceLoader(t, tc.sampler, tc.stream, 1000, workers)
				var got any
				func() {
					defer func() { got = recover() }()
					for _, err := range l.All() {
						if err != nil {
							t.Fatal(err)
						}
						break
					}
				}()
				if got != "closing the stream failed" {
					t.Errorf("the loop's goroutine recovered %v, want the sequence's panic", got)
				}
				settled(t, before)
			})
		}
	}
}
