package backend

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"sync"
)

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

// Device is one device: memory, copies to and from the host, and kernels.
// All methods are safe for concurrent use; work submitted on one Stream
// runs in submission order.
type Device interface {
	Memory
	Copier
	Kernels
	// DefaultStream returns the stream that ops use unless told otherwise.
	DefaultStream() Stream
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

// Stream orders work on a device. Work is queued in order; Synchronize
// waits for all of it.
type Stream interface {
	// Synchronize blocks until all work queued on the stream has finished.
	// It returns an asynchronous error raised by that work, if any; such an
	// error may come from an op submitted long before the call.
	Synchronize() error
}

// Memory allocates device memory.
type Memory interface {
	// Alloc returns a buffer of at least nbytes bytes, for use on stream s.
	// region labels the allocation for memory accounting ("forward",
	// "backward", "optimizer", a user's label, or ""); devices without
	// accounting ignore it. A failure to find memory is returned as an
	// error that the caller can inspect with errors.As (the memory
	// package's OutOfMemoryError for devices with a caching allocator).
	// Alloc(0) returns a valid empty buffer.
	Alloc(nbytes int64, s Stream, region string) (Buffer, error)
	// Free returns b to the device. The memory may be reused as soon as the
	// work already queued on s has finished.
	Free(b Buffer, s Stream)
}

// Copier moves bytes between host memory and the device.
type Copier interface {
	// CopyFromHost writes src (the raw little-endian elements of dst's dtype,
	// exactly dst.NumElements() of them) into the contiguous view dst.
	CopyFromHost(dst View, src []byte) error
	// CopyToHost reads the contiguous view src into dst, which must hold
	// src.NumElements() elements of src's dtype.
	CopyToHost(dst []byte, src View) error
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
// row-major order (dimensions of size 1 may have any stride).
func (v View) IsContiguous() bool {
	want := 1
	for i := len(v.Shape) - 1; i >= 0; i-- {
		if v.Shape[i] == 1 {
			continue
		}
		if v.Strides[i] != want {
			return false
		}
		want *= v.Shape[i]
	}
	return true
}

// NumElements returns the product of shape (1 for an empty shape). It does
// not check for overflow: shapes that reach a backend have passed
// [CheckShape].
func NumElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// CheckShape returns the number of elements of shape and their size in
// bytes at elemSize bytes each (elemSize > 0). It fails, naming the shape,
// when a size is negative, or when the product of the sizes other than 0
// (which sets the row-major strides), or that product times elemSize, does
// not fit an int and an int64: such a shape can describe no tensor, not even
// an empty one, and would wrap every computation of offsets and sizes.
func CheckShape(shape []int, elemSize int) (elems int, nbytes int64, err error) {
	span := uint64(1) // product of the nonzero sizes, at most maxCount
	zero := false
	const maxCount = uint64(math.MaxInt)
	for i, d := range shape {
		switch {
		case d < 0:
			return 0, 0, fmt.Errorf("shape %s has a negative size at dimension %d", formatShape(shape), i)
		case d == 0:
			zero = true
			continue
		}
		hi, lo := bits.Mul64(span, uint64(d))
		if hi != 0 || lo > maxCount {
			return 0, 0, fmt.Errorf("shape %s has more elements than an int can count (%d)", formatShape(shape), math.MaxInt)
		}
		span = lo
	}
	if hi, lo := bits.Mul64(span, uint64(elemSize)); hi != 0 || lo > math.MaxInt64 {
		return 0, 0, fmt.Errorf("shape %s of %d-byte elements needs more than %d bytes (8 EiB)", formatShape(shape), elemSize, int64(math.MaxInt64))
	}
	if zero {
		return 0, 0, nil
	}
	return int(span), int64(span) * int64(elemSize), nil
}

// formatShape writes shape as "[2, 3]".
func formatShape(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ContiguousStrides returns the row-major strides of shape, in elements.
func ContiguousStrides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// Kernels is the small op set every backend implements; the root package
// builds every tensor operation from it. Kernels trust their inputs: the
// caller has checked devices, dtypes and shapes, and has broadcast inputs to
// the output shape (stride 0 along broadcast dimensions). Unless a method
// says otherwise, all views have the same shape, dst is freshly allocated or
// exactly equal to an input (in-place), and dst never partially overlaps an
// input. Kernels run on the device's default stream; an error may be
// returned at once or later from [Stream.Synchronize].
type Kernels interface {
	// Fill sets every element of dst to value, converted to dst's dtype.
	Fill(dst View, value float64) error
	// Copy copies src into dst, converting between dtypes (floats to integers
	// truncate toward zero; nonzero to bool is true).
	Copy(dst, src View) error
	// Unary applies op elementwise; param is the op's parameter where it has
	// one (the exponent of PowScalar, the slope of LeakyRelu...). dst and src
	// have the same dtype, except for IsNaN and LogicalNot (dst bool).
	Unary(op UnaryOp, dst, src View, param float64) error
	// Binary applies op elementwise. a and b have the same dtype; dst has it
	// too, except for comparisons and logical ops, whose dst is bool.
	Binary(op BinaryOp, dst, a, b View) error
	// Scalar applies op to each element x of a and the scalar s, as op(x, s),
	// or op(s, x) when reversed is set. The dtype rule is Binary's.
	Scalar(op BinaryOp, dst, a View, s float64, reversed bool) error
	// Where sets dst to a where cond (bool) is true and to b elsewhere.
	Where(dst, cond, a, b View) error
	// Reduce reduces src over the listed axes (sorted, distinct) into dst,
	// whose shape equals src's with those axes set to 1. dst has src's
	// dtype, except that ArgMax and ArgMin write int64 indices along the
	// single reduced axis (ties: the first), and that Sum and Prod of a
	// float16 or bfloat16 src may write a float32 dst ([WidensReduce]).
	// Float sums and products accumulate in float32 or wider and round
	// once, to dst's dtype, at the end.
	Reduce(op ReduceOp, dst, src View, axes []int) error
	// MatMul computes dst[b] = a[b] x b[b] for shapes a [B,M,K], b [B,K,N],
	// dst [B,M,N] (any strides; batch stride 0 broadcasts). Float dtypes only.
	MatMul(dst, a, b View) error
	// Gather sets dst[...i...] = src[...index[...i...]...] along axis, where
	// index (int64) has dst's shape and src matches it on all other axes.
	// An index out of range is an error.
	Gather(dst, src, index View, axis int) error
	// ScatterAdd adds src[...i...] into dst[...index[...i...]...] along axis;
	// index (int64) has src's shape. Repeated indices accumulate.
	ScatterAdd(dst, index, src View, axis int) error
}

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

func (op ReduceOp) String() string {
	if op < numReduce {
		return reduceNames[op]
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(op))
}

// ErrNotImplemented is returned (wrapped) by a kernel that a backend does not
// provide for the given op or dtype.
var ErrNotImplemented = errors.New("not implemented")

var (
	registryMu sync.RWMutex
	registry   = map[string]Backend{}
)

// Register makes a backend available under b.Name(). It panics if b is nil,
// the name is empty or contains a colon, or the name is already taken:
// registration happens in init, where such mistakes are cheapest.
func Register(b Backend) {
	if b == nil {
		panic("backend: Register of a nil backend")
	}
	name := b.Name()
	if name == "" {
		panic("backend: Register of a backend with an empty name")
	}
	for _, r := range name {
		if r == ':' {
			panic("backend: backend name " + name + " contains a colon")
		}
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("backend: Register called twice for backend " + name)
	}
	registry[name] = b
}

// Lookup returns the backend registered under name.
func Lookup(name string) (Backend, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	b, ok := registry[name]
	return b, ok
}

// Names returns the names of the registered backends, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DeviceMemory is what a device's driver says about its memory, for
// telling the allocator's reserve apart from the rest.
type DeviceMemory struct {
	Total int64 // bytes of device memory
	Free  int64 // bytes free, as the driver reports them
	// ThisProcess is what the driver's process list says this process holds
	// on the device (context, libraries and allocations together), or -1
	// when the list is not visible (inside some containers).
	ThisProcess int64
	// Others lists the other processes on the device, largest first; nil
	// when the list is not visible.
	Others []ProcessMemory
}

// ProcessMemory is the device memory one process holds.
type ProcessMemory struct {
	PID   int
	Name  string
	Bytes int64
}

// MemoryInfoer is implemented by devices that can report [DeviceMemory].
type MemoryInfoer interface {
	MemoryInfo() (DeviceMemory, error)
}

// FusedAdam is an optional interface of a [Device] whose kernels can do a
// whole Adam or AdamW step of one parameter in a single pass (one kernel
// launch on a GPU) instead of the dozen elementwise ops it takes through
// [Kernels]. Callers find it with a type assertion and fall back to the
// composed ops when a device lacks it or AdamStep returns an error wrapping
// [ErrNotImplemented].
type FusedAdam interface {
	// AdamStep updates the parameter p, the first moment m and the second
	// moment v in place from the gradient g, elementwise, exactly as
	// PyTorch's Adam and AdamW (without amsgrad) do, with cfg's
	// hyper-parameters:
	//
	//	bc1 = 1 - Beta1^Step, bc2 = 1 - Beta2^Step
	//	g = g + WeightDecay·p                    (Adam: Decoupled false)
	//	p = p·(1 - LR·WeightDecay)               (AdamW: Decoupled true, instead)
	//	m = Beta1·m + (1 - Beta1)·g
	//	v = Beta2·v + (1 - Beta2)·g·g
	//	p = p - LR/bc1 · m / (sqrt(v)/sqrt(bc2) + Eps)
	//
	// The gradient g itself is not written. All four views are contiguous,
	// have the same shape and the same floating-point dtype (float32,
	// float64, float16 or bfloat16); the math runs in float32 (float64
	// for float64), with m and v rounded to their dtype at each step, and
	// p, m, v must not overlap g or each other.
	AdamStep(p, g, m, v View, cfg AdamStepConfig) error
}

// AdamStepConfig holds the hyper-parameters of one [FusedAdam.AdamStep].
type AdamStepConfig struct {
	LR          float64 // learning rate
	Beta1       float64 // decay rate of the first moment
	Beta2       float64 // decay rate of the second moment
	Eps         float64 // added to the denominator
	WeightDecay float64 // L2 penalty (Decoupled false) or decoupled decay (true)
	Step        int     // the step number, from 1, for the bias corrections
	Decoupled   bool    // AdamW's decoupled weight decay
}

// FusedMatMul is an optional interface of a [Device] whose matrix products
// can do a linear layer's elementwise work in the same kernel: add a bias
// and apply a ReLU to the product on its way out (the forward pass), or sum
// the rows of an operand while reading it (the bias gradient of the
// backward pass). Callers find it with a type assertion and fall back to
// [Kernels.MatMul] and separate ops when a device lacks it or a method
// returns an error wrapping [ErrNotImplemented], as it may for any dtype,
// shape, stride or alignment it has no fused kernel for.
type FusedMatMul interface {
	// MatMulBias computes dst = a·b + bias, then max(dst, 0) when relu is
	// set, for 2-D views a [M,K], b [K,N] (any strides) and dst [M,N]
	// (contiguous), with bias [N] (contiguous) added to every row. All
	// four views have the same floating-point dtype; arithmetic is that of
	// [Kernels.MatMul].
	MatMulBias(dst, a, b, bias View, relu bool) error
	// MatMulRowSum computes dst = a·b as MatMulBias does without the bias,
	// and sets rowSum[i] to the sum of row i of a, for rowSum [M]
	// (contiguous, same dtype). With a the transpose of a layer's output
	// gradient, that sum is the bias gradient.
	MatMulRowSum(dst, a, b, rowSum View) error
}

// FusedSGD is an optional interface of a [Device] that does a whole SGD step
// of one parameter in a single pass, found and used like [FusedAdam].
type FusedSGD interface {
	// SGDStep updates the parameter p in place from the gradient g, and the
	// momentum buffer buf when cfg.Momentum is not 0 (buf is then ignored
	// otherwise and may be a zero View), as PyTorch's SGD does:
	//
	//	d = g + WeightDecay·p
	//	buf = d                                   (First: the first step)
	//	buf = Momentum·buf + (1 - Dampening)·d    (later steps)
	//	d = d + Momentum·buf (Nesterov), else d = buf
	//	p = p - LR·d
	//
	// The views are contiguous, of one shape and one floating-point dtype,
	// and do not overlap; the math runs in float32 (float64 for float64),
	// buf rounded to its dtype when stored.
	SGDStep(p, g, buf View, cfg SGDStepConfig) error
}

// SGDStepConfig holds the hyper-parameters of one [FusedSGD.SGDStep].
type SGDStepConfig struct {
	LR          float64 // learning rate
	Momentum    float64 // 0: no momentum buffer
	Dampening   float64 // dampening of the momentum
	WeightDecay float64 // L2 penalty
	Nesterov    bool    // Nesterov momentum
	First       bool    // the first step: buf starts as d
}
