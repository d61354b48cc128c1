package parallel

// DistributedDataParallel keeps one replica of a model per rank in step,
// as torch.nn.parallel.DistributedDataParallel does:
//
//   - At construction every rank checks that the others built the same
//     parameters and buffers (names, shapes, dtypes) and takes rank 0's
//     values. Each forward with gradients on, outside NoSync, takes rank
//     0's buffers again (PyTorch's broadcast_buffers).
//   - The gradients live in flat buckets of about BucketCapBytes each,
//     filled in reverse parameter order (the order backward produces
//     them), and each parameter's gradient is a view of its bucket: there
//     is no second copy, and a bucket's all-reduce covers all of its
//     gradients at once.
//   - A post-accumulate-grad hook on every parameter counts the gradients
//     of each bucket; once a bucket is complete it is queued for an
//     all-reduce (Avg) on a communication stream, which waits for an
//     event of the compute stream, while backward goes on with the
//     earlier layers. Buckets are reduced in index order on every rank, so
//     that all ranks run the same collectives in the same order.
//   - When the last bucket has been queued the compute stream waits for
//     the communication stream, so the optimizer that runs next sees
//     averaged gradients.
//
// The all-reduces run on a goroutine of the DDP (a Communicator is used
// by one goroutine at a time), so that with the TCP collectives, which
// block, reduction overlaps backward too.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// DefaultBucketCapBytes is the size of a gradient bucket when
// DDPOptions.BucketCapBytes is zero: 25 MiB, PyTorch's bucket_cap_mb.
const DefaultBucketCapBytes = 25 << 20

// DDPOptions configures [NewDistributedDataParallel]. The zero value is
// PyTorch's default. Every rank gives the same options (a BucketCapBytes
// that lays out the same buckets will do): the constructor compares
// them.
type DDPOptions struct {
	// BucketCapBytes is the most bytes of gradients in one bucket (a
	// parameter larger than that gets a bucket of its own). 0 means
	// DefaultBucketCapBytes.
	BucketCapBytes int64
	// FindUnusedParameters makes [DistributedDataParallel.Backward]
	// reduce, as zeros, the gradients of parameters that took no part in
	// the loss, instead of failing (PyTorch's find_unused_parameters).
	// As in PyTorch, a parameter that no rank used since the last
	// reduction keeps the gradient it had (none stays none, so that the
	// optimizer skips it); finding those costs one small all-reduce per
	// step. It needs Backward to be called through the DDP.
	FindUnusedParameters bool
	// KeepLocalBuffers makes every rank keep its own buffers (BatchNorm's
	// running statistics) from one forward to the next (PyTorch's
	// broadcast_buffers=False). By default each Forward with gradients
	// on, outside NoSync, first gives every rank rank 0's buffers, as
	// PyTorch's DDP does. Either way the buffers are taken from rank 0
	// once, at construction.
	KeepLocalBuffers bool
}

// BucketInfo describes one gradient bucket, for logs and tests.
type BucketInfo struct {
	Params []string   // the parameters' names, in bucket order
	Bytes  int64      // the bucket's size
	DType  vram.DType // the dtype of its gradients
}

// DistributedDataParallel wraps a module so that training it on every
// rank of a communicator keeps the replicas equal: each rank runs forward
// and backward on its own part of the batch, and the gradients are
// averaged over the ranks during backward (see the notes at the top of
// this file, and PyTorch's DistributedDataParallel). It implements
// [nn.Module]; NamedParameters are the module's own, without a "module."
// prefix.
//
// A training step, inside [vram.Tidy] so that its tensors are released:
//
//	vram.Tidy(func() {
//		out := ddp.Forward(x)
//		loss := nn.MSELoss(out, y)
//		if err = ddp.Backward(loss); err != nil { // a rank failed, or parameters had no gradient
//			return
//		}
//		opt.Step()
//		ddp.ZeroGrad() // zero the buckets in place (opt.ZeroGrad works too, but costs a copy next step)
//	})
//
// Use it from one goroutine. Close it when done.
type DistributedDataParallel struct {
	module  nn.Module
	comm    Communicator
	dev     vram.Device
	opts    DDPOptions
	all     []nn.NamedParameter // every parameter, frozen ones too
	frozen  []nn.NamedParameter // the parameters that did not require grad when the DDP was made
	bufs    []nn.NamedParameter // the module's buffers
	slots   []*slot             // the parameters that require grad, in order
	buckets []*bucket
	stream  *vram.Stream // the communication stream
	unhook  []func()
	jobs    chan *bucket
	results chan reduced
	done    chan struct{} // closed when the worker ends

	// Guarded by mu (hooks may run on another goroutine's Backward).
	mu       sync.Mutex
	noSync   int   // depth of NoSync calls
	active   bool  // a round of reductions has begun and not finished
	next     int   // the next bucket to launch in this round
	inflight int   // buckets launched and not yet collected
	rounds   int   // rounds finished
	err      error // the first error of this round, not yet reported
	closed   bool
}

var _ nn.Module = (*DistributedDataParallel)(nil)

// slot is one parameter's place in its bucket.
type slot struct {
	name   string
	param  *vram.Tensor
	b      *bucket
	offset int          // in elements
	view   *vram.Tensor // the gradient view set as the parameter's grad; nil until first attached
	ready  bool         // the gradient is complete in this round
	used   bool         // a backward since the last reduction reached the parameter
	had    bool         // unused in this round, it had a gradient before
}

// bucket is a flat tensor holding the gradients of some parameters.
type bucket struct {
	index   int
	flat    *vram.Tensor
	slots   []*slot
	pending int // gradients not yet complete in this round
	event   *vram.Event
}

// reduced is what the worker reports for one bucket.
type reduced struct {
	err   error
	panic any
}

// NewDistributedDataParallel wraps m, whose parameters must all be on
// comm's device, for training on every rank of comm. It runs collectives,
// so every rank calls it: they check that their models agree and take
// rank 0's parameter values (frozen parameters too; only those that
// require grad are reduced) and buffers. It returns an error for a nil
// module or communicator, a model without trainable parameters, a
// parameter or buffer on another device, models or options that differ
// between ranks ([ErrMismatch]), or a failed collective; since the other ranks wait for this one
// in the collectives of construction, any such error aborts comm (when
// it is not nil), so that theirs fails at once, naming this rank.
func NewDistributedDataParallel(m nn.Module, comm Communicator, opts DDPOptions) (*DistributedDataParallel, error) {
	d, err := newDDP(m, comm, opts)
	if err != nil && comm != nil {
		comm.Abort(err)
	}
	return d, err
}

// newDDP is NewDistributedDataParallel but for the abort on error.
func newDDP(m nn.Module, comm Communicator, opts DDPOptions) (*DistributedDataParallel, error) {
	const op = "parallel: DDP"
	switch {
	case isNilModule(m):
		return nil, errorf("%s: nil module: %w", op, vram.ErrArgument)
	case comm == nil:
		return nil, errorf("%s: nil communicator: %w", op, vram.ErrArgument)
	case opts.BucketCapBytes < 0:
		return nil, errorf("%s: negative bucket size %d: %w", op, opts.BucketCapBytes, vram.ErrArgument)
	}
	if opts.BucketCapBytes == 0 {
		opts.BucketCapBytes = DefaultBucketCapBytes
	}
	d := &DistributedDataParallel{module: m, comm: comm, dev: comm.Device(), opts: opts}
	for _, p := range m.NamedParameters() {
		t := p.Tensor
		switch {
		case t == nil || t.Released():
			return nil, errorf("%s: parameter %s is nil or released: %w", op, p.Name, vram.ErrArgument)
		case t.Device() != d.dev:
			return nil, errorf("%s: parameter %s is on %s, rank %d's device is %s; move the model with m.To(%s) first: %w",
				op, p.Name, t.Device(), comm.Rank(), d.dev, d.dev, vram.ErrDevice)
		case !t.IsContiguous():
			return nil, errorf("%s: parameter %s is not contiguous: %w", op, p.Name, vram.ErrArgument)
		}
		d.all = append(d.all, p)
		if t.RequiresGrad() {
			d.slots = append(d.slots, &slot{name: p.Name, param: t})
		} else {
			d.frozen = append(d.frozen, p)
		}
	}
	if len(d.slots) == 0 {
		return nil, errorf("%s: the module has no parameters that require grad: %w", op, vram.ErrArgument)
	}
	for _, b := range nn.NamedBuffers(m) {
		switch t := b.Tensor; {
		case t == nil || t.Released():
			return nil, errorf("%s: buffer %s is nil or released: %w", op, b.Name, vram.ErrArgument)
		case t.Device() != d.dev:
			return nil, errorf("%s: buffer %s is on %s, rank %d's device is %s; move the model with m.To(%s) first: %w",
				op, b.Name, t.Device(), comm.Rank(), d.dev, d.dev, vram.ErrDevice)
		}
		d.bufs = append(d.bufs, b)
	}
	if err := vram.Catch(d.makeBuckets); err != nil {
		d.releaseBuckets()
		return nil, errorf("%s: %w", op, err)
	}
	if err := d.checkSameModel(); err != nil {
		d.releaseBuckets()
		return nil, err
	}
	if err := d.broadcastParams(); err != nil {
		d.releaseBuckets()
		return nil, err
	}
	if err := d.broadcastBuffers(); err != nil {
		d.releaseBuckets()
		return nil, err
	}
	s, err := vram.NewStream(d.dev)
	if err != nil {
		d.releaseBuckets()
		return nil, errorf("%s: communication stream: %w", op, err)
	}
	d.stream = s
	for _, sl := range d.slots {
		d.unhook = append(d.unhook, sl.param.RegisterPostAccumulateGradHook(func(*vram.Tensor) { d.gradReady(sl) }))
	}
	d.jobs = make(chan *bucket, len(d.buckets))
	d.results = make(chan reduced, len(d.buckets))
	d.done = make(chan struct{})
	go d.work()
	return d, nil
}

// checkSameModel compares a digest of the parameters and buffers (names,
// shapes and dtypes) between the ranks, and one of the options that
// decide which collectives a step runs: the buckets' layout, the search
// for unused parameters and the broadcast of buffers. Ranks that differ
// there would pair up the wrong collectives in a later step (and NCCL,
// which compares nothing, would hang or mix the ranks' bytes). The
// buckets are made already.
func (d *DistributedDataParallel) checkSameModel() error {
	const k = 4 // numbers per rank
	h := fnv.New64a()
	var elems int64
	for _, p := range d.all {
		fmt.Fprintf(h, "%s %v %s %v;", p.Name, p.Tensor.Shape(), p.Tensor.DType(), p.Tensor.RequiresGrad())
		elems += int64(p.Tensor.NumElements())
	}
	for _, b := range d.bufs {
		fmt.Fprintf(h, "buffer %s %v %s;", b.Name, b.Tensor.Shape(), b.Tensor.DType())
	}
	oh := fnv.New64a()
	for _, b := range d.buckets {
		fmt.Fprintf(oh, "bucket %d %s;", b.flat.NumElements(), b.flat.DType())
	}
	fmt.Fprintf(oh, "unused %v; local buffers %v;", d.opts.FindUnusedParameters, d.opts.KeepLocalBuffers)
	mine := []int64{int64(len(d.all)), elems, int64(h.Sum64()), int64(oh.Sum64())}
	n := d.comm.Size()
	var all []int64
	var cerr error // the collective's error: returned, not panicked, since vram.Catch passes only vram's on
	err := vram.Catch(func() {
		src := vram.FromSlice(mine, vram.Shape{k}, vram.Int64, d.dev)
		defer src.Release()
		dst := vram.Zeros(vram.Shape{n * k}, vram.Int64, d.dev)
		defer dst.Release()
		if cerr = d.comm.AllGather(dst, src); cerr == nil {
			all = dst.Int64s()
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return errorf("parallel: DDP: comparing the models of the ranks: %w", err)
	}
	for r := range n {
		o := all[k*r : k*r+k]
		if !slices.Equal(o[:3], all[:3]) {
			return errorf("parallel: DDP: rank %d's model differs from rank 0's (%d parameters of %d elements, against %d of %d, or other names, shapes or dtypes of parameters or buffers); every rank must build the same model: %w",
				r, o[0], o[1], all[0], all[1], ErrMismatch)
		}
	}
	for r := range n {
		if all[k*r+3] != all[3] {
			return errorf("parallel: DDP: rank %d's DDPOptions differ from rank 0's (BucketCapBytes, which lays out other buckets, FindUnusedParameters or KeepLocalBuffers); "+
				"the ranks' steps run the same collectives only with the same options: %w", r, ErrMismatch)
		}
	}
	return nil
}

// makeBuckets lays the parameters out in buckets, in reverse order.
func (d *DistributedDataParallel) makeBuckets() {
	var cur *bucket
	var bytes int64
	var dt vram.DType
	flush := func() {
		if cur == nil {
			return
		}
		n := 0
		for _, s := range cur.slots {
			s.offset = n
			n += s.param.NumElements()
		}
		cur.flat = vram.Keep(vram.Zeros(vram.Shape{n}, dt, d.dev))
		d.buckets = append(d.buckets, cur)
		cur = nil
	}
	for i := len(d.slots) - 1; i >= 0; i-- {
		s := d.slots[i]
		b := s.param.Bytes()
		if cur != nil && (s.param.DType() != dt || bytes+b > d.opts.BucketCapBytes) {
			flush()
		}
		if cur == nil {
			cur = &bucket{index: len(d.buckets)}
			bytes, dt = 0, s.param.DType()
		}
		cur.slots = append(cur.slots, s)
		s.b = cur
		bytes += b
	}
	flush()
}

func (d *DistributedDataParallel) releaseBuckets() {
	for _, b := range d.buckets {
		b.flat.Release()
	}
}

// slotView returns a new view of s's place in its bucket, shaped like the
// parameter.
func slotView(s *slot) *vram.Tensor {
	n := s.param.NumElements()
	part := s.b.flat.Narrow(0, s.offset, n)
	defer part.Release()
	return vram.Keep(part.View(s.param.Shape()...))
}

// broadcastParams gives every rank rank 0's parameter values, one
// broadcast per bucket, and one per frozen parameter.
func (d *DistributedDataParallel) broadcastParams() error {
	if d.comm.Size() == 1 {
		return nil
	}
	var cerr error
	err := vram.Catch(func() {
		vram.NoGrad(func() {
			for _, p := range d.all {
				if !p.Tensor.RequiresGrad() {
					if cerr = d.comm.Broadcast(p.Tensor, 0); cerr != nil {
						return
					}
				}
			}
			for _, b := range d.buckets {
				for _, s := range b.slots {
					v := slotView(s)
					v.CopyFrom(s.param)
					v.Release()
				}
				if cerr = d.comm.Broadcast(b.flat, 0); cerr != nil {
					return
				}
				for _, s := range b.slots {
					v := slotView(s)
					s.param.CopyFrom(v)
					v.Release()
				}
				b.flat.FillInPlace(0)
			}
		})
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return errorf("parallel: DDP: broadcasting rank 0's parameters: %w", err)
	}
	return nil
}

// broadcastBuffers gives every rank rank 0's buffers: one broadcast per
// dtype, of the buffers of that dtype concatenated, as PyTorch coalesces
// them.
func (d *DistributedDataParallel) broadcastBuffers() error {
	if d.comm.Size() == 1 || len(d.bufs) == 0 {
		return nil
	}
	var groups [][]*vram.Tensor // the buffers of each dtype, in order
	for _, b := range d.bufs {
		k := slices.IndexFunc(groups, func(g []*vram.Tensor) bool { return g[0].DType() == b.Tensor.DType() })
		if k < 0 {
			groups = append(groups, nil)
			k = len(groups) - 1
		}
		groups[k] = append(groups[k], b.Tensor)
	}
	var cerr error
	err := vram.Catch(func() {
		vram.NoGrad(func() {
			for _, g := range groups {
				vram.Tidy(func() {
					flats := make([]*vram.Tensor, len(g))
					for i, t := range g {
						flats[i] = t.Reshape(-1)
					}
					all := vram.Cat(flats, 0)
					if cerr = d.comm.Broadcast(all, 0); cerr != nil || d.comm.Rank() == 0 {
						return
					}
					off := 0
					for _, t := range g {
						n := t.NumElements()
						t.CopyFrom(all.Narrow(0, off, n).Reshape(t.Shape()...))
						off += n
					}
				})
				if cerr != nil {
					return
				}
			}
		})
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return errorf("parallel: DDP: broadcasting rank 0's buffers: %w", err)
	}
	return nil
}

// attach makes s's parameter's gradient the view of its bucket: a
// gradient made elsewhere (the first backward, or after opt.ZeroGrad
// released the view) is copied in; none is written as zeros. The caller
// runs inside NoGrad.
func attach(s *slot) {
	g := s.param.Grad()
	if g != nil && g == s.view && !g.Released() {
		return // accumulated in place
	}
	if s.view == nil || s.view.Released() {
		s.view = slotView(s)
	}
	if g != nil {
		s.view.CopyFrom(g)
	} else {
		s.view.FillInPlace(0)
	}
	s.param.SetGrad(s.view) // releases g
}

// gradReady is the hook of s's parameter: its gradient is complete.
func (d *DistributedDataParallel) gradReady(s *slot) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	vram.NoGrad(func() { attach(s) })
	s.used = true
	if d.noSync > 0 {
		return
	}
	if !d.active {
		d.beginLocked()
	}
	if s.ready {
		d.setErrLocked(errorf("parallel: DDP: parameter %s got a second gradient before the gradients of the last backward were reduced "+
			"(a parameter used in two backward passes of one step; use NoSync for all but the last): %w", s.name, vram.ErrAutograd))
		return
	}
	s.ready = true
	s.b.pending--
	d.launchLocked()
}

// beginLocked starts a round of reductions. d.mu is held.
func (d *DistributedDataParallel) beginLocked() {
	d.active, d.next = true, 0
	for _, b := range d.buckets {
		b.pending = len(b.slots)
		for _, s := range b.slots {
			s.ready = false
		}
	}
}

func (d *DistributedDataParallel) setErrLocked(err error) {
	if d.err == nil {
		d.err = err
	}
}

// launchLocked queues the complete buckets, in index order, and finishes
// the round once all are queued. d.mu is held.
func (d *DistributedDataParallel) launchLocked() {
	for d.next < len(d.buckets) && d.buckets[d.next].pending == 0 {
		b := d.buckets[d.next]
		// The communication stream starts on the bucket once the compute
		// stream has written its gradients.
		b.event = vram.CurrentStream(d.dev).RecordEvent()
		d.inflight++
		d.jobs <- b
		d.next++
	}
	if d.next == len(d.buckets) {
		d.finishLocked()
	}
}

// finishLocked waits for the round's reductions and makes the compute
// stream wait for the communication stream. A panic of the worker is
// raised again here. d.mu is held.
func (d *DistributedDataParallel) finishLocked() {
	var panicked any
	for ; d.inflight > 0; d.inflight-- {
		r := <-d.results
		if r.panic != nil && panicked == nil {
			panicked = r.panic
		}
		if r.err != nil {
			d.setErrLocked(r.err)
		}
	}
	d.active = false
	d.rounds++
	if panicked != nil {
		panic(panicked)
	}
	vram.CurrentStream(d.dev).WaitStream(d.stream)
}

// work is the worker goroutine: it all-reduces the buckets it is given,
// on the communication stream, and reports each.
func (d *DistributedDataParallel) work() {
	defer close(d.done)
	failed := false
	for b := range d.jobs {
		var r reduced
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.panic = p
				}
			}()
			defer b.event.Release()
			if failed {
				return // a failed collective leaves the communicator aborted
			}
			d.stream.WaitEvent(b.event)
			var err error
			if perr := vram.Catch(func() {
				vram.WithStream(d.stream, func() { err = d.comm.AllReduce(b.flat, Avg) })
			}); perr != nil {
				err = perr
			}
			if err != nil {
				failed = true
				r.err = errorf("parallel: DDP: reducing the gradients of %s: %w", describeBucket(b), err)
			}
		}()
		d.results <- r
	}
}

func describeBucket(b *bucket) string {
	names := make([]string, len(b.slots))
	for i, s := range b.slots {
		names[i] = s.name
	}
	if len(names) > 4 {
		names = append(names[:3], fmt.Sprintf("and %d more", len(names)-3))
	}
	return fmt.Sprintf("bucket %d (%s)", b.index, strings.Join(names, ", "))
}

// Backward runs loss.Backward(opts...) and waits for the gradients to be
// averaged over the ranks, on the compute stream: once it returns, the
// optimizer can step. It returns the error of a failed collective (a
// [*RankError] naming a rank that died, did not arrive or aborted), an
// error of kind vram.ErrArgument naming parameters that were frozen when
// the DDP was made and require grad now (they have no bucket), or an
// error naming the parameters that received no gradient (unless
// FindUnusedParameters is set, when their gradients are reduced as zeros);
// after such an error the communicator is aborted, since the other ranks
// wait in a reduction this rank cannot join. A panic of loss.Backward is
// returned as its error (wrapped, and, outside NoSync, it aborts the
// communicator too, so that the other ranks' Backward fails at once with
// a [*RankError] naming this rank rather than at the timeout); a panic
// with a value that is not one of vram's errors aborts the same way and
// then goes on. Inside [DistributedDataParallel.NoSync] it only
// accumulates the gradients.
func (d *DistributedDataParallel) Backward(loss *vram.Tensor, opts ...vram.BackwardOption) error {
	d.mu.Lock()
	if err := d.pendingLocked(); err != nil {
		d.mu.Unlock()
		return err
	}
	if err := d.unfrozen(); err != nil {
		d.mu.Unlock()
		d.comm.Abort(err)
		return err
	}
	rounds := d.rounds
	d.mu.Unlock()
	var berr error
	var panicked any // a panic that is not vram's, raised again below
	func() {
		defer func() {
			if p := recover(); p != nil {
				panicked = p
				berr = errorf("backward panicked: %v", p)
			}
		}()
		berr = vram.Catch(func() { loss.Backward(opts...) })
	}()
	d.mu.Lock()
	defer d.mu.Unlock()
	if berr != nil {
		if d.active {
			d.abandonLocked()
		}
		if d.noSync == 0 {
			// The other ranks reduce this step's gradients and would
			// wait for this rank's until the timeout: end it for them now.
			err := errorf("parallel: DDP: rank %d: backward failed: %w", d.comm.Rank(), berr)
			d.comm.Abort(err)
			d.err = nil
			berr = err
		}
		if panicked != nil {
			panic(panicked)
		}
		return berr
	}
	if d.noSync > 0 {
		return d.takeErrLocked() // accumulated only
	}
	if d.rounds > rounds {
		// Every bucket was reduced during backward.
		return d.endRoundLocked()
	}
	// Some parameters, or all, received no gradient.
	if !d.active {
		d.beginLocked()
	}
	var unused []string
	for _, s := range d.slots {
		if !s.ready {
			unused = append(unused, s.name)
		}
	}
	if !d.opts.FindUnusedParameters {
		d.abandonLocked()
		var err error
		if len(unused) == len(d.slots) {
			err = errorf("parallel: DDP: rank %d: no parameter received a gradient in this backward; "+
				"is the loss computed from the DDP's output? %w", d.comm.Rank(), vram.ErrAutograd)
		} else {
			err = errorf("parallel: DDP: rank %d: %s received no gradient in this backward: %s; "+
				"every parameter must take part in the loss on every rank, or set DDPOptions.FindUnusedParameters: %w",
				d.comm.Rank(), plural(len(unused), "parameter"), strings.Join(unused, ", "), vram.ErrAutograd)
		}
		d.comm.Abort(err)
		d.err = nil
		return err
	}
	vram.NoGrad(func() {
		for _, s := range d.slots {
			if !s.ready {
				s.had = s.param.Grad() != nil
				attach(s)
				s.ready = true
				s.b.pending--
			}
		}
	})
	d.launchLocked()
	return d.endRoundLocked()
}

// unfrozen returns an error of kind vram.ErrArgument naming the
// parameters that were frozen when the DDP was made and require grad now:
// their gradients have no bucket and would never be averaged, so the
// ranks' replicas would drift apart without a word (PyTorch's DDP has the
// same limit, silently). Parameters frozen since are caught by Backward
// as parameters without a gradient.
func (d *DistributedDataParallel) unfrozen() error {
	var names []string
	for _, p := range d.frozen {
		if p.Tensor.RequiresGrad() {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return errorf("parallel: DDP: rank %d: parameters frozen when the DDP was made now require grad: %s; "+
		"their gradients would not be averaged over the ranks: unfreeze them before wrapping the module, or wrap it again: %w",
		d.comm.Rank(), strings.Join(names, ", "), vram.ErrArgument)
}

// endRoundLocked returns the error of the round that just finished, after
// the search for unused parameters, which every rank joins even when its
// round went wrong, so that the others do not wait for it. d.mu is held.
func (d *DistributedDataParallel) endRoundLocked() error {
	err := d.takeErrLocked()
	if uerr := d.syncUnusedLocked(); err == nil {
		err = uerr
	}
	return err
}

// syncUnusedLocked ends a round of reductions under FindUnusedParameters
// as PyTorch's does: the ranks all-reduce which parameters a backward
// since the last reduction reached, and a parameter reached on no rank
// keeps the gradient it had before (none stays none, so that the
// optimizer skips it, rather than decaying it or moving it by its
// momentum with a zero gradient). A failed all-reduce aborts the
// communicator. Without FindUnusedParameters it does nothing. d.mu is
// held; the round is finished.
func (d *DistributedDataParallel) syncUnusedLocked() error {
	if !d.opts.FindUnusedParameters {
		return nil
	}
	used := make([]int32, len(d.slots))
	for i, s := range d.slots {
		if s.used {
			used[i] = 1
		}
		s.used = false
	}
	var cerr error
	err := vram.Catch(func() {
		t := vram.FromSlice(used, vram.Shape{len(used)}, vram.Int32, d.dev)
		defer t.Release()
		if cerr = d.comm.AllReduce(t, Max); cerr == nil {
			used = t.Int32s()
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		err = errorf("parallel: DDP: rank %d: finding the parameters no rank used: %w", d.comm.Rank(), err)
		d.comm.Abort(err)
		return err
	}
	for i, s := range d.slots {
		if used[i] == 0 && !s.had {
			s.param.SetGrad(nil) // releases the bucket view; attach makes a new one
		}
		s.had = false
	}
	return nil
}

// takeErrLocked returns and clears the error of the last round. d.mu is
// held.
func (d *DistributedDataParallel) takeErrLocked() error {
	err := d.err
	d.err = nil
	return err
}

// pendingLocked returns the error a new step must not start with: an
// error of the last round not yet reported, or a round not finished (a
// backward called outside Backward that left parameters without a
// gradient). d.mu is held.
func (d *DistributedDataParallel) pendingLocked() error {
	if d.closed {
		return errorf("parallel: DDP: used after Close: %w", vram.ErrReleased)
	}
	if d.active {
		var unused []string
		for _, s := range d.slots {
			if !s.ready {
				unused = append(unused, s.name)
			}
		}
		d.abandonLocked()
		err := errorf("parallel: DDP: rank %d: the gradients of the last backward were not all reduced: %s received no gradient: %s; "+
			"every parameter must take part in the loss, or set DDPOptions.FindUnusedParameters and call ddp.Backward: %w",
			d.comm.Rank(), plural(len(unused), "parameter"), strings.Join(unused, ", "), vram.ErrAutograd)
		d.comm.Abort(err)
		return err
	}
	if err := d.err; err != nil {
		d.err = nil
		return err
	}
	return nil
}

// abandonLocked ends a round that cannot finish: it collects the buckets
// in flight. d.mu is held.
func (d *DistributedDataParallel) abandonLocked() {
	for ; d.inflight > 0; d.inflight-- {
		if r := <-d.results; r.err != nil {
			d.setErrLocked(r.err)
		}
	}
	d.active, d.next = false, 0
}

// Forward runs the wrapped module's Forward. With gradients on, outside
// NoSync, it first gives every rank rank 0's buffers (unless
// DDPOptions.KeepLocalBuffers is set): a collective, so every rank calls
// Forward as often. It panics with an [*vram.Error] when the last step
// went wrong and no Backward reported it: its reduction failed (kind
// ErrBackend, wrapping the [*RankError]), or parameters received no
// gradient (kind ErrAutograd); after Close (kind ErrReleased); or when
// the broadcast of the buffers
// failed (kind ErrBackend; the communicator is aborted). A panic of the
// module's Forward with gradients on, outside NoSync, aborts the
// communicator, as one of Backward does, so that the other ranks'
// Backward fails at once with a [*RankError] naming this rank rather than
// at the timeout, and then goes on.
func (d *DistributedDataParallel) Forward(x *vram.Tensor) *vram.Tensor {
	d.mu.Lock()
	err := d.pendingLocked()
	reduces := err == nil && d.noSync == 0 && vram.GradEnabled() // a reduction of this step's gradients follows
	sync := reduces && !d.opts.KeepLocalBuffers
	d.mu.Unlock()
	if err != nil {
		kind, detail := vram.ErrBackend, "the last step failed"
		switch {
		case errors.Is(err, vram.ErrAutograd):
			kind = vram.ErrAutograd
		case errors.Is(err, vram.ErrReleased):
			kind, detail = vram.ErrReleased, "closed"
		}
		panic(&vram.Error{Op: "ddp forward", Kind: kind, Detail: detail, Err: err})
	}
	if sync {
		if err := d.broadcastBuffers(); err != nil {
			d.comm.Abort(err)
			panic(&vram.Error{Op: "ddp forward", Kind: vram.ErrBackend, Detail: fmt.Sprintf("rank %d", d.comm.Rank()), Err: err})
		}
	}
	if !reduces {
		return d.module.Forward(x)
	}
	// The other ranks will wait in the reduction of this step's gradients
	// for this rank's: if its forward fails, end the wait for them now.
	ok := false
	defer func() {
		if ok {
			return
		}
		p := recover()
		what := fmt.Sprint(p)
		if p == nil {
			what = "its goroutine exited (runtime.Goexit)"
		}
		d.comm.Abort(errorf("parallel: DDP: rank %d: forward failed: %s", d.comm.Rank(), what))
		if p != nil {
			panic(p)
		}
	}()
	out := d.module.Forward(x)
	ok = true
	return out
}

// NoSync runs fn with the reduction of gradients off: backward passes in
// fn accumulate gradients locally (in the buckets), and the first backward
// after NoSync returns reduces the sum (PyTorch's no_sync, for gradient
// accumulation):
//
//	ddp.NoSync(func() {
//		for _, mb := range micro[:k-1] { ddp.Backward(loss(mb)) }
//	})
//	ddp.Backward(loss(micro[k-1])) // reduces all k
//
// A nil fn panics with an *vram.Error of kind vram.ErrArgument.
func (d *DistributedDataParallel) NoSync(fn func()) {
	if fn == nil {
		panic(&vram.Error{Op: "no_sync", Kind: vram.ErrArgument, Detail: "nil function"})
	}
	d.mu.Lock()
	d.noSync++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.noSync--
		d.mu.Unlock()
	}()
	fn()
}

// ZeroGrad zeroes the gradients in place, in their buckets, keeping them
// as views (the cheap way; an optimizer's ZeroGrad releases them, and the
// next backward then copies each gradient into its bucket once more).
// Parameters without a gradient keep none.
func (d *DistributedDataParallel) ZeroGrad() {
	vram.NoGrad(func() {
		for _, b := range d.buckets {
			b.flat.FillInPlace(0)
		}
	})
}

// Buckets describes the gradient buckets, in the order they are reduced.
func (d *DistributedDataParallel) Buckets() []BucketInfo {
	out := make([]BucketInfo, len(d.buckets))
	for i, b := range d.buckets {
		info := BucketInfo{Bytes: b.flat.Bytes(), DType: b.flat.DType()}
		for _, s := range b.slots {
			info.Params = append(info.Params, s.name)
		}
		out[i] = info
	}
	return out
}

// Module returns the wrapped module.
func (d *DistributedDataParallel) Module() nn.Module { return d.module }

// Communicator returns the DDP's communicator.
func (d *DistributedDataParallel) Communicator() Communicator { return d.comm }

// Close removes the hooks and stops the worker. The parameters keep their
// gradients (views of the buckets, which stay allocated until the
// gradients are released). The communicator stays open.
func (d *DistributedDataParallel) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	if d.active {
		d.abandonLocked()
	}
	d.closed = true
	d.mu.Unlock()
	for _, f := range d.unhook {
		f()
	}
	close(d.jobs)
	<-d.done
	d.releaseBuckets()
	d.stream.Release()
	return nil
}

// NamedParameters returns the wrapped module's parameters, under its own
// names.
func (d *DistributedDataParallel) NamedParameters() []nn.NamedParameter {
	return d.module.NamedParameters()
}

// Parameters returns the wrapped module's parameters.
func (d *DistributedDataParallel) Parameters() []*vram.Tensor { return d.module.Parameters() }

// NamedBuffers returns the wrapped module's buffers, under its own names,
// so that [nn.StateDict] and [nn.Save] of the DDP keep them (BatchNorm's
// running statistics).
func (d *DistributedDataParallel) NamedBuffers() []nn.NamedParameter {
	return nn.NamedBuffers(d.module)
}

// NamedChildren returns the wrapped module's children.
func (d *DistributedDataParallel) NamedChildren() []nn.NamedModule { return d.module.NamedChildren() }

// To panics with an [*vram.Error] of kind ErrDevice unless dev is the
// DDP's device: the replica belongs to its rank's device.
func (d *DistributedDataParallel) To(dev vram.Device) {
	if dev != d.dev {
		panic(&vram.Error{Op: "ddp to", Kind: vram.ErrDevice,
			Detail: fmt.Sprintf("a DistributedDataParallel replica stays on its rank's device %s; move the module before wrapping it", d.dev)})
	}
}

// CUDA is To(vram.CUDA(index...)).
func (d *DistributedDataParallel) CUDA(index ...int) { d.To(vram.CUDA(index...)) }

// CPU is To(vram.CPU).
func (d *DistributedDataParallel) CPU() { d.To(vram.CPU) }

// Train puts the wrapped module in training mode.
func (d *DistributedDataParallel) Train() { d.module.Train() }

// Eval puts the wrapped module in evaluation mode.
func (d *DistributedDataParallel) Eval() { d.module.Eval() }

// Training reports whether the wrapped module is in training mode.
func (d *DistributedDataParallel) Training() bool { return d.module.Training() }
