package parallel

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/vramgo/vram"
)

// The in-process collectives: one goroutine per rank, all in one process,
// each rank's tensors on its own device (CPU or sim; CUDA devices use NCCL
// when it is there, and these otherwise). A collective is a meeting: each
// rank leaves its tensor and waits; the last to arrive does the work for
// all, with vram's copies between devices (reductions through the host,
// with the TCP collectives' accumulator, so that both give the same bits),
// and wakes the others. Before it
// arrives, a rank waits for its current stream, so the work of every
// rank's streams before the collective is done; the meeting's work runs on
// the default streams and is finished before anyone leaves. Collectives are
// therefore synchronous here.

// LocalOptions configure [NewLocalGroup].
type LocalOptions struct {
	// Timeout bounds the wait for the other ranks at each collective;
	// 0 means DefaultTimeout.
	Timeout time.Duration
}

// NewLocalGroup returns one communicator per device of devs, rank i on
// devs[i], for goroutines of this process: each goroutine uses its own. A
// collective called on a communicator while another goroutine waits in
// one of it is refused with an error of kind vram.ErrArgument, the group
// going on. The devices must be distinct. It uses DefaultTimeout.
func NewLocalGroup(devs []vram.Device) ([]Communicator, error) {
	return NewLocalGroupOptions(devs, LocalOptions{})
}

// NewLocalGroupOptions is NewLocalGroup with options.
func NewLocalGroupOptions(devs []vram.Device, opts LocalOptions) ([]Communicator, error) {
	if len(devs) == 0 {
		return nil, errorf("parallel: a group needs at least one device: %w", vram.ErrArgument)
	}
	for i, d := range devs {
		if err := d.Check(); err != nil {
			return nil, errorf("parallel: device %d of the group, %v, is not available: %w", i, d, err)
		}
		if j := slices.Index(devs[:i], d); j >= 0 {
			return nil, errorf("parallel: %v is both rank %d and rank %d of the group; give each rank its own device: %w", d, j, i, vram.ErrArgument)
		}
	}
	if opts.Timeout < 0 {
		return nil, errorf("parallel: negative timeout %v: %w", opts.Timeout, vram.ErrArgument)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	g := &localGroup{devs: slices.Clone(devs), timeout: opts.Timeout, slots: make([]meetSlot, len(devs)),
		done: make(chan struct{}), mail: map[[2]int]chan *vram.Tensor{}, closed: map[int]bool{}}
	g.cond = sync.NewCond(&g.mu)
	comms := make([]Communicator, len(devs))
	for i := range devs {
		comms[i] = &localComm{g: g, rank: i}
	}
	return comms, nil
}

// localGroup is the shared state of an in-process group.
type localGroup struct {
	devs    []vram.Device
	timeout time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	gen     uint64 // meetings completed
	arrived int
	slots   []meetSlot
	result  error         // of the meeting that just completed
	aborted error         // set once, for good
	done    chan struct{} // closed when aborted is set

	mailMu sync.Mutex
	mail   map[[2]int]chan *vram.Tensor // (from, to) -> sent tensors
	closed map[int]bool                 // ranks closed, which receive no more
}

// meetSlot is what one rank brought to a meeting.
type meetSlot struct {
	here bool
	op   string
	a, b *vram.Tensor
	arg  int
	red  ReduceOp
}

// localComm is one rank of a localGroup.
type localComm struct {
	g      *localGroup
	rank   int
	closed bool
}

func (c *localComm) Rank() int           { return c.rank }
func (c *localComm) Size() int           { return len(c.g.devs) }
func (c *localComm) Device() vram.Device { return c.g.devs[c.rank] }

// begin checks that the communicator is open, before a call of op checks
// its arguments.
func (c *localComm) begin(op string) error {
	if c.closed {
		return &RankError{Op: op, Rank: c.rank, Err: errorf("%w: the communicator is closed", ErrAborted)}
	}
	return nil
}

// fail ends the group with err, for every rank's pending and later calls,
// unless it has ended already. g.mu must be held.
func (g *localGroup) fail(err error) {
	if g.aborted == nil {
		g.aborted = err
		close(g.done)
		g.cond.Broadcast()
	}
}

// failWith ends the group with err, unless it has ended already, and
// returns the error that ended it: a send or receive that timed out or
// did not match leaves the ranks out of step (a message sent late would
// be taken by the next receive), so, as after a collective's failure,
// every later call fails too.
func (g *localGroup) failWith(err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail(err)
	return g.aborted
}

// failure returns the error that ended the group.
func (g *localGroup) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.aborted
}

// meet brings s to the next meeting and returns its result. The last rank
// to arrive checks that every rank called the same op and runs work; a
// mismatch or a failure of work ends the group.
func (c *localComm) meet(s meetSlot, work func(slots []meetSlot) error) error {
	// The rank's queued work first, then the meeting.
	if err := vram.CurrentStream(c.Device()).Synchronize(); err != nil {
		return err
	}
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aborted != nil {
		return g.aborted
	}
	if in := g.slots[c.rank]; in.here {
		// Another goroutine waits in a collective of this rank: refuse
		// this call, which would take that one's place, and leave the
		// meeting to it.
		return &RankError{Op: s.op, Rank: c.rank, Err: errorf("rank %d is in %s already, on another goroutine; "+
			"a Communicator is one rank's and is used by one goroutine at a time: give each goroutine its own: %w", c.rank, in.op, vram.ErrArgument)}
	}
	s.here = true
	g.slots[c.rank] = s
	g.arrived++
	gen := g.gen
	if g.arrived == len(g.slots) {
		err := check(g.slots)
		if err == nil {
			err = vram.Catch(func() { err = work(g.slots) })
		}
		if err == nil {
			for _, d := range g.devs {
				if e := vram.Synchronize(d); e != nil && err == nil {
					err = e
				}
			}
		}
		if err != nil {
			// Ranks that disagree, or a collective that failed half way,
			// leave the group out of step: end it, as the other
			// communicators do, rather than let later calls pair up wrongly.
			g.fail(err)
		}
		g.result = err
		clear(g.slots)
		g.arrived = 0
		g.gen++
		g.cond.Broadcast()
		return err
	}
	timer := time.AfterFunc(g.timeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.gen == gen && g.aborted == nil {
			var missing []int
			for r, sl := range g.slots {
				if !sl.here {
					missing = append(missing, r)
				}
			}
			rank := -1
			if len(missing) > 0 {
				rank = missing[0]
			}
			g.fail(&RankError{Op: s.op, Rank: rank, Err: errorf("%w: ranks %v did not arrive within %v", ErrTimeout, missing, g.timeout)})
		}
	})
	defer timer.Stop()
	for g.gen == gen && g.aborted == nil {
		g.cond.Wait()
	}
	if g.gen == gen {
		return g.aborted
	}
	return g.result
}

// check returns an ErrMismatch error unless every rank brought the same op
// with tensors of one dtype and size.
func check(slots []meetSlot) error {
	first := slots[0]
	for r, s := range slots[1:] {
		switch {
		case s.op != first.op:
			return &RankError{Op: first.op, Rank: r + 1, Err: errorf("%w: rank 0 called %s, rank %d called %s", ErrMismatch, first.op, r+1, s.op)}
		case s.arg != first.arg || s.red != first.red:
			return &RankError{Op: first.op, Rank: r + 1, Err: errorf("%w: rank %d's root or reduction differs from rank 0's", ErrMismatch, r+1)}
		}
		for _, pair := range [][2]*vram.Tensor{{first.a, s.a}, {first.b, s.b}} {
			x, y := pair[0], pair[1]
			if (x == nil) != (y == nil) {
				return &RankError{Op: first.op, Rank: r + 1, Err: errorf("%w: tensors missing", ErrMismatch)}
			}
			if x != nil && (x.DType() != y.DType() || x.NumElements() != y.NumElements()) {
				return &RankError{Op: first.op, Rank: r + 1, Err: errorf("%w: rank 0 has %d %s elements, rank %d has %d %s",
					ErrMismatch, x.NumElements(), x.DType(), r+1, y.NumElements(), y.DType())}
			}
		}
	}
	return nil
}

// reduceRaw returns the reduction of the ts' elements as raw bytes, with
// the TCP collectives' accumulator: in rank order, floating-point elements
// in float64 rounded once, integers in int64. The in-process and TCP
// collectives thus give the same bits, and a float16 sum or an int8
// average does not overflow on the way.
func reduceRaw(ts []*vram.Tensor, op ReduceOp) []byte {
	acc := newAccumulator(ts[0].DType(), op, ts[0].RawBytes())
	for _, t := range ts[1:] {
		acc.add(t.RawBytes())
	}
	return acc.result(len(ts))
}

// setRaw writes b into the contiguous t, in place.
func setRaw(t *vram.Tensor, b []byte) {
	vram.NoGrad(func() { t.SetRawBytes(b) })
}

// store copies the flat src into t, on t's device, in place.
func store(t, src *vram.Tensor) {
	x := src.To(t.Device())
	defer x.Release()
	v := x.Reshape(t.Shape()...)
	defer v.Release()
	vram.NoGrad(func() { t.CopyFrom(v) })
}

func tensors(slots []meetSlot) []*vram.Tensor {
	out := make([]*vram.Tensor, len(slots))
	for i, s := range slots {
		out[i] = s.a
	}
	return out
}

// args checks the arguments of a call of op: the communicator is open,
// t (written by the call when written is set) is a tensor of this rank,
// and red, when not nil, is a reduction of t's dtype.
func (c *localComm) args(op string, t *vram.Tensor, written bool, red *ReduceOp) error {
	if err := c.begin(op); err != nil {
		return err
	}
	if err := checkTensor(op, "", t, c.Device(), written); err != nil {
		return err
	}
	if red != nil {
		if err := checkReduce(t.DType(), *red); err != nil {
			return errorf("parallel: %s: %w", op, err)
		}
	}
	return nil
}

// pairArgs checks the arguments of all_gather and reduce_scatter: whole
// has Size() times part's elements, and the call writes dst.
func (c *localComm) pairArgs(op string, dst, src *vram.Tensor, wholeIsDst bool, red *ReduceOp) error {
	if err := c.begin(op); err != nil {
		return err
	}
	if err := checkTensor(op, "destination", dst, c.Device(), true); err != nil {
		return err
	}
	if err := checkTensor(op, "source", src, c.Device(), false); err != nil {
		return err
	}
	if wholeIsDst {
		if err := checkParts(op, "destination", dst, "source", src, c.Size()); err != nil {
			return err
		}
	} else if err := checkParts(op, "source", src, "destination", dst, c.Size()); err != nil {
		return err
	}
	if red != nil {
		if err := checkReduce(src.DType(), *red); err != nil {
			return errorf("parallel: %s: %w", op, err)
		}
	}
	return nil
}

// AllReduce reduces t over the ranks, in place on each.
func (c *localComm) AllReduce(t *vram.Tensor, op ReduceOp) error {
	if err := c.args("all_reduce", t, true, &op); err != nil {
		return err
	}
	return c.meet(meetSlot{op: "all_reduce", a: t, red: op}, func(slots []meetSlot) error {
		r := reduceRaw(tensors(slots), op)
		for _, s := range slots {
			setRaw(s.a, r)
		}
		return nil
	})
}

// Broadcast copies root's t to every rank's t.
func (c *localComm) Broadcast(t *vram.Tensor, root int) error {
	if err := c.args("broadcast", t, c.rank != root, nil); err != nil {
		return err
	}
	if err := checkRank("broadcast", "root", root, c.Size()); err != nil {
		return err
	}
	return c.meet(meetSlot{op: "broadcast", a: t, arg: root}, func(slots []meetSlot) error {
		src := slots[root].a.Reshape(-1)
		defer src.Release()
		for i, s := range slots {
			if i != root {
				store(s.a, src)
			}
		}
		return nil
	})
}

// Reduce reduces t over the ranks into root's t.
func (c *localComm) Reduce(t *vram.Tensor, op ReduceOp, root int) error {
	if err := c.args("reduce", t, c.rank == root, &op); err != nil {
		return err
	}
	if err := checkRank("reduce", "root", root, c.Size()); err != nil {
		return err
	}
	return c.meet(meetSlot{op: "reduce", a: t, red: op, arg: root}, func(slots []meetSlot) error {
		setRaw(slots[root].a, reduceRaw(tensors(slots), op))
		return nil
	})
}

// AllGather concatenates the ranks' src into every rank's dst.
func (c *localComm) AllGather(dst, src *vram.Tensor) error {
	if err := c.pairArgs("all_gather", dst, src, true, nil); err != nil {
		return err
	}
	return c.meet(meetSlot{op: "all_gather", a: src, b: dst}, func(slots []meetSlot) error {
		dev := slots[0].a.Device()
		parts := make([]*vram.Tensor, len(slots))
		for i, s := range slots {
			flat := s.a.Reshape(-1)
			parts[i] = flat.To(dev)
			flat.Release()
		}
		all := vram.Cat(parts, 0)
		defer all.Release()
		for i, s := range slots {
			parts[i].Release()
			store(s.b, all)
		}
		return nil
	})
}

// ReduceScatter reduces the ranks' src and gives part r to rank r's dst.
func (c *localComm) ReduceScatter(dst, src *vram.Tensor, op ReduceOp) error {
	if err := c.pairArgs("reduce_scatter", dst, src, false, &op); err != nil {
		return err
	}
	return c.meet(meetSlot{op: "reduce_scatter", a: src, b: dst, red: op}, func(slots []meetSlot) error {
		r := reduceRaw(tensors(slots), op)
		n := int(slots[0].b.Bytes())
		for i, s := range slots {
			setRaw(s.b, r[i*n:(i+1)*n])
		}
		return nil
	})
}

// mailbox returns the channel of tensors sent from rank from to rank to.
func (g *localGroup) mailbox(from, to int) chan *vram.Tensor {
	g.mailMu.Lock()
	defer g.mailMu.Unlock()
	k := [2]int{from, to}
	ch, ok := g.mail[k]
	if !ok {
		ch = make(chan *vram.Tensor, 16)
		g.mail[k] = ch
	}
	return ch
}

// dropMail releases what was sent to rank to and not received, once to
// is closed and can receive nothing more; it does nothing while to is
// open.
func (g *localGroup) dropMail(to int) {
	g.mailMu.Lock()
	defer g.mailMu.Unlock()
	if !g.closed[to] {
		return
	}
	for k, ch := range g.mail {
		if k[1] != to {
			continue
		}
		for empty := false; !empty; {
			select {
			case t := <-ch:
				t.Release()
			default:
				empty = true
			}
		}
	}
}

// Send queues a copy of t for rank peer; t may be written or released
// once it returns. A copy queued for a rank that closes before receiving
// it is released then.
func (c *localComm) Send(t *vram.Tensor, peer int) error {
	if err := c.args("send", t, false, nil); err != nil {
		return err
	}
	if err := checkPeer("send", peer, c.rank, c.Size()); err != nil {
		return err
	}
	if err := vram.CurrentStream(c.Device()).Synchronize(); err != nil {
		return err
	}
	// A copy, made now: the caller may write t or release it as soon as
	// Send returns, as after the TCP and NCCL sends.
	dt := t.Detach()
	var cp *vram.Tensor
	if dt.IsContiguous() {
		cp = dt.Clone()
	} else {
		cp = dt.Contiguous() // a copy already
	}
	dt.Release()
	select {
	case <-c.g.done:
		cp.Release()
		return c.g.failure()
	default:
	}
	select {
	case c.g.mailbox(c.rank, peer) <- cp:
		// The peer may have closed meanwhile; its Close released what
		// was queued before this copy, and this releases this one.
		c.g.dropMail(peer)
		return nil
	case <-c.g.done:
		cp.Release()
		return c.g.failure()
	case <-time.After(c.g.timeout):
		cp.Release()
		return c.g.failWith(&RankError{Op: "send", Rank: peer, Err: errorf("%w: rank %d did not receive within %v", ErrTimeout, peer, c.g.timeout)})
	}
}

// Recv receives into t what rank peer sent.
func (c *localComm) Recv(t *vram.Tensor, peer int) error {
	if err := c.args("recv", t, true, nil); err != nil {
		return err
	}
	if err := checkPeer("recv", peer, c.rank, c.Size()); err != nil {
		return err
	}
	box := c.g.mailbox(peer, c.rank)
	var got *vram.Tensor
	select {
	case got = <-box:
	case <-c.g.done:
		// What the peer sent before the group ended is still delivered.
		select {
		case got = <-box:
		default:
			return c.g.failure()
		}
	case <-time.After(c.g.timeout):
		return c.g.failWith(&RankError{Op: "recv", Rank: peer, Err: errorf("%w: rank %d sent nothing within %v", ErrTimeout, peer, c.g.timeout)})
	}
	defer got.Release()
	if got.DType() != t.DType() || got.NumElements() != t.NumElements() {
		err := &RankError{Op: "recv", Rank: peer, Err: errorf("%w: rank %d sent %d %s elements, rank %d receives %d %s",
			ErrMismatch, peer, got.NumElements(), got.DType(), c.rank, t.NumElements(), t.DType())}
		return c.g.failWith(err) // the ranks are out of step, as after a collective's mismatch
	}
	return vram.Catch(func() {
		flat := got.Reshape(-1)
		defer flat.Release()
		store(t, flat)
	})
}

// Barrier returns once every rank has called it.
func (c *localComm) Barrier() error {
	if err := c.begin("barrier"); err != nil {
		return err
	}
	return c.meet(meetSlot{op: "barrier"}, func([]meetSlot) error { return nil })
}

// Abort ends the group for every rank.
func (c *localComm) Abort(err error) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		err = errors.New("aborted")
	}
	g.fail(&RankError{Op: "abort", Rank: c.rank, Err: errorf("%w by rank %d: %w", ErrAborted, c.rank, err)})
}

// Close ends this rank's use of the group. The other ranks can no longer
// meet it: their pending and later calls fail at once with a *RankError
// naming it, wrapping ErrAborted, as with the other communicators. What
// the others sent this rank and it did not receive is released.
func (c *localComm) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	g := c.g
	g.mu.Lock()
	g.fail(&RankError{Op: "close", Rank: c.rank, Err: errorf("%w: rank %d closed its communicator", ErrAborted, c.rank)})
	g.mu.Unlock()
	g.mailMu.Lock()
	g.closed[c.rank] = true
	g.mailMu.Unlock()
	g.dropMail(c.rank)
	return nil
}
