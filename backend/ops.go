package backend

import (
	"errors"
	"fmt"
)

// UnaryOp names an elementwise operation of one input.
type UnaryOp uint8

// The unary ops.
const (
	Neg UnaryOp = iota
	Abs
	Sign
	Exp
	Log
	Log1p
	Expm1
	Sqrt
	Rsqrt
	Square
	Reciprocal
	Sin
	Cos
	Tanh
	Sigmoid
	Relu
	Gelu       // exact: x * Phi(x)
	GeluTanh   // the tanh approximation
	GeluGrad   // derivative of the exact Gelu
	Silu       // x * sigmoid(x)
	Erf        // error function
	Floor      // round down
	Ceil       // round up
	Round      // round half to even
	PowScalar  // x ** param
	LeakyRelu  // x if x > 0, else param * x
	IsNaN      // dst bool
	LogicalNot // dst bool, src any
	numUnary
)

var unaryNames = [...]string{"neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "square",
	"reciprocal", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "gelu_grad", "silu", "erf",
	"floor", "ceil", "round", "pow_scalar", "leaky_relu", "isnan", "logical_not"}

// String returns the operation's name, such as "exp".
func (op UnaryOp) String() string {
	if op < numUnary {
		return unaryNames[op]
	}
	return fmt.Sprintf("UnaryOp(%d)", uint8(op))
}

// BinaryOp names an elementwise operation of two inputs.
type BinaryOp uint8

// The binary ops. Comparisons and logical ops produce bool.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div // true division; integer division truncates toward zero
	Pow
	Maximum // NaN-propagating, like torch.maximum
	Minimum
	Eq
	Ne
	Lt
	Le
	Gt
	Ge
	LogicalAnd
	LogicalOr
	// The fused ops below are defined on floating-point dtypes only.
	ReluBackward // a where b > 0, else 0: the gradient a through a ReLU whose output (or input) is b
	GeluBackward // a·gelu'(b): the gradient a through the exact GELU at input b
	AddRelu      // max(a + b, 0): a bias and a ReLU in one pass
	AddGelu      // gelu(a + b), exact: a bias and a GELU in one pass
	numBinary
)

// NumBinaryOps is the number of binary ops; they are numbered from 0.
const NumBinaryOps = int(numBinary)

var binaryNames = [...]string{"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le",
	"gt", "ge", "logical_and", "logical_or", "relu_backward", "gelu_backward", "add_relu", "add_gelu"}

// String returns the operation's name, such as "add".
func (op BinaryOp) String() string {
	if op < numBinary {
		return binaryNames[op]
	}
	return fmt.Sprintf("BinaryOp(%d)", uint8(op))
}

// IsComparison reports whether op produces bool from its inputs.
func (op BinaryOp) IsComparison() bool { return op >= Eq && op <= LogicalOr }

// FloatOnly reports whether op is defined on floating-point dtypes only.
func (op BinaryOp) FloatOnly() bool { return op >= ReluBackward && op < numBinary }

// ReduceOp names a reduction.
type ReduceOp uint8

// The reductions.
const (
	Sum ReduceOp = iota
	Prod
	Max // NaN-propagating
	Min
	ArgMax // int64 result
	ArgMin
	numReduce
)

var reduceNames = [...]string{"sum", "prod", "max", "min", "argmax", "argmin"}

// String returns the reduction's name, such as "sum".
func (op ReduceOp) String() string {
	if op < numReduce {
		return reduceNames[op]
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(op))
}

// ErrNotImplemented is returned (wrapped) by a kernel that a backend does not
// provide for the given op or dtype.
var ErrNotImplemented = errors.New("not implemented")
