package cpu

import (
	"math"
	"unsafe"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/half"
)

// number is the set of types the kernels compute in. float32 serves
// float32, float16 and bfloat16 storage; int32 serves int8 and bool (0 or
// 1).
type number interface {
	float32 | float64 | int32 | int64
}

// floating is the set of float compute types.
type floating interface {
	float32 | float64
}

// integer is the set of integer compute types.
type integer interface {
	int32 | int64
}

// word is the set of unsigned types of each element size, for kernels that
// only move elements.
type word interface {
	uint8 | uint16 | uint32 | uint64
}

// kind is a compute type.
type kind uint8

const (
	kFloat32 kind = iota
	kFloat64
	kInt32
	kInt64
)

// computeKind returns the type elementwise kernels compute dt in.
func computeKind(dt backend.DType) kind {
	switch dt {
	case backend.Float64:
		return kFloat64
	case backend.Int32, backend.Int8, backend.Bool:
		return kInt32
	case backend.Int64:
		return kInt64
	}
	return kFloat32
}

// copyKind returns a compute type that holds every value of dt exactly (but
// int64 in float64), used to convert between dtypes.
func copyKind(dt backend.DType) kind {
	switch dt {
	case backend.Float64:
		return kFloat64
	case backend.Int32, backend.Int64, backend.Int8, backend.Bool:
		return kInt64
	}
	return kFloat32
}

// typed reinterprets raw as a slice of T. The buffers of this package are
// 8-byte aligned; foreign buffers are checked when a view is resolved.
func typed[T any](raw []byte) []T {
	var z T
	n := len(raw) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(raw))), n)
}

// native reports whether elements of dt are stored as C itself, so that a
// contiguous run can be used in place without conversion.
func native[C number](dt backend.DType) bool {
	var z C
	switch any(z).(type) {
	case float32:
		return dt == backend.Float32
	case float64:
		return dt == backend.Float64
	case int32:
		return dt == backend.Int32
	case int64:
		return dt == backend.Int64
	}
	return false
}

// load converts len(out) elements of o, starting at element off and stride
// elements apart, into out.
func load[C number](o *operand, off, stride int, out []C) {
	if o.konst {
		v := constOf[C](o.value)
		for i := range out {
			out[i] = v
		}
		return
	}
	switch o.dt {
	case backend.Float32:
		loadNum(typed[float32](o.raw), off, stride, out)
	case backend.Float64:
		loadNum(typed[float64](o.raw), off, stride, out)
	case backend.Int32:
		loadNum(typed[int32](o.raw), off, stride, out)
	case backend.Int64:
		loadNum(typed[int64](o.raw), off, stride, out)
	case backend.Float16:
		s := typed[uint16](o.raw)
		for i := range out {
			out[i] = C(half.F16To32(s[off]))
			off += stride
		}
	case backend.BFloat16:
		s := typed[uint16](o.raw)
		for i := range out {
			out[i] = C(half.BF16To32(s[off]))
			off += stride
		}
	case backend.Bool:
		s := o.raw
		for i := range out {
			if s[off] != 0 {
				out[i] = 1
			} else {
				out[i] = 0
			}
			off += stride
		}
	case backend.Int8:
		s := typed[int8](o.raw)
		for i := range out {
			out[i] = C(s[off])
			off += stride
		}
	}
}

func loadNum[S, C number](s []S, off, stride int, out []C) {
	switch stride {
	case 1:
		s = s[off : off+len(out)]
		for i, v := range s {
			out[i] = C(v)
		}
	case 0:
		v := C(s[off])
		for i := range out {
			out[i] = v
		}
	default:
		for i := range out {
			out[i] = C(s[off])
			off += stride
		}
	}
}

// constOf converts a scalar operand to the compute type C.
func constOf[C number](v float64) C {
	var z C
	switch any(z).(type) {
	case float32, float64:
		return C(v)
	}
	if v != v {
		return 0
	}
	return C(int64(v))
}

// store converts in to o's dtype and writes it at element off onwards,
// stride elements apart.
func store[C number](o *operand, off, stride int, in []C) {
	switch o.dt {
	case backend.Float32:
		storeNum(typed[float32](o.raw), off, stride, in)
	case backend.Float64:
		storeNum(typed[float64](o.raw), off, stride, in)
	case backend.Int32:
		storeNum(typed[int32](o.raw), off, stride, in)
	case backend.Int64:
		storeNum(typed[int64](o.raw), off, stride, in)
	case backend.Float16:
		s := typed[uint16](o.raw)
		if f, ok := any(in).([]float32); ok {
			for _, v := range f {
				s[off] = half.F16(v)
				off += stride
			}
			return
		}
		for _, v := range in {
			s[off] = half.F16(roundToOdd32(float64(v)))
			off += stride
		}
	case backend.BFloat16:
		s := typed[uint16](o.raw)
		if f, ok := any(in).([]float32); ok {
			for _, v := range f {
				s[off] = half.BF16(v)
				off += stride
			}
			return
		}
		for _, v := range in {
			s[off] = half.BF16(roundToOdd32(float64(v)))
			off += stride
		}
	case backend.Bool:
		s := o.raw
		for _, v := range in {
			if v != 0 { // NaN too
				s[off] = 1
			} else {
				s[off] = 0
			}
			off += stride
		}
	case backend.Int8:
		s := typed[int8](o.raw)
		for _, v := range in {
			s[off] = toInt8(v)
			off += stride
		}
	}
}

// toInt8 converts v to int8 as PyTorch does: a float is truncated toward
// zero to a 64-bit integer (NaN gives 0) and every integer keeps its low 8
// bits, so out-of-range values wrap the same way on every backend.
func toInt8[C number](v C) int8 {
	if v != v {
		return 0
	}
	return int8(int64(v))
}

func storeNum[C, S number](s []S, off, stride int, in []C) {
	if stride == 1 {
		s = s[off : off+len(in)]
		for i, v := range in {
			s[i] = S(v)
		}
		return
	}
	for _, v := range in {
		s[off] = S(v)
		off += stride
	}
}

// roundToOdd32 rounds x to float32 with round-to-odd: an inexact result is
// truncated toward zero and its last bit set. Rounding that float32 again to
// a format of at most 22 significand bits (float16, bfloat16) then gives the
// correctly rounded result of x, which rounding x to float32 to nearest
// first would not always.
func roundToOdd32(x float64) float32 {
	f := float32(x)
	if float64(f) == x || x != x {
		return f
	}
	b := math.Float32bits(f)
	if math.Abs(float64(f)) > math.Abs(x) {
		b-- // one step toward zero (sign-magnitude)
	}
	return math.Float32frombits(b | 1)
}
