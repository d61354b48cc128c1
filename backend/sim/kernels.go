package sim

import (
	"fmt"

	"github.com/vramgo/vram/backend"
)

// The kernels unwrap sim buffers and run the CPU's, or do nothing in
// shape-only mode.

// raw returns v over the host data, and false in shape-only mode.
func raw(v backend.View) (backend.View, bool) {
	b, ok := v.Buf.(*buffer)
	if !ok || b.data == nil {
		return v, false
	}
	v.Buf = b.data
	return v, true
}

func raws(vs ...backend.View) ([]backend.View, bool) {
	out := make([]backend.View, len(vs))
	for i, v := range vs {
		r, ok := raw(v)
		if !ok {
			return nil, false
		}
		out[i] = r
	}
	return out, true
}

// CopyFromHost writes host bytes into dst (dropped in shape-only mode).
func (d *Device) CopyFromHost(dst backend.View, src []byte) error {
	r, ok := raw(dst)
	if !ok {
		return nil
	}
	return d.host.CopyFromHost(r, src)
}

// CopyToHost reads src into host bytes. A shape-only device has no data to
// read, which is an error.
func (d *Device) CopyToHost(dst []byte, src backend.View) error {
	r, ok := raw(src)
	if !ok {
		return fmt.Errorf("sim:%d is shape-only: it keeps no data to read", d.index)
	}
	return d.host.CopyToHost(dst, r)
}

// Fill runs the CPU kernel.
func (d *Device) Fill(dst backend.View, value float64) error {
	if r, ok := raw(dst); ok {
		return d.host.Fill(r, value)
	}
	return nil
}

// Copy runs the CPU kernel.
func (d *Device) Copy(dst, src backend.View) error {
	if v, ok := raws(dst, src); ok {
		return d.host.Copy(v[0], v[1])
	}
	return nil
}

// Unary runs the CPU kernel.
func (d *Device) Unary(op backend.UnaryOp, dst, src backend.View, param float64) error {
	if v, ok := raws(dst, src); ok {
		return d.host.Unary(op, v[0], v[1], param)
	}
	return nil
}

// Binary runs the CPU kernel.
func (d *Device) Binary(op backend.BinaryOp, dst, a, b backend.View) error {
	if v, ok := raws(dst, a, b); ok {
		return d.host.Binary(op, v[0], v[1], v[2])
	}
	return nil
}

// Scalar runs the CPU kernel.
func (d *Device) Scalar(op backend.BinaryOp, dst, a backend.View, s float64, reversed bool) error {
	if v, ok := raws(dst, a); ok {
		return d.host.Scalar(op, v[0], v[1], s, reversed)
	}
	return nil
}

// Where runs the CPU kernel.
func (d *Device) Where(dst, cond, a, b backend.View) error {
	if v, ok := raws(dst, cond, a, b); ok {
		return d.host.Where(v[0], v[1], v[2], v[3])
	}
	return nil
}

// Reduce runs the CPU kernel.
func (d *Device) Reduce(op backend.ReduceOp, dst, src backend.View, axes []int) error {
	if v, ok := raws(dst, src); ok {
		return d.host.Reduce(op, v[0], v[1], axes)
	}
	return nil
}

// MatMul runs the CPU kernel.
func (d *Device) MatMul(dst, a, b backend.View) error {
	if v, ok := raws(dst, a, b); ok {
		return d.host.MatMul(v[0], v[1], v[2])
	}
	return nil
}

// Gather runs the CPU kernel.
func (d *Device) Gather(dst, src, index backend.View, axis int) error {
	if v, ok := raws(dst, src, index); ok {
		return d.host.Gather(v[0], v[1], v[2], axis)
	}
	return nil
}

// ScatterAdd runs the CPU kernel.
func (d *Device) ScatterAdd(dst, index, src backend.View, axis int) error {
	if v, ok := raws(dst, index, src); ok {
		return d.host.ScatterAdd(v[0], v[1], v[2], axis)
	}
	return nil
}

var _ backend.FusedMatMul = (*Device)(nil)

// MatMulBias runs the CPU's fused product. It implements
// [backend.FusedMatMul].
func (d *Device) MatMulBias(dst, a, b, bias backend.View, relu bool) error {
	f, ok := d.host.(backend.FusedMatMul)
	if !ok {
		return fmt.Errorf("sim: matmul_bias: %w", backend.ErrNotImplemented)
	}
	if v, ok := raws(dst, a, b, bias); ok {
		return f.MatMulBias(v[0], v[1], v[2], v[3], relu)
	}
	return nil
}

// MatMulRowSum runs the CPU's fused product. It implements
// [backend.FusedMatMul].
func (d *Device) MatMulRowSum(dst, a, b, rowSum backend.View) error {
	f, ok := d.host.(backend.FusedMatMul)
	if !ok {
		return fmt.Errorf("sim: matmul_rowsum: %w", backend.ErrNotImplemented)
	}
	if v, ok := raws(dst, a, b, rowSum); ok {
		return f.MatMulRowSum(v[0], v[1], v[2], v[3])
	}
	return nil
}

var (
	_ backend.FusedAdam = (*Device)(nil)
	_ backend.FusedSGD  = (*Device)(nil)
)

// AdamStep runs the CPU's fused Adam step, which computes what the CUDA
// kernel computes (float32 inside for the 16-bit dtypes). It implements
// [backend.FusedAdam].
func (d *Device) AdamStep(p, g, m, v backend.View, cfg backend.AdamStepConfig) error {
	f, ok := d.host.(backend.FusedAdam)
	if !ok {
		return fmt.Errorf("sim: adam step: %w", backend.ErrNotImplemented)
	}
	if r, ok := raws(p, g, m, v); ok {
		return f.AdamStep(r[0], r[1], r[2], r[3], cfg)
	}
	return nil
}

// SGDStep runs the CPU's fused SGD step. It implements [backend.FusedSGD].
// buf is used only with momentum, as the interface says.
func (d *Device) SGDStep(p, g, buf backend.View, cfg backend.SGDStepConfig) error {
	f, ok := d.host.(backend.FusedSGD)
	if !ok {
		return fmt.Errorf("sim: sgd step: %w", backend.ErrNotImplemented)
	}
	views := []backend.View{p, g}
	if cfg.Momentum != 0 {
		views = append(views, buf)
	}
	r, ok := raws(views...)
	if !ok {
		return nil
	}
	var rb backend.View
	if cfg.Momentum != 0 {
		rb = r[2]
	}
	return f.SGDStep(r[0], r[1], rb, cfg)
}
