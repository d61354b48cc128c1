package cuda

import (
	"fmt"
	"math"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/half"
	"github.com/vramgo/vram/native/cuda"
)

// Kernel names, by op: [0] the contiguous kernel, [1] the strided one.
var (
	unaryNames  [backend.LogicalNot + 1][2]string
	binaryNames [backend.NumBinaryOps][3][2]string // bin, sca, scf
	binaryRows  [backend.NumBinaryOps]string       // bin_*_r: row broadcast
	binaryTiles [backend.NumBinaryOps]string       // bin_*_t: one input transposed
	copyNames   [backend.Int8 + 1][2]string        // by destination dtype
	copyTiles   [backend.Int8 + 1]string           // cp_*_t: from a transposed view
	moveTiles   [9]string                          // move_w*_t, by element size
	widthNames  = map[string][9][2]string{}        // fill, move, where: by element size
	gatherNames [9]string
)

func init() {
	for op := range unaryNames {
		s := backend.UnaryOp(op).String()
		unaryNames[op] = [2]string{"un_" + s + "_c", "un_" + s + "_s"}
	}
	for op := range binaryNames {
		s := backend.BinaryOp(op).String()
		for i, p := range []string{"bin_", "sca_", "scf_"} {
			binaryNames[op][i] = [2]string{p + s + "_c", p + s + "_s"}
		}
		binaryRows[op] = "bin_" + s + "_r"
		binaryTiles[op] = "bin_" + s + "_t"
	}
	for _, dt := range backend.DTypes {
		copyNames[dt] = [2]string{"cp_" + dt.String() + "_c", "cp_" + dt.String() + "_s"}
		copyTiles[dt] = "cp_" + dt.String() + "_t"
	}
	for _, k := range []string{"fill", "move", "where"} {
		var n [9][2]string
		for _, w := range []int{1, 2, 4, 8} {
			n[w] = [2]string{fmt.Sprintf("%s_w%d_c", k, w), fmt.Sprintf("%s_w%d_s", k, w)}
		}
		widthNames[k] = n
	}
	for _, w := range []int{1, 2, 4, 8} {
		gatherNames[w] = fmt.Sprintf("gather_w%d", w)
		moveTiles[w] = fmt.Sprintf("move_w%d_t", w)
	}
}

// op resolves v to its device address, element size and strides.
func (d *Device) op(what string, v backend.View) (ewOp, error) {
	if len(v.Strides) != len(v.Shape) {
		return ewOp{}, fmt.Errorf("cuda: %s: view has %d strides for %d dimensions", what, len(v.Strides), len(v.Shape))
	}
	if v.NumElements() == 0 {
		return ewOp{size: v.DType.Size(), strides: v.Strides}, nil
	}
	p, err := d.ptrOf(what, v)
	return ewOp{ptr: p, size: v.DType.Size(), strides: v.Strides}, err
}

// ops resolves views that all have the shape of the first (as one of
// package backend's checks has found).
func (d *Device) ops(what string, vs ...backend.View) ([]ewOp, error) {
	out := make([]ewOp, len(vs))
	for i, v := range vs {
		o, err := d.op(what, v)
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

// roundToOdd32 rounds x to float32, truncating an inexact result and
// setting its last bit, so that a second rounding to float16 or bfloat16
// gives the correctly rounded value of x.
func roundToOdd32(x float64) float32 {
	f := float32(x)
	if float64(f) == x || x != x {
		return f
	}
	b := math.Float32bits(f)
	if math.Abs(float64(f)) > math.Abs(x) {
		b--
	}
	return math.Float32frombits(b | 1)
}

// fillBits returns the raw element of dtype dt holding v, converted as the
// CPU backend converts (integers truncate, NaN gives 0 for integers and
// true for bool).
func fillBits(dt backend.DType, v float64) uint64 {
	switch dt {
	case backend.Bool:
		if v != 0 {
			return 1
		}
		return 0
	case backend.Int32, backend.Int64, backend.Int8:
		if v != v {
			return 0
		}
		i := int64(v)
		switch dt {
		case backend.Int32:
			return uint64(uint32(int32(i)))
		case backend.Int8:
			return uint64(uint8(int8(i)))
		}
		return uint64(i)
	case backend.Float32:
		return uint64(math.Float32bits(float32(v)))
	case backend.Float64:
		return math.Float64bits(v)
	case backend.Float16:
		return uint64(half.F16(roundToOdd32(v)))
	case backend.BFloat16:
		return uint64(half.BF16(roundToOdd32(v)))
	}
	return 0
}

// Fill sets every element of dst to value, converted to dst's dtype.
func (dev *Device) Fill(s backend.Stream, dst backend.View, value float64) error {
	d, err := dev.begin(s, "fill", backend.CheckFill(dst))
	if err != nil {
		return err
	}
	o, err := d.op("fill", dst)
	if err != nil || dst.NumElements() == 0 {
		return err
	}
	bits := fillBits(dst.DType, value)
	return d.run(func() error { return d.fill(dst, o, bits) })
}

func (d *queue) fill(dst backend.View, o ewOp, bits uint64) error {
	w := dst.DType.Size()
	if w == 1 && dst.IsContiguous() {
		return d.check(cuda.MemsetD8Async(o.ptr, uint8(bits), uint64(dst.NumElements()), d.stream))
	}
	names := widthNames["fill"][w]
	k := ewKernel{key: modKey{fam: famBytes, op: "fill"}, c: names[0], s: names[1]}
	return d.ewise(k, dst.Shape, []ewOp{o}, func(a *cuda.KernelArgs, p []cuda.DevicePtr) {
		a.Ptr(p[0]).Uint64(bits)
	})
}

// Copy copies src into dst, converting between dtypes as the CPU backend
// does.
func (dev *Device) Copy(s backend.Stream, dst, src backend.View) error {
	d, err := dev.begin(s, "copy", backend.CheckCopy(dst, src))
	if err != nil {
		return err
	}
	ops, err := d.ops("copy", dst, src)
	if err != nil || dst.NumElements() == 0 {
		return err
	}
	return d.run(func() error { return d.copyLocked(dst, src, ops) })
}

func (d *queue) copyLocked(dst, src backend.View, ops []ewOp) error {
	if dst.DType == src.DType {
		if dst.IsContiguous() && src.IsContiguous() {
			n := uint64(dst.NumElements() * dst.DType.Size())
			return d.check(cuda.MemcpyDtoDAsync(ops[0].ptr, ops[1].ptr, n, d.stream))
		}
		names := widthNames["move"][dst.DType.Size()]
		k := ewKernel{key: modKey{fam: famBytes, op: "move"}, s: names[1], t: moveTiles[dst.DType.Size()]}
		return d.ewise(k, dst.Shape, ops, func(a *cuda.KernelArgs, p []cuda.DevicePtr) { a.Ptr(p[0]).Ptr(p[1]) })
	}
	names := copyNames[dst.DType]
	k := ewKernel{key: modKey{fam: famCopy, dt: src.DType, op: dst.DType.String()}, c: names[0], s: names[1], t: copyTiles[dst.DType]}
	return d.ewise(k, dst.Shape, ops, func(a *cuda.KernelArgs, p []cuda.DevicePtr) { a.Ptr(p[0]).Ptr(p[1]) })
}

// Unary applies op elementwise.
func (dev *Device) Unary(s backend.Stream, op backend.UnaryOp, dst, src backend.View, param float64) error {
	what := "unary " + op.String()
	d, err := dev.begin(s, what, backend.CheckUnary(op, dst, src, param))
	if err != nil {
		return err
	}
	ops, err := d.ops(what, dst, src)
	if err != nil || dst.NumElements() == 0 {
		return err
	}
	names := unaryNames[op]
	k := ewKernel{key: modKey{fam: famUnary, dt: src.DType, op: op.String()}, c: names[0], s: names[1]}
	return d.run(func() error {
		return d.ewise(k, dst.Shape, ops, func(a *cuda.KernelArgs, p []cuda.DevicePtr) {
			a.Ptr(p[0]).Ptr(p[1]).Float64(param)
		})
	})
}

// Binary applies op elementwise. An integer division by zero is reported
// by the next Synchronize (a [KernelError]).
func (dev *Device) Binary(s backend.Stream, op backend.BinaryOp, dst, a, b backend.View) error {
	what := "binary " + op.String()
	d, err := dev.begin(s, what, backend.CheckBinary(op, dst, a, b))
	if err != nil {
		return err
	}
	ops, err := d.ops(what, dst, a, b)
	if err != nil || dst.NumElements() == 0 {
		return err
	}
	names := binaryNames[op][0]
	k := ewKernel{key: modKey{fam: famBinary, dt: a.DType, op: op.String()}, c: names[0], s: names[1], r: binaryRows[op], t: binaryTiles[op]}
	return d.run(func() error {
		if op == backend.Div && !a.DType.IsFloat() {
			d.armed.Store(true)
		}
		return d.ewise(k, dst.Shape, ops, func(ka *cuda.KernelArgs, p []cuda.DevicePtr) {
			ka.Ptr(p[0]).Ptr(p[1]).Ptr(p[2]).Ptr(d.errWords)
		})
	})
}

// Scalar applies op to each element x of a and c, as op(x, c), or op(c,
// x) when reversed is set. Integer inputs with a fractional (or huge, or
// NaN) scalar compute in float64, as the CPU backend does.
func (dev *Device) Scalar(s backend.Stream, op backend.BinaryOp, dst, a backend.View, c float64, reversed bool) error {
	what := "scalar " + op.String()
	d, err := dev.begin(s, what, backend.CheckScalar(op, dst, a))
	if err != nil {
		return err
	}
	kind := 1 // sca: in the compute type
	if !a.DType.IsFloat() {
		if c != math.Trunc(c) || !(c >= math.MinInt64 && c < -math.MinInt64) {
			kind = 2 // scf: in float64
		} else if op == backend.Div && c == 0 && !reversed {
			return fmt.Errorf("cuda: %s: integer division by zero", what)
		}
	}
	ops, err := d.ops(what, dst, a)
	if err != nil || dst.NumElements() == 0 {
		return err
	}
	names := binaryNames[op][kind]
	k := ewKernel{key: modKey{fam: famBinary, dt: a.DType, op: op.String()}, c: names[0], s: names[1]}
	rev := int32(0)
	if reversed {
		rev = 1
	}
	return d.run(func() error {
		if op == backend.Div && kind == 1 && !a.DType.IsFloat() {
			d.armed.Store(true)
		}
		return d.ewise(k, dst.Shape, ops, func(ka *cuda.KernelArgs, p []cuda.DevicePtr) {
			ka.Ptr(p[0]).Ptr(p[1]).Ptr(d.errWords).Float64(c).Int32(rev)
		})
	})
}

// Where sets dst to a where cond is true and to b elsewhere.
func (dev *Device) Where(s backend.Stream, dst, cond, a, b backend.View) error {
	d, err := dev.begin(s, "where", backend.CheckWhere(dst, cond, a, b))
	if err != nil {
		return err
	}
	ops, err := d.ops("where", dst, cond, a, b)
	if err != nil || dst.NumElements() == 0 {
		return err
	}
	names := widthNames["where"][dst.DType.Size()]
	k := ewKernel{key: modKey{fam: famBytes, op: "where"}, c: names[0], s: names[1]}
	return d.run(func() error {
		return d.ewise(k, dst.Shape, ops, func(ka *cuda.KernelArgs, p []cuda.DevicePtr) {
			ka.Ptr(p[0]).Ptr(p[1]).Ptr(p[2]).Ptr(p[3])
		})
	})
}

var _ backend.MultiCopier = (*Device)(nil)

// cpMax is the most pairs one launch of kernels/copy.cu's cp_*_multi takes
// (its CP_MAX): three kernel parameters each, within maxKernelArgs.
const cpMax = 16

// cpTile is the elements of one block of cp_*_multi, the kernel's CP_TILE:
// 16 for each of blockThreads threads.
const cpTile = 4096

// CopyMany copies each pair as Copy does, converting dtypes with one
// launch of kernels/copy.cu's cp_<dst>_multi per group of up to cpMax
// pairs, each pair's tiles of cpTile elements a block of the grid; pairs
// of one dtype are copied by the copy engine, one call each. It
// implements [backend.MultiCopier].
func (dev *Device) CopyMany(s backend.Stream, dsts, srcs []backend.View) error {
	const what = "copy many"
	d, err := dev.begin(s, what, backend.CheckCopyMany(dsts, srcs))
	if err != nil {
		return err
	}
	type pair struct {
		o, a cuda.DevicePtr
		n    int64
	}
	var pairs []pair
	for i := range dsts {
		n := int64(dsts[i].NumElements())
		if n == 0 {
			continue
		}
		o, err := d.ptrOf(what, dsts[i])
		if err != nil {
			return err
		}
		a, err := d.ptrOf(what, srcs[i])
		if err != nil {
			return err
		}
		pairs = append(pairs, pair{o, a, n})
	}
	if len(pairs) == 0 {
		return nil
	}
	dt, st := dsts[0].DType, srcs[0].DType
	return d.run(func() error {
		if dt == st {
			for _, p := range pairs {
				if err := d.check(cuda.MemcpyDtoDAsync(p.o, p.a, uint64(p.n)*uint64(dt.Size()), d.stream)); err != nil {
					return err
				}
			}
			return nil
		}
		f, err := d.function(modKey{fam: famCopy, dt: st, op: dt.String()}, "cp_"+dt.String()+"_multi")
		if err != nil {
			// Nothing is queued yet: the caller copies pair by pair.
			return fmt.Errorf("cuda: %s: %v: %w", what, err, backend.ErrNotImplemented)
		}
		for len(pairs) > 0 {
			chunk := pairs[:min(len(pairs), cpMax)]
			pairs = pairs[len(chunk):]
			var blocks int64
			for _, p := range chunk {
				blocks += (p.n + cpTile - 1) / cpTile
			}
			a := d.getArgs()
			a.Int32(int32(len(chunk)))
			for i := range cpMax {
				if i < len(chunk) {
					a.Ptr(chunk[i].o).Ptr(chunk[i].a).Int64(chunk[i].n)
				} else {
					a.Ptr(0).Ptr(0).Int64(0)
				}
			}
			err := d.check(cuda.LaunchKernel(f, cuda.Dim3{X: uint32(blocks), Y: 1, Z: 1},
				cuda.Dim3{X: blockThreads, Y: 1, Z: 1}, 0, d.stream, a))
			d.putArgs(a)
			if err != nil {
				return err
			}
		}
		return nil
	})
}
