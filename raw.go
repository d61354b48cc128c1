package vram

import (
	"fmt"

	"github.com/vramgo/vram/backend"
)

// RawBytes returns a copy of t's elements as raw little-endian bytes, in
// row-major order (t need not be contiguous). It is for code that moves
// tensors through files or sockets, such as the TCP collectives of package
// parallel.
func (t *Tensor) RawBytes() []byte {
	defer asOp("raw_bytes")
	return t.hostBytes("raw_bytes")
}

// SetRawBytes overwrites t's elements, in place, with raw little-endian
// bytes in row-major order: exactly t.Bytes() of them. t must be
// contiguous ([ErrArgument] otherwise, or for a wrong length). It does not
// record for autograd, like [Tensor.CopyFrom] on a tensor that needs none.
func (t *Tensor) SetRawBytes(b []byte) {
	const op = "set_raw_bytes"
	defer pin(op, t).unpin()
	if !t.IsContiguous() {
		fail(op, ErrArgument, "the tensor is not contiguous")
	}
	if int64(len(b)) != t.Bytes() {
		fail(op, ErrArgument, "%d bytes for a tensor of %d bytes (%v %s)", len(b), t.Bytes(), Shape(t.shape), t.dtype)
	}
	t.inPlaceCheck(op)
	t.writeBytes(op, b)
	t.wrote()
}

// RawTensor is a tensor's memory as its backend sees it, for packages that
// extend vram with kernels or collectives of their own (package parallel
// passes it to NCCL): the backend device, the view of the tensor's
// elements and the stream of the calling goroutine on that device.
type RawTensor struct {
	Device backend.Device
	View   backend.View
	Stream backend.Stream
}

// Raw calls fn with t's memory, keeping t alive while fn runs. fn may queue
// work on r.Stream that reads or writes the view's elements, and must not
// touch memory outside the view or keep the view after it returns (work
// it queued may still run; the stream orders it before later operations
// on t). Raw returns fn's error; it panics with [ErrReleased] for a
// released t.
//
// Raw does not count as an in-place write for autograd, as a write through
// PyTorch's data_ptr() does not: it cannot tell whether fn reads or writes,
// and reads (a send, the source of a collective) must leave the graphs that
// saved t usable. A fn that writes t's elements calls
// [Tensor.IncrementVersion] on t afterwards, as PyTorch's custom kernels
// call torch.autograd.graph.increment_version, so that a graph that saved
// t before refuses to backpropagate through the stale values rather than
// computing a wrong gradient. The collectives of package parallel and
// amp.GradScaler do so for the tensors they write.
func Raw(t *Tensor, fn func(r RawTensor) error) error {
	const op = "raw"
	defer pin(op, t).unpin()
	if fn == nil {
		fail(op, ErrArgument, "nil function")
	}
	ds := t.ds()
	if err := fn(RawTensor{Device: ds.bd, View: t.bv(), Stream: ds.stream()}); err != nil {
		return fmt.Errorf("vram: raw access to a tensor on %s: %w", ds.dev, err)
	}
	return nil
}

// Version returns the number of in-place writes made to t's storage
// (PyTorch's t._version). Views of t and [Tensor.Detach] share the
// storage, and so the count: a write through any of them is one to t. A
// graph that saved t for backward refuses to run once the count has
// moved. It panics with [ErrReleased] for a released t.
func (t *Tensor) Version() uint64 {
	defer pin("version", t).unpin()
	return t.ref.st.version.Load()
}

// IncrementVersion counts one in-place write to t's storage made where
// vram cannot see it, through [Raw] (torch.autograd.graph.increment_version):
// a graph that saved t, or a view of it, for backward then panics with
// [ErrAutograd] rather than compute a gradient from the overwritten values.
// vram's own in-place operations count their writes themselves. It panics
// with [ErrReleased] for a released t.
func (t *Tensor) IncrementVersion() {
	defer pin("increment_version", t).unpin()
	t.wrote()
}
