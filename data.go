package vram

import (
	"encoding/binary"
	"math"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/half"
)

// Element is the set of Go types that tensors can be built from and read
// into.
type Element interface {
	float32 | float64 | int32 | int64 | int | bool
}

// hostBytes returns t's elements, in row-major order, as raw little-endian
// bytes of t's dtype.
func (t *Tensor) hostBytes(op string) []byte {
	defer pin(op, t).unpin()
	return t.readHost(op)
}

// readHost is hostBytes for a t that the caller pinned.
func (t *Tensor) readHost(op string) []byte {
	c := t
	if !t.IsContiguous() {
		c = t.contiguous(op)
		defer c.Release()
	}
	out := make([]byte, c.Bytes())
	// A shape-only device keeps no values: they read as zeros. An empty
	// view reads nothing: its offset may lie past the end of its storage
	// (a Narrow of an empty tensor).
	if len(out) == 0 || c.ds().shapeOnly() {
		return out
	}
	if hb, ok := c.ref.st.buf.(backend.HostBuffer); ok && c.ds().dev.Kind == "cpu" {
		c.ref.st.settle()
		sz := c.dtype.Size()
		copy(out, hb.Host()[c.offset*sz:])
		return out
	}
	check(op, c.ds().bd.CopyToHost(c.ds().stream(), out, c.bv()))
	return out
}

// load returns element i of raw bytes b of dtype dt as float64.
func load(dt DType, b []byte, i int) float64 {
	switch dt {
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	case Float16:
		return float64(half.F16To32(binary.LittleEndian.Uint16(b[2*i:])))
	case BFloat16:
		return float64(half.BF16To32(binary.LittleEndian.Uint16(b[2*i:])))
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(b[8*i:])))
	case Int8:
		return float64(int8(b[i]))
	case Bool:
		if b[i] != 0 {
			return 1
		}
		return 0
	}
	panic("vram: internal: load of dtype " + dt.String())
}

// store writes v as element i of raw bytes b of dtype dt.
func store(dt DType, b []byte, i int, v float64) {
	switch dt {
	case Float32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	case Float16:
		binary.LittleEndian.PutUint16(b[2*i:], half.F16(float32(v)))
	case BFloat16:
		binary.LittleEndian.PutUint16(b[2*i:], half.BF16(float32(v)))
	case Int32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(v)))
	case Int64:
		binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(v)))
	case Int8:
		b[i] = byte(int8(int64(v)))
	case Bool:
		if v != 0 {
			b[i] = 1
		} else {
			b[i] = 0
		}
	default:
		panic("vram: internal: store of dtype " + dt.String())
	}
}

func elementDType[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case int32:
		return Int32
	case int64, int:
		return Int64
	case bool:
		return Bool
	}
	panic("vram: internal: unknown element type")
}

func toFloat[T Element](v T) float64 {
	switch x := any(v).(type) {
	case bool:
		if x {
			return 1
		}
		return 0
	case float32:
		return float64(x)
	case float64:
		return x
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	return 0
}

// encode converts data to raw bytes of dtype dt. Int64 values keep full
// precision.
func encode[T Element](data []T, dt DType) []byte {
	b := make([]byte, len(data)*dt.Size())
	for i, v := range data {
		if dt == Int64 {
			switch x := any(v).(type) {
			case int64:
				binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
				continue
			case int:
				binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
				continue
			}
		}
		store(dt, b, i, toFloat(v))
	}
	return b
}

// Float32s returns a copy of t's elements in row-major order, converted to
// float32. It synchronizes with the device.
func (t *Tensor) Float32s() []float32 {
	b := t.hostBytes("float32s")
	out := make([]float32, t.NumElements())
	for i := range out {
		out[i] = float32(load(t.dtype, b, i))
	}
	return out
}

// Float64s returns a copy of t's elements in row-major order, converted to
// float64.
func (t *Tensor) Float64s() []float64 {
	b := t.hostBytes("float64s")
	out := make([]float64, t.NumElements())
	for i := range out {
		out[i] = load(t.dtype, b, i)
	}
	return out
}

// Int64s returns a copy of t's elements in row-major order, converted to
// int64 (floats truncate toward zero).
func (t *Tensor) Int64s() []int64 {
	b := t.hostBytes("int64s")
	out := make([]int64, t.NumElements())
	for i := range out {
		if t.dtype == Int64 {
			out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		} else {
			out[i] = int64(load(t.dtype, b, i))
		}
	}
	return out
}

// Int32s returns a copy of t's elements in row-major order, converted to
// int32 as t.Cast(Int32) converts them: int64 values wrap around (2^31+5
// is -2^31+5), floats truncate toward zero.
func (t *Tensor) Int32s() []int32 {
	b := t.hostBytes("int32s")
	out := make([]int32, t.NumElements())
	for i := range out {
		if t.dtype == Int64 {
			// Not through a float64, which rounds above 2^53 and turns
			// every value out of int32's range into its minimum.
			out[i] = int32(int64(binary.LittleEndian.Uint64(b[8*i:])))
		} else {
			out[i] = int32(load(t.dtype, b, i))
		}
	}
	return out
}

// Bools returns a copy of t's elements converted to bool (nonzero is true).
func (t *Tensor) Bools() []bool {
	b := t.hostBytes("bools")
	out := make([]bool, t.NumElements())
	for i := range out {
		out[i] = load(t.dtype, b, i) != 0
	}
	return out
}

// Item returns the value of a one-element tensor as a float64 (Python's
// .item()): a plain number that holds no graph and no device memory, the
// right way to accumulate a running loss. It panics with [ErrShape] unless t
// has exactly one element. It synchronizes with the device. An int64 beyond
// ±2^53 is rounded to the nearest float64, where PyTorch's item() gives a
// Python int: read such values with [Tensor.Int64s].
func (t *Tensor) Item() float64 {
	t.live("item")
	if t.NumElements() != 1 {
		fail("item", ErrShape, "a tensor with %d elements (shape %v) cannot be converted to a number: only one-element tensors can; "+
			"reduce it first (Sum, Mean) or read its elements with Float64s", t.NumElements(), Shape(t.shape))
	}
	b := t.hostBytes("item")
	return load(t.dtype, b, 0)
}

// fromBytes makes a tensor of the given dtype and shape on ds from raw bytes.
func fromBytes(op string, ds *devState, dt DType, shape []int, raw []byte) *Tensor {
	t := newTensor(op, ds, dt, shape)
	t.writeNew(op, raw)
	return t
}

// writeNew is writeBytes into t fresh from newTensor, which nothing else
// holds yet: when the copy fails (a graph capture refuses copies from the
// host) t is released before the panic goes on, so that the failed
// operation keeps no memory.
func (t *Tensor) writeNew(op string, raw []byte) {
	defer releaseOnPanic(t)
	t.writeBytes(op, raw)
}

// releaseOnPanic, deferred, releases t when the function panics and passes
// the panic on: the tensor made for a result the operation cannot return.
func releaseOnPanic(t *Tensor) {
	if r := recover(); r != nil {
		t.Release()
		panic(r)
	}
}

// writeBytes copies raw, the little-endian elements of t's dtype, into t, a
// contiguous tensor: one fresh from newTensor, or a view (SetRawBytes),
// whose elements start at its offset into the storage. Functions that
// compute values on the host allocate t first, so that a size the device
// cannot hold fails there, before any host buffer of that size is made.
func (t *Tensor) writeBytes(op string, raw []byte) {
	if len(raw) == 0 {
		return
	}
	if hb, ok := t.ref.st.buf.(backend.HostBuffer); ok && t.ds().dev.Kind == "cpu" {
		t.ref.st.settle()
		copy(hb.Host()[t.offset*t.dtype.Size():], raw)
		return
	}
	check(op, t.ds().bd.CopyFromHost(t.ds().stream(), t.bv(), raw))
}
