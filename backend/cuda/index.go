package cuda

import (
	"fmt"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

// Index errors. Gather checks each index in its kernel and ScatterAdd runs
// a checking kernel before adding; a bad index is written to the device's
// error words and reported, as a [KernelError], by the next Synchronize (a
// check on the host would need the indices there: a copy and a wait for
// every embedding lookup). The bad elements are skipped, so the memory
// stays safe.

// axisless returns strides with the one along axis set to 0.
func axisless(strides []int, axis int) []int {
	s := append([]int(nil), strides...)
	s[axis] = 0
	return s
}

// Gather sets dst[...i...] = src[...index[...i...]...] along axis. An index
// out of range is reported by the next Synchronize.
func (dev *Device) Gather(s backend.Stream, dst, src, index backend.View, axis int) error {
	const what = "gather"
	d, err := dev.begin(s, what, backend.CheckGather(dst, src, index, axis))
	if err != nil {
		return err
	}
	if dst.NumElements() == 0 {
		return nil
	}
	if src.Shape[axis] == 0 {
		return fmt.Errorf("cuda: %s: every index is out of range for axis %d of size 0", what, axis)
	}
	dp, err := d.ptrOf(what, dst)
	if err != nil {
		return err
	}
	ip, err := d.ptrOf(what, index)
	if err != nil {
		return err
	}
	sp, err := d.ptrOf(what, src)
	if err != nil {
		return err
	}
	w := dst.DType.Size()
	ops := []ewOp{{ptr: dp, size: w, strides: dst.Strides}, {ptr: ip, size: 8, strides: index.Strides},
		{ptr: sp, size: w, strides: axisless(src.Strides, axis)}}
	k := ewKernel{key: modKey{fam: famBytes, op: "gather"}, s: gatherNames[w]}
	bound, ast := int64(src.Shape[axis]), int64(src.Strides[axis])
	return d.run(func() error {
		d.armed.Store(true)
		return d.ewise(k, dst.Shape, ops, func(a *cuda.KernelArgs, p []cuda.DevicePtr) {
			a.Ptr(p[0]).Ptr(p[2]).Ptr(p[1]).Ptr(d.errWords).Int64(bound).Int64(ast)
		})
	})
}

// ScatterAdd adds src[...i...] into dst[...index[...i...]...] along axis,
// with atomic additions (float16 and bfloat16 through compare-and-swap on
// the 32-bit word that holds the element): repeated indices accumulate in
// an unspecified order. A bad index is reported by the next Synchronize,
// and dst is then unchanged.
func (dev *Device) ScatterAdd(s backend.Stream, dst, index, src backend.View, axis int) error {
	const what = "scatter-add"
	d, err := dev.begin(s, what, backend.CheckScatterAdd(dst, index, src, axis))
	if err != nil {
		return err
	}
	if src.NumElements() == 0 {
		return nil
	}
	dp, err := d.ptrOf(what, dst)
	if err != nil {
		return err
	}
	ip, err := d.ptrOf(what, index)
	if err != nil {
		return err
	}
	sp, err := d.ptrOf(what, src)
	if err != nil {
		return err
	}
	w := dst.DType.Size()
	bound, ast := int64(dst.Shape[axis]), int64(dst.Strides[axis])
	return d.run(func() error {
		d.armed.Store(true)
		chk := ewKernel{key: modKey{fam: famBytes, op: "check"}, s: "check_index"}
		err := d.ewise(chk, index.Shape, []ewOp{{ptr: ip, size: 8, strides: index.Strides}}, func(a *cuda.KernelArgs, p []cuda.DevicePtr) {
			a.Ptr(p[0]).Ptr(d.errWords).Int64(bound)
		})
		if err != nil {
			return err
		}
		ops := []ewOp{{ptr: dp, size: w, strides: axisless(dst.Strides, axis)}, {ptr: ip, size: 8, strides: index.Strides},
			{ptr: sp, size: w, strides: src.Strides}}
		k := ewKernel{key: modKey{fam: famScatter, dt: dst.DType}, s: "scatter_add"}
		return d.ewise(k, src.Shape, ops, func(a *cuda.KernelArgs, p []cuda.DevicePtr) {
			a.Ptr(p[0]).Ptr(p[1]).Ptr(p[2]).Ptr(d.errWords).Int64(ast).Int64(bound)
		})
	})
}
