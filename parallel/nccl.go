package parallel

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
	bcuda "github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/nccl"
)

// The NCCL communicators: CUDA tensors, reduced by NCCL on the stream of
// the calling goroutine (see vram.WithStream). Two ways to make them:
//
//   - NewNCCLGroup: one process driving several GPUs (ncclCommInitAll),
//     rank i on devs[i]. Use each communicator from its own goroutine,
//     all calling the same collectives at once (DataParallel's goroutine
//     per device), or issue the collectives of several communicators from
//     one goroutine inside NCCLGroupCalls.
//   - NewNCCLRank: one rank per process, on one or many hosts
//     (ncclCommInitRank). Rank 0 makes the id with NewNCCLID and every
//     rank gets it through a store (InitProcessGroup does this).
//
// Each communicator has a watchdog (see nccl_watch.go) that aborts it when
// a collective waits longer than its timeout or NCCL reports an error.

// ErrNoNCCL is the error (matched with errors.Is) of the NCCL constructors
// on a machine where libnccl.so.2 cannot be loaded; it wraps the loader's
// error, which lists the places searched.
var ErrNoNCCL = errors.New("parallel: NCCL is not available")

// NCCLOptions configure the NCCL communicators. The zero value works.
type NCCLOptions struct {
	// Timeout bounds the time a collective, or the creation of the
	// communicators, may wait for the other ranks: past it the
	// communicator is aborted and its calls return a *RankError wrapping
	// ErrTimeout and ErrAborted. 0 means DefaultNCCLTimeout.
	Timeout time.Duration
}

func (o NCCLOptions) timeout() (time.Duration, error) {
	switch {
	case o.Timeout < 0:
		return 0, errorf("parallel: negative NCCL timeout %v: %w", o.Timeout, vram.ErrArgument)
	case o.Timeout == 0:
		return DefaultNCCLTimeout, nil
	}
	return o.Timeout, nil
}

// loadNCCL loads libnccl.so.2, or says why it cannot be used.
func loadNCCL() error {
	if _, err := nccl.Load(); err != nil {
		return errorf("%w: %w (install NCCL: pip install nvidia-nccl-cu13 or nvidia-nccl-cu12, or the libnccl2 package; or point VRAM_CUDA_LIBS at the folder that holds libnccl.so.2)", ErrNoNCCL, err)
	}
	return nil
}

// NCCLVersion returns the version of the NCCL library, e.g. "2.28.3".
func NCCLVersion() (string, error) {
	if err := loadNCCL(); err != nil {
		return "", err
	}
	v, err := nccl.GetVersion()
	if err != nil {
		return "", err
	}
	return nccl.VersionString(v), nil
}

// NewNCCLID makes the id of a new NCCL communicator (ncclGetUniqueId), for
// rank 0 to share with every rank's [NewNCCLRank]. It holds the address of
// a socket that this process opens, so it is made on rank 0's host.
func NewNCCLID() ([128]byte, error) {
	if err := loadNCCL(); err != nil {
		return [128]byte{}, err
	}
	id, err := nccl.GetUniqueID()
	if err != nil {
		return [128]byte{}, errorf("parallel: making an NCCL id: %w", err)
	}
	return id, nil
}

// NewNCCLGroup returns one NCCL communicator per CUDA device of devs, rank
// i on devs[i], for one process driving them all (ncclCommInitAll), with
// DefaultNCCLTimeout. The devices must be distinct.
//
// Use each communicator from its own goroutine, the goroutines calling the
// same collectives concurrently; or issue the collectives of several
// communicators from one goroutine inside [NCCLGroupCalls]. Calling one
// communicator's collective and then another's from one goroutine, outside
// a group, waits for the first until the timeout aborts the group. A
// failure of one rank (a timeout, NCCL's error or [Communicator.Abort])
// aborts them all. Close every communicator when done.
//
// Without libnccl.so.2 the error wraps [ErrNoNCCL]; CPU and sim devices
// use NewLocalGroup.
func NewNCCLGroup(devs []vram.Device) ([]Communicator, error) {
	return NewNCCLGroupOptions(devs, NCCLOptions{})
}

// NewNCCLGroupOptions is [NewNCCLGroup] with options.
func NewNCCLGroupOptions(devs []vram.Device, opts NCCLOptions) ([]Communicator, error) {
	if len(devs) == 0 {
		return nil, errorf("parallel: an NCCL group needs at least one device: %w", vram.ErrArgument)
	}
	for i, d := range devs {
		if !d.IsCUDA() {
			return nil, errorf("parallel: device %d of the NCCL group, %v, is not a CUDA device: NCCL reduces CUDA tensors (use NewLocalGroup for CPU and sim devices): %w", i, d, vram.ErrDevice)
		}
		if j := slices.Index(devs[:i], d); j >= 0 {
			return nil, errorf("parallel: %v is both rank %d and rank %d of the NCCL group; give each rank its own GPU: %w", d, j, i, vram.ErrArgument)
		}
	}
	timeout, err := opts.timeout()
	if err != nil {
		return nil, err
	}
	if err := loadNCCL(); err != nil {
		return nil, err
	}
	cds := make([]*bcuda.Device, len(devs))
	ords := make([]int, len(devs))
	for i, d := range devs {
		if cds[i], err = openCUDA(d); err != nil {
			return nil, err
		}
		ords[i] = d.Index
	}
	hs, err := initComms("ncclCommInitAll", timeout, cds[0].Context(), func() ([]nccl.Comm, error) {
		return nccl.CommInitAll(ords)
	})
	if err != nil {
		return nil, errorf("parallel: NCCL group of %v: %w", devs, err)
	}
	cl := &clique{}
	comms := make([]*ncclComm, len(devs))
	for i := range devs {
		comms[i] = newNCCLComm(hs[i], i, len(devs), devs[i], cds[i], timeout, cl)
	}
	if err := checkComms(comms); err != nil {
		abortComms(comms)
		return nil, err
	}
	out := make([]Communicator, len(comms))
	for i, c := range comms {
		c.start()
		out[i] = c
	}
	return out, nil
}

// NewNCCLRank returns rank's NCCL communicator of a group of size ranks,
// one per process, on CUDA device dev (ncclCommInitRank), with
// DefaultNCCLTimeout. Every rank passes the same id, made by rank 0 with
// [NewNCCLID]; the call returns once every rank has called it, or fails
// with a *RankError wrapping ErrTimeout when they have not within the
// timeout. Close it when done.
//
// Without libnccl.so.2 the error wraps [ErrNoNCCL].
func NewNCCLRank(rank, size int, dev vram.Device, id [128]byte) (Communicator, error) {
	return NewNCCLRankOptions(rank, size, dev, id, NCCLOptions{})
}

// NewNCCLRankOptions is [NewNCCLRank] with options.
func NewNCCLRankOptions(rank, size int, dev vram.Device, id [128]byte, opts NCCLOptions) (Communicator, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, errorf("parallel: NCCL rank %d of a group of %d: want 0 <= rank < size: %w", rank, size, vram.ErrArgument)
	}
	if !dev.IsCUDA() {
		return nil, errorf("parallel: NCCL rank %d on %v: not a CUDA device: NCCL reduces CUDA tensors (CPU and sim tensors use the TCP collectives): %w", rank, dev, vram.ErrDevice)
	}
	if id == ([128]byte{}) {
		return nil, errorf("parallel: NCCL rank %d: the id is all zeros; make it on rank 0 with NewNCCLID and share it: %w", rank, vram.ErrArgument)
	}
	timeout, err := opts.timeout()
	if err != nil {
		return nil, err
	}
	if err := loadNCCL(); err != nil {
		return nil, err
	}
	cd, err := openCUDA(dev)
	if err != nil {
		return nil, err
	}
	hs, err := initComms("ncclCommInitRank", timeout, cd.Context(), func() ([]nccl.Comm, error) {
		h, err := nccl.CommInitRank(size, nccl.UniqueID(id), rank)
		if err != nil {
			return nil, err
		}
		return []nccl.Comm{h}, nil
	})
	if err != nil {
		return nil, errorf("parallel: NCCL rank %d of %d on %v: %w", rank, size, dev, err)
	}
	c := newNCCLComm(hs[0], rank, size, dev, cd, timeout, &clique{})
	if err := checkComms([]*ncclComm{c}); err != nil {
		abortComms([]*ncclComm{c})
		return nil, err
	}
	c.start()
	return c, nil
}

// openCUDA opens d for vram and returns its backend device.
func openCUDA(d vram.Device) (*bcuda.Device, error) {
	if err := d.Check(); err != nil {
		return nil, errorf("parallel: NCCL on %v: %w", d, err)
	}
	cd, err := bcuda.Open(d.Index)
	if err != nil {
		return nil, errorf("parallel: NCCL on %v: %w", d, err)
	}
	return cd, nil
}

// initComms runs init, which makes communicators and blocks until every
// rank has called it, on a goroutine with ctx current, and waits for it at
// most timeout. Communicators that init makes after the timeout are
// aborted when it returns. A timeout, or NCCL's failure of a peer or of
// the network, is a *RankError.
func initComms(what string, timeout time.Duration, ctx cuda.Context, init func() ([]nccl.Comm, error)) ([]nccl.Comm, error) {
	return initWithin(what, timeout, ctx.Do, init, func(h nccl.Comm) {
		ctx.Do(func() error { return nccl.CommAbort(h) })
	})
}

// initWithin is initComms with the context's Do as run and the abort of an
// abandoned communicator as abort.
func initWithin(what string, timeout time.Duration, run func(func() error) error, init func() ([]nccl.Comm, error),
	abort func(nccl.Comm)) ([]nccl.Comm, error) {
	type result struct {
		hs  []nccl.Comm
		err error
	}
	var (
		mu        sync.Mutex
		abandoned bool
		ch        = make(chan result, 1)
	)
	go func() {
		var r result
		r.err = run(func() error {
			var err error
			r.hs, err = init()
			return err
		})
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			for _, h := range r.hs {
				abort(h)
			}
			return
		}
		ch <- r
	}()
	done := func(r result) ([]nccl.Comm, error) {
		if fatalNCCL(r.err) { // a peer died during the setup, or the network to it failed
			return nil, &RankError{Op: "init", Rank: -1, Err: errorf("%w: %s: %w", ErrAborted, what, r.err)}
		}
		return r.hs, r.err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return done(r)
	case <-timer.C:
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-ch:
		return done(r)
	default:
	}
	abandoned = true
	return nil, &RankError{Op: "init", Rank: -1, Err: errorf("%w: %s did not complete within %v: not every rank called it with the same id (a rank never started, or died)", ErrTimeout, what, timeout)}
}

// ncclComm is a Communicator over one NCCL communicator.
type ncclComm struct {
	h          nccl.Comm
	rank, size int
	dev        vram.Device
	cd         *bcuda.Device
	st         *commState
	cl         *clique
	poll       time.Duration
	barrier    *vram.Tensor // one element, for Barrier; made at first use
}

var _ Communicator = (*ncclComm)(nil)

// ncclHandle is the commHandle of a real communicator.
type ncclHandle struct {
	h   nccl.Comm
	ctx cuda.Context
}

func (h ncclHandle) asyncError() error {
	st, err := nccl.CommGetAsyncError(h.h)
	if err != nil {
		return err
	}
	return st.Err()
}

func (h ncclHandle) abort() error {
	return h.ctx.Do(func() error { return nccl.CommAbort(h.h) })
}

func (h ncclHandle) destroy() error {
	return h.ctx.Do(func() error { return nccl.CommDestroy(h.h) })
}

func newNCCLComm(h nccl.Comm, rank, size int, dev vram.Device, cd *bcuda.Device, timeout time.Duration, cl *clique) *ncclComm {
	where := fmt.Sprintf("rank %d on %v", rank, dev)
	c := &ncclComm{h: h, rank: rank, size: size, dev: dev, cd: cd, cl: cl, poll: pollInterval(timeout)}
	c.st = newCommState(ncclHandle{h: h, ctx: cd.Context()}, func() (backend.Event, error) { return cd.NewEvent(false) }, timeout, where)
	cl.members = append(cl.members, c.st)
	return c
}

// start starts the watchdog.
func (c *ncclComm) start() { go c.st.watch(c.cl, c.poll) }

// checkComms checks that NCCL made what was asked: each communicator's
// rank, size and device.
func checkComms(comms []*ncclComm) error {
	for _, c := range comms {
		n, err1 := nccl.CommCount(c.h)
		r, err2 := nccl.CommUserRank(c.h)
		d, err3 := nccl.CommCuDevice(c.h)
		if err := errors.Join(err1, err2, err3); err != nil {
			return errorf("parallel: NCCL %s: %w", c.st.where, err)
		}
		if n != c.size || r != c.rank || d != c.dev.Index {
			return errorf("parallel: NCCL made rank %d of %d on cuda:%d, asked for %s of %d", r, n, d, c.st.where, c.size)
		}
	}
	return nil
}

// abortComms ends communicators that were made but not started.
func abortComms(comms []*ncclComm) {
	for _, c := range comms {
		c.st.h.abort()
	}
}

func (c *ncclComm) Rank() int           { return c.rank }
func (c *ncclComm) Size() int           { return c.size }
func (c *ncclComm) Device() vram.Device { return c.dev }

// ncclDataType returns NCCL's type for a vram dtype. Bool is one byte,
// 0 or 1, reduced as uint8 (see ncclRedOpFor).
func ncclDataType(dt vram.DType) (nccl.DataType, error) {
	switch dt {
	case vram.Float32:
		return nccl.Float32, nil
	case vram.Float64:
		return nccl.Float64, nil
	case vram.Float16:
		return nccl.Float16, nil
	case vram.BFloat16:
		return nccl.BFloat16, nil
	case vram.Int32:
		return nccl.Int32, nil
	case vram.Int64:
		return nccl.Int64, nil
	case vram.Int8:
		return nccl.Int8, nil
	case vram.Bool:
		return nccl.Uint8, nil
	}
	return 0, errorf("parallel: NCCL has no type for %v", dt)
}

// ncclRedOpFor returns NCCL's reduction for op on tensors of dt. On bool
// tensors, as in PyTorch, a sum is a logical or (NCCL's max of 0 and 1)
// and a product a logical and (the min); an average is refused.
func ncclRedOpFor(op ReduceOp, dt vram.DType) (nccl.RedOp, error) {
	if dt == vram.Bool {
		switch op {
		case Sum, Max:
			return nccl.Max, nil
		case Prod, Min:
			return nccl.Min, nil
		case Avg:
			return 0, errors.New("parallel: the average of bool tensors is not a bool: cast them to a float type first")
		}
	}
	switch op {
	case Sum:
		return nccl.Sum, nil
	case Prod:
		return nccl.Prod, nil
	case Max:
		return nccl.Max, nil
	case Min:
		return nccl.Min, nil
	case Avg:
		return nccl.Avg, nil
	}
	return 0, errorf("parallel: unknown reduction %v", op)
}

// fatalNCCL reports whether an NCCL error leaves the communicator unusable
// (a peer's or the system's failure), as opposed to a refused call.
func fatalNCCL(err error) bool {
	for _, e := range []error{nccl.ErrUnhandledCudaError, nccl.ErrSystemError, nccl.ErrInternalError, nccl.ErrRemoteError, nccl.ErrTimeout} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// callError turns the error of a call of op into the one to return: the
// communicator's failure once it failed (NCCL's fatal errors abort it),
// else the error with where it happened.
func (c *ncclComm) callError(op string, err error) error {
	if err == nil {
		return nil
	}
	if f := c.st.failure(op); f != nil {
		return f
	}
	if fatalNCCL(err) {
		c.cl.abort(errorf("%s on %s: %w", op, c.st.where, err), -1, false)
		return c.st.failure(op)
	}
	return errorf("parallel: %s on %s: %w", op, c.st.where, err)
}

// rawTensor is what a collective needs of a tensor.
type rawTensor struct {
	ptr cuda.DevicePtr
	n   int
	s   backend.Stream
}

// withRawWrite is withRaw for a tensor the collective writes: once fn has
// queued the work, the write is counted in t's version (vram.Raw does not,
// since it cannot tell a read from a write), as the CPU collectives'
// in-place copies count theirs, so that a graph that saved t refuses to
// backpropagate through values the collective replaced.
func (c *ncclComm) withRawWrite(op string, t *vram.Tensor, fn func(r rawTensor) error) error {
	if err := c.withRaw(op, t, fn); err != nil {
		return err
	}
	return vram.Catch(t.IncrementVersion)
}

// withRaw calls fn with t's device address, element count and current
// stream, after checking that t is a contiguous tensor of this rank's
// device.
func (c *ncclComm) withRaw(op string, t *vram.Tensor, fn func(r rawTensor) error) error {
	// NCCL reads, too, one block of elements.
	if err := checkTensor(op, "", t, c.dev, true); err != nil {
		return err
	}
	var ferr error // fn's error, kept out of vram.Raw's wrapping
	err := vram.Catch(func() {
		_ = vram.Raw(t, func(r vram.RawTensor) error {
			buf, ok := r.View.Buf.(*bcuda.Buffer)
			if r.Device != backend.Device(c.cd) || !ok {
				ferr = errorf("parallel: %s on %s: the tensor's memory is not of the communicator's GPU", op, c.st.where)
				return nil
			}
			s := r.Stream
			if s == nil {
				s = c.cd.DefaultStream()
			}
			ferr = fn(rawTensor{ptr: buf.Ptr() + cuda.DevicePtr(r.View.Offset*r.View.DType.Size()), n: r.View.NumElements(), s: s})
			return nil
		})
	})
	if err != nil {
		return err
	}
	return ferr
}

// enqueue queues one NCCL call on stream s: issue, with the device's
// context current, holding a lease on the handle. Outside a group it then
// records the stream for the watchdog; inside NCCLGroupCalls the group
// does that after ncclGroupEnd, which launches the call, and holds the
// lease until then.
func (c *ncclComm) enqueue(op string, s backend.Stream, issue func(cs cuda.Stream) error) error {
	st, ok := s.(*bcuda.Stream)
	if !ok {
		return errorf("parallel: %s on %s: a stream of type %T is not a CUDA stream", op, c.st.where, s)
	}
	g := currentGroup()
	if err := c.st.begin(op); err != nil {
		return err
	}
	err := c.cd.Context().Do(func() error { return issue(st.Handle()) })
	if g != nil && err == nil {
		g.add(c, s, op)
		return nil
	}
	c.st.end()
	if err != nil {
		return c.callError(op, err)
	}
	return c.st.track(s, op)
}

// AllReduce replaces t, on every rank, by the reduction of all ranks' t
// (ncclAllReduce in place).
func (c *ncclComm) AllReduce(t *vram.Tensor, op ReduceOp) error {
	return c.allReduce("all_reduce", t, op)
}

func (c *ncclComm) allReduce(name string, t *vram.Tensor, op ReduceOp) error {
	return c.withRawWrite(name, t, func(r rawTensor) error {
		dt, rop, err := c.types(t.DType(), op)
		if err != nil || r.n == 0 {
			return err
		}
		return c.enqueue(name, r.s, func(s cuda.Stream) error {
			return nccl.AllReduce(r.ptr, r.ptr, uint64(r.n), dt, rop, c.h, s)
		})
	})
}

// types returns NCCL's type and reduction for a collective.
func (c *ncclComm) types(dt vram.DType, op ReduceOp) (nccl.DataType, nccl.RedOp, error) {
	nt, err := ncclDataType(dt)
	if err != nil {
		return 0, 0, err
	}
	rop, err := ncclRedOpFor(op, dt)
	return nt, rop, err
}

func (c *ncclComm) validRank(op, what string, r int) error {
	return checkRank(op, what, r, c.size)
}

// Broadcast replaces t, on every rank, by root's t (ncclBroadcast in
// place).
func (c *ncclComm) Broadcast(t *vram.Tensor, root int) error {
	if err := c.validRank("broadcast", "root", root); err != nil {
		return err
	}
	raw := c.withRaw // the root's t is read, the others' written
	if c.rank != root {
		raw = c.withRawWrite
	}
	return raw("broadcast", t, func(r rawTensor) error {
		dt, err := ncclDataType(t.DType())
		if err != nil || r.n == 0 {
			return err
		}
		return c.enqueue("broadcast", r.s, func(s cuda.Stream) error {
			return nccl.Broadcast(r.ptr, r.ptr, uint64(r.n), dt, root, c.h, s)
		})
	})
}

// Reduce replaces t on root by the reduction of all ranks' t (ncclReduce
// in place); NCCL writes the result on root only.
func (c *ncclComm) Reduce(t *vram.Tensor, op ReduceOp, root int) error {
	if err := c.validRank("reduce", "root", root); err != nil {
		return err
	}
	raw := c.withRaw // only the root's t is written
	if c.rank == root {
		raw = c.withRawWrite
	}
	return raw("reduce", t, func(r rawTensor) error {
		dt, rop, err := c.types(t.DType(), op)
		if err != nil || r.n == 0 {
			return err
		}
		return c.enqueue("reduce", r.s, func(s cuda.Stream) error {
			return nccl.Reduce(r.ptr, r.ptr, uint64(r.n), dt, rop, root, c.h, s)
		})
	})
}

// pair checks the two tensors of an all-gather or a reduce-scatter: both
// contiguous tensors of this rank, of one dtype, whole holding Size()
// times part's elements.
func (c *ncclComm) pair(op, wholeRole string, whole *vram.Tensor, partRole string, part *vram.Tensor) error {
	if err := checkTensor(op, wholeRole, whole, c.dev, true); err != nil {
		return err
	}
	if err := checkTensor(op, partRole, part, c.dev, true); err != nil {
		return err
	}
	return checkParts(op, wholeRole, whole, partRole, part, c.size)
}

// AllGather sets dst, on every rank, to the ranks' src in rank order
// (ncclAllGather).
func (c *ncclComm) AllGather(dst, src *vram.Tensor) error {
	const op = "all_gather"
	if err := c.pair(op, "destination", dst, "source", src); err != nil {
		return err
	}
	return c.withRawWrite(op, dst, func(rd rawTensor) error {
		return c.withRaw(op, src, func(rs rawTensor) error {
			dt, err := ncclDataType(src.DType())
			if err != nil || rs.n == 0 {
				return err
			}
			return c.enqueue(op, rd.s, func(s cuda.Stream) error {
				return nccl.AllGather(rs.ptr, rd.ptr, uint64(rs.n), dt, c.h, s)
			})
		})
	})
}

// ReduceScatter sets dst on rank r to part r of the reduction of the
// ranks' src (ncclReduceScatter).
func (c *ncclComm) ReduceScatter(dst, src *vram.Tensor, op ReduceOp) error {
	const name = "reduce_scatter"
	if err := c.pair(name, "source", src, "destination", dst); err != nil {
		return err
	}
	return c.withRawWrite(name, dst, func(rd rawTensor) error {
		return c.withRaw(name, src, func(rs rawTensor) error {
			dt, rop, err := c.types(src.DType(), op)
			if err != nil || rd.n == 0 {
				return err
			}
			return c.enqueue(name, rd.s, func(s cuda.Stream) error {
				return nccl.ReduceScatter(rs.ptr, rd.ptr, uint64(rd.n), dt, rop, c.h, s)
			})
		})
	})
}

// Send sends t to rank peer (ncclSend). A send to this rank itself must
// be in one NCCLGroupCalls with its Recv.
func (c *ncclComm) Send(t *vram.Tensor, peer int) error {
	return c.p2p("send", t, peer, nccl.Send)
}

// Recv receives into t what rank peer sends (ncclRecv).
func (c *ncclComm) Recv(t *vram.Tensor, peer int) error {
	return c.p2p("recv", t, peer, nccl.Recv)
}

func (c *ncclComm) p2p(op string, t *vram.Tensor, peer int,
	call func(p cuda.DevicePtr, n uint64, dt nccl.DataType, peer int, h nccl.Comm, s cuda.Stream) error) error {
	if err := c.validRank(op, "peer", peer); err != nil {
		return err
	}
	if peer == c.rank && currentGroup() == nil {
		return errorf("parallel: %s: rank %d to itself: NCCL runs a send to self only with its receive, in one group; issue both inside parallel.NCCLGroupCalls", op, c.rank)
	}
	raw := c.withRaw
	if op == "recv" {
		raw = c.withRawWrite
	}
	return raw(op, t, func(r rawTensor) error {
		dt, err := ncclDataType(t.DType())
		if err != nil || r.n == 0 {
			return err
		}
		return c.enqueue(op, r.s, func(s cuda.Stream) error {
			return call(r.ptr, uint64(r.n), dt, peer, c.h, s)
		})
	})
}

// Barrier returns once every rank has called it: an all-reduce of one
// element, waited for on the current stream.
func (c *ncclComm) Barrier() error {
	const op = "barrier"
	if currentGroup() != nil {
		return errorf("parallel: %s on %s inside NCCLGroupCalls: a barrier waits, and the group's calls only start at its end", op, c.st.where)
	}
	if c.barrier == nil {
		if err := vram.Catch(func() { c.barrier = vram.Zeros(vram.Shape{1}, c.dev) }); err != nil {
			return errorf("parallel: %s on %s: %w", op, c.st.where, err)
		}
	}
	if err := c.allReduce(op, c.barrier, Max); err != nil {
		return err
	}
	var serr error
	if err := vram.Catch(func() { serr = vram.CurrentStream(c.dev).Synchronize() }); err != nil {
		serr = err
	}
	if f := c.st.failure(op); f != nil {
		return f
	}
	if serr != nil {
		return errorf("parallel: %s on %s: %w", op, c.st.where, serr)
	}
	return nil
}

// Abort ends the communicator at once (ncclCommAbort), and with it every
// communicator of its NewNCCLGroup; their pending and later calls return
// a *RankError naming this rank and wrapping ErrAborted and err. The
// ranks of other processes find out by their watchdogs.
func (c *ncclComm) Abort(err error) {
	if err == nil {
		err = errors.New("Abort was called")
	}
	c.cl.abort(err, c.rank, true)
}

// Close waits for the collectives queued so far (at most the timeout, then
// they are aborted), stops the watchdog and frees the communicator
// (ncclCommDestroy). It returns the failure that ended the communicator,
// if a timeout or NCCL did; after Abort it returns nil.
func (c *ncclComm) Close() error {
	err := c.st.close()
	if c.barrier != nil {
		c.barrier.Release()
		c.barrier = nil
	}
	return err
}

// Group calls. NCCL keeps a group's state per OS thread, so
// NCCLGroupCalls locks its goroutine to its thread and registers the group
// under the thread's id: a call made on that thread joins the group.

// groupCalls is an open NCCLGroupCalls.
type groupCalls struct {
	ops []groupedOp
}

// groupedOp is a call queued in a group, holding its communicator's lease
// until the group ends.
type groupedOp struct {
	c  *ncclComm
	s  backend.Stream
	op string
}

func (g *groupCalls) add(c *ncclComm, s backend.Stream, op string) {
	g.ops = append(g.ops, groupedOp{c: c, s: s, op: op})
}

var (
	ncclGroups     sync.Map     // thread id -> *groupCalls
	ncclOpenGroups atomic.Int32 // entries of ncclGroups, to skip the lookup
)

// currentGroup returns the group open on the calling goroutine, nil when
// none is. A goroutine in NCCLGroupCalls is locked to its thread, so no
// other goroutine runs there and the thread's id names the goroutine.
func currentGroup() *groupCalls {
	if ncclOpenGroups.Load() == 0 {
		return nil
	}
	g, ok := ncclGroups.Load(threadID())
	if !ok {
		return nil
	}
	return g.(*groupCalls)
}

// NCCLGroupCalls runs fn inside an NCCL group (ncclGroupStart, fn,
// ncclGroupEnd): the NCCL collectives and sends and receives that fn
// issues, from this goroutine, on NCCL communicators of any devices, are
// launched together when fn returns. Use it to drive several GPUs'
// communicators from one goroutine, and for a rank's send to itself with
// its receive. The calls inside only queue (they return nil or a refused
// argument); what the launch meets is NCCLGroupCalls' error. Keep fn
// short: its calls hold their communicators until it returns. Groups
// nest; only the outermost launches. fn must not call Barrier, or start
// goroutines that issue the calls.
func NCCLGroupCalls(fn func() error) (err error) {
	if fn == nil {
		return errors.New("parallel: NCCLGroupCalls: nil function")
	}
	if err := loadNCCL(); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := threadID()
	g := currentGroup()
	outer := g == nil
	if outer {
		g = &groupCalls{}
		ncclGroups.Store(tid, g)
		ncclOpenGroups.Add(1)
	}
	if err := nccl.GroupStart(); err != nil {
		if outer {
			ncclGroups.Delete(tid)
			ncclOpenGroups.Add(-1)
		}
		return errorf("parallel: %w", err)
	}
	var fnErr error
	panicked := true
	defer func() {
		var endErr error
		if outer && len(g.ops) > 0 {
			endErr = g.ops[0].c.cd.Context().Do(nccl.GroupEnd)
		} else {
			endErr = nccl.GroupEnd()
		}
		if outer {
			ncclGroups.Delete(tid)
			ncclOpenGroups.Add(-1)
			endErr = g.finish(endErr)
		}
		if !panicked {
			err = errors.Join(fnErr, endErr)
		}
	}()
	fnErr = fn()
	panicked = false
	return nil
}

// finish ends the leases of the group's calls and, once they were
// launched, records their streams for the watchdogs. It returns the
// error to report for ncclGroupEnd's.
func (g *groupCalls) finish(endErr error) error {
	for _, o := range g.ops {
		o.c.st.end()
	}
	if endErr == nil {
		var err error
		for _, o := range g.ops {
			if e := o.c.st.track(o.s, o.op); e != nil && err == nil {
				err = e
			}
		}
		return err
	}
	if len(g.ops) == 0 {
		return errorf("parallel: NCCL group: %w", endErr)
	}
	if fatalNCCL(endErr) {
		for _, o := range g.ops {
			o.c.cl.abort(errorf("the NCCL group of %s: %w", o.op, endErr), -1, false)
		}
		return g.ops[0].c.st.failure(g.ops[0].op)
	}
	return errorf("parallel: the NCCL group of %d calls (%s on %s first): %w", len(g.ops), g.ops[0].op, g.ops[0].c.st.where, endErr)
}

// DataParallel on CUDA devices uses NCCL when it is there.
func init() { ncclGroup = NewNCCLGroup }
