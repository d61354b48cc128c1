package data

import (
	"fmt"
	"iter"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/vramgo/vram"
)

// DefaultPrefetch is the number of batches each worker prepares ahead when
// Options.Prefetch is zero, PyTorch's default prefetch_factor.
const DefaultPrefetch = 2

// MaxPrefetch bounds Options.Prefetch: batches prepared ahead beyond it would
// not fit in any memory.
const MaxPrefetch = 1 << 16

// MaxWorkers bounds Options.NumWorkers. An epoch starts a goroutine and
// channels for each worker that has a batch to prepare, and every worker of
// a stream or of a [ShardedDataset], whose length is unknown: more workers
// than this run no faster on any host, and their prepared batches would
// not fit in memory.
const MaxWorkers = 1 << 12

// indexReserve is the most indices a loader reserves room for before a
// batch's sampler yields them, so that a batch size near the largest int
// sizes no slice up front; a larger batch grows as its indices come.
const indexReserve = 1 << 12

// Options configures a [Loader]. Its zero value reads the dataset in order,
// on the calling goroutine, keeps the last short batch and leaves batches
// where the collate function makes them; each field says what zero means.
type Options struct {
	// Shuffle reads the dataset in a new random order every epoch, drawn
	// from Generator (PyTorch's shuffle=True). It cannot be combined with
	// Sampler.
	Shuffle bool
	// Generator draws the orders of Shuffle; nil means
	// [vram.DefaultGenerator], which [vram.ManualSeed] seeds. Epochs of a
	// loader made with a generator of the same seed come in the same
	// orders.
	Generator *vram.Generator
	// DropLast drops the last batch of an epoch when it is shorter than the
	// batch size.
	DropLast bool
	// Sampler, when not nil, chooses the indices of each epoch instead of
	// the sequential or shuffled order. A nil pointer or a nil
	// [SamplerFunc] held here counts as nil.
	Sampler Sampler
	// NumWorkers is the number of goroutines that prepare batches ahead of
	// the loop (PyTorch's num_workers); zero prepares each batch on the
	// calling goroutine when the loop asks for it. Batches come in the
	// same order, with the same contents, whatever the number of workers.
	// It is at most [MaxWorkers].
	NumWorkers int
	// Prefetch is the number of batches each worker prepares ahead
	// (PyTorch's prefetch_factor); zero means [DefaultPrefetch]. It needs
	// NumWorkers > 0.
	Prefetch int
	// Collate turns the samples of a batch into tensors; nil means
	// [Collate].
	Collate CollateFunc
	// Device is where batches land; the zero Device leaves them where the
	// collate function makes them (by default: tensors on their samples'
	// device, numbers on the CPU).
	Device vram.Device
	// PinMemory assembles batches in page-locked host memory
	// (PyTorch's pin_memory=True): pinned for Device and copied to it
	// without blocking ([vram.NonBlocking]) when Device is a GPU, else
	// pinned for the current CUDA device and left on the CPU, ready for
	// To(dev, vram.NonBlocking). [NewLoader] returns an error when the
	// device cannot pin memory.
	PinMemory bool
}

// Loader reads a [Dataset], or an [IterableDataset] (see
// [NewIterableLoader]), in batches (torch.utils.data.DataLoader). Each
// call of [Loader.All] is one epoch. A Loader may run several epochs at
// once from different goroutines; its dataset's Get must then be safe for
// concurrent use, as it must be with workers.
type Loader struct {
	ds        Dataset
	stream    IterableDataset // instead of ds, for [NewIterableLoader]
	n         int
	batchSize int
	opts      Options
	sampler   Sampler
	collate   CollateFunc
	pinFor    vram.Device
}

// NewLoader returns a loader of ds in batches of batchSize samples. It
// returns an error that matches [vram.ErrArgument] for a nil or empty
// dataset, a batch size below 1, a negative NumWorkers or Prefetch,
// NumWorkers above [MaxWorkers], Prefetch above [MaxPrefetch], Prefetch
// without workers, Shuffle with a Sampler, a Sampler whose Len is negative
// and a [RandomSampler] of N 0, which has no indices to draw,
// [vram.ErrIndex] for a [SequentialSampler] or [RandomSampler] whose N is
// above the dataset's length or a [SubsetRandomSampler] with an index
// outside the dataset (where an epoch would fail part way), and
// [vram.ErrUnavailable] for a Device that cannot be used or PinMemory where
// no device can pin memory.
func NewLoader(ds Dataset, batchSize int, opts Options) (*Loader, error) {
	bad := func(format string, args ...any) (*Loader, error) {
		return nil, fmt.Errorf("data: NewLoader: "+format+": %w", append(args, vram.ErrArgument)...)
	}
	if isNil(opts.Sampler) {
		opts.Sampler = nil // a nil pointer or function: no sampler
	}
	if isNil(ds) {
		return bad("nil dataset")
	}
	// Each Len is read once: a second reading could differ.
	n, err := length(ds)
	if err != nil {
		return nil, wrap(err, "NewLoader: the dataset's Len")
	}
	switch {
	case n <= 0:
		return bad("the dataset is empty (Len %d); there is nothing to load", n)
	case opts.Shuffle && opts.Sampler != nil:
		return bad("Shuffle and Sampler exclude each other; shuffle in the sampler")
	}
	if s, ok := opts.Sampler.(interface{ Len() int }); ok {
		sn, err := length(s)
		if err != nil {
			return nil, wrap(err, "NewLoader: the sampler's Len")
		}
		if sn < 0 {
			return bad("the sampler's Len is %d; a sampler yields 0 indices or more", sn)
		}
	}
	if s, ok := opts.Sampler.(interface{ check() error }); ok {
		if err := s.check(); err != nil {
			return bad("%v", err)
		}
	}
	if s, ok := opts.Sampler.(interface{ within(n int) error }); ok {
		if err := s.within(n); err != nil {
			return nil, fmt.Errorf("data: NewLoader: %v: %w", err, vram.ErrIndex)
		}
	}
	l := &Loader{ds: ds, n: n, batchSize: batchSize, opts: opts, sampler: opts.Sampler}
	if err := l.setup("NewLoader"); err != nil {
		return nil, err
	}
	if l.sampler == nil {
		if opts.Shuffle {
			l.sampler = RandomSampler{N: l.n, Generator: opts.Generator}
		} else {
			l.sampler = SequentialSampler{N: l.n}
		}
	}
	return l, nil
}

// setup checks the options that every loader takes, fills in their
// defaults, and checks that the device can be used; name is the
// constructor, for the errors.
func (l *Loader) setup(name string) error {
	opts, batchSize := l.opts, l.batchSize
	bad := func(format string, args ...any) error {
		return fmt.Errorf("data: %s: "+format+": %w", append([]any{name}, append(args, vram.ErrArgument)...)...)
	}
	switch {
	case batchSize < 1:
		return bad("batch size %d; it must be at least 1", batchSize)
	case opts.NumWorkers < 0:
		return bad("NumWorkers %d; it must be 0 (load on the calling goroutine) or more", opts.NumWorkers)
	case opts.NumWorkers > MaxWorkers:
		return bad("NumWorkers %d; it must be at most MaxWorkers (%d)", opts.NumWorkers, MaxWorkers)
	case opts.Prefetch < 0:
		return bad("Prefetch %d; it must be 0 (the default, %d) or more", opts.Prefetch, DefaultPrefetch)
	case opts.Prefetch > MaxPrefetch:
		return bad("Prefetch %d; it must be at most MaxPrefetch (%d)", opts.Prefetch, MaxPrefetch)
	case opts.Prefetch > 0 && opts.NumWorkers == 0:
		return bad("Prefetch %d needs NumWorkers > 0", opts.Prefetch)
	}
	if opts.Device != (vram.Device{}) {
		if err := opts.Device.Check(); err != nil {
			return fmt.Errorf("data: %s: Device: %w", name, err)
		}
	}
	l.collate = opts.Collate
	if l.opts.NumWorkers > 0 && l.opts.Prefetch == 0 {
		l.opts.Prefetch = DefaultPrefetch
	}
	if l.collate == nil {
		l.collate = Collate
	}
	if opts.PinMemory {
		l.pinFor = vram.CUDA()
		if d := opts.Device; d != (vram.Device{}) && d != vram.CPU {
			l.pinFor = d
		}
		err := vram.Catch(func() {
			t := vram.Zeros(vram.Shape{1})
			defer t.Release()
			t.PinMemory(l.pinFor).Release()
		})
		if err != nil {
			return fmt.Errorf("data: %s: PinMemory: %w", name, err)
		}
	}
	return nil
}

// Dataset returns the dataset the loader reads, or nil for a loader of an
// [IterableDataset].
func (l *Loader) Dataset() Dataset { return l.ds }

// BatchSize returns the number of samples of a full batch.
func (l *Loader) BatchSize() int { return l.batchSize }

// length returns v.Len(), or its panic as a [*PanicError]: the Len of a
// dataset or a sampler is the caller's code, whose panics the package
// returns as errors as it does those of Get.
func length(v interface{ Len() int }) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return v.Len(), nil
}

// Len returns the number of batches of an epoch (len of a PyTorch
// DataLoader), or -1 when the sampler does not say how many indices it
// yields and for an [IterableDataset], whose length is unknown. It
// panics as the sampler's Len does; an epoch returns that panic as an
// error.
func (l *Loader) Len() int {
	s, ok := l.sampler.(interface{ Len() int })
	if !ok {
		return -1
	}
	n := s.Len()
	if n < 0 {
		return -1 // a sampler whose Len has turned negative since NewLoader
	}
	batches := n / l.batchSize // no n+batchSize-1: it overflows for the largest sizes
	if n%l.batchSize != 0 && !l.opts.DropLast {
		batches++
	}
	return batches
}

// Batch is one batch of a [Loader]: a tensor per field of the samples, and
// the dataset indices of its samples in order (nil for a stream, whose
// samples have none).
//
// The loader owns the tensors: it releases them when the loop body that
// received the batch returns, so that batches the body does not keep cost
// no memory, with or without [vram.Tidy]. Views and graphs made from them in
// the body keep what they need alive as usual; to keep the tensors
// themselves past the body, call [Batch.Keep].
type Batch struct {
	Tensors []*vram.Tensor
	Indices []int
	kept    bool
}

// Keep hands the batch's tensors to the caller, who then releases them;
// the loader no longer does. It returns them, and exempts them from every
// enclosing [vram.Tidy] as [vram.Keep] does.
func (b *Batch) Keep() []*vram.Tensor {
	b.kept = true
	vram.Keep(b.Tensors...)
	return b.Tensors
}

// Release releases the batch's tensors (even kept ones). It is idempotent.
func (b *Batch) Release() {
	for _, t := range b.Tensors {
		t.Release()
	}
}

// done releases b after the loop body, unless it was kept.
func (b *Batch) done() {
	if b != nil && !b.kept {
		b.Release()
	}
}

// PanicError is the error of a panic in a dataset's Get or Len, a stream,
// a collate function or a sampler, recovered on the goroutine that called
// it and returned by the loop (or by the constructor that read a Len). It
// unwraps to the panic value when that is an error (a [*vram.Error], say).
type PanicError struct {
	Value any    // what the code panicked with
	Stack []byte // the stack of the panicking goroutine
}

// Error returns "panic: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// wrapped is an error of the package that says where err happened; its
// message is "data: ", the place, and err's message without a "data: " of
// its own.
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// wrap returns err with the place given by format and args before its
// message, as fmt.Errorf("data: "+format+": %w") does, saying "data:" once
// when err is the package's own ("data: worker 1: batch 0: collate: ...",
// not "data: worker 1: data: batch 0: data: collate: ...").
func wrap(err error, format string, args ...any) error {
	return &wrapped{msg: "data: " + fmt.Sprintf(format, args...) + ": " + strings.TrimPrefix(err.Error(), "data: "), err: err}
}

// Unwrap returns the panic value when it is an error, else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// All returns an iterator over one epoch of batches, for
//
//	for batch, err := range loader.All() {
//		if err != nil {
//			return err
//		}
//		x, y := batch.Tensors[0], batch.Tensors[1]
//		...
//	}
//
// Each call starts a new epoch: with Shuffle, a new order. An error (a
// failing or panicking Get, collate function or sampler, an index out of
// range) comes at the position of its batch, with a nil batch, and ends the
// epoch; with workers, that of Get or the collate function names the
// worker that prepared the batch ("data: worker 1: batch 4: ..."), as
// PyTorch's names the worker process. Leaving the loop early, with break
// or return or a panic, stops the workers before the loop's statement
// completes; batches prepared ahead are released, and no goroutine
// outlives the loop. The iterator may be ranged over more than once, each
// time a new epoch.
//
// Each batch is prepared inside [vram.NoGrad] and [vram.Tidy] on a worker's
// goroutine (or the loop's, without workers), so that tensors the dataset
// makes for a sample are released once the batch is assembled, and no
// graph is recorded. Settings scoped to the loop's goroutine, such as
// [vram.WithStream] or autocast, do not reach workers.
func (l *Loader) All() iter.Seq2[*Batch, error] { return l.AllFrom(0) }

// AllFrom returns an iterator over one epoch of batches, as [Loader.All]
// does, that starts at batch start of the epoch: the batches before it are
// skipped, so that a run stopped within an epoch resumes where it stopped
// (PyTorch's StatefulDataLoader). The epoch's order is drawn as All draws
// it, so the skipped batches are those the stopped run read only when
// the sampler's generator is in the state it had when that epoch began:
// give the loader a generator of its own (Options.Generator), keep its
// [vram.Generator.State] from before each epoch, and restore it with
// [vram.Generator.SetState] before resuming. The indices of skipped
// batches are drawn but their samples are not read; of a stream, the
// samples of skipped batches are read and released, and of a
// [ShardedDataset], whose order of batches depends on its workers, the
// skipped batches are also made. A start past the end yields nothing; a
// negative one yields an error matching [vram.ErrArgument].
func (l *Loader) AllFrom(start int) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		if start < 0 {
			yield(nil, fmt.Errorf("data: Loader.AllFrom: start batch %d; it must be 0 or more: %w", start, vram.ErrArgument))
			return
		}
		switch sd, ok := l.stream.(ShardedDataset); {
		case l.opts.NumWorkers == 0:
			l.serial(start, yield)
		case ok:
			k := 0
			l.sharded(sd, func(b *Batch, err error) bool {
				if err == nil && k < start {
					k++
					return true // released by sharded when this returns
				}
				return yield(b, err)
			})
		default:
			l.parallel(start, yield)
		}
	}
}

// job is the k-th batch of an epoch: its indices, or for a stream its
// samples, or the error that the sampler or the stream gave in its place.
type job struct {
	k       int
	idx     []int
	samples []Sample // read from a stream, owned by the job
	err     error
}

// drop releases the samples of a job that is never fetched.
func (j job) drop() { releaseSamples(j.samples) }

// jobs yields the batches of one epoch's indices from batch skip on, in
// order, and a final job with an error if the sampler panics or yields an
// index out of range. An error among the skipped batches comes as job
// skip, the first the loop would have seen, since the consumers number
// their places from there. The sampler runs as a pulled iterator, so that
// only its own panics are recovered here, never those of the code that
// consumes the jobs.
func (l *Loader) jobs(skip int) iter.Seq[job] {
	if l.stream != nil {
		return l.streamJobs("All", l.stream.All, skip)
	}
	return func(yield func(job) bool) {
		seq, err := open("All", l.sampler.All)
		if err != nil {
			yield(job{k: skip, err: fmt.Errorf("data: sampler: %w", err)})
			return
		}
		next, stop := iter.Pull(seq)
		defer stop()
		k := 0
		// Room for a batch, but no more than the dataset nor than
		// indexReserve: a batch size or a dataset length may be far
		// larger than any memory, and a batch that has more indices
		// grows as they come.
		room := min(l.batchSize, l.n, indexReserve)
		idx := make([]int, 0, room)
		for {
			i, ok, err := l.pull(next)
			if err != nil {
				yield(job{k: max(k, skip), err: err})
				return
			}
			if !ok {
				break
			}
			idx = append(idx, i)
			if len(idx) == l.batchSize {
				if k < skip {
					k++
					idx = idx[:0]
					continue
				}
				if !yield(job{k: k, idx: idx}) {
					return
				}
				k++
				idx = make([]int, 0, room)
			}
		}
		if len(idx) > 0 && !l.opts.DropLast && k >= skip {
			yield(job{k: k, idx: idx})
		}
	}
}

// open returns what all returns (an epoch's sequence, of a sampler or a
// stream), or its panic as a [*PanicError]: it runs on the goroutine that
// hands out batches, where a panic would end the process. A nil sequence,
// which would panic when pulled, is an error that matches
// [vram.ErrArgument]; name is the method that returned it, for the error.
func open[T iter.Seq[int] | iter.Seq2[Sample, error]](name string, all func() T) (seq T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	if seq = all(); seq == nil {
		return nil, fmt.Errorf("%s returned a nil sequence; an epoch of nothing is an empty one: %w", name, vram.ErrArgument)
	}
	return seq, nil
}

// pull returns the sampler's next index, or an error for an index out of
// range or a panic of the sampler.
func (l *Loader) pull(next func() (int, bool)) (i int, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			i, ok, err = 0, false, fmt.Errorf("data: sampler: %w", &PanicError{Value: r, Stack: debug.Stack()})
		}
	}()
	i, ok = next()
	if ok && (i < 0 || i >= l.n) {
		return 0, false, fmt.Errorf("data: the sampler yielded index %d for a dataset of %d: %w", i, l.n, vram.ErrIndex)
	}
	return i, ok, nil
}

// fetch prepares the batch of j, turning panics into errors.
func (l *Loader) fetch(j job) (b *Batch, err error) {
	if j.err != nil {
		return nil, j.err
	}
	where := "collate"
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("data: batch %d: %s: %w", j.k, where, &PanicError{Value: r, Stack: debug.Stack()})
		}
	}()
	var ts []*vram.Tensor
	// A stream's samples are the job's: release their tensors once the
	// batch is made (or failed); the batch has handles of its own
	// (ownHandles).
	defer j.drop()
	vram.NoGrad(func() {
		vram.Tidy(func() {
			samples := j.samples
			if samples == nil {
				samples = make([]Sample, len(j.idx))
			}
			for n, i := range j.idx {
				where = fmt.Sprintf("sample %d", i)
				s, gerr := l.ds.Get(i)
				if gerr != nil {
					err = wrap(gerr, "batch %d: sample %d", j.k, i)
					return
				}
				if s == nil {
					err = fmt.Errorf("data: batch %d: sample %d: Get returned a nil sample and no error: %w", j.k, i, vram.ErrArgument)
					return
				}
				samples[n] = s
			}
			where = "collate"
			out, cerr := l.collate(samples, l.collateDevice())
			if cerr != nil {
				for _, t := range out {
					t.Release()
				}
				if j.idx != nil {
					err = wrap(cerr, "batch %d (dataset indices %v)", j.k, j.idx)
				} else {
					err = wrap(cerr, "batch %d", j.k)
				}
				return
			}
			for f, t := range out {
				if t == nil || t.Released() {
					for _, t := range out {
						if t != nil {
							t.Release()
						}
					}
					err = fmt.Errorf("data: batch %d: the collate function returned a nil or released tensor for field %d: %w", j.k, f, vram.ErrArgument)
					return
				}
			}
			ownHandles(out, samples)
			if l.opts.PinMemory {
				where = "pin memory"
				out = l.pin(out)
			}
			vram.Keep(out...)
			ts = out
		})
	})
	if err != nil {
		return nil, err
	}
	return &Batch{Tensors: ts, Indices: j.idx}, nil
}

// ownHandles replaces each tensor of out that is a field of one of the
// samples, which a collate function may return as it is, by a new handle
// of it (a detached view), so that the batch owns its tensors: releasing
// the batch then leaves the dataset's tensor alone, and releasing the
// samples (a stream's, or those Get made) leaves the batch's alone.
func ownHandles(out []*vram.Tensor, samples []Sample) {
	var fields map[*vram.Tensor]bool
	for f, t := range out {
		if fields == nil {
			fields = map[*vram.Tensor]bool{}
			for _, s := range samples {
				for _, v := range s {
					if x, ok := v.(*vram.Tensor); ok && x != nil {
						fields[x] = true
					}
				}
			}
		}
		if fields[t] {
			out[f] = t.Detach()
		}
	}
}

// collateDevice is where the collate function puts batches: the CPU when
// they are pinned next, else Options.Device.
func (l *Loader) collateDevice() vram.Device {
	if l.opts.PinMemory {
		return vram.CPU
	}
	return l.opts.Device
}

// pin returns ts in pinned host memory, moved to Options.Device without
// blocking when that is not the CPU; it releases ts.
func (l *Loader) pin(ts []*vram.Tensor) []*vram.Tensor {
	out := make([]*vram.Tensor, len(ts))
	for i, t := range ts {
		p := t.CPU().PinMemory(l.pinFor)
		if d := l.opts.Device; d != (vram.Device{}) && d != vram.CPU {
			q := p.To(d, vram.NonBlocking)
			p.Release()
			p = q
		}
		out[i] = p
		t.Release()
	}
	return out
}

// serial runs an epoch on the calling goroutine.
func (l *Loader) serial(skip int, yield func(*Batch, error) bool) {
	for j := range l.jobs(skip) {
		b, err := l.fetch(j)
		if err != nil {
			yield(nil, err)
			return
		}
		ok := func() bool {
			defer b.done()
			return yield(b, nil)
		}()
		if !ok {
			return
		}
	}
}

// latePanic keeps the first panic that a loader's goroutine recovers
// outside the code that returns panics as errors: that of a sampler or a
// stream told to stop (a pulled sequence whose yield returned false and
// that panicked then, closing a file, say), which comes once the loop has
// stopped taking batches or has its error. The loop's goroutine raises it
// again when the goroutines have returned, as the sequence's panic does
// there without workers, rather than letting it end the process from a
// goroutine of the loader's. Its zero value keeps nothing.
type latePanic struct {
	mu  sync.Mutex
	set bool
	v   any
}

// catch recovers a panic into p; it must be deferred directly.
func (p *latePanic) catch() {
	if r := recover(); r != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.set {
			p.set, p.v = true, r
		}
	}
}

// raise panics with the panic p keeps, if any.
func (p *latePanic) raise() {
	p.mu.Lock()
	set, v := p.set, p.v
	p.mu.Unlock()
	if set {
		panic(v)
	}
}

// goexitError is the error in place of batch k of an epoch whose
// goroutine (a worker's, or the one that reads the sampler or the stream)
// ended with runtime.Goexit in code of the caller's, what: without it, the
// epoch would seem to end there, short.
func goexitError(k int, what string) error {
	return fmt.Errorf("data: batch %d: %s ended the loader's goroutine with runtime.Goexit "+
		"(which testing's FailNow and SkipNow call), so the epoch cannot go on; return an error or panic instead: %w", k, what, vram.ErrArgument)
}

// result is a prepared batch, or the error in its place.
type result struct {
	b   *Batch
	err error
}

// parallel runs an epoch with NumWorkers goroutines, or one for each
// batch when an epoch has fewer. Batch k goes to worker k mod their
// number, whose results come out in order through a
// channel of Prefetch-1 places (plus the one the worker holds while it
// waits to send), so the loop reads batch k from that worker's channel and
// the order is the serial one.
func (l *Loader) parallel(skip int, yield func(*Batch, error) bool) {
	n, err := length(l)
	if err != nil {
		yield(nil, wrap(err, "sampler: Len"))
		return
	}
	w := l.opts.NumWorkers
	if n >= 0 {
		w = max(min(w, n-min(skip, n)), 1) // no worker without a batch to prepare
	}
	done := make(chan struct{})
	ins := make([]chan job, w)
	outs := make([]chan result, w)
	// A worker never has more batches ahead than it has in an epoch.
	room := l.opts.Prefetch - 1
	if n >= 0 {
		room = min(room, n/w+1)
	}
	for i := range w {
		ins[i] = make(chan job)
		outs[i] = make(chan result, room)
	}
	var wg sync.WaitGroup
	wg.Add(1 + w)
	var late latePanic
	go func() { // the producer: reads the sampler, hands out jobs
		defer wg.Done()
		defer func() {
			for _, in := range ins {
				close(in)
			}
		}()
		next, finished := skip, false // the batch to hand out next
		defer func() {
			if !finished { // the sampler or stream ended the goroutine
				select {
				case ins[(next-skip)%w] <- job{k: next, err: goexitError(next, "the sampler or the stream")}:
				case <-done:
				}
			}
		}()
		defer late.catch()
		for j := range l.jobs(skip) {
			select {
			case ins[(j.k-skip)%w] <- j:
			case <-done:
				j.drop()
				finished = true
				return
			}
			next = j.k + 1
		}
		finished = true
	}()
	for i := range w {
		go func() {
			defer wg.Done()
			defer close(outs[i])
			k, finished := -1, false // the batch being prepared
			defer func() {
				if !finished { // Get or the collate function ended the goroutine
					select {
					case outs[i] <- result{err: wrap(goexitError(k, "the dataset's Get or the collate function"), "worker %d", i)}:
					case <-done:
					}
				}
			}()
			for j := range ins[i] {
				k = j.k
				b, err := l.fetch(j)
				if err != nil && j.err == nil {
					// This worker's Get or collate function failed (a
					// job's own error is the sampler's or the stream's).
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
			}
			finished = true
		}()
	}
	defer func() {
		// Stop the producer and the workers, wait for them, and release
		// what they prepared that the loop did not take.
		close(done)
		wg.Wait()
		for _, out := range outs {
			for r := range out {
				r.b.done()
			}
		}
		late.raise()
	}()
	for k := 0; ; k++ {
		r, ok := <-outs[k%w]
		if !ok {
			return
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
	}
}
