package vram

import "github.com/vramgo/vram/backend"

// To returns t on device d: a copy when d differs from t's device, else a
// new reference to t. It is differentiable: gradients flow back to t's
// device, which is what makes model parallelism across devices train. It
// panics with [ErrUnavailable] when d cannot be used.
func (t *Tensor) To(d Device) *Tensor {
	defer pin("to", t).unpin()
	if t.Device() == d {
		return t.identity("to")
	}
	dst := mustDevice("to", d)
	out := copyAcross(t, dst)
	if needsGrad(t) {
		src := t.Device()
		record("to", out, []*Tensor{t}, nil, func(g *Tensor) []*Tensor { return []*Tensor{g.To(src)} })
	}
	return out
}

// peerCopier is implemented by backend devices that copy directly to
// another device of their kind (backend/cuda's PeerCopier).
type peerCopier interface {
	CopyPeer(dst backend.View, to backend.Device, src backend.View) error
}

// copyAcross copies t's elements to a new contiguous tensor on dst: directly
// between devices that can (GPU to GPU), else through host memory. The
// caller pins t.
func copyAcross(t *Tensor, dst *devState) *Tensor {
	out := newTensor("to", dst, t.dtype, t.shape)
	if out.NumElements() == 0 {
		return out
	}
	if pc, ok := t.ds().bd.(peerCopier); ok && t.ds().dev.Kind == dst.dev.Kind {
		// A direct copy between two GPUs (NVLink or PCIe), without the host.
		c := t.contiguous("to")
		err := pc.CopyPeer(out.bv(), dst.bd, c.bv())
		c.Release()
		check("to", err)
		return out
	}
	raw := t.readHost("to")
	if hb, ok := out.ref.st.buf.(backend.HostBuffer); ok {
		copy(hb.Host(), raw)
		return out
	}
	check("to", dst.bd.CopyFromHost(out.bv(), raw))
	return out
}

// CUDA returns t on CUDA device index, or on the current CUDA device when
// no index is given (PyTorch's .cuda()). Like To, it is differentiable.
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
// it). Its gradient moves with it. It panics with [ErrAutograd] on a tensor
// computed by a recorded operation.
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
	moved := copyAcross(t, dst)
	Keep(moved)
	// Swap the storages: t takes the new one, moved the old one, which
	// its Release then drops. Each ref stays with its own Tensor, whose
	// cleanup backstop watches it.
	t.ref.st, moved.ref.st = moved.ref.st, t.ref.st
	t.shape, t.strides, t.offset = moved.shape, moved.strides, moved.offset
	moved.Release()
	if g := t.Grad(); g != nil {
		g.MoveTo(d)
	}
}
