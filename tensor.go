package vram

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/vramgo/vram/backend"
)

// Shape lists the sizes of a tensor's dimensions, outermost first. Sizes
// are at least 0, and the product of the sizes other than 0, times the
// dtype's size in bytes, must fit an int64: every function that creates a
// tensor or a view panics with [ErrShape] for a shape that breaks this,
// rather than let a count or a size wrap around.
type Shape []int

// NumElements returns the product of the sizes (1 for a scalar). It panics
// with [ErrShape] if a size is negative or the product overflows an int.
func (s Shape) NumElements() int {
	n, _, err := backend.CheckShape(s, 1)
	if err != nil {
		fail("num elements", ErrShape, "%v", err)
	}
	return n
}

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Tensor is an n-dimensional array on a device, with an element type, a
// shape, strides and an offset into reference-counted storage that views
// share. A Tensor that requires grad records the operations made with it so
// that [Tensor.Backward] can compute gradients.
//
// # Memory ownership
//
// Each Tensor holds one reference to its storage. [Tensor.Release] drops it
// (Python's del); the storage is freed when the tensor, its views and the
// graph nodes that saved it have all let go. [Tidy] releases every tensor
// created inside it. A tensor that is never released is freed by the garbage
// collector eventually and counted as leaked ([Storage]).
//
// # Concurrency
//
// Reading a tensor and running ops on it from several goroutines is safe;
// writing it in place (the ...InPlace methods, optimizers) while another
// goroutine reads it is a data race, as with any Go value.
type Tensor struct {
	ref     *tensorRef
	dtype   DType
	shape   []int
	strides []int
	offset  int

	requiresGrad bool
	gradMu       sync.Mutex
	grad         *Tensor

	scope *scope // the Tidy that releases it, if any
}

// checkShape returns the element count and the size in bytes of a tensor
// of shape and dt. It panics with ErrShape, naming op, when no tensor can
// have that shape: a negative size, or a count or size that overflows (see
// backend.CheckShape). Every shape a tensor takes passes through it or
// through backend.CheckShape: new storage (newTensor), the shapes given to
// FromSlice, and views that can grow (Reshape, View, Expand).
func checkShape(op string, shape []int, dt DType) (int, int64) {
	n, nbytes, err := backend.CheckShape(shape, dt.Size())
	if err != nil {
		fail(op, ErrShape, "%v; no tensor can have it", err)
	}
	return n, nbytes
}

// newTensor allocates a contiguous tensor on ds.
func newTensor(op string, ds *devState, dt DType, shape []int) *Tensor {
	_, nbytes := checkShape(op, shape, dt)
	st := newStorage(op, ds, nbytes)
	t := &Tensor{dtype: dt, shape: slices.Clone(shape), strides: backend.ContiguousStrides(shape)}
	attachRef(t, st, nil)
	track(t)
	return t
}

// view returns a new tensor sharing t's storage with the given layout.
func (t *Tensor) view(shape, strides []int, offset int) *Tensor {
	t.ref.st.retain()
	v := &Tensor{dtype: t.dtype, shape: shape, strides: strides, offset: offset}
	attachRef(v, t.ref.st, nil)
	track(v)
	return v
}

// share returns another reference to t with the same layout, for the
// autograd graph; it is not tracked by Tidy.
func (t *Tensor) share() *Tensor {
	t.ref.st.retain()
	v := &Tensor{dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset}
	attachRef(v, t.ref.st, nil)
	return v
}

// bv returns the backend view of t.
func (t *Tensor) bv() backend.View {
	return backend.View{Buf: t.ref.st.buf, DType: t.dtype.b(), Shape: t.shape, Strides: t.strides, Offset: t.offset}
}

func (t *Tensor) ds() *devState { return t.ref.st.ds }

// live panics if t is nil or released.
func (t *Tensor) live(op string) {
	if t == nil {
		fail(op, ErrArgument, "nil tensor")
	}
	if t.ref.released.Load() {
		fail(op, ErrReleased, "tensor %v %s on %s was already released", Shape(t.shape), t.dtype, t.ref.st.ds.dev)
	}
}

// Release drops this tensor's reference to its storage and graph, like
// Python's del. It is idempotent, and also releases the tensor's gradient.
// Using the tensor afterwards panics with [ErrReleased]; views of it and the
// graph keep the storage alive as long as they need it.
func (t *Tensor) Release() {
	if t == nil {
		return
	}
	t.ref.drop()
	t.gradMu.Lock()
	g := t.grad
	t.grad = nil
	t.gradMu.Unlock()
	if g != nil {
		g.Release()
	}
}

// Released reports whether [Tensor.Release] was called.
func (t *Tensor) Released() bool { return t.ref.released.Load() }

// DType returns the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Device returns where the tensor lives.
func (t *Tensor) Device() Device { return t.ref.st.ds.dev }

// Shape returns a copy of the sizes of t's dimensions.
func (t *Tensor) Shape() Shape { return slices.Clone(t.shape) }

// Size returns the size of dimension dim; negative dims count from the end.
func (t *Tensor) Size(dim int) int { return t.shape[t.axis("size", dim)] }

// Strides returns a copy of t's strides, in elements.
func (t *Tensor) Strides() []int { return slices.Clone(t.strides) }

// Offset returns the offset of t's first element in its storage, in
// elements.
func (t *Tensor) Offset() int { return t.offset }

// Dim returns the number of dimensions.
func (t *Tensor) Dim() int { return len(t.shape) }

// NumElements returns the number of elements.
func (t *Tensor) NumElements() int { return backend.NumElements(t.shape) }

// Bytes returns the size of t's elements in bytes (not of its storage).
func (t *Tensor) Bytes() int64 { return int64(t.NumElements()) * int64(t.dtype.Size()) }

// IsContiguous reports whether t's elements are dense in row-major order.
func (t *Tensor) IsContiguous() bool { return t.bv().IsContiguous() }

// SharesStorage reports whether t and u are views of the same storage.
func (t *Tensor) SharesStorage(u *Tensor) bool { return t.ref.st == u.ref.st }

// axis resolves a possibly negative dimension index, panicking with
// ErrIndex when it is out of range.
func (t *Tensor) axis(op string, dim int) int {
	n := len(t.shape)
	d := dim
	if d < 0 {
		d += n
	}
	if d < 0 || d >= n {
		fail(op, ErrIndex, "dimension %d out of range for a tensor of %d dimensions (shape %v)", dim, n, Shape(t.shape))
	}
	return d
}

// String returns a short description and, for small tensors, the values.
func (t *Tensor) String() string {
	if t == nil {
		return "Tensor(nil)"
	}
	if t.Released() {
		return fmt.Sprintf("Tensor(released, shape=%v, dtype=%s)", Shape(t.shape), t.dtype)
	}
	var b strings.Builder
	b.WriteString("Tensor(")
	if n := t.NumElements(); n <= 32 {
		vals := t.Float64s()
		b.WriteString(formatValues(vals, t.shape, t.dtype))
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "shape=%v, dtype=%s, device=%s", Shape(t.shape), t.dtype, t.Device())
	if t.requiresGrad {
		b.WriteString(", requires_grad")
	}
	b.WriteString(")")
	return b.String()
}

func formatValues(vals []float64, shape []int, dt DType) string {
	var b strings.Builder
	var rec func(dim, off int) int
	rec = func(dim, off int) int {
		if dim == len(shape) {
			switch {
			case dt == Bool:
				fmt.Fprint(&b, vals[off] != 0)
			case dt.IsFloat():
				fmt.Fprintf(&b, "%.4g", vals[off])
			default:
				fmt.Fprintf(&b, "%d", int64(vals[off]))
			}
			return off + 1
		}
		b.WriteString("[")
		for i := 0; i < shape[dim]; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			off = rec(dim+1, off)
		}
		b.WriteString("]")
		return off
	}
	rec(0, 0)
	return b.String()
}
