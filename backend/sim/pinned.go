package sim

import (
	"fmt"

	"github.com/vramgo/vram/backend"
)

// pinned is simulated page-locked host memory: ordinary host memory that
// the device copies to and from when a stream reaches the copy, not when
// it is queued, so that a program which writes a pinned buffer before its
// queued copy ran sees the new values copied, as on a GPU.
type pinned struct {
	backend.HostBuffer
	d *Device
}

// PinnedBy returns the simulated device that allocated the buffer.
func (p *pinned) PinnedBy() backend.Device { return p.d }

var (
	_ backend.AsyncCopier = (*Device)(nil)
	_ backend.Pinned      = (*pinned)(nil)
)

// AllocPinned returns nbytes of simulated page-locked host memory.
func (d *Device) AllocPinned(nbytes int64) (backend.HostBuffer, error) {
	b, err := d.host.Alloc(nbytes, d.host.DefaultStream(), "")
	if err != nil {
		return nil, fmt.Errorf("sim:%d: pinned host memory: %w", d.index, err)
	}
	return &pinned{HostBuffer: b.(backend.HostBuffer), d: d}, nil
}

// FreePinned drops the buffer; copies still queued on it keep its memory
// until they run (the garbage collector frees it after).
func (d *Device) FreePinned(backend.HostBuffer) {}

// hostOperand checks that v is a contiguous view of pinned memory and
// returns it as a view the CPU kernels read.
func (d *Device) hostOperand(what string, v backend.View) (backend.View, error) {
	p, ok := v.Buf.(*pinned)
	if !ok {
		return v, fmt.Errorf("sim:%d: %s: the host buffer (%T) is not pinned memory: %w", d.index, what, v.Buf, backend.ErrNotImplemented)
	}
	if !v.IsContiguous() {
		return v, fmt.Errorf("sim:%d: %s: host view is not contiguous", d.index, what)
	}
	v.Buf = p.HostBuffer
	return v, nil
}

// CopyFromPinned queues the copy of pinned src into dst on s; the data is
// read when s runs the copy.
func (d *Device) CopyFromPinned(s backend.Stream, dst, src backend.View) error {
	h, err := d.hostOperand("copy from pinned memory", src)
	if err != nil {
		return err
	}
	if st, err := d.stream("copy from pinned memory", s); err != nil {
		return err
	} else if err := d.refuseHostCopy("copy from pinned memory", st); err != nil {
		return err
	}
	return d.run("copy from pinned memory", s, backend.CheckCopy(dst, h), func(v []backend.View) error {
		return d.host.Copy(d.hostStream(), v[0], h)
	}, dst)
}

// CopyToPinned queues the copy of src into pinned dst on s; dst holds the
// data once s has run the copy.
func (d *Device) CopyToPinned(s backend.Stream, dst, src backend.View) error {
	h, err := d.hostOperand("copy to pinned memory", dst)
	if err != nil {
		return err
	}
	if st, err := d.stream("copy to pinned memory", s); err != nil {
		return err
	} else if err := d.refuseHostCopy("copy to pinned memory", st); err != nil {
		return err
	}
	return d.run("copy to pinned memory", s, backend.CheckCopy(h, src), func(v []backend.View) error {
		return d.host.Copy(d.hostStream(), h, v[0])
	}, src)
}
