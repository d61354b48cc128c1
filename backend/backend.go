package backend

// Backend is one kind of device ("cpu", "cuda", "sim"). It is registered
// once under its name and hands out the devices of its kind by index.
type Backend interface {
	// Name returns the device kind, as written before the colon of a device
	// string ("cuda" in "cuda:1").
	Name() string
	// DeviceCount returns how many devices of this kind the machine has. A
	// backend whose native library or hardware is missing returns 0.
	DeviceCount() int
	// Device opens (on first use) and returns device index. It fails when the
	// index is out of range or the device cannot be initialised.
	Device(index int) (Device, error)
}

// Device is one device: memory, copies to and from the host, kernels, and
// the streams they run on. All methods are safe for concurrent use; work
// submitted on one [Stream] runs in submission order, and work on different
// streams is ordered only by [Event]s.
type Device interface {
	Memory
	Copier
	Kernels
	Streams
}

// Buffer is a piece of device memory obtained from [Memory.Alloc]. Buffers
// are owned by the caller of Alloc until passed to [Memory.Free].
type Buffer interface {
	// Bytes returns the usable size of the buffer in bytes (at least what was
	// asked for).
	Bytes() int64
}

// HostBuffer is implemented by buffers that live in host memory, so that
// callers can read and write them without a copy.
type HostBuffer interface {
	Buffer
	// Host returns the buffer's memory. The slice stays valid until the
	// buffer is freed.
	Host() []byte
}

// Memory allocates device memory.
type Memory interface {
	// Alloc returns a buffer of at least nbytes bytes, for use on stream s.
	// region labels the allocation for memory accounting ("forward",
	// "backward", "optimizer", a user's label, or ""); devices without
	// accounting ignore it. A failure to find memory is returned as an
	// error that the caller can inspect with errors.As (the memory
	// package's OutOfMemoryError for devices with a caching allocator).
	// Alloc(0) returns a valid empty buffer that takes no device memory
	// (a caching allocator counts it nowhere, as PyTorch's does not).
	Alloc(nbytes int64, s Stream, region string) (Buffer, error)
	// Free returns b, allocated for stream s, to the device. The memory may
	// be reused by work queued on s after the call, and by work on other
	// streams once the work already queued on s, and on every stream passed
	// to RecordStream for b, has finished.
	Free(b Buffer, s Stream)
	// RecordStream tells the device that b, allocated for another stream,
	// is also used by work queued on s, so that Free keeps it from reuse
	// until that work has finished (torch's Tensor.record_stream).
	RecordStream(b Buffer, s Stream)
}

// Copier moves bytes between host memory and the device, in the order of
// stream s. Both copies are synchronous for the host: they return once src
// has been read (CopyFromHost) or dst written (CopyToHost), so the caller
// may reuse its slice at once. A device with page-locked host memory also
// copies without waiting ([AsyncCopier]).
type Copier interface {
	// CopyFromHost writes src (the raw little-endian elements of dst's dtype,
	// exactly dst.NumElements() of them) into the contiguous view dst, after
	// the work queued on s.
	CopyFromHost(s Stream, dst View, src []byte) error
	// CopyToHost reads the contiguous view src into dst, which must hold
	// src.NumElements() elements of src's dtype, after the work queued on s.
	CopyToHost(s Stream, dst []byte, src View) error
}

// View is a strided window onto a buffer: the operand of every kernel.
type View struct {
	Buf     Buffer
	DType   DType
	Shape   []int
	Strides []int // in elements; 0 along broadcast dimensions
	Offset  int   // in elements, from the start of Buf
}

// NumElements returns the product of v.Shape (1 for a scalar).
func (v View) NumElements() int { return NumElements(v.Shape) }

// IsContiguous reports whether v's elements are laid out densely in
// row-major order (dimensions of size 1 may have any stride), with the
// strides [ContiguousStrides] gives, which count a size of 0 as 1.
func (v View) IsContiguous() bool {
	want := 1
	for i := len(v.Shape) - 1; i >= 0; i-- {
		if v.Shape[i] == 1 {
			continue
		}
		if v.Strides[i] != want {
			return false
		}
		want *= max(v.Shape[i], 1)
	}
	return true
}

// Kernels is the small op set every backend implements; the root package
// builds every tensor operation from it. Kernels trust their inputs: the
// caller has checked devices, dtypes and shapes, and has broadcast inputs to
// the output shape (stride 0 along broadcast dimensions). Unless a method
// says otherwise, all views have the same shape, dst is freshly allocated or
// exactly equal to an input (in-place), and dst never partially overlaps an
// input. Each kernel is queued on the stream s that the caller names (a
// stream of this device) and runs after the work queued on s before it; an
// error may be returned at once or later from [Stream.Synchronize].
type Kernels interface {
	// Fill sets every element of dst to value, converted to dst's dtype.
	Fill(s Stream, dst View, value float64) error
	// Copy copies src into dst, converting between dtypes (floats to integers
	// truncate toward zero; nonzero to bool is true).
	Copy(s Stream, dst, src View) error
	// Unary applies op elementwise; param is the op's parameter where it has
	// one (the exponent of PowScalar, the slope of LeakyRelu...). dst and src
	// have the same dtype, except for IsNaN and LogicalNot (dst bool).
	Unary(s Stream, op UnaryOp, dst, src View, param float64) error
	// Binary applies op elementwise. a and b have the same dtype; dst has it
	// too, except for comparisons and logical ops, whose dst is bool.
	Binary(s Stream, op BinaryOp, dst, a, b View) error
	// Scalar applies op to each element e of a and the scalar c, as op(e, c),
	// or op(c, e) when reversed is set. The dtype rule is Binary's.
	Scalar(s Stream, op BinaryOp, dst, a View, c float64, reversed bool) error
	// Where sets dst to a where cond (bool) is true and to b elsewhere.
	Where(s Stream, dst, cond, a, b View) error
	// Reduce reduces src over the listed axes (sorted, distinct) into dst,
	// whose shape equals src's with those axes set to 1. dst has src's
	// dtype, except that ArgMax and ArgMin write int64 indices along the
	// single reduced axis (ties: the first), and that Sum and Prod of a
	// float16 or bfloat16 src may write a float32 dst ([WidensReduce]).
	// Float sums and products accumulate in float32 or wider and round
	// once, to dst's dtype, at the end.
	Reduce(s Stream, op ReduceOp, dst, src View, axes []int) error
	// MatMul computes dst[b] = a[b] x b[b] for shapes a [B,M,K], b [B,K,N],
	// dst [B,M,N] (any strides; batch stride 0 broadcasts). Float dtypes only.
	MatMul(s Stream, dst, a, b View) error
	// Gather sets dst[...i...] = src[...index[...i...]...] along axis, where
	// index (int64) has dst's shape and src matches it on all other axes.
	// An index out of range is an error.
	Gather(s Stream, dst, src, index View, axis int) error
	// ScatterAdd adds src[...i...] into dst[...index[...i...]...] along axis;
	// index (int64) has src's shape. Repeated indices accumulate.
	ScatterAdd(s Stream, dst, index, src View, axis int) error
}
