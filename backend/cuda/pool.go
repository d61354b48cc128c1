package cuda

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

// Pooling of channels-last tensors with vram's own kernels
// (kernels/pool.cu) instead of cuDNN's.
//
// In a channels-last ResNet-50 training step (batch 64) on an H100,
// cuDNN's NHWC max pooling took 165 µs forward and 446 µs backward in
// float32, 83 and 440 µs in bf16 (Nsight Compute, 2026-12-05), where
// reading and writing the tensors once takes about 85 and 165 µs in
// float32 and half that in bf16; its average pooling's backward pass, which
// only spreads a [64, 2048] gradient over 7×7 positions, took 97 to 104 µs.
// The kernels here read whole rows of channels, coalesced, 16 bytes a
// thread where the channels allow it; the backward pass of max pooling
// gathers, without atomics, from the tap of each window's maximum, a byte
// per output element that the forward pass kept (MaxPool2DTaps) or that
// Pool2DBackward finds again in a workspace. On the same card (2026-12-06)
// the stem's pooling took 106 / 325 µs in float32 and 61 / 226 µs in bf16
// (forward / backward) with them. NCHW-contiguous tensors keep cuDNN's
// kernels.

// PoolWorkspaceRegion is the allocator region of the backward pass of
// channels-last max pooling: a byte per element of the pooling's output,
// freed as soon as the call is queued.
const PoolWorkspaceRegion = "pooling workspace"

// poolMaxTaps is the most taps a max pooling window of pool.cu may have:
// the backward pass keeps a tap's number in a byte.
const poolMaxTaps = 255

// takesPoolNHWC reports whether pool.cu's kernels take a pooling of x
// into y (and, for the backward pass, of the views in same, of x's or
// y's shape): float32, float16 or bfloat16, x dense channels-last and not
// also NCHW-contiguous (those keep cuDNN's kernels), y and same dense
// channels-last, padding at most half the window, x and y of fewer than
// 2³¹ elements,
// and for max pooling at most poolMaxTaps taps a window. The geometry has
// been checked.
func takesPoolNHWC(x, y backend.View, p backend.Pool2DParams, same ...backend.View) bool {
	switch x.DType {
	case backend.Float32, backend.Float16, backend.BFloat16:
	default:
		return false
	}
	if !nhwcDense(x) || layoutOf(x)&nchw != 0 || !nhwcDense(y) {
		return false
	}
	for _, v := range same {
		if !nhwcDense(v) || v.DType != x.DType {
			return false
		}
	}
	for i := range 2 {
		if 2*p.Padding[i] > p.Kernel[i] || p.Stride[i] < 1 || p.Kernel[i] > math.MaxInt32 || p.Stride[i] > math.MaxInt32 {
			return false
		}
	}
	// The kernels count items and element offsets in 32 bits.
	for _, v := range []backend.View{x, y} {
		n := int64(1)
		for _, d := range v.Shape {
			if n *= int64(d); d > math.MaxInt32 || n > math.MaxInt32 {
				return false
			}
		}
	}
	return p.Mode != backend.MaxPool || p.Kernel[0]*p.Kernel[1] <= poolMaxTaps
}

// poolArgs appends the geometry of a pooling of x into y to a: N, H, W,
// C, OH, OW, the window, the strides and the padding.
func poolArgs(a *cuda.KernelArgs, x, y backend.View, p backend.Pool2DParams) {
	a.Int32(int32(x.Shape[0])).Int32(int32(x.Shape[2])).Int32(int32(x.Shape[3])).Int32(int32(x.Shape[1]))
	a.Int32(int32(y.Shape[2])).Int32(int32(y.Shape[3]))
	a.Int32(int32(p.Kernel[0])).Int32(int32(p.Kernel[1])).Int32(int32(p.Stride[0])).Int32(int32(p.Stride[1]))
	a.Int32(int32(p.Padding[0])).Int32(int32(p.Padding[1]))
}

// errPoolKernels marks the failure to load pool.cu's kernels (a compiler
// that rejects them): Pool2D and Pool2DBackward then take cuDNN's path, as
// nothing has been queued.
var errPoolKernels = errors.New("cuda: pool.cu's kernels are unavailable")

// poolFunction returns pool.cu's kernel name for dt, v channels a thread;
// an error wraps errPoolKernels.
func (d *queue) poolFunction(dt backend.DType, name string, v int) (cuda.Function, error) {
	if v > 1 {
		name += strconv.Itoa(v)
	}
	f, err := d.function(modKey{fam: famPool, dt: dt, op: "pool"}, name)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errPoolKernels, err)
	}
	return f, nil
}

// poolMaxAccess is the most bytes a thread of pool.cu reads or writes in
// one access: a 16-byte vector load or store.
const poolMaxAccess = 16

// poolWidth returns the channels a thread of pool.cu takes: the most of
// 8, 4, 2 and 1 that divides c, whose access stays within poolMaxAccess
// bytes, and to whose access size every pointer in ptrs is aligned.
func poolWidth(dt backend.DType, c int, ptrs ...cuda.DevicePtr) int {
	for v := 8; v > 1; v /= 2 {
		if v*dt.Size() > poolMaxAccess || c%v != 0 {
			continue
		}
		aligned := true
		for _, p := range ptrs {
			aligned = aligned && p%cuda.DevicePtr(v*dt.Size()) == 0
		}
		if aligned {
			return v
		}
	}
	return 1
}

// poolBlock is the threads of a block of pool.cu's kernels.
const poolBlock = 256

// poolLaunch queues f over rows rows of c channels, v a thread: rows·c/v
// items in blocks of poolBlock threads, at most normBlocksPerSM blocks an
// SM (the kernels stride over the rest); nothing when there are none.
func (d *queue) poolLaunch(f cuda.Function, rows int64, c, v int, a *cuda.KernelArgs) error {
	items := rows * int64(c/v)
	if items == 0 {
		return nil
	}
	gx := uint32(max(1, min((items+poolBlock-1)/poolBlock, int64(d.sms*normBlocksPerSM))))
	return d.check(cuda.LaunchKernel(f, cuda.Dim3{X: gx, Y: 1, Z: 1}, cuda.Dim3{X: poolBlock, Y: 1, Z: 1}, 0, d.stream, a))
}

// pool2DNHWC is Pool2D on pool.cu's kernels.
func (d *queue) pool2DNHWC(what string, y, x backend.View, p backend.Pool2DParams) error {
	ptr, err := d.ptrsOf(what, x, y)
	if err != nil {
		return err
	}
	c := x.Shape[1]
	rows := int64(y.Shape[0]) * int64(y.Shape[2]) * int64(y.Shape[3])
	v := poolWidth(x.DType, c, ptr...)
	return d.run(func() error {
		name := "pool_max"
		if p.Mode == backend.AvgPool {
			name = "pool_avg"
		}
		f, err := d.poolFunction(x.DType, name, v)
		if err != nil {
			return err
		}
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(ptr[0]).Ptr(ptr[1])
		poolArgs(a, x, y, p)
		if p.Mode == backend.AvgPool {
			a.Int32(flag(p.CountIncludePad))
		}
		return d.poolLaunch(f, rows, c, v, a)
	})
}

// pool2DBackwardNHWC is Pool2DBackward on pool.cu's kernels: for max
// pooling, the tap of every window's maximum into a byte workspace, then
// the gather into dx; for average pooling, the gather alone.
func (d *queue) pool2DBackwardNHWC(what string, dx, dy, x, y backend.View, p backend.Pool2DParams) error {
	ptr, err := d.ptrsOf(what, x, dy, dx)
	if err != nil {
		return err
	}
	c := x.Shape[1]
	in := int64(x.Shape[0]) * int64(x.Shape[2]) * int64(x.Shape[3])
	out := int64(y.Shape[0]) * int64(y.Shape[2]) * int64(y.Shape[3])
	v := poolWidth(x.DType, c, ptr...)
	return d.run(func() error {
		a := d.getArgs()
		defer d.putArgs(a)
		if p.Mode == backend.AvgPool {
			f, err := d.poolFunction(x.DType, "pool_avg_bwd", v)
			if err != nil {
				return err
			}
			a.Ptr(ptr[1]).Ptr(ptr[2])
			poolArgs(a, x, y, p)
			a.Int32(flag(p.CountIncludePad))
			return d.poolLaunch(f, in, c, v, a)
		}
		fa, err := d.poolFunction(x.DType, "pool_max_arg", v)
		if err != nil {
			return err
		}
		fb, err := d.poolFunction(x.DType, "pool_max_bwd", v)
		if err != nil {
			return err
		}
		b, err := d.Alloc(max(1, out*int64(c)), d.st, PoolWorkspaceRegion)
		if err != nil {
			return err
		}
		arg := b.(*Buffer)
		defer d.Free(arg, d.st)
		a.Ptr(ptr[0]).Ptr(arg.ptr)
		poolArgs(a, x, y, p)
		if err := d.poolLaunch(fa, out, c, v, a); err != nil {
			return err
		}
		a.Reset()
		a.Ptr(ptr[1]).Ptr(arg.ptr).Ptr(ptr[2])
		poolArgs(a, x, y, p)
		return d.poolLaunch(fb, in, c, v, a)
	})
}

var _ backend.MaxPoolTapper = (*Device)(nil)

// checkTaps checks that taps can hold a tap for every element of y: int8,
// y's shape.
func checkTaps(taps, y backend.View) error {
	if taps.Buf == nil || taps.DType != backend.Int8 || !equalInts(taps.Shape, y.Shape) {
		return fmt.Errorf("taps is %s %v: want int8 %v, the pooling output's shape", taps.DType, taps.Shape, y.Shape)
	}
	return nil
}

// tapsTaken reports whether pool.cu takes a max pooling of x into y that
// keeps its taps: the operands Pool2D gives pool.cu, and taps dense
// channels-last.
func tapsTaken(x, y, taps backend.View, p backend.Pool2DParams, same ...backend.View) error {
	if p.Mode != backend.MaxPool {
		return fmt.Errorf("only max pooling keeps taps: %w", backend.ErrNotImplemented)
	}
	if !takesPoolNHWC(x, y, p, same...) || !nhwcDense(taps) {
		return fmt.Errorf("%s %v (strides %v) is not a channels-last tensor that pool.cu's kernels take: %w",
			x.DType, x.Shape, x.Strides, backend.ErrNotImplemented)
	}
	return nil
}

// MaxPool2DTaps is max pooling on pool.cu's kernels that also writes the
// tap each window's maximum came from, which saves
// [Device.MaxPool2DBackwardTaps] finding them again (on an H100,
// pool_max_arg took 62 µs of a bf16 ResNet-50 step's 226 µs of pooling
// backward). It implements [backend.MaxPoolTapper] for the channels-last
// operands that Pool2D gives pool.cu; others get an error wrapping
// [backend.ErrNotImplemented].
func (dev *Device) MaxPool2DTaps(s backend.Stream, y, taps, x backend.View, p backend.Pool2DParams) error {
	const what = "max pool2d keeping taps"
	if err := errors.Join(checkPool(x, y, p), checkTaps(taps, y)); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	if err := tapsTaken(x, y, taps, p); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	d, err := dev.begin(s, what, nil)
	if err != nil {
		return err
	}
	ptr, err := d.ptrsOf(what, x, y, taps)
	if err != nil {
		return err
	}
	c := x.Shape[1]
	rows := int64(y.Shape[0]) * int64(y.Shape[2]) * int64(y.Shape[3])
	v := poolWidth(x.DType, c, ptr...)
	err = d.run(func() error {
		f, err := d.poolFunction(x.DType, "pool_max_taps", v)
		if err != nil {
			return err
		}
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(ptr[0]).Ptr(ptr[1]).Ptr(ptr[2])
		poolArgs(a, x, y, p)
		return d.poolLaunch(f, rows, c, v, a)
	})
	if errors.Is(err, errPoolKernels) {
		return fmt.Errorf("cuda: %s: %w: %w", what, backend.ErrNotImplemented, err)
	}
	return err
}

// MaxPool2DBackwardTaps is the backward pass of [Device.MaxPool2DTaps]:
// pool.cu's gather of dy into dx by the taps, one pass. It implements
// [backend.MaxPoolTapper].
func (dev *Device) MaxPool2DBackwardTaps(s backend.Stream, dx, dy, taps backend.View, p backend.Pool2DParams) error {
	const what = "max pool2d backward from taps"
	if err := errors.Join(checkPool(dx, dy, p), checkTaps(taps, dy)); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	if err := tapsTaken(dx, dy, taps, p); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	d, err := dev.begin(s, what, nil)
	if err != nil {
		return err
	}
	ptr, err := d.ptrsOf(what, dy, taps, dx)
	if err != nil {
		return err
	}
	c := dx.Shape[1]
	in := int64(dx.Shape[0]) * int64(dx.Shape[2]) * int64(dx.Shape[3])
	v := poolWidth(dx.DType, c, ptr...)
	err = d.run(func() error {
		f, err := d.poolFunction(dx.DType, "pool_max_bwd", v)
		if err != nil {
			return err
		}
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(ptr[0]).Ptr(ptr[1]).Ptr(ptr[2])
		poolArgs(a, dx, dy, p)
		return d.poolLaunch(f, in, c, v, a)
	})
	if errors.Is(err, errPoolKernels) {
		return fmt.Errorf("cuda: %s: %w: %w", what, backend.ErrNotImplemented, err)
	}
	return err
}
