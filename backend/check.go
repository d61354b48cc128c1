package backend

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Argument checks. Every backend runs the check of a kernel on its
// arguments before it touches memory, so that all backends accept and
// refuse the same calls for the same reasons. A check looks only at the
// views' dtypes, shapes, ranks and layouts and at the other arguments; it
// never looks at the buffers (their kind, owner, size or state), which is
// the backend's part, and neither does it check what a backend may add
// (alignment, the number of dimensions its kernels take). Each check
// returns nil or an error describing the first fault it finds, without the
// backend's name: the backend wraps it ("cpu: unary exp: ..."). An error
// that wraps [ErrNotImplemented] marks a call outside the op set of the
// contract, which callers may replace with other kernels; any other error
// is a caller's mistake.
//
// Every check also finds each view it is given well-formed, as [CheckFill]
// does: a valid dtype and as many strides as dimensions, so that indexing
// Strides by dimension is safe. The signs of sizes and strides and the
// reach of a view into its buffer are left to the backend, which knows the
// buffer. A backend may rely on everything that a check it ran documents.

// checkViews checks that every view has a valid dtype and one stride per
// dimension.
func checkViews(vs ...View) error {
	for _, v := range vs {
		if !v.DType.Valid() {
			return fmt.Errorf("invalid dtype %v", v.DType)
		}
		if len(v.Strides) != len(v.Shape) {
			return fmt.Errorf("view has %d strides for %d dimensions", len(v.Strides), len(v.Shape))
		}
	}
	return nil
}

// sameShape checks that every view has the shape of the first.
func sameShape(vs ...View) error {
	for _, v := range vs[1:] {
		if !slices.Equal(v.Shape, vs[0].Shape) {
			return fmt.Errorf("shape %v does not match %v", v.Shape, vs[0].Shape)
		}
	}
	return nil
}

// elementwise runs the checks every elementwise kernel shares: well-formed
// views of one shape.
func elementwise(vs ...View) error {
	if err := checkViews(vs...); err != nil {
		return err
	}
	return sameShape(vs...)
}

// notDefined is the error of an op that the contract does not define on
// dtype dt.
func notDefined(dt DType) error {
	return fmt.Errorf("not defined on %s: %w", dt, ErrNotImplemented)
}

// CheckFill checks the arguments of [Kernels.Fill]: dst has a valid dtype
// and one stride per dimension. Every value is accepted (Fill converts it
// to dst's dtype).
func CheckFill(dst View) error { return checkViews(dst) }

// CheckCopy checks the arguments of [Kernels.Copy]: dst and src have valid
// dtypes (any two: Copy converts), one stride per dimension, and the same
// shape.
func CheckCopy(dst, src View) error { return elementwise(dst, src) }

// UnaryDefined reports whether the contract defines op on a source of
// dtype dt: every unary op on the floating-point dtypes; on integers the
// exact ones (Neg, Abs, Sign, Square, Relu, Floor, Ceil, Round, PowScalar
// with an integer exponent, IsNaN, LogicalNot); on bool those of them that
// stay in 0 and 1 (all but Neg and PowScalar).
func UnaryDefined(op UnaryOp, dt DType) bool {
	if op >= numUnary || !dt.Valid() {
		return false
	}
	if dt.IsFloat() {
		return true
	}
	switch op {
	case Abs, Sign, Square, Relu, Floor, Ceil, Round, IsNaN, LogicalNot:
		return true
	case Neg, PowScalar:
		return dt != Bool
	}
	return false
}

// CheckUnary checks the arguments of [Kernels.Unary]: dst and src are
// well-formed views of one shape; dst is bool for IsNaN and LogicalNot and
// has src's dtype for every other op. Errors wrapping [ErrNotImplemented]:
// an op that [UnaryDefined] does not define on src's dtype, and PowScalar
// of an integer src with a param that is not a whole number.
func CheckUnary(op UnaryOp, dst, src View, param float64) error {
	if err := elementwise(dst, src); err != nil {
		return err
	}
	switch op {
	case IsNaN, LogicalNot:
		if dst.DType != Bool {
			return fmt.Errorf("destination has dtype %s, want bool", dst.DType)
		}
	default:
		if dst.DType != src.DType {
			return fmt.Errorf("destination dtype %s differs from source dtype %s", dst.DType, src.DType)
		}
	}
	if !UnaryDefined(op, src.DType) {
		return notDefined(src.DType)
	}
	if op == PowScalar && src.DType.IsInt() && param != math.Trunc(param) {
		return fmt.Errorf("non-integer exponent %v on %s: %w", param, src.DType, ErrNotImplemented)
	}
	return nil
}

// BinaryDefined reports whether the contract defines op on inputs of dtype
// dt: every op on the floating-point dtypes; all but the float-only fused
// ops ([BinaryOp.FloatOnly]) on integers; on bool, all of those but Sub,
// Div and Pow.
func BinaryDefined(op BinaryOp, dt DType) bool {
	if op >= numBinary || !dt.Valid() || op.FloatOnly() && !dt.IsFloat() {
		return false
	}
	if dt == Bool {
		switch op {
		case Sub, Div, Pow:
			return false
		}
	}
	return true
}

// checkBinaryDType checks dst's dtype for op on inputs of dtype dt: bool
// for comparisons and logical ops, dt for the others, and that
// [BinaryDefined] defines op on dt.
func checkBinaryDType(op BinaryOp, dst, dt DType) error {
	if op.IsComparison() {
		if dst != Bool {
			return fmt.Errorf("destination has dtype %s, want bool", dst)
		}
	} else if dst != dt {
		return fmt.Errorf("destination dtype %s differs from input dtype %s", dst, dt)
	}
	if !BinaryDefined(op, dt) {
		return notDefined(dt)
	}
	return nil
}

// CheckBinary checks the arguments of [Kernels.Binary]: dst, a and b are
// well-formed views of one shape; a and b have one dtype; dst is bool for
// comparisons and logical ops ([BinaryOp.IsComparison]) and has the
// inputs' dtype for the others. An op that [BinaryDefined] does not define
// on the inputs' dtype is an error wrapping [ErrNotImplemented]. A division
// of integers by zero is the kernel's to report.
func CheckBinary(op BinaryOp, dst, a, b View) error {
	if err := elementwise(dst, a, b); err != nil {
		return err
	}
	if a.DType != b.DType {
		return fmt.Errorf("input dtypes %s and %s differ", a.DType, b.DType)
	}
	return checkBinaryDType(op, dst.DType, a.DType)
}

// CheckScalar checks the arguments of [Kernels.Scalar]: dst and a are
// well-formed views of one shape, and dst's dtype and the op follow
// [CheckBinary]'s rules for inputs of a's dtype. Any scalar is accepted
// (with integer inputs, a fractional one makes the kernel compute in
// float64); a division of integers by zero is the kernel's to report.
func CheckScalar(op BinaryOp, dst, a View) error {
	if err := elementwise(dst, a); err != nil {
		return err
	}
	return checkBinaryDType(op, dst.DType, a.DType)
}

// CheckWhere checks the arguments of [Kernels.Where]: dst, cond, a and b
// are well-formed views of one shape; cond is bool; a and b have dst's
// dtype (any dtype).
func CheckWhere(dst, cond, a, b View) error {
	if err := elementwise(dst, cond, a, b); err != nil {
		return err
	}
	if cond.DType != Bool {
		return fmt.Errorf("condition has dtype %s, want bool", cond.DType)
	}
	if a.DType != dst.DType || b.DType != dst.DType {
		return fmt.Errorf("dtypes %s and %s do not match destination %s", a.DType, b.DType, dst.DType)
	}
	return nil
}

// CheckReduce checks the arguments of [Kernels.Reduce]: op is one of the
// listed reductions (else an error wrapping [ErrNotImplemented]); dst and
// src are well-formed views of the same rank; axes are sorted, distinct
// and within that rank (none is fine: dst then has src's shape); dst's
// shape is src's with the axes set to 1. ArgMax and ArgMin take exactly
// one axis and an int64 dst; every other op takes a dst of src's dtype,
// or of its [DType.OpMath] where [WidensReduce] allows it (a backend
// without that widening refuses it itself). The number of reduced
// elements is not checked: a reduction of none is the kernel's (Sum and
// Prod fill their identity; the others have none).
func CheckReduce(op ReduceOp, dst, src View, axes []int) error {
	if op >= numReduce {
		return fmt.Errorf("unknown reduction: %w", ErrNotImplemented)
	}
	if err := checkViews(dst, src); err != nil {
		return err
	}
	nd := len(src.Shape)
	if len(dst.Shape) != nd {
		return fmt.Errorf("destination has %d dimensions, source %d", len(dst.Shape), nd)
	}
	prev := -1
	for _, ax := range axes {
		if ax <= prev || ax >= nd {
			return fmt.Errorf("axes %v are not sorted, distinct and within %d dimensions", axes, nd)
		}
		prev = ax
	}
	for i, n := range src.Shape {
		if slices.Contains(axes, i) {
			n = 1
		}
		if dst.Shape[i] != n {
			return fmt.Errorf("destination shape %v does not match source shape %v reduced over axes %v", dst.Shape, src.Shape, axes)
		}
	}
	switch {
	case op == ArgMax || op == ArgMin:
		if len(axes) != 1 {
			return fmt.Errorf("want exactly one axis, got %v", axes)
		}
		if dst.DType != Int64 {
			return fmt.Errorf("destination has dtype %s, want int64", dst.DType)
		}
	case dst.DType != src.DType && !WidensReduce(op, dst.DType, src.DType):
		return fmt.Errorf("destination dtype %s differs from source dtype %s (only a sum or product of float16 or bfloat16 may write float32)", dst.DType, src.DType)
	}
	return nil
}

// checkIndexed checks the operands of Gather and ScatterAdd: small (the
// operand the index walks) and big (the one it indexes along axis) are
// well-formed and share a dtype, index is int64 of small's shape, big has
// small's rank, axis is one of its dimensions, and small is no larger
// than big along every other axis.
func checkIndexed(small, big, index View, axis int) error {
	if err := checkViews(small, big, index); err != nil {
		return err
	}
	if index.DType != Int64 {
		return fmt.Errorf("index has dtype %s, want int64", index.DType)
	}
	if small.DType != big.DType {
		return fmt.Errorf("dtypes %s and %s differ", small.DType, big.DType)
	}
	if !slices.Equal(index.Shape, small.Shape) {
		return fmt.Errorf("index shape %v differs from %v", index.Shape, small.Shape)
	}
	if len(big.Shape) != len(small.Shape) || axis < 0 || axis >= len(small.Shape) {
		return fmt.Errorf("bad axis %d for shapes %v and %v", axis, small.Shape, big.Shape)
	}
	for i := range small.Shape {
		if i != axis && small.Shape[i] > big.Shape[i] {
			return fmt.Errorf("shape %v does not fit in %v off axis %d", small.Shape, big.Shape, axis)
		}
	}
	return nil
}

// CheckGather checks the arguments of [Kernels.Gather]: dst, src and
// index are well-formed; dst and src share a dtype (any dtype) and a
// rank; index is int64 and has dst's shape; 0 <= axis < that rank; dst is
// no larger than src along every other axis (src's shape along axis is
// free). The index values are the kernel's to check.
func CheckGather(dst, src, index View, axis int) error {
	return checkIndexed(dst, src, index, axis)
}

// CheckScatterAdd checks the arguments of [Kernels.ScatterAdd]: dst,
// index and src are well-formed; dst and src share a dtype (any dtype)
// and a rank; index is int64 and has src's shape; 0 <= axis < that rank;
// src is no larger than dst along every other axis (dst's shape along
// axis is free). The index values are the kernel's to check.
func CheckScatterAdd(dst, index, src View, axis int) error {
	return checkIndexed(src, dst, index, axis)
}

// CheckMatMul checks the arguments of [Kernels.MatMul]: dst, a and b are
// well-formed 3-D views, a [B,M,K], b [B,K,N] and dst [B,M,N] (any of
// the sizes may be 0), of one dtype. A dtype that is not floating-point
// is an error wrapping [ErrNotImplemented]. Strides are not checked.
func CheckMatMul(dst, a, b View) error {
	if err := checkViews(dst, a, b); err != nil {
		return err
	}
	if len(dst.Shape) != 3 || len(a.Shape) != 3 || len(b.Shape) != 3 {
		return fmt.Errorf("want 3-d views, got shapes %v, %v -> %v", a.Shape, b.Shape, dst.Shape)
	}
	bn, m, n, k := dst.Shape[0], dst.Shape[1], dst.Shape[2], a.Shape[2]
	if a.Shape[0] != bn || a.Shape[1] != m || b.Shape[0] != bn || b.Shape[1] != k || b.Shape[2] != n {
		return fmt.Errorf("shapes %v x %v do not give %v", a.Shape, b.Shape, dst.Shape)
	}
	if a.DType != dst.DType || b.DType != dst.DType {
		return fmt.Errorf("dtypes %s x %s -> %s differ", a.DType, b.DType, dst.DType)
	}
	if !dst.DType.IsFloat() {
		return notDefined(dst.DType)
	}
	return nil
}

// checkFused checks the operands of a fused product: well-formed 2-D a
// [M,K], b [K,N] and dst [M,N] and a vector vec of want elements, all of
// one floating-point dtype.
func checkFused(dst, a, b, vec View, rows bool) error {
	if err := checkViews(dst, a, b, vec); err != nil {
		return err
	}
	if len(dst.Shape) != 2 || len(a.Shape) != 2 || len(b.Shape) != 2 || len(vec.Shape) != 1 {
		return fmt.Errorf("want 2-d matrices and a vector, got shapes %v, %v -> %v and %v", a.Shape, b.Shape, dst.Shape, vec.Shape)
	}
	want := b.Shape[1]
	if rows {
		want = a.Shape[0]
	}
	if b.Shape[0] != a.Shape[1] || dst.Shape[0] != a.Shape[0] || dst.Shape[1] != b.Shape[1] || vec.Shape[0] != want {
		return fmt.Errorf("shapes %v x %v -> %v with vector %v do not fit", a.Shape, b.Shape, dst.Shape, vec.Shape)
	}
	dt := dst.DType
	if a.DType != dt || b.DType != dt || vec.DType != dt {
		return fmt.Errorf("dtypes %s x %s -> %s with vector %s differ", a.DType, b.DType, dt, vec.DType)
	}
	if !dt.IsFloat() {
		return notDefined(dt)
	}
	return nil
}

// CheckMatMulBias checks the arguments of [FusedMatMul.MatMulBias]:
// well-formed 2-D views a [M,K], b [K,N] and dst [M,N] and a 1-D bias
// [N], all of one dtype; a dtype that is not floating-point is an error
// wrapping [ErrNotImplemented]. Strides (the contiguity of dst and bias
// included) are not checked.
func CheckMatMulBias(dst, a, b, bias View) error { return checkFused(dst, a, b, bias, false) }

// CheckMatMulRowSum checks the arguments of [FusedMatMul.MatMulRowSum]
// as [CheckMatMulBias] does, with a 1-D rowSum [M] for the bias.
func CheckMatMulRowSum(dst, a, b, rowSum View) error { return checkFused(dst, a, b, rowSum, true) }

// checkStep checks the views of a fused optimizer step: well-formed, of
// one shape, and (else errors wrapping [ErrNotImplemented]) of one
// floating-point dtype and contiguous.
func checkStep(vs ...View) error {
	if err := checkViews(vs...); err != nil {
		return err
	}
	dt := vs[0].DType
	if !dt.IsFloat() {
		return notDefined(dt)
	}
	if err := sameShape(vs...); err != nil {
		return err
	}
	for _, v := range vs {
		if v.DType != dt {
			return fmt.Errorf("dtypes %s and %s differ: %w", dt, v.DType, ErrNotImplemented)
		}
	}
	for _, v := range vs {
		if !v.IsContiguous() {
			return fmt.Errorf("view is not contiguous (shape %v, strides %v): %w", v.Shape, v.Strides, ErrNotImplemented)
		}
	}
	return nil
}

// CheckAdamStep checks the arguments of [FusedAdam.AdamStep]: p, g, m and
// v are well-formed views of one shape, and cfg.Step is at least 1.
// Errors wrapping [ErrNotImplemented] (the caller then composes the step
// from [Kernels]): a dtype of p that is not floating-point, views of
// different dtypes, a view that is not contiguous. Overlaps are not
// checked.
func CheckAdamStep(p, g, m, v View, cfg AdamStepConfig) error {
	if err := checkStep(p, g, m, v); err != nil {
		return err
	}
	if cfg.Step < 1 {
		return fmt.Errorf("step %d, want at least 1", cfg.Step)
	}
	return nil
}

// CheckSGDStep checks the arguments of [FusedSGD.SGDStep] as
// [CheckAdamStep] does for p, g, and buf when cfg.Momentum is not 0 (buf
// is not looked at otherwise). The other hyper-parameters are free.
func CheckSGDStep(p, g, buf View, cfg SGDStepConfig) error {
	if cfg.Momentum != 0 {
		return checkStep(p, g, buf)
	}
	return checkStep(p, g)
}

// CheckSGDSteps checks the arguments of [FusedSGDMulti.SGDSteps]: one
// gradient, first flag and (with momentum) buffer per parameter, each
// parameter's views as [CheckSGDStep] checks them.
func CheckSGDSteps(ps, gs, bufs []View, first []bool, cfg SGDStepConfig) error {
	if len(gs) != len(ps) || len(first) != len(ps) || cfg.Momentum != 0 && len(bufs) != len(ps) {
		return fmt.Errorf("%d parameters with %d gradients, %d buffers and %d first-step flags", len(ps), len(gs), len(bufs), len(first))
	}
	for i := range ps {
		var b View
		if cfg.Momentum != 0 {
			b = bufs[i]
		}
		if err := CheckSGDStep(ps[i], gs[i], b, cfg); err != nil {
			return fmt.Errorf("parameter %d: %w", i, err)
		}
	}
	return nil
}

// CheckHostCopy checks a device view v for a copy of nbytes host bytes
// ([Copier.CopyFromHost], [Copier.CopyToHost], and the device side of
// other copies): v is well-formed and contiguous, and nbytes is exactly
// v.NumElements() elements of v's dtype.
func CheckHostCopy(v View, nbytes int) error {
	if err := checkViews(v); err != nil {
		return err
	}
	if !v.IsContiguous() {
		return fmt.Errorf("view is not contiguous (shape %v, strides %v)", v.Shape, v.Strides)
	}
	if n := v.NumElements() * v.DType.Size(); nbytes != n {
		return fmt.Errorf("got %d bytes for %d elements of %s (want %d)", nbytes, v.NumElements(), v.DType, n)
	}
	return nil
}

// CheckCopyMany checks the arguments of [MultiCopier.CopyMany]: as many
// destinations as sources, each pair as [CheckCopy] wants it, every view
// contiguous, the sources of one dtype and the destinations of one dtype,
// and no destination overlapping another destination or a source.
func CheckCopyMany(dsts, srcs []View) error {
	if len(dsts) != len(srcs) {
		return fmt.Errorf("%d destinations for %d sources", len(dsts), len(srcs))
	}
	type span struct {
		lo, hi int // bytes from the start of the buffer
		pair   int
		dst    bool
	}
	spans := map[Buffer][]span{}
	for i := range dsts {
		if err := CheckCopy(dsts[i], srcs[i]); err != nil {
			return fmt.Errorf("pair %d: %w", i, err)
		}
		if !dsts[i].IsContiguous() || !srcs[i].IsContiguous() {
			return fmt.Errorf("pair %d: views must be contiguous (strides %v and %v)", i, dsts[i].Strides, srcs[i].Strides)
		}
		if dsts[i].DType != dsts[0].DType || srcs[i].DType != srcs[0].DType {
			return fmt.Errorf("pair %d: %s from %s, where pair 0 is %s from %s: one dtype each side", i, dsts[i].DType, srcs[i].DType, dsts[0].DType, srcs[0].DType)
		}
		for k, v := range []View{dsts[i], srcs[i]} {
			if n := v.NumElements(); n > 0 && v.Buf != nil {
				sz := v.DType.Size()
				spans[v.Buf] = append(spans[v.Buf], span{v.Offset * sz, (v.Offset + n) * sz, i, k == 0})
			}
		}
	}
	// Per buffer, in order of their starts: a span overlaps an earlier one
	// when it starts before that one's end.
	for _, ss := range spans {
		sort.Slice(ss, func(a, b int) bool { return ss[a].lo < ss[b].lo })
		anyEnd, dstEnd := -1, -1
		var anyPair, dstPair int
		for _, s := range ss {
			switch {
			case s.lo < dstEnd:
				return fmt.Errorf("destination %d overlaps pair %d", dstPair, s.pair)
			case s.dst && s.lo < anyEnd:
				return fmt.Errorf("destination %d overlaps pair %d", s.pair, anyPair)
			}
			if s.hi > anyEnd {
				anyEnd, anyPair = s.hi, s.pair
			}
			if s.dst && s.hi > dstEnd {
				dstEnd, dstPair = s.hi, s.pair
			}
		}
	}
	return nil
}
