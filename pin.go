package vram

// Operations and Release may run on different goroutines at once. An
// operation first pins the tensors it reads: each pin is a hold on the
// tensor's ref (tensorRef.hold), taken only while the tensor is not
// released. A use that comes after Release so panics with ErrReleased, and
// a Release that comes during the operation only marks the tensor: the
// operation's unpin then drops its storage and graph node. Every kernel
// launch and every new view or graph reference of a caller's tensor
// happens under a pin; the operation's own new tensors need none, since no
// other goroutine can reach them before it returns.

// pins are the tensors an operation holds until unpin. Most operations
// take one to three, which fit without allocating.
type pins struct {
	held [3]*tensorRef
	more []*tensorRef
}

// add holds t or, when t was released, unpins what p holds and panics
// with ErrReleased.
func (p *pins) add(op string, t *Tensor) {
	r := t.ref
	if !r.hold() {
		p.unpin()
		failReleased(op, t)
	}
	for i := range p.held {
		if p.held[i] == nil {
			p.held[i] = r
			return
		}
	}
	p.more = append(p.more, r)
}

// unpin lets go of every held tensor.
func (p pins) unpin() {
	for _, r := range p.held {
		if r != nil {
			r.unhold()
		}
	}
	for _, r := range p.more {
		r.unhold()
	}
}

// pin holds every tensor of ts until unpin, panicking with ErrArgument for
// a nil or zero one and ErrReleased for a released one (and holding none then). The
// idiom is defer pin(op, a, b).unpin().
func pin(op string, ts ...*Tensor) pins {
	var p pins
	for i, t := range ts {
		if absent(t) {
			p.unpin()
			nilTensor(op, t, i, len(ts))
		}
		p.add(op, t)
	}
	return p
}

// failReleased panics with the ErrReleased error of a use of t, saying the
// two ways a tensor is released and how to keep one.
func failReleased(op string, t *Tensor) {
	fail(op, ErrReleased, "tensor %v %s on %s was already released, by its Release or by the vram.Tidy it was made in; "+
		"use it before then, pass it to vram.Keep inside the Tidy, or Clone what must outlive it",
		Shape(t.shape), t.dtype, t.ref.st.ds.dev)
}
