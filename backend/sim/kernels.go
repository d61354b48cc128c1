package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vramgo/vram/backend"
)

// The kernels unwrap sim buffers and run the CPU's on stream s (see
// stream.go for when), or only keep the order in shape-only mode.

// run queues k on stream s over views vs: k gets the views over the host
// data, or is skipped in shape-only mode. checked is the shared argument
// check of the kernel (backend.Check*), returned at once, before anything
// is queued, as on a GPU.
func (d *Device) run(what string, s backend.Stream, checked error, k func(raw []backend.View) error, vs ...backend.View) error {
	st, err := d.stream(what, s)
	if err != nil {
		return err
	}
	if checked != nil {
		return fmt.Errorf("sim:%d: %s: %w", d.index, what, checked)
	}
	bufs := make([]*buffer, 0, len(vs))
	raw := make([]backend.View, len(vs))
	data := true
	for i, v := range vs {
		b, ok := v.Buf.(*buffer)
		if !ok {
			if v.NumElements() == 0 {
				raw[i] = v
				continue
			}
			return fmt.Errorf("sim:%d: %s: buffer of type %T is not sim memory", d.index, what, v.Buf)
		}
		if b.freed.Load() {
			return fmt.Errorf("sim:%d: %s: buffer was freed", d.index, what)
		}
		bufs = append(bufs, b)
		if b.data == nil {
			data = false
		}
		v.Buf = b.data
		raw[i] = v
	}
	return st.submit(bufs, func() error {
		if !data {
			return nil
		}
		return kernelError(d.index, k(raw))
	})
}

// kernelError returns err, the error of a CPU kernel run for sim device
// index, as that device's (nil for nil): the user's tensors are on the sim
// device, so its text names "sim:N" where the CPU backend's names "cpu".
// It wraps err, so that errors.Is and errors.As see what err wraps.
func kernelError(index int, err error) error {
	if err == nil {
		return nil
	}
	return &hostKernelError{index: index, err: err}
}

// hostKernelError is the error of [kernelError].
type hostKernelError struct {
	index int
	err   error
}

// Error reads as err with its "cpu: " prefix replaced by "sim:N: ".
func (e *hostKernelError) Error() string {
	return simName(e.index) + ": " + strings.TrimPrefix(e.err.Error(), "cpu: ")
}

// Unwrap returns the CPU kernel's error.
func (e *hostKernelError) Unwrap() error { return e.err }

// hostStream is the CPU stream the CPU kernels are given.
func (d *Device) hostStream() backend.Stream { return d.host.DefaultStream() }

// CopyFromHost writes host bytes into dst on s (dropped in shape-only
// mode). src is copied first when s queues the work, so that the caller
// may reuse it at once.
func (d *Device) CopyFromHost(s backend.Stream, dst backend.View, src []byte) error {
	st, err := d.stream("copy from host", s)
	if err != nil {
		return err
	}
	if err := d.refuseHostCopy("copy from host", st); err != nil {
		return err
	}
	if !st.eager {
		src = append([]byte(nil), src...)
	}
	return d.run("copy from host", s, backend.CheckHostCopy(dst, len(src)), func(v []backend.View) error {
		return d.host.CopyFromHost(d.hostStream(), v[0], src)
	}, dst)
}

// CopyToHost reads src into host bytes once the work queued on s has run,
// and returns the first error of that work. A shape-only device has no
// data to read, which is an error.
func (d *Device) CopyToHost(s backend.Stream, dst []byte, src backend.View) error {
	st, err := d.stream("copy to host", s)
	if err != nil {
		return err
	}
	if err := d.refuseHostCopy("copy to host", st); err != nil {
		return err
	}
	b, ok := src.Buf.(*buffer)
	if ok && b.data == nil {
		return fmt.Errorf("sim:%d is shape-only: it keeps no data to read", d.index)
	}
	if !st.eager {
		if err := st.Synchronize(); err != nil {
			return err
		}
	}
	return d.run("copy to host", d.st.def, backend.CheckHostCopy(src, len(dst)), func(v []backend.View) error {
		return d.host.CopyToHost(d.hostStream(), dst, v[0])
	}, src)
}

// Fill runs the CPU kernel.
func (d *Device) Fill(s backend.Stream, dst backend.View, value float64) error {
	return d.run("fill", s, backend.CheckFill(dst), func(v []backend.View) error { return d.host.Fill(d.hostStream(), v[0], value) }, dst)
}

// Copy runs the CPU kernel.
func (d *Device) Copy(s backend.Stream, dst, src backend.View) error {
	return d.run("copy", s, backend.CheckCopy(dst, src), func(v []backend.View) error { return d.host.Copy(d.hostStream(), v[0], v[1]) }, dst, src)
}

// Unary runs the CPU kernel.
func (d *Device) Unary(s backend.Stream, op backend.UnaryOp, dst, src backend.View, param float64) error {
	return d.run("unary", s, backend.CheckUnary(op, dst, src, param), func(v []backend.View) error {
		return d.host.Unary(d.hostStream(), op, v[0], v[1], param)
	}, dst, src)
}

// Binary runs the CPU kernel.
func (d *Device) Binary(s backend.Stream, op backend.BinaryOp, dst, a, b backend.View) error {
	return d.run("binary", s, backend.CheckBinary(op, dst, a, b), func(v []backend.View) error {
		return d.host.Binary(d.hostStream(), op, v[0], v[1], v[2])
	}, dst, a, b)
}

// Scalar runs the CPU kernel.
func (d *Device) Scalar(s backend.Stream, op backend.BinaryOp, dst, a backend.View, c float64, reversed bool) error {
	return d.run("scalar", s, backend.CheckScalar(op, dst, a), func(v []backend.View) error {
		return d.host.Scalar(d.hostStream(), op, v[0], v[1], c, reversed)
	}, dst, a)
}

// Where runs the CPU kernel.
func (d *Device) Where(s backend.Stream, dst, cond, a, b backend.View) error {
	return d.run("where", s, backend.CheckWhere(dst, cond, a, b), func(v []backend.View) error {
		return d.host.Where(d.hostStream(), v[0], v[1], v[2], v[3])
	}, dst, cond, a, b)
}

// Reduce runs the CPU kernel.
func (d *Device) Reduce(s backend.Stream, op backend.ReduceOp, dst, src backend.View, axes []int) error {
	axes = append([]int(nil), axes...)
	return d.run("reduce", s, backend.CheckReduce(op, dst, src, axes), func(v []backend.View) error {
		return d.host.Reduce(d.hostStream(), op, v[0], v[1], axes)
	}, dst, src)
}

// MatMul runs the CPU kernel.
func (d *Device) MatMul(s backend.Stream, dst, a, b backend.View) error {
	return d.run("matmul", s, backend.CheckMatMul(dst, a, b), func(v []backend.View) error {
		return d.host.MatMul(d.hostStream(), v[0], v[1], v[2])
	}, dst, a, b)
}

// Gather runs the CPU kernel.
func (d *Device) Gather(s backend.Stream, dst, src, index backend.View, axis int) error {
	return d.run("gather", s, backend.CheckGather(dst, src, index, axis), func(v []backend.View) error {
		return d.host.Gather(d.hostStream(), v[0], v[1], v[2], axis)
	}, dst, src, index)
}

// ScatterAdd runs the CPU kernel.
func (d *Device) ScatterAdd(s backend.Stream, dst, index, src backend.View, axis int) error {
	return d.run("scatter_add", s, backend.CheckScatterAdd(dst, index, src, axis), func(v []backend.View) error {
		return d.host.ScatterAdd(d.hostStream(), v[0], v[1], v[2], axis)
	}, dst, index, src)
}

var _ backend.FusedMatMul = (*Device)(nil)

// MatMulBias runs the CPU's fused product. It implements
// [backend.FusedMatMul].
func (d *Device) MatMulBias(s backend.Stream, dst, a, b, bias backend.View, relu bool) error {
	f, ok := d.host.(backend.FusedMatMul)
	if !ok {
		return fmt.Errorf("sim: matmul_bias: %w", backend.ErrNotImplemented)
	}
	return d.run("matmul_bias", s, backend.CheckMatMulBias(dst, a, b, bias), func(v []backend.View) error {
		return f.MatMulBias(d.hostStream(), v[0], v[1], v[2], v[3], relu)
	}, dst, a, b, bias)
}

// MatMulRowSum runs the CPU's fused product. It implements
// [backend.FusedMatMul].
func (d *Device) MatMulRowSum(s backend.Stream, dst, a, b, rowSum backend.View) error {
	f, ok := d.host.(backend.FusedMatMul)
	if !ok {
		return fmt.Errorf("sim: matmul_rowsum: %w", backend.ErrNotImplemented)
	}
	return d.run("matmul_rowsum", s, backend.CheckMatMulRowSum(dst, a, b, rowSum), func(v []backend.View) error {
		return f.MatMulRowSum(d.hostStream(), v[0], v[1], v[2], v[3])
	}, dst, a, b, rowSum)
}

var (
	_ backend.FusedAdam = (*Device)(nil)
	_ backend.FusedSGD  = (*Device)(nil)
)

// AdamStep runs the CPU's fused Adam step, which computes what the CUDA
// kernel computes (float32 inside for the 16-bit dtypes). It implements
// [backend.FusedAdam].
func (d *Device) AdamStep(s backend.Stream, p, g, m, v backend.View, cfg backend.AdamStepConfig) error {
	f, ok := d.host.(backend.FusedAdam)
	if !ok {
		return fmt.Errorf("sim: adam step: %w", backend.ErrNotImplemented)
	}
	return d.run("adam step", s, backend.CheckAdamStep(p, g, m, v, cfg), func(r []backend.View) error {
		return f.AdamStep(d.hostStream(), r[0], r[1], r[2], r[3], cfg)
	}, p, g, m, v)
}

// SGDStep runs the CPU's fused SGD step. It implements [backend.FusedSGD].
// buf is used only with momentum, as the interface says.
func (d *Device) SGDStep(s backend.Stream, p, g, buf backend.View, cfg backend.SGDStepConfig) error {
	f, ok := d.host.(backend.FusedSGD)
	if !ok {
		return fmt.Errorf("sim: sgd step: %w", backend.ErrNotImplemented)
	}
	views := []backend.View{p, g}
	if cfg.Momentum != 0 {
		views = append(views, buf)
	}
	return d.run("sgd step", s, backend.CheckSGDStep(p, g, buf, cfg), func(r []backend.View) error {
		var rb backend.View
		if cfg.Momentum != 0 {
			rb = r[2]
		}
		return f.SGDStep(d.hostStream(), r[0], r[1], rb, cfg)
	}, views...)
}

var (
	_ backend.Int8Linear      = (*Device)(nil)
	_ backend.Int8Dequantizer = (*Device)(nil)
)

// MatMulInt8Weight runs the CPU's int8-weight product. It implements
// [backend.Int8Linear].
func (d *Device) MatMulInt8Weight(s backend.Stream, dst, x, wq, scale, bias backend.View) error {
	f, ok := d.host.(backend.Int8Linear)
	if !ok {
		return fmt.Errorf("sim: matmul_int8_weight: %w", backend.ErrNotImplemented)
	}
	vs := []backend.View{dst, x, wq, scale}
	if bias.DType != backend.Invalid {
		vs = append(vs, bias)
	}
	return d.run("matmul_int8_weight", s, backend.CheckMatMulInt8Weight(dst, x, wq, scale, bias), func(v []backend.View) error {
		b := backend.View{}
		if len(v) == 5 {
			b = v[4]
		}
		return f.MatMulInt8Weight(d.hostStream(), v[0], v[1], v[2], v[3], b)
	}, vs...)
}

// DequantizeInt8 runs the CPU's dequantization. It implements
// [backend.Int8Dequantizer].
func (d *Device) DequantizeInt8(s backend.Stream, dst, wq, scale backend.View) error {
	f, ok := d.host.(backend.Int8Dequantizer)
	if !ok {
		return fmt.Errorf("sim: dequantize_int8: %w", backend.ErrNotImplemented)
	}
	return d.run("dequantize_int8", s, backend.CheckDequantizeInt8(dst, wq, scale), func(v []backend.View) error {
		return f.DequantizeInt8(d.hostStream(), v[0], v[1], v[2])
	}, dst, wq, scale)
}

var _ backend.Sorter = (*Device)(nil)

// ArgSort runs the CPU's sort. It implements [backend.Sorter].
func (d *Device) ArgSort(s backend.Stream, indices, src backend.View, axis int, descending bool) error {
	f, ok := d.host.(backend.Sorter)
	if !ok {
		return fmt.Errorf("sim: argsort: %w", backend.ErrNotImplemented)
	}
	return d.run("argsort", s, backend.CheckArgSort(indices, src, axis), func(v []backend.View) error {
		return f.ArgSort(d.hostStream(), v[0], v[1], axis, descending)
	}, indices, src)
}

// Fmod runs the CPU kernel (see [backend.Modder]).
func (d *Device) Fmod(s backend.Stream, dst, a, b backend.View) error {
	m, ok := d.host.(backend.Modder)
	if !ok {
		return fmt.Errorf("sim:%d: fmod: %w", d.index, backend.ErrNotImplemented)
	}
	return d.run("fmod", s, backend.CheckBinary(backend.Sub, dst, a, b), func(v []backend.View) error {
		return m.Fmod(d.hostStream(), v[0], v[1], v[2])
	}, dst, a, b)
}

var _ backend.Modder = (*Device)(nil)

var _ backend.MultiCopier = (*Device)(nil)

// CopyMany runs the CPU kernel of each pair, as one submission.
func (d *Device) CopyMany(s backend.Stream, dsts, srcs []backend.View) error {
	n := len(dsts)
	return d.run("copy many", s, backend.CheckCopyMany(dsts, srcs), func(v []backend.View) error {
		for i := range n {
			if err := d.host.Copy(d.hostStream(), v[i], v[n+i]); err != nil {
				return err
			}
		}
		return nil
	}, append(slices.Clone(dsts), srcs...)...)
}
