package cuda

import (
	"github.com/vramgo/vram/backend"
)

var _ backend.Int8Dequantizer = (*Device)(nil)

// DequantizeInt8 expands an int8 weight with one kernel
// (kernels/quant.cu): dst[n,k] = wq[n,k]·scale[n], in float32 (float64
// for float64) rounded once to dst's dtype. It implements
// [backend.Int8Dequantizer]; the root package calls it into a transient
// buffer that the cuBLASLt product reads and that is released right after,
// rather than multiplying in a kernel of its own: for a batch of rows the
// product is bound by arithmetic, where cuBLASLt's tensor-core kernels
// are far ahead of a hand-written one, and expanding the weight costs one
// pass over it (a byte read and 2 or 4 written per element).
func (dev *Device) DequantizeInt8(s backend.Stream, dst, wq, scale backend.View) error {
	const what = "dequantize int8"
	d, err := dev.begin(s, what, backend.CheckDequantizeInt8(dst, wq, scale))
	if err != nil {
		return err
	}
	ops, err := d.ops(what, dst, wq)
	if err != nil {
		return err
	}
	sc, err := d.op(what, scale)
	if err != nil {
		return err
	}
	rows, cols := int64(wq.Shape[0]), int64(wq.Shape[1])
	n := rows * cols
	if n == 0 {
		return nil
	}
	vec := int32(0)
	if cols%4 == 0 && uint64(ops[1].ptr)%4 == 0 && uint64(ops[0].ptr)%uint64(4*dst.DType.Size()) == 0 {
		vec = 1
	}
	units := n
	if vec == 1 {
		units = n / 4
	}
	key := modKey{fam: famQuant, dt: dst.DType, op: "dequant"}
	return d.run(func() error {
		f, err := d.function(key, "dequant_i8")
		if err != nil {
			return err
		}
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(ops[0].ptr).Ptr(ops[1].ptr).Ptr(sc.ptr).Int64(rows).Int64(cols).Int32(vec)
		return d.launch(f, d.grid(units), a)
	})
}
