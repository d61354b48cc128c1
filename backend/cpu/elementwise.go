package cpu

import (
	"fmt"
	"math"

	"github.com/vramgo/vram/backend"
)

// block is the number of elements converted and computed at a time.
const block = 1024

// ewise applies fn block by block to dst and the inputs ins, which have
// dst's shape, in compute type C: each input block is converted to C (or
// used in place when it is contiguous and stored as C), fn computes the
// block of dst, and the block is converted to dst's dtype. cost is the work
// per element, as a multiple of an addition, for the parallel split.
func ewise[C number](dst *operand, ins []*operand, cost int, fn func(d []C, in [][]C) error) error {
	ops := append([]*operand{dst}, ins...)
	sp := spaceOf(ops...)
	n := sp.size
	if n == 0 {
		return nil
	}
	dstNative := native[C](dst.dt)
	inNative := make([]bool, len(ins))
	for k, in := range ins {
		inNative[k] = !in.konst && native[C](in.dt)
	}
	return parallel(n, n*cost, func(lo, hi int) error {
		bs := min(block, hi-lo)
		cur := newCursor(sp)
		cur.reset(lo, hi, [maxOperands]int{})
		dScratch := make([]C, bs)
		scratch := make([][]C, len(ins))
		for k, in := range ins {
			scratch[k] = make([]C, bs)
			if in.konst {
				load(in, 0, 0, scratch[k])
			}
		}
		blocks := make([][]C, len(ins))
		dstTyped := typed[C](dst.raw)
		for {
			off, rn, ok := cur.next()
			if !ok {
				return nil
			}
			dstStride := sp.inner[0]
			for j := 0; j < rn; j += bs {
				m := min(bs, rn-j)
				for k, in := range ins {
					st := sp.inner[k+1]
					o := off[k+1] + j*st
					switch {
					case in.konst:
						blocks[k] = scratch[k][:m]
					case inNative[k] && st == 1:
						blocks[k] = typed[C](in.raw)[o : o+m]
					default:
						blocks[k] = scratch[k][:m]
						load(in, o, st, blocks[k])
					}
				}
				o := off[0] + j*dstStride
				direct := dstNative && dstStride == 1
				var d []C
				if direct {
					d = dstTyped[o : o+m]
				} else {
					d = dScratch[:m]
				}
				if err := fn(d, blocks); err != nil {
					return err
				}
				if !direct {
					store(dst, o, dstStride, d)
				}
			}
		}
	})
}

// Fill sets every element of dst to value, converted to dst's dtype.
func (*Device) Fill(st backend.Stream, dst backend.View, value float64) (err error) {
	if err := begin(st, "fill", backend.CheckFill(dst)); err != nil {
		return err
	}
	defer recoverTo(&err, "fill")
	d, err := resolve("fill", dst)
	if err != nil || d.size() == 0 {
		return err
	}
	c := &operand{dt: dst.DType, shape: d.shape, strides: make([]int, len(d.shape)), konst: true, value: value}
	copyFn := func(dd []int64, in [][]int64) error { copy(dd, in[0]); return nil }
	switch {
	case dst.DType == backend.Bool:
		if value != 0 { // NaN too
			c.value = 1
		} else {
			c.value = 0
		}
		return ewise(d, []*operand{c}, 1, copyFn)
	case dst.DType.IsInt():
		return ewise(d, []*operand{c}, 1, copyFn)
	}
	return ewise(d, []*operand{c}, 1, func(dd []float64, in [][]float64) error { copy(dd, in[0]); return nil })
}

// Copy copies src into dst, converting between dtypes.
func (*Device) Copy(st backend.Stream, dst, src backend.View) (err error) {
	if err := begin(st, "copy", backend.CheckCopy(dst, src)); err != nil {
		return err
	}
	defer recoverTo(&err, "copy")
	ops, err := resolveAll("copy", dst, src)
	if err != nil {
		return err
	}
	d, s := ops[0], ops[1]
	if d.size() == 0 {
		return nil
	}
	if d.dt == s.dt {
		return moveElements(d, s)
	}
	switch copyKind(s.dt) {
	case kFloat32:
		return ewise(d, []*operand{s}, 1, func(dd []float32, in [][]float32) error { copy(dd, in[0]); return nil })
	case kFloat64:
		return ewise(d, []*operand{s}, 1, func(dd []float64, in [][]float64) error { copy(dd, in[0]); return nil })
	default:
		return ewise(d, []*operand{s}, 1, func(dd []int64, in [][]int64) error { copy(dd, in[0]); return nil })
	}
}

// moveElements copies src into dst of the same dtype without conversion.
func moveElements(dst, src *operand) error {
	switch dst.dt.Size() {
	case 1:
		return move[uint8](dst, src)
	case 2:
		return move[uint16](dst, src)
	case 4:
		return move[uint32](dst, src)
	default:
		return move[uint64](dst, src)
	}
}

func move[W word](dst, src *operand) error {
	sp := spaceOf(dst, src)
	d, s := typed[W](dst.raw), typed[W](src.raw)
	return parallel(sp.size, sp.size, func(lo, hi int) error {
		cur := newCursor(sp)
		cur.reset(lo, hi, [maxOperands]int{})
		ds, ss := sp.inner[0], sp.inner[1]
		for {
			off, n, ok := cur.next()
			if !ok {
				return nil
			}
			do, so := off[0], off[1]
			if ds == 1 && ss == 1 {
				copy(d[do:do+n], s[so:so+n])
				continue
			}
			for range n {
				d[do] = s[so]
				do += ds
				so += ss
			}
		}
	})
}

// Where sets dst to a where cond is true and to b elsewhere.
func (*Device) Where(st backend.Stream, dst, cond, a, b backend.View) (err error) {
	if err := begin(st, "where", backend.CheckWhere(dst, cond, a, b)); err != nil {
		return err
	}
	defer recoverTo(&err, "where")
	ops, err := resolveAll("where", dst, cond, a, b)
	if err != nil {
		return err
	}
	if ops[0].size() == 0 {
		return nil
	}
	switch dst.DType.Size() {
	case 1:
		return where[uint8](ops)
	case 2:
		return where[uint16](ops)
	case 4:
		return where[uint32](ops)
	default:
		return where[uint64](ops)
	}
}

func where[W word](ops []*operand) error {
	sp := spaceOf(ops...)
	d, c, a, b := typed[W](ops[0].raw), ops[1].raw, typed[W](ops[2].raw), typed[W](ops[3].raw)
	return parallel(sp.size, sp.size, func(lo, hi int) error {
		cur := newCursor(sp)
		cur.reset(lo, hi, [maxOperands]int{})
		in := sp.inner
		for {
			off, n, ok := cur.next()
			if !ok {
				return nil
			}
			do, co, ao, bo := off[0], off[1], off[2], off[3]
			for range n {
				if c[co] != 0 {
					d[do] = a[ao]
				} else {
					d[do] = b[bo]
				}
				do += in[0]
				co += in[1]
				ao += in[2]
				bo += in[3]
			}
		}
	})
}

// Unary applies op elementwise.
func (*Device) Unary(st backend.Stream, op backend.UnaryOp, dst, src backend.View, param float64) (err error) {
	what := "unary " + op.String()
	if err := begin(st, what, backend.CheckUnary(op, dst, src, param)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, src)
	if err != nil {
		return err
	}
	d, s := ops[0], ops[1]
	if d.size() == 0 {
		return nil
	}
	cost := 8
	switch op {
	case backend.Neg, backend.Abs, backend.Sign, backend.Square, backend.Reciprocal, backend.Relu,
		backend.LeakyRelu, backend.IsNaN, backend.LogicalNot:
		cost = 1
	}
	in := []*operand{s}
	switch computeKind(s.dt) {
	case kFloat32:
		return ewise(d, in, cost, func(dd []float32, x [][]float32) error { unaryFloat(op, dd, x[0], param); return nil })
	case kFloat64:
		return ewise(d, in, cost, func(dd []float64, x [][]float64) error { unaryFloat(op, dd, x[0], param); return nil })
	case kInt32:
		return ewise(d, in, cost, func(dd []int32, x [][]int32) error { unaryInt(op, dd, x[0], param); return nil })
	default:
		return ewise(d, in, cost, func(dd []int64, x [][]int64) error { unaryInt(op, dd, x[0], param); return nil })
	}
}

// Constants of the Gelu family.
const (
	invSqrt2  = 1 / math.Sqrt2
	sqrt2OvPi = 0.7978845608028654 // sqrt(2/pi)
	invSqrt2p = 0.3989422804014327 // 1/sqrt(2*pi)
)

// unaryFloat computes d = op(x) for a float compute type. Functions without
// a float32 version are evaluated in float64 and rounded once.
func unaryFloat[F floating](op backend.UnaryOp, d, x []F, p float64) {
	x = x[:len(d)]
	switch op {
	case backend.Neg:
		for i, v := range x {
			d[i] = -v
		}
	case backend.Abs:
		for i, v := range x {
			d[i] = F(math.Abs(float64(v)))
		}
	case backend.Sign:
		for i, v := range x {
			switch {
			case v > 0:
				d[i] = 1
			case v < 0:
				d[i] = -1
			default:
				d[i] = 0 // zero of either sign, and NaN, as in PyTorch
			}
		}
	case backend.Square:
		for i, v := range x {
			d[i] = v * v
		}
	case backend.Reciprocal:
		for i, v := range x {
			d[i] = 1 / v
		}
	case backend.Relu:
		for i, v := range x {
			if v < 0 {
				v = 0
			}
			d[i] = v
		}
	case backend.LeakyRelu:
		s := F(p)
		for i, v := range x {
			if v < 0 {
				v *= s
			}
			d[i] = v
		}
	case backend.IsNaN:
		for i, v := range x {
			d[i] = b2n[F](v != v)
		}
	case backend.LogicalNot:
		for i, v := range x {
			d[i] = b2n[F](v == 0)
		}
	case backend.PowScalar:
		switch p {
		case 2:
			for i, v := range x {
				d[i] = v * v
			}
		case 1:
			copy(d, x)
		default:
			for i, v := range x {
				d[i] = F(math.Pow(float64(v), p))
			}
		}
	default:
		f := floatFunc(op)
		for i, v := range x {
			d[i] = F(f(float64(v)))
		}
	}
}

// floatFunc returns the float64 function of a transcendental unary op.
func floatFunc(op backend.UnaryOp) func(float64) float64 {
	switch op {
	case backend.Exp:
		return math.Exp
	case backend.Log:
		return math.Log
	case backend.Log1p:
		return math.Log1p
	case backend.Expm1:
		return math.Expm1
	case backend.Sqrt:
		return math.Sqrt
	case backend.Rsqrt:
		return func(x float64) float64 { return 1 / math.Sqrt(x) }
	case backend.Sin:
		return math.Sin
	case backend.Cos:
		return math.Cos
	case backend.Tanh:
		return math.Tanh
	case backend.Sigmoid:
		return sigmoid
	case backend.Gelu:
		return func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x*invSqrt2)) }
	case backend.GeluTanh:
		return func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(sqrt2OvPi*(x+0.044715*x*x*x))) }
	case backend.GeluGrad:
		return func(x float64) float64 {
			return 0.5*(1+math.Erf(x*invSqrt2)) + x*invSqrt2p*math.Exp(-0.5*x*x)
		}
	case backend.Silu:
		return func(x float64) float64 { return x * sigmoid(x) }
	case backend.Erf:
		return math.Erf
	case backend.Floor:
		return math.Floor
	case backend.Ceil:
		return math.Ceil
	case backend.Round:
		return math.RoundToEven
	}
	panic(fmt.Sprintf("unhandled unary op %v", op))
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// b2n converts a bool to 1 or 0.
func b2n[C number](b bool) C {
	if b {
		return 1
	}
	return 0
}

// unaryInt computes d = op(x) for an integer compute type; unaryIntOK has
// checked op.
func unaryInt[I integer](op backend.UnaryOp, d, x []I, p float64) {
	x = x[:len(d)]
	switch op {
	case backend.Neg:
		for i, v := range x {
			d[i] = -v
		}
	case backend.Abs:
		for i, v := range x {
			if v < 0 {
				v = -v
			}
			d[i] = v
		}
	case backend.Sign:
		for i, v := range x {
			d[i] = b2n[I](v > 0) - b2n[I](v < 0)
		}
	case backend.Square:
		for i, v := range x {
			d[i] = v * v
		}
	case backend.Relu:
		for i, v := range x {
			d[i] = max(v, 0)
		}
	case backend.Floor, backend.Ceil, backend.Round:
		copy(d, x)
	case backend.IsNaN:
		clear(d)
	case backend.LogicalNot:
		for i, v := range x {
			d[i] = b2n[I](v == 0)
		}
	case backend.PowScalar:
		e := I(p)
		for i, v := range x {
			d[i] = ipow(v, e)
		}
	default:
		panic(fmt.Sprintf("unhandled integer unary op %v", op))
	}
}

// ipow returns x**e with integer wrap-around. Negative exponents follow C
// integer division: 1 and -1 keep their magnitude, everything else gives 0.
func ipow[I integer](x, e I) I {
	if e < 0 {
		switch x {
		case 1:
			return 1
		case -1:
			if e%2 == 0 {
				return 1
			}
			return -1
		}
		return 0
	}
	r := I(1)
	for e > 0 {
		if e&1 != 0 {
			r *= x
		}
		x *= x
		e >>= 1
	}
	return r
}

// Binary applies op elementwise.
func (*Device) Binary(st backend.Stream, op backend.BinaryOp, dst, a, b backend.View) (err error) {
	what := "binary " + op.String()
	if err := begin(st, what, backend.CheckBinary(op, dst, a, b)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, a, b)
	if err != nil {
		return err
	}
	return binaryIn(what, op, computeKind(a.DType), ops[0], ops[1], ops[2])
}

// Scalar applies op to each element x of a and the scalar s, as op(x, s) or
// op(s, x) when reversed is set.
func (*Device) Scalar(st backend.Stream, op backend.BinaryOp, dst, a backend.View, s float64, reversed bool) (err error) {
	what := "scalar " + op.String()
	if err := begin(st, what, backend.CheckScalar(op, dst, a)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, a)
	if err != nil {
		return err
	}
	x := ops[1]
	k := computeKind(x.dt)
	if !x.dt.IsFloat() && (s != math.Trunc(s) || !(s >= math.MinInt64 && s < -math.MinInt64)) {
		// A fractional (or NaN) scalar, or one beyond int64, with integer
		// elements: compute in float64 and convert the result to dst's
		// dtype. Any other is an int64 exactly.
		k = kFloat64
	}
	c := &operand{dt: x.dt, shape: x.shape, strides: make([]int, len(x.shape)), konst: true, value: s}
	if reversed {
		return binaryIn(what, op, k, ops[0], c, x)
	}
	return binaryIn(what, op, k, ops[0], x, c)
}

// binaryIn runs op in compute type k.
func binaryIn(what string, op backend.BinaryOp, k kind, d, a, b *operand) error {
	if d.size() == 0 {
		return nil
	}
	in := []*operand{a, b}
	cost := 1
	if op == backend.Pow {
		cost = 8
	}
	switch k {
	case kFloat32:
		return ewise(d, in, cost, func(dd []float32, x [][]float32) error { binaryFloat(op, dd, x[0], x[1]); return nil })
	case kFloat64:
		return ewise(d, in, cost, func(dd []float64, x [][]float64) error { binaryFloat(op, dd, x[0], x[1]); return nil })
	case kInt32:
		return ewise(d, in, cost, func(dd []int32, x [][]int32) error { return binaryInt(what, op, dd, x[0], x[1]) })
	default:
		return ewise(d, in, cost, func(dd []int64, x [][]int64) error { return binaryInt(what, op, dd, x[0], x[1]) })
	}
}

// binaryFloat computes d = op(a, b) for a float compute type; comparisons
// write 1 or 0.
func binaryFloat[F floating](op backend.BinaryOp, d, a, b []F) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case backend.Add:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case backend.Sub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case backend.Mul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case backend.Div:
		for i := range d {
			d[i] = a[i] / b[i]
		}
	case backend.Pow:
		for i := range d {
			d[i] = F(math.Pow(float64(a[i]), float64(b[i])))
		}
	case backend.Maximum:
		for i := range d {
			x, y := a[i], b[i]
			if x > y || x != x {
				d[i] = x
			} else {
				d[i] = y
			}
		}
	case backend.Minimum:
		for i := range d {
			x, y := a[i], b[i]
			if x < y || x != x {
				d[i] = x
			} else {
				d[i] = y
			}
		}
	case backend.ReluBackward:
		for i := range d {
			if b[i] > 0 {
				d[i] = a[i]
			} else {
				d[i] = 0
			}
		}
	case backend.GeluBackward:
		for i := range d {
			x := float64(b[i])
			d[i] = F(float64(a[i]) * (0.5*(1+math.Erf(x*invSqrt2)) + x*invSqrt2p*math.Exp(-0.5*x*x)))
		}
	case backend.AddRelu:
		for i := range d {
			s := a[i] + b[i]
			if s < 0 {
				s = 0
			}
			d[i] = s
		}
	case backend.AddGelu:
		for i := range d {
			x := float64(a[i] + b[i])
			d[i] = F(0.5 * x * (1 + math.Erf(x*invSqrt2)))
		}
	default:
		compare(op, d, a, b)
	}
}

// compare computes comparisons and logical ops, writing 1 or 0.
func compare[C number](op backend.BinaryOp, d, a, b []C) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case backend.Eq:
		for i := range d {
			d[i] = b2n[C](a[i] == b[i])
		}
	case backend.Ne:
		for i := range d {
			d[i] = b2n[C](a[i] != b[i])
		}
	case backend.Lt:
		for i := range d {
			d[i] = b2n[C](a[i] < b[i])
		}
	case backend.Le:
		for i := range d {
			d[i] = b2n[C](a[i] <= b[i])
		}
	case backend.Gt:
		for i := range d {
			d[i] = b2n[C](a[i] > b[i])
		}
	case backend.Ge:
		for i := range d {
			d[i] = b2n[C](a[i] >= b[i])
		}
	case backend.LogicalAnd:
		for i := range d {
			d[i] = b2n[C](a[i] != 0 && b[i] != 0)
		}
	case backend.LogicalOr:
		for i := range d {
			d[i] = b2n[C](a[i] != 0 || b[i] != 0)
		}
	default:
		panic(fmt.Sprintf("unhandled binary op %v", op))
	}
}

// binaryInt computes d = op(a, b) for an integer compute type. Division
// truncates toward zero; division by zero is an error.
func binaryInt[I integer](what string, op backend.BinaryOp, d, a, b []I) error {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case backend.Add:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case backend.Sub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case backend.Mul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case backend.Div:
		for i := range d {
			if b[i] == 0 {
				return fmt.Errorf("cpu: %s: integer division by zero", what)
			}
			d[i] = a[i] / b[i]
		}
	case backend.Pow:
		for i := range d {
			d[i] = ipow(a[i], b[i])
		}
	case backend.Maximum:
		for i := range d {
			d[i] = max(a[i], b[i])
		}
	case backend.Minimum:
		for i := range d {
			d[i] = min(a[i], b[i])
		}
	default:
		compare(op, d, a, b)
	}
	return nil
}

// recoverTo turns a panic in a kernel's own goroutine into an error.
func recoverTo(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("cpu: %s: kernel panicked: %v", what, r)
	}
}

var _ backend.MultiCopier = (*Device)(nil)

// CopyMany copies each pair as Copy does, once every argument has been
// checked. It implements [backend.MultiCopier].
func (d *Device) CopyMany(st backend.Stream, dsts, srcs []backend.View) error {
	if err := begin(st, "copy many", backend.CheckCopyMany(dsts, srcs)); err != nil {
		return err
	}
	for i := range dsts {
		if err := d.Copy(st, dsts[i], srcs[i]); err != nil {
			return err
		}
	}
	return nil
}
