package vram

import (
	"errors"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/units"
)

// To returns t on device d: a copy when d differs from t's device, else a
// new reference to t. It is differentiable: gradients flow back to t's
// device, which is what makes model parallelism across devices train. It
// panics with [ErrUnavailable] when d cannot be used.
//
// With [NonBlocking], a copy between pinned host memory ([Tensor.PinMemory])
// and a GPU is queued on the current stream and To returns at once, as
// torch's non_blocking=True does; a copy to the host then lands in pinned
// memory. Unlike PyTorch, reading or writing the host tensor on the CPU
// waits for the copy first, so the result is never read early. Copies that
// cannot be asynchronous (pageable memory, the CPU, a sim device's data
// read at once) are made as without the option.
//
// A [MemoryFormat] among opts lays the result out in that format
// (t.To(d, vram.ChannelsLast)), copying on d itself when t is already there
// in another layout; without one, a copy of a channels-last tensor is
// channels-last too. More than one format, or one that is neither
// ContiguousFormat nor ChannelsLast, panics with [ErrArgument], as in
// [Tensor.Contiguous].
func (t *Tensor) To(d Device, opts ...CopyOption) *Tensor {
	defer pin("to", t).unpin()
	var co copyOptions
	for _, o := range opts {
		if o == nil {
			fail("to", ErrArgument, "nil copy option")
		}
		o.applyCopy(&co)
	}
	if co.formats > 1 {
		fail("to", ErrArgument, "takes at most one memory format, got %d", co.formats)
	}
	if co.hasFormat {
		co.format.check("to")
		needs4D("to", t, co.format)
	} else if t.SuggestMemoryFormat() == ChannelsLast {
		// A copy keeps t's format, as PyTorch's preserve_format does.
		co.format, co.hasFormat = ChannelsLast, true
	}
	if t.Device() == d {
		if co.hasFormat {
			return t.toFormat("to", co.format)
		}
		return t.identity("to")
	}
	dst := mustDevice("to", d)
	out := copyAcross(t, dst, co.nonBlocking)
	if needsGrad(t) {
		src := t.Device()
		record("to", out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.To(src, opts...)} })
	}
	if co.hasFormat {
		defer out.Release()
		return out.toFormat("to", co.format)
	}
	return out
}

// CopyOption changes how [Tensor.To] copies.
type CopyOption interface{ applyCopy(*copyOptions) }

type copyOptions struct {
	nonBlocking bool
	format      MemoryFormat // with hasFormat: the layout of the result
	hasFormat   bool
	formats     int // the MemoryFormats among the options, to refuse more than one
}

type nonBlocking struct{}

func (nonBlocking) applyCopy(o *copyOptions) { o.nonBlocking = true }

// NonBlocking makes [Tensor.To] queue a copy between pinned host memory
// and a GPU without waiting for it (torch's non_blocking=True).
var NonBlocking CopyOption = nonBlocking{}

// peerCopier is implemented by backend devices that copy directly to
// another device of their kind (backend/cuda's PeerCopier).
type peerCopier interface {
	CopyPeer(s backend.Stream, dst backend.View, to backend.Device, toStream backend.Stream, src backend.View) error
}

// copyAcross copies t's elements to a new contiguous tensor on dst: directly
// between devices that can (GPU to GPU), without waiting between pinned
// host memory and a GPU when nonBlocking is set, else through host memory.
// The caller pins t.
func copyAcross(t *Tensor, dst *devState, nonBlocking bool) *Tensor {
	src := t.ds()
	if nonBlocking {
		if out := copyAsync(t, dst); out != nil {
			return out
		}
	}
	out := newTensor("to", dst, t.dtype, t.shape)
	if out.NumElements() == 0 {
		return out
	}
	defer releaseOnPanic(out) // a refused copy (a graph capture) keeps nothing
	if pc, ok := src.bd.(peerCopier); ok && src.dev.Kind == dst.dev.Kind {
		// A direct copy between two GPUs (NVLink or PCIe), without the host.
		c := t.contiguous("to")
		err := pc.CopyPeer(src.stream(), out.bv(), dst.bd, dst.stream(), c.bv())
		c.Release()
		check("to", err)
		return out
	}
	if src != dst && src.dev.Kind == dst.dev.Kind && src.dev.Kind != "cpu" {
		readAfter("to", src, dst)
	}
	raw := t.readHost("to")
	if hb, ok := out.ref.st.buf.(backend.HostBuffer); ok && dst.dev.Kind == "cpu" {
		copy(hb.Host(), raw)
		return out
	}
	check("to", dst.bd.CopyFromHost(dst.stream(), out.bv(), raw))
	return out
}

// readAfter makes the current stream of src, which a copy to dst through
// host memory reads on, wait for the work queued so far on dst's current
// stream, as PyTorch's copies between GPUs (and the CUDA backend's peer
// copies) do: a destination stream made to wait for the stream that wrote
// the source (s1.WaitEvent(s0.RecordEvent()), then t.To(dev1) on s1)
// then reads what that stream wrote, not what the memory held before.
func readAfter(op string, src, dst *devState) {
	ev, err := dst.bd.NewEvent(false)
	if err != nil {
		panic(&Error{Op: op, Kind: ErrBackend, Detail: dst.dev.String(), Err: err})
	}
	defer ev.Destroy()
	check(op, ev.Record(dst.stream()))
	check(op, src.stream().WaitEvent(ev))
}

// copyAsync makes the copy of a non-blocking To when it can be one: from
// a pinned CPU tensor to a device whose backend pinned it, or from such a
// device to new pinned memory. It returns nil when it cannot.
func copyAsync(t *Tensor, dst *devState) *Tensor {
	src := t.ds()
	switch {
	case src.dev.Kind == "cpu" && t.ref.st.pinnedBy != nil && t.IsContiguous():
		ac, ok := dst.bd.(backend.AsyncCopier)
		if !ok || ac != t.ref.st.pinnedBy {
			return nil
		}
		out := newTensor("to", dst, t.dtype, t.shape)
		t.ref.st.settle()
		err := ac.CopyFromPinned(dst.stream(), out.bv(), t.bv())
		if errors.Is(err, backend.ErrNotImplemented) {
			out.Release()
			return nil
		}
		if err != nil {
			out.Release()
		}
		check("to", err)
		t.ref.st.setPending("to", dst)
		return out
	case dst.dev.Kind == "cpu":
		ac, ok := src.bd.(backend.AsyncCopier)
		if !ok {
			return nil
		}
		out := newPinnedTensor("to", src, ac, t.dtype, t.shape)
		c := t.contiguous("to")
		defer c.Release()
		err := ac.CopyToPinned(src.stream(), out.bv(), c.bv())
		if errors.Is(err, backend.ErrNotImplemented) {
			out.Release()
			return nil
		}
		if err != nil {
			out.Release()
		}
		check("to", err)
		out.ref.st.setPending("to", src)
		return out
	}
	return nil
}

// PinMemory returns t in page-locked host memory (torch's pin_memory), from
// which [Tensor.To] with [NonBlocking] copies to the GPU without waiting:
// a copy of t when t is a CPU tensor in pageable memory, t itself when it is
// already pinned. The memory is pinned by device d's backend, the current
// CUDA device when d is not given; sim devices pin simulated memory. It
// panics with [ErrDevice] when t is not on the CPU and with [ErrUnavailable]
// when the device cannot pin memory.
func (t *Tensor) PinMemory(d ...Device) *Tensor {
	const op = "pin_memory"
	defer pin(op, t).unpin()
	if t.Device() != CPU {
		fail(op, ErrDevice, "only CPU tensors can be pinned; t is on %s", t.Device())
	}
	if len(d) > 1 {
		fail(op, ErrArgument, "one device at most, got %d", len(d))
	}
	dev := CUDA()
	if len(d) == 1 {
		dev = d[0]
	}
	ds := mustDevice(op, dev)
	ac, ok := ds.bd.(backend.AsyncCopier)
	if !ok {
		fail(op, ErrUnavailable, "%s cannot pin host memory", dev)
	}
	if t.ref.st.pinnedBy == ac {
		return t.identity(op)
	}
	out := newPinnedTensor(op, ds, ac, t.dtype, t.shape)
	raw := t.readHost(op)
	copy(out.ref.st.buf.(backend.HostBuffer).Host(), raw)
	return out
}

// IsPinned reports whether t is a CPU tensor in page-locked host memory
// (torch's is_pinned).
func (t *Tensor) IsPinned() bool {
	t.live("is_pinned")
	return t.ref.st.pinnedBy != nil
}

// newPinnedTensor returns a contiguous CPU tensor in memory pinned by ac,
// the AsyncCopier of device by.
func newPinnedTensor(op string, by *devState, ac backend.AsyncCopier, dt DType, shape []int) *Tensor {
	_, nbytes := checkShape(op, shape, dt)
	buf, err := ac.AllocPinned(nbytes)
	if err != nil {
		panic(&Error{Op: op, Kind: ErrBackend, Detail: "pinning " + units.Bytes(nbytes) + " of host memory for " + by.dev.String(), Err: err})
	}
	cpu := mustDevice(op, CPU)
	st := &storage{ds: cpu, buf: buf, bytes: nbytes, stream: cpu.defStreamB, pinnedBy: ac}
	st.refs.Store(1)
	cpu.counted(nbytes)
	return wrapStorage(st, dt, shape)
}

// CUDA returns t on CUDA device index, or on the current CUDA device when
// no index is given (PyTorch's .cuda()); more than one index panics with
// [ErrArgument], as [CUDA] does. Like To, it is differentiable.
func (t *Tensor) CUDA(index ...int) *Tensor {
	defer asOp("cuda")
	return t.To(CUDA(index...))
}

// CPU returns t on the CPU (PyTorch's .cpu()). Like To, it is
// differentiable.
func (t *Tensor) CPU() *Tensor {
	defer asOp("cpu")
	return t.To(CPU)
}

// MoveTo moves a leaf tensor to device d in place, keeping its identity, so
// that modules and optimizers that hold it see the move (Module.To uses
// it). Its gradient moves with it, and a channels-last tensor stays
// channels-last. It panics with [ErrAutograd] on a tensor computed by a
// recorded operation.
func (t *Tensor) MoveTo(d Device) {
	defer asOp("move_to")
	defer pin("move_to", t).unpin()
	if t.ref.node != nil {
		fail("move_to", ErrAutograd, "only leaf tensors can be moved in place; use To for computed tensors")
	}
	if t.Device() == d {
		return
	}
	dst := mustDevice("move_to", d)
	moved := copyAcross(t, dst, false)
	if t.SuggestMemoryFormat() == ChannelsLast {
		// The moved tensor keeps its format (a model converted with
		// nn.ToMemoryFormat stays channels-last on its new device).
		c := moved.inFormat("move_to", ChannelsLast)
		moved.Release()
		moved = c
	}
	Keep(moved)
	// Swap the storages: t takes the new one, moved the old one, which
	// its Release then drops. Each ref stays with its own Tensor, whose
	// cleanup backstop watches it.
	swapStorage(t.ref, moved.ref)
	t.shape, t.strides, t.offset = moved.shape, moved.strides, moved.offset
	moved.Release()
	if g := t.Grad(); g != nil {
		g.MoveTo(d)
	}
}

// CastInPlace converts a leaf tensor to the floating-point dtype dt in
// place, keeping its identity, so that modules and optimizers that hold it
// see the change (Module.Half and Module.Float use it). Its gradient is
// converted with it. Values are rounded to dt as [Tensor.Cast] rounds them;
// float32 values past 65504 become ±Inf in float16. It panics with
// [ErrAutograd] on a tensor computed by a recorded operation and with
// [ErrDType] when t or dt is not a floating-point type.
func (t *Tensor) CastInPlace(dt DType) {
	const op = "cast_in_place"
	defer asOp(op)
	defer pin(op, t).unpin()
	if t.ref.node != nil {
		fail(op, ErrAutograd, "only leaf tensors can be converted in place; use Cast for computed tensors")
	}
	if !dt.b().Valid() || !dt.IsFloat() {
		fail(op, ErrDType, "target dtype %v is not a floating-point type; convert in place only between float16, bfloat16, float32 and float64", dt)
	}
	if !t.dtype.IsFloat() {
		fail(op, ErrDType, "tensor has dtype %s; only floating-point tensors can be converted in place", t.dtype)
	}
	if t.dtype == dt {
		return
	}
	converted := castRaw(t, dt)
	Keep(converted)
	// Swap the storages as MoveTo does: t takes the converted one, the
	// temporary the old one, which its Release then drops.
	swapStorage(t.ref, converted.ref)
	t.dtype, converted.dtype = converted.dtype, t.dtype
	t.shape, converted.shape = converted.shape, t.shape
	t.strides, converted.strides = converted.strides, t.strides
	t.offset, converted.offset = converted.offset, t.offset
	if s := t.ref.site; s != nil {
		// A leak report of t names the dtype t has now. The site may
		// also be the old storage's origin, which its views still name:
		// change a copy.
		c := *s
		c.dtype = dt
		t.ref.site = &c
	}
	converted.Release()
	if g := t.Grad(); g != nil {
		g.CastInPlace(dt)
	}
}
