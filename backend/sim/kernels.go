package sim

import "github.com/vramgo/vram/backend"

// The kernels unwrap sim buffers and run the CPU's.

func raw(v backend.View) backend.View {
	if b, ok := v.Buf.(*buffer); ok {
		v.Buf = b.Buffer
	}
	return v
}

// CopyFromHost writes host bytes into dst.
func (d *Device) CopyFromHost(dst backend.View, src []byte) error {
	return d.Device.CopyFromHost(raw(dst), src)
}

// CopyToHost reads src into host bytes.
func (d *Device) CopyToHost(dst []byte, src backend.View) error {
	return d.Device.CopyToHost(dst, raw(src))
}

// Fill runs the CPU kernel.
func (d *Device) Fill(dst backend.View, value float64) error { return d.Device.Fill(raw(dst), value) }

// Copy runs the CPU kernel.
func (d *Device) Copy(dst, src backend.View) error { return d.Device.Copy(raw(dst), raw(src)) }

// Unary runs the CPU kernel.
func (d *Device) Unary(op backend.UnaryOp, dst, src backend.View, param float64) error {
	return d.Device.Unary(op, raw(dst), raw(src), param)
}

// Binary runs the CPU kernel.
func (d *Device) Binary(op backend.BinaryOp, dst, a, b backend.View) error {
	return d.Device.Binary(op, raw(dst), raw(a), raw(b))
}

// Scalar runs the CPU kernel.
func (d *Device) Scalar(op backend.BinaryOp, dst, a backend.View, s float64, reversed bool) error {
	return d.Device.Scalar(op, raw(dst), raw(a), s, reversed)
}

// Where runs the CPU kernel.
func (d *Device) Where(dst, cond, a, b backend.View) error {
	return d.Device.Where(raw(dst), raw(cond), raw(a), raw(b))
}

// Reduce runs the CPU kernel.
func (d *Device) Reduce(op backend.ReduceOp, dst, src backend.View, axes []int) error {
	return d.Device.Reduce(op, raw(dst), raw(src), axes)
}

// MatMul runs the CPU kernel.
func (d *Device) MatMul(dst, a, b backend.View) error {
	return d.Device.MatMul(raw(dst), raw(a), raw(b))
}

// Gather runs the CPU kernel.
func (d *Device) Gather(dst, src, index backend.View, axis int) error {
	return d.Device.Gather(raw(dst), raw(src), raw(index), axis)
}

// ScatterAdd runs the CPU kernel.
func (d *Device) ScatterAdd(dst, index, src backend.View, axis int) error {
	return d.Device.ScatterAdd(raw(dst), raw(index), raw(src), axis)
}
