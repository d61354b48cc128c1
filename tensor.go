package vram

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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

// String formats the shape as PyTorch prints a size, such as "[2, 3]".
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
// graph nodes that saved it have all let go, so a forgotten view of a large
// tensor keeps all of it allocated. [Tidy] releases every tensor
// created inside it. A tensor that is never released is freed by the garbage
// collector eventually and counted as leaked ([Storage]).
//
// # Concurrency
//
// Reading a tensor and running ops on it from several goroutines is safe,
// and so is releasing it while they do (see [Tensor.Release]): a use that
// loses that race panics with [ErrReleased], and memory is never read after
// it is freed nor freed twice. Writing a tensor in place (the ...InPlace
// methods, optimizers, MoveTo) while another goroutine reads it is a data
// race, as with any Go value.
type Tensor struct {
	ref     *tensorRef
	dtype   DType
	shape   []int
	strides []int
	offset  int

	requiresGrad atomic.Bool
	inference    bool // allocated inside InferenceMode, or a view of such a tensor
	gradMu       sync.Mutex
	grad         *Tensor
	gradHooks    []*gradHook   // guarded by gradMu
	preHooks     []*tensorHook // a leaf's RegisterHook hooks, guarded by gradMu

	scope *scope // the Tidy that releases it, if any
	// born is the tensor's place in the order of creation (births), by
	// which TidyResult tells a result fn made from one that was there
	// before.
	born uint64
	// armed is set once the garbage collector's backstop is registered
	// (armBackstop): for tensors that no Tidy tracks.
	armed bool
}

// checkShape returns the element count and the size in bytes of a tensor
// of shape and dt. It panics with ErrShape, naming op, when no tensor can
// have that shape: a negative size, or a count or size that overflows (see
// backend.CheckShape); and with ErrDType when dt is no dtype at all. Every
// shape a tensor takes passes through it or through backend.CheckShape:
// new storage (newTensor), the shapes given to FromSlice, and views that
// can grow (Reshape, View, Expand).
func checkShape(op string, shape []int, dt DType) (int, int64) {
	if !dt.b().Valid() {
		fail(op, ErrDType, "invalid dtype %v; use one of vram's DType constants, such as vram.Float32", dt)
	}
	n, nbytes, err := backend.CheckShape(shape, dt.Size())
	if err != nil {
		fail(op, ErrShape, "%v; no tensor can have it", err)
	}
	return n, nbytes
}

// newTensor allocates a contiguous tensor on ds.
func newTensor(op string, ds *devState, dt DType, shape []int) *Tensor {
	_, nbytes := checkShape(op, shape, dt)
	return wrapStorage(newStorage(op, ds, nbytes), dt, shape)
}

// wrapStorage returns a contiguous tensor over the new storage st.
func wrapStorage(st *storage, dt DType, shape []int) *Tensor {
	t := &Tensor{dtype: dt, shape: slices.Clone(shape), strides: backend.ContiguousStrides(shape), born: births.Add(1)}
	attachRef(t, st, nil)
	g := current()
	t.inference = g != nil && g.inference > 0
	trackIn(g, t)
	t.armBackstop()
	return t
}

// view returns a new tensor sharing t's storage with the given layout. t
// must be pinned by the caller or be the caller's own.
func (t *Tensor) view(shape, strides []int, offset int) *Tensor {
	t.ref.st.retain("view")
	v := &Tensor{dtype: t.dtype, shape: shape, strides: strides, offset: offset, inference: t.inference, born: births.Add(1)}
	attachRef(v, t.ref.st, nil)
	if t.ref.apart || t.ref.detached {
		v.ref.setDetached()
	}
	track(v)
	v.armBackstop()
	return v
}

// share returns another reference to t with the same layout, for the
// autograd graph; it is not tracked by Tidy. Like view, it needs t pinned
// or the caller's own. It panics with ErrAutograd for an inference tensor
// outside InferenceMode, which PyTorch does not let a graph save either.
func (t *Tensor) share() *Tensor {
	t.checkSavable()
	t.ref.st.retain("save")
	v := &Tensor{dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, inference: t.inference, born: births.Add(1)}
	attachRef(v, t.ref.st, nil)
	v.ref.setApart()
	v.armBackstop()
	return v
}

// bv returns the backend view of t, for a kernel that runs while t is
// pinned or the caller's own.
func (t *Tensor) bv() backend.View {
	t.ref.st.settle()
	if c := t.ref.st.ds.capturing(); c != nil {
		c.use(t.ref.st)
	}
	return backend.View{Buf: t.ref.st.buf, DType: t.dtype.b(), Shape: t.shape, Strides: t.strides, Offset: t.offset}
}

func (t *Tensor) ds() *devState { return t.ref.st.ds }

// live panics if t is nil or released. Operations that touch t's data,
// views or graph pin it instead (see pin); live is for the rest.
func (t *Tensor) live(op string) {
	if absent(t) {
		nilTensor(op, t, 0, 1)
	}
	if t.ref.isReleased() {
		failReleased(op, t)
	}
}

// Release drops this tensor's reference to its storage and graph, like
// Python's del. It is idempotent, and also releases the tensor's gradient.
// Using the tensor afterwards panics with [ErrReleased]; views of it and the
// graph keep the storage alive as long as they need it. Release may run
// while other goroutines use t: an operation that started before it keeps
// the storage until the operation returns, one that starts after it panics
// with [ErrReleased], and the memory is freed exactly once.
//
// A view keeps all of its storage, not just the part it shows: after
// b.Release(), a view of b that was never released (such as the temporary
// in b.Narrow(0, 0, 1).Sum().Item()) holds every byte of b until the
// garbage collector finds it. Release views too, make them inside [Tidy],
// or Clone the small part to keep; [Config.DebugLeaks] (VRAM_DEBUG_LEAKS=1)
// reports each forgotten view with the line that made it.
func (t *Tensor) Release() {
	if absent(t) {
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

// checkSavable panics with ErrAutograd if t is an inference tensor and the
// goroutine is outside InferenceMode.
func (t *Tensor) checkSavable() {
	if t.inference && !InferenceModeEnabled() {
		fail("save for backward", ErrAutograd, "an inference tensor %v %s on %s cannot be saved for backward; "+
			"it was made inside vram.InferenceMode: use Clone() of it outside InferenceMode, or make it inside NoGrad instead",
			Shape(t.shape), t.dtype, t.Device())
	}
}

// IsInference reports whether t is an inference tensor: allocated inside
// [InferenceMode], or a view of such a tensor (torch.Tensor.is_inference).
func (t *Tensor) IsInference() bool {
	notNil("is_inference", t)
	return t.inference
}

// Released reports whether [Tensor.Release] was called.
func (t *Tensor) Released() bool {
	notNil("released", t)
	return t.ref.isReleased()
}

// DType returns the element type.
func (t *Tensor) DType() DType {
	notNil("dtype", t)
	return t.dtype
}

// Device returns where the tensor lives.
func (t *Tensor) Device() Device {
	notNil("device", t)
	return t.ref.st.ds.dev
}

// GetDevice returns the index of the GPU t lives on, or -1 for a tensor on
// the CPU, like PyTorch's get_device(). A simulated GPU counts as a GPU:
// a tensor on sim:1 gives 1. Device().Index is 0 on the CPU, since CPU is
// the device "cpu" with index 0; use GetDevice where -1 is expected.
func (t *Tensor) GetDevice() int {
	notNil("get_device", t)
	if d := t.Device(); d.Kind != "cpu" {
		return d.Index
	}
	return -1
}

// Shape returns a copy of the sizes of t's dimensions.
func (t *Tensor) Shape() Shape {
	notNil("shape", t)
	return slices.Clone(t.shape)
}

// Size returns the size of dimension dim; negative dims count from the end.
func (t *Tensor) Size(dim int) int {
	notNil("size", t)
	return t.shape[t.axis("size", dim)]
}

// Strides returns a copy of t's strides, in elements.
func (t *Tensor) Strides() []int {
	notNil("strides", t)
	return slices.Clone(t.strides)
}

// Offset returns the offset of t's first element in its storage, in
// elements.
func (t *Tensor) Offset() int {
	notNil("offset", t)
	return t.offset
}

// Dim returns the number of dimensions.
func (t *Tensor) Dim() int {
	notNil("dim", t)
	return len(t.shape)
}

// NumElements returns the number of elements.
func (t *Tensor) NumElements() int {
	notNil("num_elements", t)
	return backend.NumElements(t.shape)
}

// Bytes returns the size of t's elements in bytes (not of its storage).
func (t *Tensor) Bytes() int64 {
	notNil("bytes", t)
	return int64(t.NumElements()) * int64(t.dtype.Size())
}

// IsContiguous reports whether t's elements are dense in row-major order,
// or in the given [MemoryFormat] (t.IsContiguous(vram.ChannelsLast)), as
// PyTorch's is_contiguous(memory_format=...). Dimensions of size 1 may have
// any stride, so a tensor can be contiguous in both formats, and a tensor
// without elements is contiguous in row-major order whatever its strides.
func (t *Tensor) IsContiguous(format ...MemoryFormat) bool {
	notNil("is_contiguous", t)
	return isDense(t.shape, t.strides, formatArg("is_contiguous", format))
}

// SharesStorage reports whether t and u are views of the same storage.
func (t *Tensor) SharesStorage(u *Tensor) bool {
	notNil("shares_storage", t, u)
	return t.ref.st == u.ref.st
}

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

// scalarAxis is axis for the operations that PyTorch lets take a dimension
// of a 0-dimensional tensor (squeeze, transpose, flatten, the reductions):
// there 0 and -1 name the tensor itself, and scalarAxis returns -1 for
// them; any other dimension panics with ErrIndex.
func (t *Tensor) scalarAxis(op string, dim int) int {
	if len(t.shape) == 0 {
		if dim != 0 && dim != -1 {
			fail(op, ErrIndex, "dimension %d out of range for a 0-dimensional tensor (expected 0 or -1)", dim)
		}
		return -1
	}
	return t.axis(op, dim)
}

// Printing limits of [Tensor.String]. PyTorch's defaults are a threshold
// of 1000 elements and 3 edge items; vram prints on one line, so it
// summarizes sooner.
const (
	// printThreshold is the most elements String prints in full.
	printThreshold = 32
	// printEdgeItems is how many elements a summarized tensor shows at
	// each end of a dimension longer than twice as many.
	printEdgeItems = 3
)

// String returns a short description with the values: all of them for a
// tensor of up to 32 elements, else, as PyTorch summarizes a large tensor,
// the first and last 3 of each dimension longer than 6, with "..." between.
// A tensor without elements prints its values as [] whatever its shape
// (the shape follows). Floating-point values keep 4 significant digits,
// or 4 decimals where that would hide a fraction, and whole ones below
// 1e8 print in full; -0 prints as -0.
func (t *Tensor) String() string {
	if t == nil {
		return "Tensor(nil)"
	}
	if t.ref == nil {
		return "Tensor(zero)"
	}
	if !t.ref.hold() {
		return fmt.Sprintf("Tensor(released, shape=%v, dtype=%s)", Shape(t.shape), t.dtype)
	}
	defer t.ref.unhold()
	var b strings.Builder
	b.WriteString("Tensor(")
	switch n := t.NumElements(); {
	case n == 0:
		b.WriteString("[]")
	case n <= printThreshold:
		raw := t.readHost("string")
		b.WriteString(formatValues(func(i int) string { return formatElement(t.dtype, raw, i) }, t.shape))
	default:
		b.WriteString(t.summary())
	}
	b.WriteString(", ")
	fmt.Fprintf(&b, "shape=%v, dtype=%s, device=%s", Shape(t.shape), t.dtype, t.Device())
	if t.requiresGrad.Load() {
		b.WriteString(", requires_grad")
	}
	b.WriteString(")")
	return b.String()
}

// summary formats the values of a held tensor of at least one dimension
// as String does beyond printThreshold elements. It reads only the
// elements it shows, a row's run at a time, so a large tensor on a device
// is neither copied whole nor made contiguous.
func (t *Tensor) summary() string {
	var b strings.Builder
	last := len(t.shape) - 1
	var rec func(dim, off int)
	rec = func(dim, off int) {
		n, stride := t.shape[dim], t.strides[dim]
		// The runs of indices shown: all, or the first and last edge items.
		runs := [][2]int{{0, n}}
		if n > 2*printEdgeItems {
			runs = [][2]int{{0, printEdgeItems}, {n - printEdgeItems, n}}
		}
		b.WriteString("[")
		for r, run := range runs {
			if r > 0 {
				b.WriteString(", ..., ")
			}
			if dim < last {
				for i := run[0]; i < run[1]; i++ {
					if i > run[0] {
						b.WriteString(", ")
					}
					rec(dim+1, off+i*stride)
				}
				continue
			}
			raw := t.readRun(off+run[0]*stride, stride, run[1]-run[0])
			for j := range run[1] - run[0] {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(formatElement(t.dtype, raw, j))
			}
		}
		b.WriteString("]")
	}
	rec(0, t.offset)
	return b.String()
}

// readRun returns n elements of a held t's storage, the first at element
// offset off and the others stride elements apart, as raw bytes.
func (t *Tensor) readRun(off, stride, n int) []byte {
	sz := t.dtype.Size()
	out := make([]byte, n*sz)
	ds, st := t.ds(), t.ref.st
	if ds.shapeOnly() {
		return out // no values: they read as zeros
	}
	st.settle()
	if hb, ok := st.buf.(backend.HostBuffer); ok && ds.dev.Kind == "cpu" {
		h := hb.Host()
		for i := range n {
			copy(out[i*sz:(i+1)*sz], h[(off+i*stride)*sz:])
		}
		return out
	}
	if stride == 1 || n == 1 {
		v := backend.View{Buf: st.buf, DType: t.dtype.b(), Shape: []int{n}, Strides: []int{1}, Offset: off}
		check("string", ds.bd.CopyToHost(ds.stream(), out, v))
		return out
	}
	for i := range n {
		v := backend.View{Buf: st.buf, DType: t.dtype.b(), Shape: []int{1}, Strides: []int{1}, Offset: off + i*stride}
		check("string", ds.bd.CopyToHost(ds.stream(), out[i*sz:(i+1)*sz], v))
	}
	return out
}

// formatElement formats element i of raw bytes b of dtype dt: int64
// exactly, though a float64 cannot hold every int64.
func formatElement(dt DType, b []byte, i int) string {
	switch {
	case dt == Int64:
		return strconv.FormatInt(int64(binary.LittleEndian.Uint64(b[8*i:])), 10)
	case dt == Bool:
		return strconv.FormatBool(load(dt, b, i) != 0)
	case dt.IsFloat():
		return formatFloat(load(dt, b, i))
	}
	return fmt.Sprintf("%d", int64(load(dt, b, i)))
}

// formatFloat formats one floating-point value for String. A whole number
// below 1e8 prints in full, as PyTorch prints one: 12345, not 1.234e+04.
// Others keep 4 significant digits, except that a value from 1e-4 to 1e8
// whose 4 digits would hide its fraction (1234.5 as 1234, 12345.6 as
// 1.235e+04, 0.99999 as 1) prints with 4 decimals, as PyTorch prints it,
// less trailing zeros while one nonzero decimal stays: 1234.5, 12345.6,
// 1.0000.
func formatFloat(v float64) string {
	a := math.Abs(v)
	if v == math.Trunc(v) && a < 1e8 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	s := fmt.Sprintf("%.4g", v)
	if a < 1e-4 || a >= 1e8 || math.IsNaN(v) || strings.ContainsRune(s, '.') && !strings.ContainsRune(s, 'e') {
		return s
	}
	f := strconv.FormatFloat(v, 'f', 4, 64)
	if t := strings.TrimRight(f, "0"); !strings.HasSuffix(t, ".") {
		return t
	}
	return f
}

// formatValues nests the row-major elements of shape in brackets, elem
// formatting each.
func formatValues(elem func(i int) string, shape []int) string {
	var b strings.Builder
	var rec func(dim, off int) int
	rec = func(dim, off int) int {
		if dim == len(shape) {
			b.WriteString(elem(off))
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
