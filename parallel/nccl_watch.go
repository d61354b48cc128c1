package parallel

import (
	"sync"
	"time"

	"github.com/vramgo/vram/backend"
)

// The watchdog of the NCCL communicators. A collective returns once NCCL
// has queued it; a peer that never calls it, or died, shows up only as a
// kernel that does not finish, or as an error that NCCL reports
// asynchronously. So each communicator records an event after its
// collectives and a goroutine polls them and ncclCommGetAsyncError; when
// an event is older than the timeout, or NCCL reports an error, it aborts
// the communicator (ncclCommAbort ends the waiting kernels) and every
// later call returns a *RankError wrapping ErrAborted and the cause.
//
// The handle's lifetime is the hazard: after ncclCommAbort or
// ncclCommDestroy no call may use it. Calls into NCCL hold a lease (busy);
// an abort first marks the communicator failed, so that no new lease is
// granted, then waits up to abortGrace for the leases to end, and aborts
// under those still held only then: a call still inside NCCL after that
// is blocked there waiting for a peer, and ncclCommAbort is what releases
// it (NCCL supports aborting from another thread for that reason).

// DefaultNCCLTimeout is the timeout of NCCL communicators made without
// one: how long a collective may wait for the other ranks before the
// communicator is aborted.
const DefaultNCCLTimeout = 5 * time.Minute

// abortGrace is how long an abort waits for calls in progress to leave
// NCCL before aborting under them. A call that is not blocked leaves
// within microseconds. A variable for the tests.
var abortGrace = time.Second

const (
	// coalesceWindow is the span within which collectives queued on one
	// stream share one event: recording again moves the event past the
	// later one, and the timeout still counts from the first. It bounds
	// the events of a loop of small collectives to about one per window.
	coalesceWindow = 10 * time.Millisecond
	// maxPoll is the longest interval between two polls of the watchdog;
	// it polls ten times per timeout when that is shorter (at least every
	// millisecond).
	maxPoll = 100 * time.Millisecond
)

// pollInterval returns the watchdog's polling interval for a timeout.
func pollInterval(timeout time.Duration) time.Duration {
	return min(maxPoll, max(timeout/10, time.Millisecond))
}

// commHandle is what the watchdog and the teardown need of an NCCL
// communicator: its asynchronous state, and the two ways to end it.
type commHandle interface {
	// asyncError returns the error NCCL reports for the communicator, nil
	// while it is fine.
	asyncError() error
	// abort ends the communicator's operations and frees it.
	abort() error
	// destroy frees it once its operations are done.
	destroy() error
}

// pendingOp is a collective (or several, coalesced) that the watchdog
// waits for.
type pendingOp struct {
	ev    backend.Event
	s     backend.Stream
	op    string    // the first collective it covers
	since time.Time // when that one was queued
	gen   uint64    // incremented each time ev is recorded again
}

// commState is the failure and lifetime state of one communicator, shared
// by its calls, its watchdog and the aborts of its clique.
type commState struct {
	h        commHandle
	newEvent func() (backend.Event, error)
	timeout  time.Duration
	where    string // "rank 0 on cuda:0", for messages

	mu        sync.Mutex
	failed    error // ErrAborted wrapping the cause, once failed
	failRank  int   // the rank that RankErrors name
	byUser    bool  // failed by Abort rather than by a timeout or NCCL
	busy      int   // calls holding a lease on the handle
	busySince time.Time
	busyOp    string
	closed    bool
	released  bool // aborted or destroyed: the handle must not be used again
	pending   []*pendingOp
	spare     []backend.Event

	abortDone chan struct{} // closed once the handle is aborted
	stop      chan struct{} // closed by close to end the watchdog
	done      chan struct{} // closed when the watchdog has ended
}

func newCommState(h commHandle, newEvent func() (backend.Event, error), timeout time.Duration, where string) *commState {
	return &commState{h: h, newEvent: newEvent, timeout: timeout, where: where, failRank: -1,
		abortDone: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
}

// failure returns the error of a call of op on a failed communicator.
// c.mu must be held.
func (c *commState) failureLocked(op string) error {
	return &RankError{Op: op, Rank: c.failRank, Err: c.failed}
}

// failure returns the error of a call of op once the communicator has
// failed, nil while it has not.
func (c *commState) failure(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == nil {
		return nil
	}
	return c.failureLocked(op)
}

// begin takes a lease on the handle for a call of op.
func (c *commState) begin(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return c.failureLocked(op)
	}
	if c.closed {
		return errorf("parallel: %s on a closed NCCL communicator (%s)", op, c.where)
	}
	if c.busy == 0 {
		c.busySince, c.busyOp = time.Now(), op
	}
	c.busy++
	return nil
}

// end returns a lease taken by begin.
func (c *commState) end() {
	c.mu.Lock()
	c.busy--
	c.mu.Unlock()
}

// track records, on stream s, the point after the collective op just
// queued there, for the watchdog.
func (c *commState) track(s backend.Stream, op string) error {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil
	}
	if n := len(c.pending); n > 0 {
		if p := c.pending[n-1]; p.s == s && now.Sub(p.since) < coalesceWindow {
			// Recorded under the lock, and gen moved after: the watchdog
			// drops an entry only if its gen did not change while it
			// queried the event.
			if err := p.ev.Record(s); err != nil {
				return errorf("parallel: %s on %s: recording its event: %w", op, c.where, err)
			}
			p.gen++
			return nil
		}
	}
	var ev backend.Event
	if k := len(c.spare); k > 0 {
		ev, c.spare = c.spare[k-1], c.spare[:k-1]
	} else {
		var err error
		if ev, err = c.newEvent(); err != nil {
			return errorf("parallel: %s on %s: creating an event: %w", op, c.where, err)
		}
	}
	if err := ev.Record(s); err != nil {
		c.spare = append(c.spare, ev)
		return errorf("parallel: %s on %s: recording its event: %w", op, c.where, err)
	}
	c.pending = append(c.pending, &pendingOp{ev: ev, s: s, op: op, since: now})
	return nil
}

// tick is one poll of the watchdog at time now. It drops the collectives
// that have completed and returns the cause to abort the communicator for
// (NCCL's asynchronous error, a call or a collective older than the
// timeout), or nil; stop says that the communicator has failed or been
// released, and the watchdog has nothing left to do.
func (c *commState) tick(now time.Time) (cause error, stop bool) {
	c.mu.Lock()
	if c.failed != nil || c.released {
		c.mu.Unlock()
		return nil, true
	}
	asyncErr := c.h.asyncError()
	stuck := c.busy > 0 && now.Sub(c.busySince) > c.timeout
	busyOp, busyFor := c.busyOp, now.Sub(c.busySince)
	snap := make([]*pendingOp, len(c.pending))
	gens := make([]uint64, len(c.pending))
	copy(snap, c.pending)
	for i, p := range snap {
		gens[i] = p.gen
	}
	c.mu.Unlock()

	if asyncErr != nil {
		return errorf("NCCL reported an error on %s: %w", c.where, asyncErr), false
	}
	if stuck {
		return errorf("%w: %s on %s has waited %v inside NCCL (timeout %v): a rank did not call it, or died",
			ErrTimeout, busyOp, c.where, busyFor.Round(time.Millisecond), c.timeout), false
	}
	for i, p := range snap {
		done, err := p.ev.Query()
		if err != nil {
			return errorf("waiting for %s on %s: %w", p.op, c.where, err), false
		}
		if !done {
			if age := now.Sub(p.since); age > c.timeout {
				return errorf("%w: %s queued on %s %v ago has not completed (timeout %v): a rank did not call it, or died",
					ErrTimeout, p.op, c.where, age.Round(time.Millisecond), c.timeout), false
			}
			return nil, false
		}
		c.mu.Lock()
		if len(c.pending) > 0 && c.pending[0] == p && p.gen == gens[i] {
			c.pending[0] = nil
			c.pending = c.pending[1:]
			c.spare = append(c.spare, p.ev)
		}
		c.mu.Unlock()
	}
	return nil, false
}

// watch polls until the communicator is closed or fails; on a cause to
// fail, it aborts the whole clique.
func (c *commState) watch(cl *clique, poll time.Duration) {
	defer close(c.done)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		cause, stop := c.tick(time.Now())
		if cause != nil {
			cl.abort(cause, -1, false)
			return
		}
		if stop {
			return
		}
	}
}

// markFailed records the cause, unless the communicator already failed or
// was released; it reports whether the caller must now abort the handle.
func (c *commState) markFailed(cause error, rank int, byUser bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil || c.released {
		return false
	}
	c.failed = errorf("%w: %w", ErrAborted, cause)
	c.failRank, c.byUser = rank, byUser
	return true
}

// waitIdle waits until no call holds a lease, or until deadline.
func (c *commState) waitIdle(deadline time.Time) {
	for {
		c.mu.Lock()
		n := c.busy
		c.mu.Unlock()
		if n == 0 || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// abortHandle aborts the handle of a communicator marked failed.
func (c *commState) abortHandle() {
	err := c.h.abort()
	c.mu.Lock()
	c.released = true
	if err != nil {
		c.failed = errorf("%w (and ncclCommAbort failed: %v)", c.failed, err)
	}
	c.mu.Unlock()
	close(c.abortDone)
}

// close waits for the collectives queued so far (the watchdog aborts
// those that do not complete in time), stops the watchdog and releases
// the handle and the events. It returns the failure that ended the
// communicator, if NCCL or a timeout did, and nil after [Communicator.Abort].
func (c *commState) close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	pend := make([]backend.Event, 0, len(c.pending))
	for _, p := range c.pending {
		pend = append(pend, p.ev)
	}
	c.mu.Unlock()
	var err error
	for _, ev := range pend {
		if e := ev.Synchronize(); e != nil && err == nil {
			err = errorf("parallel: closing %s: %w", c.where, e)
		}
	}
	close(c.stop)
	<-c.done

	c.mu.Lock()
	failed := c.failed != nil
	if !failed {
		c.released = true
	}
	c.mu.Unlock()
	if failed {
		<-c.abortDone
	} else if e := c.h.destroy(); e != nil && err == nil {
		err = errorf("parallel: closing %s: %w", c.where, e)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pending {
		c.spare = append(c.spare, p.ev)
	}
	c.pending = nil
	for _, ev := range c.spare {
		ev.Destroy()
	}
	c.spare = nil
	if c.failed != nil && !c.byUser {
		return c.failureLocked("close")
	}
	return err
}

// clique is the communicators that fail together: those of one
// NewNCCLGroup, whose ranks would otherwise wait for an aborted one, or
// the one communicator of a NewNCCLRank (its peers, in other processes,
// find out by their own watchdogs).
type clique struct {
	members []*commState
}

// abort fails every member with cause, naming rank (-1: not known), and
// aborts their handles.
func (cl *clique) abort(cause error, rank int, byUser bool) {
	var todo []*commState
	for _, c := range cl.members {
		if c.markFailed(cause, rank, byUser) {
			todo = append(todo, c)
		}
	}
	deadline := time.Now().Add(abortGrace)
	for _, c := range todo {
		c.waitIdle(deadline)
	}
	for _, c := range todo {
		c.abortHandle()
	}
}
