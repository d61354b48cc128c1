package parallel

import (
	"errors"
	"fmt"

	"github.com/vramgo/vram"
)

// ReduceOp is how a collective combines the ranks' values.
type ReduceOp uint8

// The reductions, as NCCL names them.
const (
	Sum ReduceOp = iota
	Prod
	Max
	Min
	Avg // the sum divided by the number of ranks
)

var reduceNames = [...]string{"sum", "prod", "max", "min", "avg"}

// String returns the reduction's name, such as "sum".
func (op ReduceOp) String() string {
	if int(op) < len(reduceNames) {
		return reduceNames[op]
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(op))
}

// Communicator is one rank's handle on a group of Size ranks, numbered
// from 0. Every rank of the group calls each collective, in the same
// order, with tensors of the same dtype and number of elements (on its own
// device). Collectives work in place; they are queued on the current
// stream of the tensor's device (see vram.WithStream) and may return
// before they complete, as NCCL's do: later work on that stream sees the
// result, and the stream's Synchronize waits for it. A failed rank makes
// the collectives of the others return an error that names it rather than
// wait for ever.
//
// A Communicator is used by one goroutine at a time.
type Communicator interface {
	// Rank returns this rank's number.
	Rank() int
	// Size returns the number of ranks.
	Size() int
	// Device returns the device of this rank's tensors.
	Device() vram.Device
	// AllReduce replaces t, on every rank, by the reduction of all ranks' t.
	AllReduce(t *vram.Tensor, op ReduceOp) error
	// Broadcast replaces t, on every rank, by root's t.
	Broadcast(t *vram.Tensor, root int) error
	// Reduce replaces t on root by the reduction of all ranks' t; other
	// ranks' t is left as it was.
	Reduce(t *vram.Tensor, op ReduceOp, root int) error
	// AllGather sets dst, on every rank, to the ranks' src in rank order:
	// dst has Size() times src's elements (contiguous, src of rank r at
	// offset r·len(src)).
	AllGather(dst, src *vram.Tensor) error
	// ReduceScatter sets dst on rank r to part r of the reduction of the
	// ranks' src: src has Size() times dst's elements.
	ReduceScatter(dst, src *vram.Tensor, op ReduceOp) error
	// Send sends t to rank peer, which calls Recv with a tensor of the same
	// dtype and number of elements.
	Send(t *vram.Tensor, peer int) error
	// Recv receives into t what rank peer sends.
	Recv(t *vram.Tensor, peer int) error
	// Barrier returns once every rank has called it.
	Barrier() error
	// Abort ends the communicator at once, on every rank that can be told:
	// their pending and later collectives return an error wrapping
	// [ErrAborted] and err.
	Abort(err error)
	// Close releases the communicator after its collectives complete.
	Close() error
}

// Errors of the collectives, matched with errors.Is.
var (
	// ErrAborted: the communicator was aborted (by Abort, a failed rank or
	// a timeout).
	ErrAborted = errors.New("parallel: communicator aborted")
	// ErrTimeout: a rank did not arrive within the communicator's timeout.
	ErrTimeout = errors.New("parallel: timed out")
	// ErrMismatch: ranks called collectives that do not match (another op,
	// dtype or number of elements).
	ErrMismatch = errors.New("parallel: ranks disagree")
)

// RankError is the error of a collective that failed because of another
// rank: it names the rank and says what happened to it.
type RankError struct {
	Op   string // the collective ("all_reduce")
	Rank int    // the rank that failed, or -1 when not known
	Err  error  // what happened (wraps ErrAborted, ErrTimeout...)
}

// Error names the rank, when known, and what happened to it, saying
// "parallel: " once.
func (e *RankError) Error() string {
	var what string
	if e.Err != nil {
		what = unprefixed(e.Err)
	}
	if e.Rank < 0 {
		return fmt.Sprintf("parallel: %s: %s", e.Op, what)
	}
	return fmt.Sprintf("parallel: %s: rank %d: %s", e.Op, e.Rank, what)
}

// Unwrap returns the underlying error, for errors.Is and errors.As.
func (e *RankError) Unwrap() error { return e.Err }

// Every Communicator checks its arguments with the functions below before
// it joins the other ranks, so that a call one backend refuses is refused
// by the others too, with the same error: code that runs on the in-process
// or TCP collectives then runs on NCCL. A refused call leaves the
// communicator working.

// checkTensor returns the error of collective op for its tensor argument t,
// named role ("" for the one tensor of the call, or "source",
// "destination"), on a rank whose device is dev: nil (wrapping
// vram.ErrArgument), released (vram.ErrReleased), on another device
// (vram.ErrDevice), or, when the collective writes it, not contiguous
// (vram.ErrArgument): the result arrives as one block of elements.
func checkTensor(op, role string, t *vram.Tensor, dev vram.Device, written bool) error {
	what := "tensor"
	if role != "" {
		what = role + " tensor"
	}
	switch {
	case t == nil:
		return errorf("parallel: %s: nil %s: %w", op, what, vram.ErrArgument)
	case t.Released():
		return errorf("parallel: %s: the %s was released: %w", op, what, vram.ErrReleased)
	case t.Device() != dev:
		return errorf("parallel: %s: the %s is on %s, this rank's device is %s; move it with t.To(%s): %w",
			op, what, t.Device(), dev, dev, vram.ErrDevice)
	case written && !t.IsContiguous():
		return errorf("parallel: %s: the %s %v is not contiguous; pass a contiguous copy (t.Contiguous()) and copy the result back: %w",
			op, what, t.Shape(), vram.ErrArgument)
	}
	return nil
}

// checkRank returns the error of collective op for its rank argument r,
// named role ("root", "peer"), in a group of size ranks: one out of range
// wraps vram.ErrArgument.
func checkRank(op, role string, r, size int) error {
	if r < 0 || r >= size {
		return errorf("parallel: %s: %s %d is not a rank of a group of %d: %w", op, role, r, size, vram.ErrArgument)
	}
	return nil
}

// checkPeer returns the error of op (send, recv) for its peer argument on
// rank self of a group of size ranks: one out of range, or self, wraps
// vram.ErrArgument (a rank's message to itself would wait for a receive
// the same goroutine cannot make).
func checkPeer(op string, peer, self, size int) error {
	if err := checkRank(op, "peer", peer, size); err != nil {
		return err
	}
	if peer == self {
		return errorf("parallel: %s: rank %d cannot %s to itself: %w", op, peer, op, vram.ErrArgument)
	}
	return nil
}

// checkParts returns the error of collective op (all_gather,
// reduce_scatter) unless its tensor whole, named wholeRole, has size times
// the elements of part, named partRole, in the same dtype: another dtype
// wraps vram.ErrDType, another number of elements vram.ErrShape.
func checkParts(op, wholeRole string, whole *vram.Tensor, partRole string, part *vram.Tensor, size int) error {
	switch {
	case whole.DType() != part.DType():
		return errorf("parallel: %s: the %s tensor is %s, the %s tensor %s: %w",
			op, wholeRole, whole.DType(), partRole, part.DType(), vram.ErrDType)
	case whole.NumElements() != size*part.NumElements():
		return errorf("parallel: %s: the %s tensor has %d elements, want %d × %d (the %s tensor's, once per rank): %w",
			op, wholeRole, whole.NumElements(), size, part.NumElements(), partRole, vram.ErrShape)
	}
	return nil
}
