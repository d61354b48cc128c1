package backendtest

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/half"
)

// Encode returns the raw little-endian elements of dtype dt holding values
// (rounded to nearest for float16 and bfloat16, truncated toward zero for
// integers, nonzero as true for bool).
func Encode(dt backend.DType, values []float64) []byte {
	sz := dt.Size()
	raw := make([]byte, len(values)*sz)
	for i, v := range values {
		b := raw[i*sz:]
		switch dt {
		case backend.Float32:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
		case backend.Float64:
			binary.LittleEndian.PutUint64(b, math.Float64bits(v))
		case backend.Float16:
			binary.LittleEndian.PutUint16(b, half.F16(float32(v)))
		case backend.BFloat16:
			binary.LittleEndian.PutUint16(b, half.BF16(float32(v)))
		case backend.Int32:
			binary.LittleEndian.PutUint32(b, uint32(int32(v)))
		case backend.Int64:
			binary.LittleEndian.PutUint64(b, uint64(int64(v)))
		case backend.Int8:
			b[0] = byte(int8(int64(v)))
		case backend.Bool:
			if v != 0 {
				b[0] = 1
			}
		}
	}
	return raw
}

// Decode returns the values of the raw little-endian elements of dtype dt.
func Decode(dt backend.DType, raw []byte) []float64 {
	sz := dt.Size()
	out := make([]float64, len(raw)/sz)
	for i := range out {
		b := raw[i*sz:]
		switch dt {
		case backend.Float32:
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case backend.Float64:
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		case backend.Float16:
			out[i] = float64(half.F16To32(binary.LittleEndian.Uint16(b)))
		case backend.BFloat16:
			out[i] = float64(half.BF16To32(binary.LittleEndian.Uint16(b)))
		case backend.Int32:
			out[i] = float64(int32(binary.LittleEndian.Uint32(b)))
		case backend.Int64:
			out[i] = float64(int64(binary.LittleEndian.Uint64(b)))
		case backend.Int8:
			out[i] = float64(int8(b[0]))
		case backend.Bool:
			if b[0] != 0 {
				out[i] = 1
			}
		}
	}
	return out
}

// Quantize returns v as stored in dtype dt: rounded to dt's precision,
// truncated for integers, 0 or 1 for bool.
func Quantize(dt backend.DType, v float64) float64 {
	switch dt {
	case backend.Float32:
		return float64(float32(v))
	case backend.Float16:
		return float64(half.F16To32(half.F16(float32(v))))
	case backend.BFloat16:
		return float64(half.BF16To32(half.BF16(float32(v))))
	case backend.Int32:
		return float64(int32(v))
	case backend.Int64:
		return float64(int64(v))
	case backend.Int8:
		return float64(int8(int64(v)))
	case backend.Bool:
		if v != 0 {
			return 1
		}
		return 0
	}
	return v
}

// NewView allocates a contiguous view of the given shape and dtype on dev
// and fills it with values (in row-major order, converted as by Encode).
// It fails the test on error.
func NewView(t testing.TB, dev backend.Device, dt backend.DType, shape []int, values []float64) backend.View {
	t.Helper()
	n := backend.NumElements(shape)
	if len(values) != n {
		t.Fatalf("NewView: %d values for shape %v", len(values), shape)
	}
	return place(t, dev, dt, shape, backend.ContiguousStrides(shape), 0, n, values, 0)
}

// ReadView returns the elements of v, which may have any strides, in
// row-major order. It reads the whole buffer with CopyToHost. It fails the
// test on error.
func ReadView(t testing.TB, dev backend.Device, v backend.View) []float64 {
	t.Helper()
	all := readBuffer(t, dev, v.Buf, v.DType)
	out := make([]float64, 0, v.NumElements())
	eachOffset(v, func(off int) { out = append(out, all[off]) })
	return out
}

// readBuffer returns every element of buf read as dtype dt.
func readBuffer(t testing.TB, dev backend.Device, buf backend.Buffer, dt backend.DType) []float64 {
	t.Helper()
	n := int(buf.Bytes()) / dt.Size()
	raw := make([]byte, n*dt.Size())
	whole := backend.View{Buf: buf, DType: dt, Shape: []int{n}, Strides: []int{1}}
	if err := dev.CopyToHost(dev.DefaultStream(), raw, whole); err != nil {
		t.Fatalf("CopyToHost of a whole buffer (%d %s): %v", n, dt, err)
	}
	if err := dev.DefaultStream().Synchronize(); err != nil {
		t.Fatalf("Synchronize after CopyToHost: %v", err)
	}
	return Decode(dt, raw)
}

// eachOffset calls fn with the element offset of each element of v, in
// row-major order.
func eachOffset(v backend.View, fn func(off int)) {
	n := v.NumElements()
	if n == 0 {
		return
	}
	idx := make([]int, len(v.Shape))
	for range n {
		off := v.Offset
		for d, i := range idx {
			off += i * v.Strides[d]
		}
		fn(off)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < v.Shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// place allocates a buffer of bufElems elements filled with pad, and writes
// values (row-major over shape) at the positions that a view with the given
// strides and offset reaches. Positions reached more than once (stride 0)
// get the last value.
func place(t testing.TB, dev backend.Device, dt backend.DType, shape, strides []int, offset, bufElems int, values []float64, pad float64) backend.View {
	t.Helper()
	host := make([]float64, bufElems)
	for i := range host {
		host[i] = pad
	}
	v := backend.View{DType: dt, Shape: append([]int{}, shape...), Strides: append([]int{}, strides...), Offset: offset}
	i := 0
	eachOffset(v, func(off int) {
		host[off] = values[i]
		i++
	})
	buf, err := dev.Alloc(int64(bufElems*dt.Size()), dev.DefaultStream(), "test")
	if err != nil {
		t.Fatalf("Alloc(%d): %v", bufElems*dt.Size(), err)
	}
	whole := backend.View{Buf: buf, DType: dt, Shape: []int{bufElems}, Strides: []int{1}}
	if err := dev.CopyFromHost(dev.DefaultStream(), whole, Encode(dt, host)); err != nil {
		t.Fatalf("CopyFromHost of %d %s: %v", bufElems, dt, err)
	}
	v.Buf = buf
	return v
}

// layout is how a test view lies in its buffer.
type layout int

const (
	contiguous layout = iota // row-major, at the start of the buffer
	transposed               // dimensions stored in reverse order
	offset                   // row-major after some padding
	strided                  // every other element, after one of padding
	swapped                  // the last two dimensions stored in reverse order
)

func (l layout) String() string {
	return [...]string{"contiguous", "transposed", "offset", "strided", "swapped"}[l]
}

// padValue fills the parts of test buffers outside the views.
const padValue = 77

// makeView places values (row-major over shape) in a new buffer laid out
// as lay, surrounded by padValue.
func makeView(t testing.TB, dev backend.Device, dt backend.DType, shape []int, values []float64, lay layout) backend.View {
	t.Helper()
	n := backend.NumElements(shape)
	nd := len(shape)
	switch lay {
	case transposed:
		rev := make([]int, nd)
		for i := range shape {
			rev[i] = shape[nd-1-i]
		}
		rs := backend.ContiguousStrides(rev)
		st := make([]int, nd)
		for i := range st {
			st[i] = rs[nd-1-i]
		}
		return place(t, dev, dt, shape, st, 0, max(n, 1), values, padValue)
	case offset:
		return place(t, dev, dt, shape, backend.ContiguousStrides(shape), 3, n+5, values, padValue)
	case swapped:
		if nd < 2 {
			break
		}
		st := append([]int{}, shape...)
		st[nd-2], st[nd-1] = st[nd-1], st[nd-2]
		st = backend.ContiguousStrides(st)
		st[nd-2], st[nd-1] = st[nd-1], st[nd-2]
		return place(t, dev, dt, shape, st, 0, max(n, 1), values, padValue)
	case strided:
		st := backend.ContiguousStrides(shape)
		for i := range st {
			st[i] *= 2
		}
		return place(t, dev, dt, shape, st, 1, 2*n+2, values, padValue)
	}
	return place(t, dev, dt, shape, backend.ContiguousStrides(shape), 0, max(n, 1), values, padValue)
}

// broadcastView places values (row-major over src) and returns a view of
// them broadcast to shape (stride 0 along the dimensions that src lacks or
// has of size 1; src is aligned with the trailing dimensions of shape).
func broadcastView(t testing.TB, dev backend.Device, dt backend.DType, src, shape []int, values []float64) backend.View {
	t.Helper()
	v := makeView(t, dev, dt, src, values, offset)
	st := make([]int, len(shape))
	lead := len(shape) - len(src)
	for i := range shape {
		j := i - lead
		if j >= 0 && src[j] != 1 {
			st[i] = v.Strides[j]
		}
	}
	v.Shape, v.Strides = append([]int{}, shape...), st
	return v
}

// expand returns values (row-major over src) broadcast to shape, row-major.
func expand(values []float64, src, shape []int) []float64 {
	v := backend.View{Shape: shape, Strides: make([]int, len(shape))}
	ss := backend.ContiguousStrides(src)
	lead := len(shape) - len(src)
	for i := range shape {
		if j := i - lead; j >= 0 && src[j] != 1 {
			v.Strides[i] = ss[j]
		}
	}
	out := make([]float64, 0, backend.NumElements(shape))
	eachOffset(v, func(off int) { out = append(out, values[off]) })
	return out
}
