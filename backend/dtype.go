package backend

import "fmt"

// DType is the element type of a tensor.
type DType uint8

// The element types. The zero value is Invalid.
const (
	Invalid  DType = iota
	Float32        // IEEE 754 binary32
	Float64        // IEEE 754 binary64
	Float16        // IEEE 754 binary16, stored as uint16 bits
	BFloat16       // bfloat16 (the top half of a float32), stored as uint16 bits
	Int32          // signed 32-bit integer
	Int64          // signed 64-bit integer
	Bool           // one byte, 0 or 1
	Int8           // signed 8-bit integer (quantized weights)
)

var dtypeNames = [...]string{
	Invalid:  "invalid",
	Float32:  "float32",
	Float64:  "float64",
	Float16:  "float16",
	BFloat16: "bfloat16",
	Int32:    "int32",
	Int64:    "int64",
	Bool:     "bool",
	Int8:     "int8",
}

var dtypeSizes = [...]int{
	Float32: 4, Float64: 8, Float16: 2, BFloat16: 2, Int32: 4, Int64: 8, Bool: 1, Int8: 1,
}

// DTypes lists every valid element type.
var DTypes = []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Bool, Int8}

// String returns the PyTorch-style name of d ("float32", "bfloat16", ...).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size returns the size of one element in bytes, or 0 for an invalid type.
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// Valid reports whether d is one of the listed element types.
func (d DType) Valid() bool { return d > Invalid && d <= Int8 }

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float64 || d == Float16 || d == BFloat16
}

// OpMath returns the dtype in which reductions and composite ops compute
// values of dtype d (PyTorch's accumulate type): float32 for the 16-bit
// floats, whose range and precision a sum or a mean outgrows long before
// realistic sizes, and d itself for every other dtype. [Kernels.Reduce]
// writes a Sum or Prod of a float16 or bfloat16 source into a destination
// of this dtype without rounding to 16 bits.
func (d DType) OpMath() DType {
	if d == Float16 || d == BFloat16 {
		return Float32
	}
	return d
}

// WidensReduce reports whether [Kernels.Reduce] of op accepts a source of
// dtype src with a destination of dtype dst other than src: Sum and Prod of
// a 16-bit float into its [DType.OpMath] dtype.
func WidensReduce(op ReduceOp, dst, src DType) bool {
	return (op == Sum || op == Prod) && dst != src && dst == src.OpMath()
}

// IsInt reports whether d is an integer type (bool excluded).
func (d DType) IsInt() bool { return d == Int32 || d == Int64 || d == Int8 }

// ParseDType returns the element type named s. It accepts the names that
// String returns plus the PyTorch aliases "float", "double", "half", "int",
// "long", "char" and "bf16"/"fp16"/"fp32"/"fp64".
func ParseDType(s string) (DType, error) {
	switch s {
	case "float32", "float", "fp32":
		return Float32, nil
	case "float64", "double", "fp64":
		return Float64, nil
	case "float16", "half", "fp16":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "int32", "int":
		return Int32, nil
	case "int64", "long":
		return Int64, nil
	case "bool":
		return Bool, nil
	case "int8", "char":
		return Int8, nil
	}
	return Invalid, fmt.Errorf("backend: unknown dtype %q (want one of float32, float64, float16, bfloat16, int32, int64, int8, bool)", s)
}

// Promote returns the type that a binary operation on a and b computes in,
// following PyTorch's promotion for tensors of equal standing: floats win
// over integers, integers over bool, the wider float wins, and float16 with
// bfloat16 gives float32.
func Promote(a, b DType) DType {
	if a == b {
		return a
	}
	rank := func(d DType) int {
		switch d {
		case Bool:
			return 0
		case Int8:
			return 1
		case Int32:
			return 2
		case Int64:
			return 3
		case Float16, BFloat16:
			return 4
		case Float32:
			return 5
		case Float64:
			return 6
		}
		return -1
	}
	if (a == Float16 && b == BFloat16) || (a == BFloat16 && b == Float16) {
		return Float32
	}
	if rank(a) >= rank(b) {
		return a
	}
	return b
}
