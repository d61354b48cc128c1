package cuda

import (
	"fmt"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

// Batch normalization of channels-last tensors with vram's own kernels
// (kernels/norm.cu) instead of cuDNN's.
//
// cuDNN's legacy batch-norm calls run NHWC data through the kernels they
// use for NCHW (bn_fw_tr_1C11_singleread and bn_bw_1C11_singleread), which
// read one channel's values C elements apart: in a channels-last bf16
// ResNet-50 step on an H200 they took 128 of its 140 ms (Nsight Compute,
// run 1 of 2026-12-01), where PyTorch, which uses its own
// channels-last kernels there, spends about 6.5 ms on batch norm. The
// kernels here read whole rows of channels, coalesced, and reduce without
// atomics. Tensors that are NCHW-contiguous keep cuDNN's kernels, which
// are fast for them.

// Launch geometry of norm.cu.
const (
	// normTX and normTY are the block's threads across channels and its
	// rows (NB_TX and NB_TY of kernels/norm.cu); normFY is the finishing
	// kernels' threads a channel (NB_FY).
	normTX, normTY, normFY = 32, 8, 32
	// normRowsPerThread is the fewest rows a thread of the reducing
	// kernels walks before more block rows are launched: fewer means more
	// partial sums to add for little gain.
	normRowsPerThread = 16
	// normBlocksPerSM bounds the grid: 8 blocks of 256 threads fill a
	// Hopper multiprocessor's 2,048 threads.
	normBlocksPerSM = 8
)

// NormWorkspaceRegion is the allocator region of the partial sums of the
// channels-last batch-norm kernels: at most 2·8·SMs·64 floats a call
// (about 540 KiB on an H200) up to 8·SMs·64 channels, 8 bytes a channel
// beyond, freed as soon as the call is queued.
const NormWorkspaceRegion = "batch norm workspace"

// nhwcDense reports whether v is a dense channels-last [N, C, H, W] view
// (dimensions of size 1 may have any stride).
func nhwcDense(v backend.View) bool {
	return v.Buf != nil && layoutOf(v)&nhwc != 0
}

// takesNHWC reports whether the kernels of norm.cu take a batch norm of x:
// x and each view of its shape dense channels-last and not also
// NCHW-contiguous (those keep cuDNN's kernels), float32, float16 or
// bfloat16, with contiguous float32 per-channel views (zero Views allowed,
// the caller has checked which may be).
func takesNHWC(x backend.View, same, channel []backend.View) bool {
	switch x.DType {
	case backend.Float32, backend.Float16, backend.BFloat16:
	default:
		return false
	}
	if !nhwcDense(x) || layoutOf(x)&nchw != 0 {
		return false
	}
	for _, v := range same {
		if !nhwcDense(v) || v.DType != x.DType {
			return false
		}
	}
	for _, v := range channel {
		if v.Buf != nil && (v.DType != backend.Float32 || !v.IsContiguous()) {
			return false
		}
	}
	return true
}

// normWidth returns the channels each thread of norm.cu's row kernels
// takes: 2 (the kernels named …2, one 4- or 8-byte access) when c is even
// and every address in ptrs is aligned to two elements of dt, else 1.
func normWidth(dt backend.DType, c int, ptrs ...cuda.DevicePtr) int {
	if c%2 != 0 {
		return 1
	}
	for _, p := range ptrs {
		if p%cuda.DevicePtr(2*dt.Size()) != 0 {
			return 1
		}
	}
	return 2
}

// normName returns kernel name for v channels a thread.
func normName(name string, v int) string {
	if v == 2 {
		return name + "2"
	}
	return name
}

// normGrid returns the grid of a reducing or elementwise norm.cu kernel
// over m rows of c channels, v a thread.
func (d *Device) normGrid(m int64, c, v int) (gx, gy uint32) {
	gx = uint32((c + normTX*v - 1) / (normTX * v))
	rows := (m + normTY*normRowsPerThread - 1) / (normTY * normRowsPerThread)
	gy = uint32(max(1, min(rows, int64(d.sms*normBlocksPerSM)/int64(gx))))
	return gx, gy
}

// normLaunch queues norm.cu's kernel name with a grid of gx × gy blocks of
// normTX × normTY threads.
func (d *queue) normLaunch(dt backend.DType, name string, gx, gy uint32, a *cuda.KernelArgs) error {
	f, err := d.function(modKey{fam: famNorm, dt: dt, op: "bn"}, name)
	if err != nil {
		return err
	}
	return d.check(cuda.LaunchKernel(f, cuda.Dim3{X: gx, Y: gy, Z: 1}, cuda.Dim3{X: normTX, Y: normTY, Z: 1}, 0, d.stream, a))
}

// normFinish queues a finishing kernel of norm.cu: blocks of normTX
// channels, normFY threads a channel.
func (d *queue) normFinish(dt backend.DType, name string, c int, a *cuda.KernelArgs) error {
	f, err := d.function(modKey{fam: famNorm, dt: dt, op: "bn"}, name)
	if err != nil {
		return err
	}
	blocks := uint32((c + normTX - 1) / normTX)
	return d.check(cuda.LaunchKernel(f, cuda.Dim3{X: blocks, Y: 1, Z: 1}, cuda.Dim3{X: normTX, Y: normFY, Z: 1}, 0, d.stream, a))
}

// ptrsOf resolves the addresses of vs; a zero View is address 0.
func (d *queue) ptrsOf(what string, vs ...backend.View) ([]cuda.DevicePtr, error) {
	ptrs := make([]cuda.DevicePtr, len(vs))
	for i, v := range vs {
		if v.Buf == nil {
			continue
		}
		p, err := d.ptrOf(what, v)
		if err != nil {
			return nil, err
		}
		ptrs[i] = p
	}
	return ptrs, nil
}

// normScratch allocates n floats of workspace on the queue's stream.
func (d *queue) normScratch(n int64) (*Buffer, error) {
	b, err := d.Alloc(4*n, d.st, NormWorkspaceRegion)
	if err != nil {
		return nil, err
	}
	return b.(*Buffer), nil
}

// batchNormTrainNHWC is BatchNormTrain on norm.cu's kernels: partial sums,
// per-channel statistics (and running statistics, and the int64 count
// plus one unless it is the zero View), then the normalization, which adds
// r (unless it is the zero View) and applies a ReLU when relu is set.
func (d *queue) batchNormTrainNHWC(what string, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd, count backend.View, momentum, eps float64, relu bool) error {
	p, err := d.ptrsOf(what, x, y, scale, bias, runMean, runVar, saveMean, saveInvStd, r, count)
	if err != nil {
		return err
	}
	c := x.Shape[1]
	m := int64(x.Shape[0]) * int64(x.Shape[2]) * int64(x.Shape[3])
	v := normWidth(x.DType, c, p[0], p[1], p[8])
	gx, gy := d.normGrid(m, c, v)
	return d.run(func() error {
		part, err := d.normScratch(2 * int64(gy) * int64(c))
		if err != nil {
			return err
		}
		defer d.Free(part, d.st)
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(p[0]).Int64(m).Int32(int32(c)).Ptr(part.ptr)
		if err := d.normLaunch(x.DType, normName("bn_nhwc_stats", v), gx, gy, a); err != nil {
			return err
		}
		run := int32(0)
		if runMean.Buf != nil {
			run = 1
		}
		a.Reset()
		a.Ptr(p[0]).Ptr(part.ptr).Int32(int32(gy)).Int32(int32(c)).Int64(m).Float64(eps).Float64(momentum).Int32(run)
		a.Ptr(p[4]).Ptr(p[5]).Ptr(p[6]).Ptr(p[7]).Ptr(p[9])
		if err := d.normFinish(x.DType, "bn_nhwc_finish", c, a); err != nil {
			return err
		}
		a.Reset()
		a.Ptr(p[0]).Ptr(p[1]).Int64(m).Int32(int32(c)).Ptr(p[6]).Ptr(p[7]).Ptr(p[2]).Ptr(p[3]).Int32(0).Float64(eps)
		a.Ptr(p[8]).Int32(flag(relu))
		return d.normLaunch(x.DType, normName("bn_nhwc_apply", v), gx, d.applyRows(m, gx), a)
	})
}

// applyRows returns the block rows of an elementwise norm.cu kernel: as
// many as fill the device, each thread taking several rows.
func (d *queue) applyRows(m int64, gx uint32) uint32 {
	rows := (m + normTY*4 - 1) / (normTY * 4)
	return uint32(max(1, min(rows, int64(d.sms*normBlocksPerSM)/int64(gx))))
}

// batchNormInferNHWC is BatchNormInfer on norm.cu's apply kernel, which
// takes the running variance and eps, adding r (unless it is the zero
// View) and applying a ReLU when relu is set.
func (d *queue) batchNormInferNHWC(what string, y, x, r, scale, bias, runMean, runVar backend.View, eps float64, relu bool) error {
	p, err := d.ptrsOf(what, x, y, scale, bias, runMean, runVar, r)
	if err != nil {
		return err
	}
	c := x.Shape[1]
	m := int64(x.Shape[0]) * int64(x.Shape[2]) * int64(x.Shape[3])
	v := normWidth(x.DType, c, p[0], p[1], p[6])
	gx, _ := d.normGrid(m, c, v)
	return d.run(func() error {
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(p[0]).Ptr(p[1]).Int64(m).Int32(int32(c)).Ptr(p[4]).Ptr(p[5]).Ptr(p[2]).Ptr(p[3]).Int32(1).Float64(eps)
		a.Ptr(p[6]).Int32(flag(relu))
		return d.normLaunch(x.DType, normName("bn_nhwc_apply", v), gx, d.applyRows(m, gx), a)
	})
}

// batchNormBackwardNHWC is BatchNormBackward on norm.cu's kernels: partial
// sums of g and g·(x − mean), dscale, dbias and the input gradient's
// coefficients, then dx. g is dy, plus dy2 unless it is the zero View,
// masked by out (the forward's ReLU output) unless that is the zero View;
// dr, unless it is the zero View, receives g. When g must be stored (dr)
// or is a sum (dy2), the first pass stores it (in dr, else in dx) and the
// second reads it from there: one tensor instead of dy, dy2 and out
// again. With dr, that moves dr's store and saves the second pass a read
// (the residual end of a ResNet block: 7 passes over the data instead of
// 8); with dy2, it saves the addition of the two parts beforehand. A
// masked g that is not stored is masked again by the second pass, as
// storing it would cost what reading out again does. In 16-bit dtypes dr
// alone keeps its store in the second pass: the ResNet-50 step in bf16
// measured 0.4-0.7 ms slower on an H200 with it in the first.
func (d *queue) batchNormBackwardNHWC(what string, dx, dr, dscale, dbias, dy, dy2, out, x, scale, saveMean, saveInvStd backend.View) error {
	p, err := d.ptrsOf(what, dx, dscale, dbias, dy, x, scale, saveMean, saveInvStd, out, dr, dy2)
	if err != nil {
		return err
	}
	c := x.Shape[1]
	m := int64(x.Shape[0]) * int64(x.Shape[2]) * int64(x.Shape[3])
	v := normWidth(x.DType, c, p[0], p[3], p[4], p[8], p[9], p[10])
	gx, gy := d.normGrid(m, c, v)
	// g's store and where the second pass reads it, masks it and copies it.
	var dst cuda.DevicePtr
	gin, mask, gout := p[3], p[8], p[9]
	if p[10] != 0 || p[9] != 0 && x.DType == backend.Float32 {
		dst = p[9]
		if dst == 0 {
			dst = p[0]
		}
		gin, mask, gout = dst, 0, 0
	}
	return d.run(func() error {
		// The partial sums, then the two coefficient rows.
		part, err := d.normScratch(2*int64(gy)*int64(c) + 2*int64(c))
		if err != nil {
			return err
		}
		defer d.Free(part, d.st)
		coef := part.ptr + cuda.DevicePtr(4*2*int64(gy)*int64(c))
		a := d.getArgs()
		defer d.putArgs(a)
		a.Ptr(p[3]).Ptr(p[4]).Int64(m).Int32(int32(c)).Ptr(p[6]).Ptr(part.ptr).Ptr(p[8]).Ptr(p[10]).Ptr(dst)
		if err := d.normLaunch(x.DType, normName("bn_nhwc_bwd_stats", v), gx, gy, a); err != nil {
			return err
		}
		a.Reset()
		a.Ptr(part.ptr).Int32(int32(gy)).Int32(int32(c)).Int64(m).Ptr(p[7]).Ptr(p[1]).Ptr(p[2]).Ptr(coef)
		if err := d.normFinish(x.DType, "bn_nhwc_bwd_finish", c, a); err != nil {
			return err
		}
		a.Reset()
		a.Ptr(gin).Ptr(p[4]).Ptr(p[0]).Int64(m).Int32(int32(c)).Ptr(p[6]).Ptr(p[7]).Ptr(p[5]).Ptr(coef)
		a.Ptr(mask).Ptr(gout)
		return d.normLaunch(x.DType, normName("bn_nhwc_bwd_apply", v), gx, d.applyRows(m, gx), a)
	})
}

// flag is a kernel's int argument for b.
func flag(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

var _ backend.FusedBatchNormer = (*Device)(nil)

// nhwcOnly is the error of the fused batch-norm methods for operands that
// norm.cu's kernels do not take.
func nhwcOnly(what string, x backend.View) error {
	return fmt.Errorf("cuda: %s: %s %v (strides %v) is not a dense channels-last tensor of float32, float16 or bfloat16 with float32 per-channel views: %w",
		what, x.DType, x.Shape, x.Strides, backend.ErrNotImplemented)
}

// withResidual appends r to views unless it is the zero View.
func withResidual(views []backend.View, r backend.View) []backend.View {
	if r.Buf == nil {
		return views
	}
	return append(views, r)
}

// namedResidual appends r, named name, to views unless it is the zero
// View.
func namedResidual(views []named, name string, r backend.View) []named {
	if r.Buf == nil {
		return views
	}
	return append(views, named{name, r, false})
}

// BatchNormTrainReLU is BatchNormTrain ending as a residual block does,
// y = max(0, bn(x) + r), in norm.cu's normalizing pass. It implements
// [backend.FusedBatchNormer] for channels-last tensors; others get an
// error wrapping [backend.ErrNotImplemented].
func (dev *Device) BatchNormTrainReLU(s backend.Stream, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd backend.View, momentum, eps float64) error {
	return dev.trainNHWC("batch norm + relu", s, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd, backend.View{}, momentum, eps, true)
}

// BatchNormTrainCount is BatchNormTrain, or with relu BatchNormTrainReLU,
// that also adds 1 to count (an int64 scalar) in the kernel that finishes
// the statistics, saving the launch of an addition. It implements
// [backend.BatchNormCounter] for channels-last tensors; others get an
// error wrapping [backend.ErrNotImplemented].
func (dev *Device) BatchNormTrainCount(s backend.Stream, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd, count backend.View, momentum, eps float64, relu bool) error {
	const what = "batch norm (counted)"
	if r.Buf != nil && !relu {
		return fmt.Errorf("cuda: %s: a residual without the ReLU: %w", what, backend.ErrNotImplemented)
	}
	if count.Buf == nil || count.DType != backend.Int64 || backend.NumElements(count.Shape) != 1 {
		return fmt.Errorf("cuda: %s: count must be an int64 scalar, got %s %v", what, count.DType, count.Shape)
	}
	return dev.trainNHWC(what, s, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd, count, momentum, eps, relu)
}

// trainNHWC checks the operands of a training batch norm on norm.cu's
// kernels and queues it: the residual r and count may be the zero View.
// Operands the kernels do not take get an error wrapping
// [backend.ErrNotImplemented] before anything is queued.
func (dev *Device) trainNHWC(what string, s backend.Stream, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd, count backend.View, momentum, eps float64, relu bool) error {
	same := namedResidual([]named{{"y", y, false}}, "r", r)
	if err := checkBN(x, same, []named{{"scale", scale, false}, {"bias", bias, false}, {"runMean", runMean, true},
		{"runVar", runVar, true}, {"saveMean", saveMean, false}, {"saveInvStd", saveInvStd, false}}); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	if (runMean.Buf == nil) != (runVar.Buf == nil) {
		return fmt.Errorf("cuda: %s: runMean and runVar must both be given or both be the zero View", what)
	}
	if x.Shape[0]*x.Shape[2]*x.Shape[3] < 2 {
		return fmt.Errorf("cuda: %s: one value per channel, no variance to normalize by: %w", what, backend.ErrNotImplemented)
	}
	if !takesNHWC(x, withResidual([]backend.View{y}, r), []backend.View{scale, bias, runMean, runVar, saveMean, saveInvStd}) {
		return nhwcOnly(what, x)
	}
	d, err := dev.begin(s, what, nil)
	if err != nil {
		return err
	}
	return d.batchNormTrainNHWC(what, y, x, r, scale, bias, runMean, runVar, saveMean, saveInvStd, count, momentum, eps, relu)
}

var _ backend.BatchNormCounter = (*Device)(nil)

// BatchNormInferReLU is BatchNormInfer with the residual and the ReLU of
// [Device.BatchNormTrainReLU]. It implements [backend.FusedBatchNormer].
func (dev *Device) BatchNormInferReLU(s backend.Stream, y, x, r, scale, bias, runMean, runVar backend.View, eps float64) error {
	const what = "batch norm inference + relu"
	same := namedResidual([]named{{"y", y, false}}, "r", r)
	if err := checkBN(x, same, []named{{"scale", scale, false}, {"bias", bias, false}, {"runMean", runMean, false},
		{"runVar", runVar, false}}); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	if !takesNHWC(x, withResidual([]backend.View{y}, r), []backend.View{scale, bias, runMean, runVar}) {
		return nhwcOnly(what, x)
	}
	d, err := dev.begin(s, what, nil)
	if err != nil {
		return err
	}
	return d.batchNormInferNHWC(what, y, x, r, scale, bias, runMean, runVar, eps, true)
}

// BatchNormBackwardReLU is the backward pass of
// [Device.BatchNormTrainReLU]: dy (plus dy2 unless it is the zero View)
// masked by the forward's output y, stored in dr unless it is the zero
// View, and the batch norm's gradients from it, in norm.cu's two passes.
// It implements [backend.FusedBatchNormer].
func (dev *Device) BatchNormBackwardReLU(s backend.Stream, dx, dr, dscale, dbias, dy, dy2, y, x, scale, saveMean, saveInvStd backend.View, eps float64) error {
	const what = "batch norm + relu backward"
	same := namedResidual(namedResidual([]named{{"dx", dx, false}, {"dy", dy, false}, {"y", y, false}}, "dr", dr), "dy2", dy2)
	if err := checkBN(x, same, []named{{"dscale", dscale, false}, {"dbias", dbias, false}, {"scale", scale, false},
		{"saveMean", saveMean, false}, {"saveInvStd", saveInvStd, false}}); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	if !takesNHWC(x, withResidual(withResidual([]backend.View{dy, dx, y}, dr), dy2), []backend.View{dscale, dbias, scale, saveMean, saveInvStd}) {
		return nhwcOnly(what, x)
	}
	d, err := dev.begin(s, what, nil)
	if err != nil {
		return err
	}
	return d.batchNormBackwardNHWC(what, dx, dr, dscale, dbias, dy, dy2, y, x, scale, saveMean, saveInvStd)
}
