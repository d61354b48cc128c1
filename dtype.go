package vram

import (
	"fmt"
	"math"
	"strings"

	"github.com/vramgo/vram/backend"
)

// DType is the element type of a tensor. DType values are also [Option]s
// for the factory functions: vram.Zeros(vram.Shape{2, 3}, vram.Float64).
type DType uint8

// The element types; their values equal those of package backend.
const (
	Float32  = DType(backend.Float32)
	Float64  = DType(backend.Float64)
	Float16  = DType(backend.Float16)
	BFloat16 = DType(backend.BFloat16)
	Int32    = DType(backend.Int32)
	Int64    = DType(backend.Int64)
	Bool     = DType(backend.Bool)
	// Int8 holds quantized weights (package nn/quant); the elementwise
	// ops, copies and reductions take it like the other integer types.
	Int8 = DType(backend.Int8)
)

// String returns the PyTorch-style name ("float32", "bfloat16", ...).
func (d DType) String() string { return backend.DType(d).String() }

// Size returns the size of one element in bytes.
func (d DType) Size() int { return backend.DType(d).Size() }

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool { return backend.DType(d).IsFloat() }

// ParseDType returns the dtype named s ("float32", "bf16", "half", "long",
// ...). A name it does not know is an [*Error] of kind [ErrArgument] that
// lists the names it takes.
func ParseDType(s string) (DType, error) {
	d, err := backend.ParseDType(s)
	if err != nil {
		detail := fmt.Sprintf("unknown dtype %q (want float32, float64, float16, bfloat16, int32, int64, int8 or bool; or float, fp32, double, fp64, half, fp16, bf16, int, long, char)", s)
		if name, ok := strings.CutPrefix(s, "torch."); ok {
			detail += fmt.Sprintf("; write PyTorch's names without \"torch.\": %q", name)
		}
		return DType(d), &Error{Kind: ErrArgument, Detail: detail}
	}
	return DType(d), nil
}

func (d DType) applyOption(o *options) { o.dtype = d }

func (d DType) b() backend.DType { return backend.DType(d) }

func promote(a, b DType) DType { return DType(backend.Promote(a.b(), b.b())) }

// category orders the kinds of dtype as PyTorch's type promotion does:
// bool, then the integers, then the floating-point dtypes.
func category(d DType) int {
	switch {
	case d == Bool:
		return 0
	case d.IsFloat():
		return 2
	}
	return 1
}

// resultType returns the dtype of an elementwise operation on a and b
// (torch.result_type): the promotion of their dtypes, except that a
// 0-dimensional tensor combined with a tensor of one or more dimensions
// counts only when it is of a higher category, as a number would, so that
// a float16 tensor times a 0-dimensional float32 tensor stays float16 and
// an int64 tensor plus one of float32 becomes float32.
func resultType(a, b *Tensor) DType {
	az, bz := len(a.shape) == 0, len(b.shape) == 0
	if az == bz {
		return promote(a.dtype, b.dtype)
	}
	dim, zero := a.dtype, b.dtype
	if az {
		dim, zero = zero, dim
	}
	if category(zero) > category(dim) {
		return promote(dim, zero)
	}
	return dim
}

// canCast reports whether an in-place operation may write a result of
// dtype from into a tensor of dtype to, by PyTorch's rule (torch.can_cast):
// a floating-point result only into a floating-point tensor, an integer one
// into anything but bool.
func canCast(from, to DType) bool {
	switch category(from) {
	case 2:
		return category(to) == 2
	case 1:
		return to != Bool
	}
	return true
}

// checkValue panics with an [*Error] of kind ErrArgument, naming op, when v
// cannot be stored in dt without overflow, as PyTorch's fill and full
// refuse it ("value cannot be converted to type ... without overflow")
// rather than let it wrap: for an integer dtype a NaN, an infinity or a
// value outside its range, a fraction beyond its last value included
// (127.5 for int8), as c10::overflows compares the value before it is
// truncated; for a float dtype a finite value beyond its largest (an
// infinity and NaN are floats too). Every value is a bool: true unless 0.
func checkValue(op string, v float64, dt DType) {
	var lo, hi float64 // the range of values
	switch dt {
	case Bool, Float64:
		return
	case Float32:
		lo, hi = -math.MaxFloat32, math.MaxFloat32
	case Float16:
		lo, hi = -65504, 65504
	case BFloat16:
		lo, hi = -bfloat16Max, bfloat16Max
	case Int8:
		lo, hi = math.MinInt8, math.MaxInt8
	case Int32:
		lo, hi = math.MinInt32, math.MaxInt32
	case Int64:
		// 2^63 itself is not an int64, and float64 has no value between
		// it and the largest int64 below it that it represents.
		lo, hi = math.MinInt64, math.Nextafter(-math.MinInt64, 0)
	default:
		return
	}
	if dt.IsFloat() {
		if math.IsNaN(v) || math.IsInf(v, 0) || (v >= lo && v <= hi) {
			return
		}
	} else if v >= lo && v <= hi {
		return
	}
	fail(op, ErrArgument, "value %v cannot be converted to %s without overflow", v, dt)
}

// integral reports whether v is a finite whole number, one that an
// operation of an integer tensor takes as an integer rather than promoting
// the tensor to a floating-point dtype.
func integral(v float64) bool { return v == math.Trunc(v) && !math.IsInf(v, 0) }

// inRange reports whether the whole number v is a value of the integer or
// bool dtype dt.
func inRange(v float64, dt DType) bool {
	switch dt {
	case Bool:
		return v == 0 || v == 1
	case Int8:
		return v >= math.MinInt8 && v <= math.MaxInt8
	case Int32:
		return v >= math.MinInt32 && v <= math.MaxInt32
	}
	return v >= math.MinInt64 && v < -math.MinInt64
}

// bfloat16Max is the largest finite bfloat16, (2 - 2^-7) · 2^127.
const bfloat16Max = 0x1.fep127
