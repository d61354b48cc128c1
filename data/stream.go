package data

import (
	"fmt"
	"iter"
	"runtime/debug"
	"sync"

	"github.com/vramgo/vram"
)

// IterableDataset is a stream of samples with no length
// (torch.utils.data.IterableDataset): records read from a file, a socket
// or a generator. All returns one pass over the stream; each epoch of a
// [Loader] calls it once. A sample yielded with a non-nil error ends the
// epoch with that error; a nil sequence, or a nil sample with no error,
// ends it with an error that matches [vram.ErrArgument].
//
// A [Loader] reads the stream of All once per epoch, from one goroutine at
// a time, however many workers it has: its workers then share the stream,
// each collating (and pinning, and moving) the batches handed to it, so no
// sample is read twice. A stream that can be split, so that its workers
// also read in parallel, implements [ShardedDataset].
//
// The loader owns the samples a stream yields: it releases their tensors
// once their batch is assembled, or when the epoch ends before that. A
// stream over tensors it keeps yields views of them (Select, Narrow) or
// copies (Clone), never the kept tensors themselves. All is called once per
// epoch, so it must be safe to call again, and from several goroutines at
// once when epochs of one loader run at the same time.
type IterableDataset interface {
	All() iter.Seq2[Sample, error]
}

// StreamFunc adapts a function that returns one pass over a stream to an
// [IterableDataset].
type StreamFunc func() iter.Seq2[Sample, error]

// All returns f().
func (f StreamFunc) All() iter.Seq2[Sample, error] { return f() }

// WorkerInfo tells a shard of a [ShardedDataset] which part of the stream
// to read (PyTorch's torch.utils.data.get_worker_info()): worker ID of
// NumWorkers, ID in [0, NumWorkers).
type WorkerInfo struct {
	ID         int
	NumWorkers int
}

// ShardedDataset is an [IterableDataset] that a [Loader] with workers
// reads in parallel: each of its NumWorkers workers reads Shard(info) with
// its own info, on its own goroutine, and batches what it reads. The
// shards must be disjoint and together make up the stream (the records
// whose number is ID modulo NumWorkers, say, or every NumWorkers-th file);
// a shard that ignored info would give every sample NumWorkers times, as
// a PyTorch IterableDataset that ignores get_worker_info does. Without
// workers the loader reads All instead.
//
// As in PyTorch, each worker makes its own batches: a shard's last batch
// may be short (or dropped, with DropLast), so an epoch may have up to
// NumWorkers short batches. Batches come from the workers in turn, worker
// 0's first, then worker 1's, and so on; a worker whose shard has ended is
// skipped. Shard is called from several goroutines at once.
type ShardedDataset interface {
	IterableDataset
	Shard(info WorkerInfo) iter.Seq2[Sample, error]
}

// NewIterableLoader returns a loader of the stream ds in batches of
// batchSize samples (a PyTorch DataLoader of an IterableDataset). Its
// epochs read the stream in its own order and end with it; [Loader.Len]
// is -1, and the Indices of its batches are nil. Options work as for
// [NewLoader], except Shuffle and Sampler, which a stream cannot have
// (shuffle inside the stream). It returns an error that matches
// [vram.ErrArgument] for a nil ds, Shuffle or a Sampler, and the errors of
// [NewLoader] for the other options.
func NewIterableLoader(ds IterableDataset, batchSize int, opts Options) (*Loader, error) {
	bad := func(format string, args ...any) (*Loader, error) {
		return nil, fmt.Errorf("data: NewIterableLoader: "+format+": %w", append(args, vram.ErrArgument)...)
	}
	if isNil(opts.Sampler) {
		opts.Sampler = nil // a nil pointer or function: no sampler
	}
	switch {
	case isNil(ds):
		return bad("nil dataset")
	case opts.Shuffle:
		return bad("Shuffle needs indices, which a stream has not; shuffle inside the stream (a shuffle buffer)")
	case opts.Sampler != nil:
		return bad("a Sampler needs indices, which a stream has not")
	}
	l := &Loader{stream: ds, batchSize: batchSize, opts: opts}
	if err := l.setup("NewIterableLoader"); err != nil {
		return nil, err
	}
	return l, nil
}

// Stream returns the stream the loader reads, or nil for a loader of a
// [Dataset].
func (l *Loader) Stream() IterableDataset { return l.stream }

// streamJobs yields the batches of the stream that all (the method name)
// returns from batch skip on, in order, and a final job with an error if
// the stream yields one or panics, or all panics or returns nil (as job
// skip when that happens among the skipped batches, as in [Loader.jobs]).
// The samples of the jobs are theirs; those of an unfinished batch are
// released when the stream fails or the consumer stops.
func (l *Loader) streamJobs(name string, all func() iter.Seq2[Sample, error], skip int) iter.Seq[job] {
	return func(yield func(job) bool) {
		seq, err := open(name, all)
		if err != nil {
			yield(job{k: skip, err: wrap(err, "batch 0: stream")})
			return
		}
		next, stop := iter.Pull2(seq)
		defer stop()
		var batch []Sample
		defer func() { job{samples: batch}.drop() }()
		k := 0
		for {
			s, ok, err := pullSample(next)
			if err != nil {
				yield(job{k: max(k, skip), err: wrap(err, "batch %d: stream", k)})
				return
			}
			if !ok {
				break
			}
			if s == nil {
				yield(job{k: max(k, skip), err: fmt.Errorf("data: batch %d: the stream yielded a nil sample and no error: %w", k, vram.ErrArgument)})
				return
			}
			batch = append(batch, s)
			if len(batch) == l.batchSize {
				b := batch
				batch = nil
				if k < skip {
					job{samples: b}.drop()
					k++
					continue
				}
				if !yield(job{k: k, samples: b}) {
					return
				}
				k++
			}
		}
		if len(batch) > 0 && !l.opts.DropLast && k >= skip {
			b := batch
			batch = nil
			yield(job{k: k, samples: b})
		}
	}
}

// pullSample returns the stream's next sample, or its error or panic.
func pullSample(next func() (Sample, error, bool)) (s Sample, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, ok, err = nil, false, &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	s, err, ok = next()
	if ok && err != nil {
		releaseSample(s)
		return nil, false, err
	}
	return s, ok, nil
}

// sharded runs an epoch of a [ShardedDataset] with NumWorkers goroutines,
// each reading and batching its shard into a channel of Prefetch-1 places
// (plus the batch it holds while it waits to send). The loop takes one
// batch from each worker in turn, skipping those whose shard has ended.
func (l *Loader) sharded(ds ShardedDataset, yield func(*Batch, error) bool) {
	w := l.opts.NumWorkers
	done := make(chan struct{})
	outs := make([]chan result, w)
	var wg sync.WaitGroup
	var late latePanic
	wg.Add(w)
	for i := range w {
		outs[i] = make(chan result, l.opts.Prefetch-1)
		go func() {
			defer wg.Done()
			defer close(outs[i])
			k, finished := 0, false // the batch being read or prepared
			defer func() {
				if !finished { // the shard, Get or the collate function ended the goroutine
					select {
					case outs[i] <- result{err: wrap(goexitError(k, "the shard or the collate function"), "worker %d", i)}:
					case <-done:
					}
				}
			}()
			defer late.catch()
			shard := func() iter.Seq2[Sample, error] { return ds.Shard(WorkerInfo{ID: i, NumWorkers: w}) }
			for j := range l.streamJobs("Shard", shard, 0) {
				k = j.k
				b, err := l.fetch(j)
				if err != nil {
					err = wrap(err, "worker %d", i)
				}
				select {
				case outs[i] <- result{b, err}:
				case <-done:
					b.done()
					finished = true
					return
				}
				if err != nil {
					finished = true
					return
				}
				k++
			}
			finished = true
		}()
	}
	defer func() {
		close(done)
		wg.Wait()
		for _, out := range outs {
			for r := range out {
				r.b.done()
			}
		}
		late.raise()
	}()
	live := make([]int, w)
	for i := range live {
		live[i] = i
	}
	for len(live) > 0 {
		for n := 0; n < len(live); {
			r, ok := <-outs[live[n]]
			if !ok {
				live = append(live[:n], live[n+1:]...)
				continue
			}
			if r.err != nil {
				yield(nil, r.err)
				return
			}
			ok = func() bool {
				defer r.b.done()
				return yield(r.b, nil)
			}()
			if !ok {
				return
			}
			n++
		}
	}
}

// releaseSamples releases the tensors of samples.
func releaseSamples(samples []Sample) {
	for _, s := range samples {
		releaseSample(s)
	}
}
