package backend

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// outcome is what a check should say.
type outcome int

const (
	accept  outcome = iota // nil
	reject                 // an error, not wrapping ErrNotImplemented
	notImpl                // an error wrapping ErrNotImplemented
)

// checkCase is one call of a check and what it should return.
type checkCase struct {
	name    string
	err     error   // what the check returned
	want    outcome // what it should have returned
	mention string  // for errors: text the message must contain
}

// runChecks checks every case: the outcome, the message's mention, and
// that a message is one line without a backend's name in front.
func runChecks(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err
			switch tc.want {
			case accept:
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			case reject:
				if err == nil {
					t.Fatal("got nil, want an error")
				}
				if errors.Is(err, ErrNotImplemented) {
					t.Errorf("got %v, which wraps ErrNotImplemented: want a plain error", err)
				}
			case notImpl:
				if !errors.Is(err, ErrNotImplemented) {
					t.Fatalf("got %v, want an error wrapping ErrNotImplemented", err)
				}
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.mention) {
				t.Errorf("message %q does not mention %q", msg, tc.mention)
			}
			if strings.ContainsAny(msg, "\n\r") {
				t.Errorf("message %q has more than one line", msg)
			}
			for _, prefix := range []string{"cpu:", "cuda:", "sim:", "backend:"} {
				if strings.HasPrefix(msg, prefix) {
					t.Errorf("message %q starts with a backend's name", msg)
				}
			}
		})
	}
}

// cv returns a contiguous view (without a buffer: the checks never look
// at one).
func cv(dt DType, shape ...int) View {
	return View{DType: dt, Shape: shape, Strides: ContiguousStrides(shape)}
}

// tv returns the transpose of a contiguous [rows, cols] view: a view of
// shape [cols, rows] that is not contiguous (for sizes above 1).
func tv(dt DType, rows, cols int) View {
	return View{DType: dt, Shape: []int{cols, rows}, Strides: []int{1, cols}}
}

// bc returns a view of shape that broadcasts one element (stride 0).
func bc(dt DType, shape ...int) View {
	return View{DType: dt, Shape: shape, Strides: make([]int, len(shape))}
}

// shortStrides returns v with one stride fewer than dimensions.
func shortStrides(v View) View {
	v.Strides = v.Strides[:len(v.Strides)-1]
	return v
}

// badDType returns v with an invalid dtype.
func badDType(v View, dt DType) View {
	v.DType = dt
	return v
}

const (
	f32  = Float32
	f64  = Float64
	f16  = Float16
	bf16 = BFloat16
	i32  = Int32
	i64  = Int64
	bl   = Bool
)

func TestCheckFill(t *testing.T) {
	var cases []checkCase
	for _, dt := range DTypes {
		cases = append(cases, checkCase{dt.String(), CheckFill(cv(dt, 2, 3)), accept, ""})
	}
	cases = append(cases,
		checkCase{"scalar", CheckFill(cv(f32)), accept, ""},
		checkCase{"empty", CheckFill(cv(f32, 0)), accept, ""},
		checkCase{"strided", CheckFill(tv(f16, 2, 3)), accept, ""},
		checkCase{"broadcast", CheckFill(bc(i64, 4)), accept, ""},
		checkCase{"invalid dtype", CheckFill(cv(Invalid, 2)), reject, "invalid dtype invalid"},
		checkCase{"dtype past the last", CheckFill(badDType(cv(f32, 2), 99)), reject, "invalid dtype DType(99)"},
		checkCase{"strides missing", CheckFill(shortStrides(cv(f32, 2, 3))), reject, "1 strides for 2 dimensions"},
		checkCase{"strides over", CheckFill(View{DType: f32, Shape: []int{2}, Strides: []int{1, 1}}), reject, "2 strides for 1 dimensions"},
	)
	runChecks(t, cases)
}

func TestCheckCopy(t *testing.T) {
	var cases []checkCase
	for _, from := range DTypes {
		for _, to := range DTypes {
			cases = append(cases, checkCase{name: "from " + from.String() + " to " + to.String(),
				err: CheckCopy(cv(to, 2, 3), cv(from, 2, 3)), want: accept})
		}
	}
	cases = append(cases,
		checkCase{"strided and broadcast", CheckCopy(tv(f32, 3, 2), bc(f32, 2, 3)), accept, ""},
		checkCase{"scalars", CheckCopy(cv(f32), cv(i64)), accept, ""},
		checkCase{"empty", CheckCopy(cv(f32, 0, 3), cv(f32, 0, 3)), accept, ""},
		checkCase{"shapes differ", CheckCopy(cv(f32, 2, 3), cv(f32, 3, 2)), reject, "shape [3 2] does not match [2 3]"},
		checkCase{"ranks differ", CheckCopy(cv(f32, 6), cv(f32, 2, 3)), reject, "does not match"},
		checkCase{"invalid dtype", CheckCopy(cv(f32, 2), badDType(cv(f32, 2), Invalid)), reject, "invalid dtype"},
		checkCase{"dtype past the last", CheckCopy(badDType(cv(f32, 2), Int8+1), cv(f32, 2)), reject, "invalid dtype"},
		checkCase{"strides missing", CheckCopy(cv(f32, 2, 3), shortStrides(cv(f32, 2, 3))), reject, "1 strides for 2 dimensions"},
	)
	runChecks(t, cases)
}

// unaryOnInts lists the unary ops defined on int32 and int64.
var unaryOnInts = map[UnaryOp]bool{Neg: true, Abs: true, Sign: true, Square: true, Relu: true, Floor: true,
	Ceil: true, Round: true, PowScalar: true, IsNaN: true, LogicalNot: true}

// allDTypes lists the valid dtypes and two invalid ones.
var allDTypes = append([]DType{Invalid, Int8 + 1}, DTypes...)

// checkDefined compares defined with want for every op below n+2 (two
// unknown ops) and every dtype of allDTypes.
func checkDefined[Op interface {
	~uint8
	String() string
}](t *testing.T, n Op, defined, want func(Op, DType) bool) {
	t.Helper()
	for op := Op(0); op < n+2; op++ {
		for _, dt := range allDTypes {
			if got, w := defined(op, dt), want(op, dt); got != w {
				t.Errorf("defined(%s, %s) = %v, want %v", op, dt, got, w)
			}
		}
	}
}

func TestUnaryDefined(t *testing.T) {
	checkDefined(t, numUnary, UnaryDefined, func(op UnaryOp, dt DType) bool {
		switch {
		case op >= numUnary || !dt.Valid():
			return false
		case dt.IsFloat():
			return true
		case dt == Bool:
			return unaryOnInts[op] && op != Neg && op != PowScalar
		}
		return unaryOnInts[op]
	})
}

func TestCheckUnary(t *testing.T) {
	var cases []checkCase
	// Every op on every dtype: accepted exactly where it is defined.
	for op := UnaryOp(0); op < numUnary; op++ {
		for _, dt := range DTypes {
			ddt := dt
			if op == IsNaN || op == LogicalNot {
				ddt = Bool
			}
			want := notImpl
			if UnaryDefined(op, dt) {
				want = accept
			}
			cases = append(cases, checkCase{name: op.String() + " on " + dt.String(),
				err: CheckUnary(op, cv(ddt, 2, 3), cv(dt, 2, 3), 2), want: want, mention: "not defined on " + dt.String()})
		}
	}
	cases = append(cases,
		checkCase{"in place", CheckUnary(Exp, cv(f32, 4), cv(f32, 4), 0), accept, ""},
		checkCase{"strided source", CheckUnary(Neg, cv(f16, 2, 3), tv(f16, 3, 2), 0), accept, ""},
		checkCase{"scalar", CheckUnary(Sqrt, cv(f64), cv(f64), 0), accept, ""},
		checkCase{"empty", CheckUnary(Exp, cv(bf16, 0), cv(bf16, 0), 0), accept, ""},
		checkCase{"isnan of ints", CheckUnary(IsNaN, cv(bl, 3), cv(i32, 3), 0), accept, ""},
		checkCase{"logical_not of bool", CheckUnary(LogicalNot, cv(bl, 3), cv(bl, 3), 0), accept, ""},
		checkCase{"integer power of ints", CheckUnary(PowScalar, cv(i64, 3), cv(i64, 3), -2), accept, ""},
		checkCase{"fractional power of floats", CheckUnary(PowScalar, cv(f32, 3), cv(f32, 3), 0.5), accept, ""},
		checkCase{"fractional power of int64", CheckUnary(PowScalar, cv(i64, 3), cv(i64, 3), 2.5), notImpl, "non-integer exponent 2.5 on int64"},
		checkCase{"NaN power of int32", CheckUnary(PowScalar, cv(i32, 3), cv(i32, 3), math.NaN()), notImpl, "non-integer exponent NaN"},
		checkCase{"shapes differ", CheckUnary(Exp, cv(f32, 3), cv(f32, 4), 0), reject, "shape [4] does not match [3]"},
		checkCase{"destination dtype differs", CheckUnary(Exp, cv(f64, 3), cv(f32, 3), 0), reject, "destination dtype float64 differs from source dtype float32"},
		checkCase{"isnan into float", CheckUnary(IsNaN, cv(f32, 3), cv(f32, 3), 0), reject, "destination has dtype float32, want bool"},
		checkCase{"logical_not into int", CheckUnary(LogicalNot, cv(i64, 3), cv(i64, 3), 0), reject, "want bool"},
		checkCase{"unknown op", CheckUnary(numUnary, cv(f32, 3), cv(f32, 3), 0), notImpl, "not defined on float32"},
		checkCase{"invalid source dtype", CheckUnary(Abs, cv(f32, 3), badDType(cv(f32, 3), Invalid), 0), reject, "invalid dtype"},
		checkCase{"strides missing", CheckUnary(Abs, shortStrides(cv(f32, 3)), cv(f32, 3), 0), reject, "strides for 1 dimensions"},
	)
	runChecks(t, cases)
}

func TestBinaryDefined(t *testing.T) {
	checkDefined(t, numBinary, BinaryDefined, func(op BinaryOp, dt DType) bool {
		switch {
		case op >= numBinary || !dt.Valid():
			return false
		case dt.IsFloat():
			return true
		case op >= ReluBackward: // the fused ops: floats only
			return false
		case dt == Bool:
			return op != Sub && op != Div && op != Pow
		}
		return true
	})
}

func TestCheckBinary(t *testing.T) {
	var cases []checkCase
	for op := BinaryOp(0); op < numBinary; op++ {
		for _, dt := range DTypes {
			ddt := dt
			if op.IsComparison() {
				ddt = Bool
			}
			want := notImpl
			if BinaryDefined(op, dt) {
				want = accept
			}
			name := op.String() + " on " + dt.String()
			cases = append(cases,
				checkCase{"binary " + name, CheckBinary(op, cv(ddt, 2, 3), cv(dt, 2, 3), bc(dt, 2, 3)), want, "not defined on " + dt.String()},
				checkCase{"scalar " + name, CheckScalar(op, cv(ddt, 2, 3), cv(dt, 2, 3)), want, "not defined on " + dt.String()})
		}
	}
	cases = append(cases,
		checkCase{"binary in place", CheckBinary(Add, cv(f32, 3), cv(f32, 3), cv(f32, 3)), accept, ""},
		checkCase{"binary empty", CheckBinary(Mul, cv(i32, 0, 2), cv(i32, 0, 2), cv(i32, 0, 2)), accept, ""},
		checkCase{"binary integer division", CheckBinary(Div, cv(i64, 3), cv(i64, 3), cv(i64, 3)), accept, ""},
		checkCase{"binary input dtypes differ", CheckBinary(Add, cv(f32, 3), cv(f32, 3), cv(f64, 3)), reject, "input dtypes float32 and float64 differ"},
		checkCase{"binary comparison into float", CheckBinary(Lt, cv(f32, 3), cv(f32, 3), cv(f32, 3)), reject, "destination has dtype float32, want bool"},
		checkCase{"binary logical op into int", CheckBinary(LogicalAnd, cv(i32, 3), cv(i32, 3), cv(i32, 3)), reject, "want bool"},
		checkCase{"binary destination dtype differs", CheckBinary(Add, cv(f64, 3), cv(f32, 3), cv(f32, 3)), reject, "destination dtype float64 differs from input dtype float32"},
		checkCase{"binary arithmetic into bool", CheckBinary(Mul, cv(bl, 3), cv(f32, 3), cv(f32, 3)), reject, "differs from input dtype"},
		checkCase{"binary shapes differ", CheckBinary(Add, cv(f32, 2, 3), cv(f32, 2, 3), cv(f32, 3)), reject, "shape [3] does not match [2 3]"},
		checkCase{"binary destination shape differs", CheckBinary(Add, cv(f32, 3, 2), cv(f32, 2, 3), cv(f32, 2, 3)), reject, "does not match [3 2]"},
		checkCase{"binary unknown op", CheckBinary(numBinary, cv(f32, 3), cv(f32, 3), cv(f32, 3)), notImpl, "not defined"},
		checkCase{"binary invalid dtypes", CheckBinary(Add, cv(Invalid, 3), cv(Invalid, 3), cv(Invalid, 3)), reject, "invalid dtype"},
		checkCase{"binary strides missing", CheckBinary(Add, cv(f32, 3), cv(f32, 3), shortStrides(cv(f32, 3))), reject, "0 strides for 1 dimensions"},
		checkCase{"scalar strided", CheckScalar(Pow, cv(f32, 2, 3), tv(f32, 3, 2)), accept, ""},
		checkCase{"scalar integer division", CheckScalar(Div, cv(i32, 3), cv(i32, 3)), accept, ""},
		checkCase{"scalar comparison into int", CheckScalar(Eq, cv(i64, 3), cv(i64, 3)), reject, "destination has dtype int64, want bool"},
		checkCase{"scalar destination dtype differs", CheckScalar(Sub, cv(f16, 3), cv(bf16, 3)), reject, "destination dtype float16 differs from input dtype bfloat16"},
		checkCase{"scalar shapes differ", CheckScalar(Add, cv(f32, 4), cv(f32, 3)), reject, "shape [3] does not match [4]"},
		checkCase{"scalar invalid dtype", CheckScalar(Add, cv(f32, 3), badDType(cv(f32, 3), 200)), reject, "invalid dtype DType(200)"},
	)
	runChecks(t, cases)
}

func TestCheckWhere(t *testing.T) {
	var cases []checkCase
	for _, dt := range DTypes {
		cases = append(cases, checkCase{name: dt.String(),
			err: CheckWhere(cv(dt, 2, 3), cv(bl, 2, 3), cv(dt, 2, 3), bc(dt, 2, 3)), want: accept})
	}
	cases = append(cases,
		checkCase{"empty", CheckWhere(cv(f32, 0), cv(bl, 0), cv(f32, 0), cv(f32, 0)), accept, ""},
		checkCase{"condition not bool", CheckWhere(cv(f32, 3), cv(i64, 3), cv(f32, 3), cv(f32, 3)), reject, "condition has dtype int64, want bool"},
		checkCase{"a of another dtype", CheckWhere(cv(f32, 3), cv(bl, 3), cv(f64, 3), cv(f32, 3)), reject, "dtypes float64 and float32 do not match destination float32"},
		checkCase{"b of another dtype", CheckWhere(cv(f32, 3), cv(bl, 3), cv(f32, 3), cv(i32, 3)), reject, "do not match destination"},
		checkCase{"destination of another dtype", CheckWhere(cv(bl, 3), cv(bl, 3), cv(f32, 3), cv(f32, 3)), reject, "do not match destination bool"},
		checkCase{"condition shape differs", CheckWhere(cv(f32, 3), cv(bl, 1), cv(f32, 3), cv(f32, 3)), reject, "shape [1] does not match [3]"},
		checkCase{"b shape differs", CheckWhere(cv(f32, 3), cv(bl, 3), cv(f32, 3), cv(f32, 3, 1)), reject, "does not match"},
		checkCase{"strides missing", CheckWhere(cv(f32, 3), shortStrides(cv(bl, 3)), cv(f32, 3), cv(f32, 3)), reject, "strides"},
	)
	runChecks(t, cases)
}

func TestCheckReduce(t *testing.T) {
	var cases []checkCase
	for op := ReduceOp(0); op < numReduce; op++ {
		for _, dt := range DTypes {
			ddt := dt
			if op == ArgMax || op == ArgMin {
				ddt = Int64
			}
			name := op.String() + " of " + dt.String()
			cases = append(cases,
				checkCase{name + " over one axis", CheckReduce(op, cv(ddt, 2, 1, 4), cv(dt, 2, 3, 4), []int{1}), accept, ""},
				checkCase{name + " into another dtype", CheckReduce(op, cv(otherDType(ddt), 2, 1, 4), cv(dt, 2, 3, 4), []int{1}), reject, "destination"})
			if op != ArgMax && op != ArgMin {
				cases = append(cases,
					checkCase{name + " over all axes", CheckReduce(op, cv(dt, 1, 1, 1), cv(dt, 2, 3, 4), []int{0, 1, 2}), accept, ""},
					checkCase{name + " over no axis", CheckReduce(op, cv(dt, 2, 3, 4), cv(dt, 2, 3, 4), nil), accept, ""})
			}
		}
	}
	cases = append(cases,
		checkCase{"sum of float16 into float32", CheckReduce(Sum, cv(f32, 1, 3), cv(f16, 2, 3), []int{0}), accept, ""},
		checkCase{"prod of bfloat16 into float32", CheckReduce(Prod, cv(f32, 2, 1), cv(bf16, 2, 3), []int{1}), accept, ""},
		checkCase{"max of float16 into float32", CheckReduce(Max, cv(f32, 2, 1), cv(f16, 2, 3), []int{1}), reject, "destination dtype float32 differs from source dtype float16"},
		checkCase{"sum of float32 into float64", CheckReduce(Sum, cv(f64, 1), cv(f32, 5), []int{0}), reject, "differs from source dtype float32"},
		checkCase{"sum of int32 into int64", CheckReduce(Sum, cv(i64, 1), cv(i32, 5), []int{0}), reject, "differs from source dtype int32"},
		checkCase{"sum over an empty axis", CheckReduce(Sum, cv(f32, 1, 3), cv(f32, 0, 3), []int{0}), accept, ""},
		checkCase{"max over an empty axis", CheckReduce(Max, cv(f32, 1, 3), cv(f32, 0, 3), []int{0}), accept, ""},
		checkCase{"of a scalar", CheckReduce(Sum, cv(f32), cv(f32), nil), accept, ""},
		checkCase{"of a strided source", CheckReduce(Sum, cv(f32, 3, 1), tv(f32, 2, 3), []int{1}), accept, ""},
		checkCase{"argmax over two axes", CheckReduce(ArgMax, cv(i64, 1, 1), cv(f32, 2, 3), []int{0, 1}), reject, "want exactly one axis, got [0 1]"},
		checkCase{"argmin over no axis", CheckReduce(ArgMin, cv(i64, 2, 3), cv(f32, 2, 3), nil), reject, "want exactly one axis, got []"},
		checkCase{"argmax into int32", CheckReduce(ArgMax, cv(i32, 2, 1), cv(f32, 2, 3), []int{1}), reject, "destination has dtype int32, want int64"},
		checkCase{"ranks differ", CheckReduce(Sum, cv(f32, 2), cv(f32, 2, 3), []int{1}), reject, "destination has 1 dimensions, source 2"},
		checkCase{"axes unsorted", CheckReduce(Sum, cv(f32, 1, 1), cv(f32, 2, 3), []int{1, 0}), reject, "axes [1 0] are not sorted, distinct and within 2 dimensions"},
		checkCase{"axes repeated", CheckReduce(Sum, cv(f32, 1, 3), cv(f32, 2, 3), []int{0, 0}), reject, "not sorted, distinct"},
		checkCase{"negative axis", CheckReduce(Sum, cv(f32, 2, 1), cv(f32, 2, 3), []int{-1}), reject, "axes [-1]"},
		checkCase{"axis past the rank", CheckReduce(Sum, cv(f32, 2, 3), cv(f32, 2, 3), []int{2}), reject, "within 2 dimensions"},
		checkCase{"reduced axis kept", CheckReduce(Sum, cv(f32, 2, 3), cv(f32, 2, 3), []int{1}), reject, "destination shape [2 3] does not match source shape [2 3] reduced over axes [1]"},
		checkCase{"other axis changed", CheckReduce(Sum, cv(f32, 3, 1), cv(f32, 2, 3), []int{1}), reject, "does not match source shape"},
		checkCase{"unknown op", CheckReduce(numReduce, cv(f32, 1), cv(f32, 3), []int{0}), notImpl, "unknown reduction"},
		checkCase{"invalid dtype", CheckReduce(Sum, cv(Invalid, 1), cv(Invalid, 3), []int{0}), reject, "invalid dtype"},
		checkCase{"strides missing", CheckReduce(Sum, cv(f32, 1, 3), shortStrides(cv(f32, 2, 3)), []int{0}), reject, "1 strides for 2 dimensions"},
	)
	runChecks(t, cases)
}

// otherDType returns a valid dtype other than dt (never dt's OpMath).
func otherDType(dt DType) DType {
	if dt == Int32 {
		return Bool
	}
	return Int32
}

func TestCheckIndexed(t *testing.T) {
	var cases []checkCase
	for _, dt := range DTypes {
		cases = append(cases,
			checkCase{"gather " + dt.String(), CheckGather(cv(dt, 2, 5), cv(dt, 3, 7), cv(i64, 2, 5), 1), accept, ""},
			checkCase{"scatter-add " + dt.String(), CheckScatterAdd(cv(dt, 3, 7), cv(i64, 2, 5), cv(dt, 2, 5), 1), accept, ""})
	}
	cases = append(cases,
		checkCase{"gather along axis 0", CheckGather(cv(f32, 9, 4), cv(f32, 2, 4), cv(i64, 9, 4), 0), accept, ""},
		checkCase{"gather of an embedding", CheckGather(cv(f32, 6, 8), cv(f32, 100, 8), bc(i64, 6, 8), 0), accept, ""},
		checkCase{"gather from an empty axis", CheckGather(cv(f32, 2, 3), cv(f32, 2, 0), cv(i64, 2, 3), 1), accept, ""},
		checkCase{"gather of nothing", CheckGather(cv(f32, 0, 3), cv(f32, 2, 3), cv(i64, 0, 3), 0), accept, ""},
		checkCase{"gather of 1-d", CheckGather(cv(i32, 4), cv(i32, 2), cv(i64, 4), 0), accept, ""},
		checkCase{"gather index int32", CheckGather(cv(f32, 2), cv(f32, 3), cv(i32, 2), 0), reject, "index has dtype int32, want int64"},
		checkCase{"gather dtypes differ", CheckGather(cv(f32, 2), cv(f64, 3), cv(i64, 2), 0), reject, "dtypes float32 and float64 differ"},
		checkCase{"gather index shape", CheckGather(cv(f32, 2, 3), cv(f32, 2, 3), cv(i64, 3, 2), 1), reject, "index shape [3 2] differs from [2 3]"},
		checkCase{"gather ranks differ", CheckGather(cv(f32, 2, 3), cv(f32, 6), cv(i64, 2, 3), 0), reject, "bad axis 0 for shapes [2 3] and [6]"},
		checkCase{"gather negative axis", CheckGather(cv(f32, 2, 3), cv(f32, 2, 3), cv(i64, 2, 3), -1), reject, "bad axis -1"},
		checkCase{"gather axis past the rank", CheckGather(cv(f32, 2, 3), cv(f32, 2, 3), cv(i64, 2, 3), 2), reject, "bad axis 2"},
		checkCase{"gather of a scalar", CheckGather(cv(f32), cv(f32), cv(i64), 0), reject, "bad axis 0"},
		checkCase{"gather larger off axis", CheckGather(cv(f32, 3, 2), cv(f32, 2, 5), cv(i64, 3, 2), 1), reject, "shape [3 2] does not fit in [2 5] off axis 1"},
		checkCase{"gather invalid dtypes", CheckGather(cv(Invalid, 2), cv(Invalid, 2), cv(i64, 2), 0), reject, "invalid dtype"},
		checkCase{"gather index strides missing", CheckGather(cv(f32, 2), cv(f32, 2), shortStrides(cv(i64, 2)), 0), reject, "0 strides for 1 dimensions"},
		checkCase{"scatter-add along axis 0", CheckScatterAdd(cv(f32, 2, 4), cv(i64, 9, 4), cv(f32, 9, 4), 0), accept, ""},
		checkCase{"scatter-add into an empty axis", CheckScatterAdd(cv(f32, 2, 0), cv(i64, 2, 3), cv(f32, 2, 3), 1), accept, ""},
		checkCase{"scatter-add index int32", CheckScatterAdd(cv(f32, 3), cv(i32, 2), cv(f32, 2), 0), reject, "index has dtype int32, want int64"},
		checkCase{"scatter-add dtypes differ", CheckScatterAdd(cv(f64, 3), cv(i64, 2), cv(f32, 2), 0), reject, "dtypes float32 and float64 differ"},
		checkCase{"scatter-add index of dst's shape", CheckScatterAdd(cv(f32, 3), cv(i64, 3), cv(f32, 2), 0), reject, "index shape [3] differs from [2]"},
		checkCase{"scatter-add bad axis", CheckScatterAdd(cv(f32, 3), cv(i64, 2), cv(f32, 2), 1), reject, "bad axis 1"},
		checkCase{"scatter-add larger off axis", CheckScatterAdd(cv(f32, 5, 2), cv(i64, 2, 3), cv(f32, 2, 3), 0), reject, "does not fit in [5 2] off axis 0"},
		checkCase{"scatter-add strides missing", CheckScatterAdd(shortStrides(cv(f32, 3)), cv(i64, 2), cv(f32, 2), 0), reject, "strides"},
	)
	runChecks(t, cases)
}

// floatsOnly returns a case for each dtype of a check that takes the
// floating-point dtypes only: check(dt) is accepted for them and is not
// implemented for the others.
func floatsOnly(name string, check func(dt DType) error) []checkCase {
	var cases []checkCase
	for _, dt := range DTypes {
		want := notImpl
		if dt.IsFloat() {
			want = accept
		}
		cases = append(cases, checkCase{name + " " + dt.String(), check(dt), want, "not defined on " + dt.String()})
	}
	return cases
}

func TestCheckMatMul(t *testing.T) {
	cases := floatsOnly("matmul", func(dt DType) error { return CheckMatMul(cv(dt, 2, 3, 5), cv(dt, 2, 3, 4), cv(dt, 2, 4, 5)) })
	batchT := View{DType: f32, Shape: []int{2, 4, 5}, Strides: []int{0, 1, 4}}
	cases = append(cases,
		checkCase{"strided and broadcast batch", CheckMatMul(cv(f32, 2, 3, 5), cv(f32, 2, 3, 4), batchT), accept, ""},
		checkCase{"empty K", CheckMatMul(cv(f32, 1, 3, 5), cv(f32, 1, 3, 0), cv(f32, 1, 0, 5)), accept, ""},
		checkCase{"empty batch", CheckMatMul(cv(f64, 0, 3, 5), cv(f64, 0, 3, 4), cv(f64, 0, 4, 5)), accept, ""},
		checkCase{"2-d views", CheckMatMul(cv(f32, 3, 5), cv(f32, 3, 4), cv(f32, 4, 5)), reject, "want 3-d views, got shapes [3 4], [4 5] -> [3 5]"},
		checkCase{"one 2-d view", CheckMatMul(cv(f32, 1, 3, 5), cv(f32, 1, 3, 4), cv(f32, 4, 5)), reject, "want 3-d views"},
		checkCase{"inner sizes differ", CheckMatMul(cv(f32, 1, 3, 5), cv(f32, 1, 3, 4), cv(f32, 1, 6, 5)), reject, "shapes [1 3 4] x [1 6 5] do not give [1 3 5]"},
		checkCase{"rows differ", CheckMatMul(cv(f32, 1, 2, 5), cv(f32, 1, 3, 4), cv(f32, 1, 4, 5)), reject, "do not give"},
		checkCase{"columns differ", CheckMatMul(cv(f32, 1, 3, 6), cv(f32, 1, 3, 4), cv(f32, 1, 4, 5)), reject, "do not give"},
		checkCase{"batches differ", CheckMatMul(cv(f32, 2, 3, 5), cv(f32, 2, 3, 4), cv(f32, 1, 4, 5)), reject, "do not give"},
		checkCase{"a's dtype differs", CheckMatMul(cv(f32, 1, 3, 5), cv(f16, 1, 3, 4), cv(f32, 1, 4, 5)), reject, "dtypes float16 x float32 -> float32 differ"},
		checkCase{"dst's dtype differs", CheckMatMul(cv(f64, 1, 3, 5), cv(f32, 1, 3, 4), cv(f32, 1, 4, 5)), reject, "-> float64 differ"},
		checkCase{"invalid dtype", CheckMatMul(cv(Invalid, 1, 3, 5), cv(Invalid, 1, 3, 4), cv(Invalid, 1, 4, 5)), reject, "invalid dtype"},
		checkCase{"strides missing", CheckMatMul(cv(f32, 1, 3, 5), shortStrides(cv(f32, 1, 3, 4)), cv(f32, 1, 4, 5)), reject, "2 strides for 3 dimensions"},
	)
	runChecks(t, cases)
}

func TestCheckFusedMatMul(t *testing.T) {
	cases := append(
		floatsOnly("bias", func(dt DType) error { return CheckMatMulBias(cv(dt, 3, 5), cv(dt, 3, 4), cv(dt, 4, 5), cv(dt, 5)) }),
		floatsOnly("rowsum", func(dt DType) error { return CheckMatMulRowSum(cv(dt, 3, 5), cv(dt, 3, 4), cv(dt, 4, 5), cv(dt, 3)) })...)
	cases = append(cases,
		checkCase{"bias with transposed operands", CheckMatMulBias(cv(f32, 3, 5), tv(f32, 4, 3), tv(f32, 5, 4), cv(f32, 5)), accept, ""},
		checkCase{"bias with a strided destination", CheckMatMulBias(tv(f32, 5, 3), cv(f32, 3, 4), cv(f32, 4, 5), bc(f32, 5)), accept, ""},
		checkCase{"bias empty", CheckMatMulBias(cv(f32, 0, 5), cv(f32, 0, 4), cv(f32, 4, 5), cv(f32, 5)), accept, ""},
		checkCase{"bias of a's rows", CheckMatMulBias(cv(f32, 3, 5), cv(f32, 3, 4), cv(f32, 4, 5), cv(f32, 3)), reject, "shapes [3 4] x [4 5] -> [3 5] with vector [3] do not fit"},
		checkCase{"rowsum of dst's columns", CheckMatMulRowSum(cv(f32, 3, 5), cv(f32, 3, 4), cv(f32, 4, 5), cv(f32, 5)), reject, "with vector [5] do not fit"},
		checkCase{"bias 2-d", CheckMatMulBias(cv(f32, 3, 5), cv(f32, 3, 4), cv(f32, 4, 5), cv(f32, 1, 5)), reject, "want 2-d matrices and a vector, got shapes [3 4], [4 5] -> [3 5] and [1 5]"},
		checkCase{"bias batched", CheckMatMulBias(cv(f32, 1, 3, 5), cv(f32, 1, 3, 4), cv(f32, 1, 4, 5), cv(f32, 5)), reject, "want 2-d matrices"},
		checkCase{"bias inner sizes differ", CheckMatMulBias(cv(f32, 3, 5), cv(f32, 3, 4), cv(f32, 2, 5), cv(f32, 5)), reject, "do not fit"},
		checkCase{"bias rows differ", CheckMatMulBias(cv(f32, 2, 5), cv(f32, 3, 4), cv(f32, 4, 5), cv(f32, 5)), reject, "do not fit"},
		checkCase{"bias columns differ", CheckMatMulBias(cv(f32, 3, 6), cv(f32, 3, 4), cv(f32, 4, 5), cv(f32, 5)), reject, "do not fit"},
		checkCase{"bias dtype differs", CheckMatMulBias(cv(f16, 3, 5), cv(f16, 3, 4), cv(f16, 4, 5), cv(f32, 5)), reject, "dtypes float16 x float16 -> float16 with vector float32 differ"},
		checkCase{"rowsum a's dtype differs", CheckMatMulRowSum(cv(f32, 3, 5), cv(bf16, 3, 4), cv(f32, 4, 5), cv(f32, 3)), reject, "dtypes bfloat16 x float32"},
		checkCase{"rowsum invalid dtype", CheckMatMulRowSum(cv(f32, 3, 5), cv(f32, 3, 4), cv(f32, 4, 5), cv(Invalid, 3)), reject, "invalid dtype"},
		checkCase{"bias strides missing", CheckMatMulBias(cv(f32, 3, 5), cv(f32, 3, 4), cv(f32, 4, 5), shortStrides(cv(f32, 5))), reject, "0 strides for 1 dimensions"},
	)
	runChecks(t, cases)
}

func TestCheckOptimizerSteps(t *testing.T) {
	adam := AdamStepConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}
	sgd := SGDStepConfig{LR: 0.1, Momentum: 0.9}
	plain := SGDStepConfig{LR: 0.1}
	cases := append(
		floatsOnly("adam", func(dt DType) error {
			return CheckAdamStep(cv(dt, 2, 3), cv(dt, 2, 3), cv(dt, 2, 3), cv(dt, 2, 3), adam)
		}),
		floatsOnly("sgd", func(dt DType) error { return CheckSGDStep(cv(dt, 6), cv(dt, 6), cv(dt, 6), sgd) })...)
	late := adam
	late.Step = 1000
	for _, step := range []int{0, -1, math.MinInt} {
		bad := adam
		bad.Step = step
		cases = append(cases, checkCase{"adam step " + strconv.Itoa(step), CheckAdamStep(cv(f32, 3), cv(f32, 3), cv(f32, 3), cv(f32, 3), bad), reject, "step " + strconv.Itoa(step) + ", want at least 1"})
	}
	cases = append(cases,
		checkCase{"adam late step", CheckAdamStep(cv(f32, 3), cv(f32, 3), cv(f32, 3), cv(f32, 3), late), accept, ""},
		checkCase{"adam empty", CheckAdamStep(cv(f32, 0), cv(f32, 0), cv(f32, 0), cv(f32, 0), adam), accept, ""},
		checkCase{"adam dtypes differ", CheckAdamStep(cv(f32, 3), cv(f16, 3), cv(f32, 3), cv(f32, 3), adam), notImpl, "dtypes float32 and float16 differ"},
		checkCase{"adam state dtype differs", CheckAdamStep(cv(bf16, 3), cv(bf16, 3), cv(f32, 3), cv(f32, 3), adam), notImpl, "dtypes bfloat16 and float32 differ"},
		checkCase{"adam not contiguous", CheckAdamStep(cv(f32, 3, 2), tv(f32, 2, 3), cv(f32, 3, 2), cv(f32, 3, 2), adam), notImpl, "view is not contiguous (shape [3 2], strides [1 3])"},
		checkCase{"adam broadcast", CheckAdamStep(cv(f32, 3), cv(f32, 3), bc(f32, 3), cv(f32, 3), adam), notImpl, "not contiguous"},
		checkCase{"adam shapes differ", CheckAdamStep(cv(f32, 3), cv(f32, 3), cv(f32, 3), cv(f32, 4), adam), reject, "shape [4] does not match [3]"},
		checkCase{"adam invalid dtype", CheckAdamStep(cv(f32, 3), cv(f32, 3), cv(Invalid, 3), cv(f32, 3), adam), reject, "invalid dtype"},
		checkCase{"adam strides missing", CheckAdamStep(cv(f32, 3), shortStrides(cv(f32, 3)), cv(f32, 3), cv(f32, 3), adam), reject, "strides"},
		checkCase{"sgd without momentum ignores buf", CheckSGDStep(cv(f32, 6), cv(f32, 6), View{}, plain), accept, ""},
		checkCase{"sgd without momentum ignores a bad buf", CheckSGDStep(cv(f32, 6), cv(f32, 6), tv(i32, 2, 3), plain), accept, ""},
		checkCase{"sgd with momentum needs buf", CheckSGDStep(cv(f32, 6), cv(f32, 6), View{}, sgd), reject, "invalid dtype"},
		checkCase{"sgd buf dtype differs", CheckSGDStep(cv(f32, 6), cv(f32, 6), cv(f64, 6), sgd), notImpl, "dtypes float32 and float64 differ"},
		checkCase{"sgd buf not contiguous", CheckSGDStep(cv(f32, 3, 2), cv(f32, 3, 2), tv(f32, 2, 3), sgd), notImpl, "not contiguous"},
		checkCase{"sgd gradient not contiguous", CheckSGDStep(cv(f32, 3, 2), tv(f32, 2, 3), View{}, plain), notImpl, "not contiguous"},
		checkCase{"sgd shapes differ", CheckSGDStep(cv(f32, 6), cv(f32, 2, 3), View{}, plain), reject, "shape [2 3] does not match [6]"},
		checkCase{"sgd integer parameter", CheckSGDStep(cv(i64, 6), cv(i64, 6), View{}, plain), notImpl, "not defined on int64"},
	)
	runChecks(t, cases)
}

func TestCheckHostCopy(t *testing.T) {
	var cases []checkCase
	for _, dt := range DTypes {
		n := 6 * dt.Size()
		cases = append(cases,
			checkCase{dt.String(), CheckHostCopy(cv(dt, 2, 3), n), accept, ""},
			checkCase{dt.String() + " one element short", CheckHostCopy(cv(dt, 2, 3), n-dt.Size()), reject, "got " + strconv.Itoa(n-dt.Size()) + " bytes for 6 elements of " + dt.String() + " (want " + strconv.Itoa(n) + ")"},
			checkCase{dt.String() + " one byte over", CheckHostCopy(cv(dt, 2, 3), n+1), reject, "(want " + strconv.Itoa(n) + ")"})
	}
	sized1 := View{DType: f32, Shape: []int{2, 1, 3}, Strides: []int{3, 99, 1}}
	offset := cv(f32, 4)
	offset.Offset = 12
	cases = append(cases,
		checkCase{"scalar", CheckHostCopy(cv(f64), 8), accept, ""},
		checkCase{"empty", CheckHostCopy(cv(f32, 0, 3), 0), accept, ""},
		checkCase{"empty given bytes", CheckHostCopy(cv(f32, 0, 3), 4), reject, "got 4 bytes for 0 elements of float32 (want 0)"},
		checkCase{"any stride on a dimension of 1", CheckHostCopy(sized1, 24), accept, ""},
		checkCase{"at an offset", CheckHostCopy(offset, 16), accept, ""},
		checkCase{"negative size", CheckHostCopy(cv(f32, 2), -8), reject, "got -8 bytes"},
		checkCase{"transposed", CheckHostCopy(tv(f32, 2, 3), 24), reject, "view is not contiguous (shape [3 2], strides [1 3])"},
		checkCase{"broadcast", CheckHostCopy(bc(f32, 3), 12), reject, "not contiguous"},
		checkCase{"invalid dtype", CheckHostCopy(cv(Invalid, 3), 0), reject, "invalid dtype"},
		checkCase{"strides missing", CheckHostCopy(shortStrides(cv(f32, 2, 3)), 24), reject, "1 strides for 2 dimensions"},
	)
	runChecks(t, cases)
}

// TestChecksAllocateNothing keeps the checks off the heap when they pass:
// they run on every kernel call, whose host overhead is measured against
// PyTorch's.
func TestChecksAllocateNothing(t *testing.T) {
	a, row, cond := cv(f32, 64, 64), cv(f32, 1, 64), cv(bl, 64, 64)
	idx, axes := cv(i64, 64, 64), []int{0}
	m := cv(f32, 1, 64, 64)
	adam := AdamStepConfig{Step: 1}
	n := testing.AllocsPerRun(100, func() {
		_ = CheckFill(a)
		_ = CheckCopy(a, a)
		_ = CheckUnary(Exp, a, a, 0)
		_ = CheckBinary(Add, a, a, a)
		_ = CheckScalar(Mul, a, a)
		_ = CheckWhere(a, cond, a, a)
		_ = CheckReduce(Sum, row, a, axes)
		_ = CheckGather(a, a, idx, 1)
		_ = CheckMatMul(m, m, m)
		_ = CheckAdamStep(a, a, a, a, adam)
		_ = CheckHostCopy(a, 64*64*4)
	})
	if n != 0 {
		t.Errorf("the checks of accepted arguments allocate %v times, want 0", n)
	}
}

func TestCheckArgSort(t *testing.T) {
	var cases []checkCase
	for _, dt := range DTypes {
		cases = append(cases, checkCase{"argsort " + dt.String(), CheckArgSort(cv(i64, 2, 5), cv(dt, 2, 5), 1), accept, ""})
	}
	cases = append(cases,
		checkCase{"argsort along axis 0", CheckArgSort(cv(i64, 3, 2), cv(f32, 3, 2), 0), accept, ""},
		checkCase{"argsort of nothing", CheckArgSort(cv(i64, 0, 3), cv(f32, 0, 3), 1), accept, ""},
		checkCase{"argsort indices int32", CheckArgSort(cv(i32, 2), cv(f32, 2), 0), reject, "indices have dtype int32, want int64"},
		checkCase{"argsort shapes differ", CheckArgSort(cv(i64, 3), cv(f32, 2), 0), reject, "shape"},
		checkCase{"argsort negative axis", CheckArgSort(cv(i64, 2), cv(f32, 2), -1), reject, "axis -1 out of range"},
		checkCase{"argsort of a scalar", CheckArgSort(cv(i64), cv(f32), 0), reject, "axis 0 out of range"},
		checkCase{"argsort strides missing", CheckArgSort(cv(i64, 2), shortStrides(cv(f32, 2)), 0), reject, "strides"},
	)
	runChecks(t, cases)
}

// testBuf is a Buffer for the overlap checks, compared by address.
type testBuf struct{ n int64 }

func (b *testBuf) Bytes() int64 { return b.n }

func TestCheckCopyMany(t *testing.T) {
	b1, b2 := &testBuf{1 << 20}, &testBuf{1 << 20}
	at := func(b Buffer, dt DType, off int, shape ...int) View {
		v := cv(dt, shape...)
		v.Buf, v.Offset = b, off
		return v
	}
	vs := func(v ...View) []View { return v }
	runChecks(t, []checkCase{
		{"weights to bf16", CheckCopyMany(vs(at(b2, bf16, 0, 4, 3), at(b2, bf16, 12, 5)), vs(at(b1, f32, 0, 4, 3), at(b1, f32, 12, 5))), accept, ""},
		{"none", CheckCopyMany(nil, nil), accept, ""},
		{"sources may overlap", CheckCopyMany(vs(at(b2, bf16, 0, 4), at(b2, bf16, 4, 4)), vs(at(b1, f32, 0, 4), at(b1, f32, 2, 4))), accept, ""},
		{"one buffer, apart", CheckCopyMany(vs(at(b1, bf16, 32, 4)), vs(at(b1, f32, 0, 4))), accept, ""},
		{"empty views overlap nothing", CheckCopyMany(vs(at(b1, bf16, 0, 0)), vs(at(b1, f32, 0, 0))), accept, ""},
		{"counts differ", CheckCopyMany(vs(at(b2, bf16, 0, 4)), nil), reject, "1 destinations for 0 sources"},
		{"shapes differ", CheckCopyMany(vs(at(b2, bf16, 0, 4)), vs(at(b1, f32, 0, 5))), reject, "pair 0"},
		{"not contiguous", CheckCopyMany(vs(at(b2, bf16, 0, 3, 2)), vs(View{Buf: b1, DType: f32, Shape: []int{3, 2}, Strides: []int{1, 3}})), reject, "contiguous"},
		{"two source dtypes", CheckCopyMany(vs(at(b2, bf16, 0, 4), at(b2, bf16, 4, 4)), vs(at(b1, f32, 0, 4), at(b1, f16, 100, 4))), reject, "one dtype each side"},
		{"destinations overlap", CheckCopyMany(vs(at(b2, bf16, 0, 4), at(b2, bf16, 3, 4)), vs(at(b1, f32, 0, 4), at(b1, f32, 4, 4))), reject, "overlaps"},
		{"destination over its source", CheckCopyMany(vs(at(b1, bf16, 0, 4)), vs(at(b1, f32, 0, 4))), reject, "overlaps"},
		{"destination over another source, in bytes", CheckCopyMany(vs(at(b2, bf16, 0, 4), at(b1, bf16, 7, 2)), vs(at(b1, f32, 0, 4), at(b2, f32, 100, 2))), reject, "overlaps"},
	})
}
