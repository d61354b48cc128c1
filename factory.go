package vram

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sync"
)

// Option sets where and how a factory function creates a tensor. A
// [Device] and a [DType] are Options themselves, so calls read like
// PyTorch's: vram.Zeros(vram.Shape{4, 3}, vram.CUDA(0), vram.Float16).
type Option interface{ applyOption(*options) }

type options struct {
	device       Device
	deviceSet    bool
	dtype        DType
	requiresGrad bool
	gen          *Generator
}

type optionFunc func(*options)

func (f optionFunc) applyOption(o *options) { f(o) }

// WithGrad makes the new tensor a leaf that requires grad.
func WithGrad() Option { return optionFunc(func(o *options) { o.requiresGrad = true }) }

// WithGenerator draws random values from g instead of the default generator.
func WithGenerator(g *Generator) Option { return optionFunc(func(o *options) { o.gen = g }) }

func resolve(defaultDType DType, opts []Option) options {
	o := options{dtype: defaultDType}
	for _, opt := range opts {
		if opt != nil {
			opt.applyOption(&o)
		}
	}
	if !o.deviceSet {
		o.device = DefaultDevice()
	}
	return o
}

func finish(t *Tensor, o options) *Tensor {
	if o.requiresGrad {
		ok := false
		defer func() {
			if !ok {
				t.Release() // an integer tensor cannot require grad: nothing is left behind
			}
		}()
		t.SetRequiresGrad(true)
		ok = true
	}
	return t
}

// Empty returns a tensor whose elements are not initialized (float32 on the
// default device unless options say otherwise).
func Empty(shape Shape, opts ...Option) *Tensor {
	defer asOp("empty") // finish's requires_grad
	o := resolve(Float32, opts)
	return finish(newTensor("empty", mustDevice("empty", o.device), o.dtype, shape), o)
}

// Full returns a tensor filled with value. It panics with [ErrArgument]
// when value overflows the dtype (300 as int8, NaN as an integer, 1e6 as
// float16), as PyTorch's full does, rather than store a wrapped value;
// an integer dtype takes value truncated toward zero.
func Full(shape Shape, value float64, opts ...Option) *Tensor {
	defer asOp("full")
	o := resolve(Float32, opts)
	checkValue("full", value, o.dtype)
	t := newTensor("full", mustDevice("full", o.device), o.dtype, shape)
	t.fill("full", value)
	return finish(t, o)
}

// Zeros returns a tensor of zeros.
func Zeros(shape Shape, opts ...Option) *Tensor {
	defer asOp("zeros")
	return Full(shape, 0, opts...)
}

// Ones returns a tensor of ones.
func Ones(shape Shape, opts ...Option) *Tensor {
	defer asOp("ones")
	return Full(shape, 1, opts...)
}

// Scalar returns a 0-dimensional tensor holding v.
func Scalar(v float64, opts ...Option) *Tensor {
	defer asOp("scalar")
	return Full(Shape{}, v, opts...)
}

// Arange returns the values start, start+step, ... below end (above end for
// a negative step), as float32 unless a dtype option is given. An integer
// dtype is computed as PyTorch computes it, in int64: start, end and step
// are truncated toward zero first and the values are exact, so that an
// int64 range past 2^53 holds every integer of it; an int64 result
// counts its elements from the truncated end (arange(0, 4.5, 1) has 4),
// other dtypes from the end given. It panics with [ErrArgument] if step is
// zero (or truncates to zero for an integer dtype), start, end or step is
// not finite, step points away from end (PyTorch's "upper bound and
// larger bound inconsistent with step sign"; end equal to start gives an
// empty tensor) or a value overflows the dtype, and with [ErrShape] if the
// range has more elements than an int counts.
func Arange(start, end, step float64, opts ...Option) *Tensor {
	defer asOp("arange")
	if step == 0 || math.IsNaN(step) || math.IsInf(step, 0) {
		fail("arange", ErrArgument, "step must be finite and nonzero, got %v", step)
	}
	if math.IsNaN(start) || math.IsInf(start, 0) || math.IsNaN(end) || math.IsInf(end, 0) {
		fail("arange", ErrArgument, "start and end must be finite, got %v and %v", start, end)
	}
	o := resolve(Float32, opts)
	if isInteger(o.dtype) {
		return arangeInt(start, end, step, o)
	}
	if step > 0 && end < start || step < 0 && end > start {
		fail("arange", ErrArgument, "step %v points away from end: the range from %v to %v needs a step of the other sign", step, start, end)
	}
	n := 0
	if c := math.Ceil((end - start) / step); c >= math.MaxInt {
		fail("arange", ErrShape, "the range from %v to %v in steps of %v has more elements than an int can count", start, end, step)
	} else if c > 0 {
		n = int(c)
	}
	if n > 0 {
		// The values run from start to the last one, monotonically.
		checkValue("arange", start, o.dtype)
		checkValue("arange", start+float64(n-1)*step, o.dtype)
	}
	t := newTensor("arange", mustDevice("arange", o.device), o.dtype, []int{n})
	raw := make([]byte, n*o.dtype.Size())
	for i := 0; i < n; i++ {
		store(o.dtype, raw, i, start+float64(i)*step)
	}
	t.writeNew("arange", raw)
	return finish(t, o)
}

// isInteger reports whether dt is an integer dtype other than bool.
func isInteger(dt DType) bool { return dt == Int64 || dt == Int32 || dt == Int8 }

// arangeInt is Arange for an integer dtype o.dtype, computed in int64 as
// PyTorch's arange_out computes it.
func arangeInt(start, end, step float64, o options) *Tensor {
	const op = "arange"
	for _, v := range []float64{start, end, step} {
		checkValue(op, v, Int64)
	}
	xs, xe, xst := int64(start), int64(end), int64(step)
	if xst == 0 {
		fail(op, ErrArgument, "step %v truncates to 0 for the integer dtype %s; give a step of at least 1 in size", step, o.dtype)
	}
	if xst > 0 && xe < xs || xst < 0 && xe > xs {
		fail(op, ErrArgument, "step %v points away from end: the range from %v to %v needs a step of the other sign", step, start, end)
	}
	// The distance and the step's size as uint64, which holds both
	// whatever int64s they come from.
	dist, size := uint64(xe)-uint64(xs), uint64(xst)
	if xst < 0 {
		dist, size = uint64(xs)-uint64(xe), -uint64(xst)
	}
	var n uint64
	if o.dtype == Int64 {
		n = dist / size
		if dist%size != 0 {
			n++
		}
	} else if c := math.Ceil((end - start) / step); c >= math.MaxInt {
		n = math.MaxInt
	} else if c > 0 {
		n = uint64(c)
	}
	if n >= math.MaxInt {
		fail(op, ErrShape, "the range from %v to %v in steps of %v has more elements than an int can count", start, end, step)
	}
	if n > 0 && o.dtype != Int64 {
		// The values run monotonically from xs to the last one; only
		// an int64 result, whose values lie between xs and xe, cannot
		// overflow.
		last := new(big.Int).Mul(big.NewInt(int64(n-1)), big.NewInt(xst))
		last.Add(last, big.NewInt(xs))
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		if o.dtype == Int8 {
			lo, hi = math.MinInt8, math.MaxInt8
		}
		for _, v := range []*big.Int{big.NewInt(xs), last} {
			if !v.IsInt64() || v.Int64() < lo || v.Int64() > hi {
				fail(op, ErrArgument, "value %v of the range from %v to %v in steps of %v overflows %s", v, start, end, step, o.dtype)
			}
		}
	}
	t := newTensor(op, mustDevice(op, o.device), o.dtype, []int{int(n)})
	raw := make([]byte, int(n)*o.dtype.Size())
	v := xs
	for i := range int(n) {
		switch o.dtype {
		case Int64:
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
		case Int32:
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(v)))
		case Int8:
			raw[i] = byte(int8(v))
		}
		v += xst // wraps only past the last value
	}
	t.writeNew(op, raw)
	return finish(t, o)
}

// FromSlice returns a tensor holding a copy of data with the given shape
// (a 1-D tensor when shape is empty). The dtype follows the element type
// (float32, float64, int32, int64 for int and int64, bool) unless a dtype
// option converts it (toward zero, for a float slice made integers). It
// panics with [ErrShape] if the shape does not hold len(data) elements and
// with [ErrArgument] if a value overflows the integer dtype it is converted
// to, as in [Full].
func FromSlice[T Element](data []T, shape Shape, opts ...Option) *Tensor {
	defer asOp("from slice")
	o := resolve(elementDType[T](), opts)
	if shape == nil {
		shape = Shape{len(data)}
	}
	if n, _ := checkShape("from slice", shape, o.dtype); n != len(data) {
		fail("from slice", ErrShape, "shape %v holds %d elements, but the slice has %d", shape, n, len(data))
	}
	if !o.dtype.IsFloat() && o.dtype != elementDType[T]() {
		for _, v := range data {
			checkValue("from slice", toFloat(v), o.dtype)
		}
	}
	return finish(fromBytes("from slice", mustDevice("from slice", o.device), o.dtype, shape, encode(data, o.dtype)), o)
}

// Generator is a seeded source of random numbers. Values depend only on the
// seed and the order of calls, never on the number of cores; a generator
// made by [NewGenerator] draws the same numbers whatever device the tensors
// it fills are on. A zero Generator is ready to use: it draws what
// NewGenerator(0) draws. A Generator is safe for concurrent use.
type Generator struct {
	mu     sync.Mutex
	src    *rand.PCG
	rng    *rand.Rand
	seed   uint64 // the seed it was made or last seeded with
	stream uint64 // the second word of the PCG seed, which sets devices apart
}

// cpuStream is the second word of the PCG seed of [NewGenerator] and of
// the CPU's default generator.
const cpuStream = 0x9e3779b97f4a7c15

// NewGenerator returns a generator seeded with seed.
func NewGenerator(seed uint64) *Generator { return newGeneratorOn(seed, cpuStream) }

// newGeneratorOn returns a generator seeded with seed whose PCG source
// starts from the words seed and stream.
func newGeneratorOn(seed, stream uint64) *Generator {
	src := rand.NewPCG(seed, stream)
	return &Generator{src: src, rng: rand.New(src), seed: seed, stream: stream}
}

// ready makes a zero Generator the one NewGenerator(0) returns; g.mu is
// held.
func (g *Generator) ready() {
	if g.src == nil {
		g.stream = cpuStream
		g.src = rand.NewPCG(g.seed, g.stream)
		g.rng = rand.New(g.src)
	}
}

// defaultGen is the CPU's default generator.
var defaultGen = NewGenerator(0)

// DefaultGenerator returns the CPU's default generator
// (torch.default_generator): random factories draw from it for CPU tensors
// when no [WithGenerator] option is given, and [ManualSeed] reseeds it.
// Packages that draw random numbers of their own, such as a data loader's
// shuffling, take it as their default so that one ManualSeed fixes a whole
// program. Tensors on other devices draw from their device's own default
// generator ([DeviceGenerator]).
func DefaultGenerator() *Generator { return defaultGen }

// ManualSeed seeds the default generator of every device
// (torch.manual_seed): the CPU's with seed, as [NewGenerator] does, and
// each other device's, including devices first used later, as
// [ManualSeedAll] does.
func ManualSeed(seed uint64) {
	defaultGen.ManualSeed(seed)
	ManualSeedAll(seed)
}

// ManualSeed reseeds g with seed (torch.Generator.manual_seed): it then
// draws what it drew when first made or seeded with seed.
func (g *Generator) ManualSeed(seed uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ready()
	g.src = rand.NewPCG(seed, g.stream)
	g.rng, g.seed = rand.New(g.src), seed
}

// InitialSeed returns the seed g was made or last seeded with
// (torch.Generator.initial_seed), or, after [Generator.SetState], that of
// the generator the state was taken from, as in PyTorch.
func (g *Generator) InitialSeed() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seed
}

// Float64 returns a uniform value in [0, 1).
func (g *Generator) Float64() float64 {
	g = g.forDraw()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ready()
	return g.rng.Float64()
}

func (g *Generator) fill(n int, normal bool) []float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ready()
	out := make([]float64, n)
	for i := range out {
		if normal {
			out[i] = g.rng.NormFloat64()
		} else {
			out[i] = g.rng.Float64()
		}
	}
	return out
}

func random(op string, shape Shape, normal bool, opts []Option) *Tensor {
	defer asOp(op)
	o := resolve(Float32, opts)
	if !o.dtype.IsFloat() {
		fail(op, ErrDType, "random values need a float dtype, got %s", o.dtype)
	}
	ds := mustDevice(op, o.device)
	t := newTensor(op, ds, o.dtype, shape) // before the host buffers: see writeBytes
	if ds.capturing() != nil {
		// The values are drawn on the host, and a capture refuses their
		// copy: refuse it before drawing, leaving the generator as it was.
		t.writeNew(op, make([]byte, t.Bytes()))
	}
	if ds.shapeOnly() {
		// Nothing to draw: the device keeps no data.
		return finish(t, o)
	}
	g := o.gen
	if g == nil {
		g = deviceGen(ds.dev)
	}
	g = g.forDraw()
	vals := g.fill(t.NumElements(), normal)
	if !normal {
		// [0, 1) in the tensor's dtype: a draw just below 1 must not round
		// up to 1 in float32, float16 or bfloat16.
		lim := belowOne(o.dtype)
		for i, v := range vals {
			vals[i] = min(v, lim)
		}
	}
	t.writeNew(op, encode(vals, o.dtype))
	return finish(t, o)
}

// belowOne returns the largest value of dtype dt below 1 (for floats; 1
// otherwise, where rand's values are not meant to be stored).
func belowOne(dt DType) float64 {
	switch dt {
	case Float32:
		return 1 - 0x1p-24
	case Float16:
		return 1 - 0x1p-11
	case BFloat16:
		return 1 - 0x1p-8
	}
	return 1 - 0x1p-53
}

// Rand returns uniform random values in [0, 1).
func Rand(shape Shape, opts ...Option) *Tensor { return random("rand", shape, false, opts) }

// Randn returns standard normal random values.
func Randn(shape Shape, opts ...Option) *Tensor { return random("randn", shape, true, opts) }

// Uniform returns random values uniform in [lo, hi). It panics with
// [ErrArgument] unless lo and hi are finite, lo <= hi, and the width hi-lo
// and both bounds fit the dtype, as PyTorch's uniform_ requires.
func Uniform(shape Shape, lo, hi float64, opts ...Option) *Tensor {
	defer asOp("uniform")
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo > hi {
		fail("uniform", ErrArgument, "expects finite bounds lo <= hi, got lo=%v and hi=%v", lo, hi)
	}
	if o := resolve(Float32, opts); o.dtype.IsFloat() {
		for _, v := range []float64{lo, hi, hi - lo} {
			checkValue("uniform", v, o.dtype)
		}
	}
	u := Rand(shape, opts...)
	defer u.Release()
	var out *Tensor
	NoGrad(func() {
		m := u.MulScalar(hi - lo)
		defer m.Release()
		out = m.AddScalar(lo)
	})
	o := resolve(Float32, opts)
	return finish(out, o)
}

// The New... methods (PyTorch's new_zeros, new_ones, ...) take a [Shape]
// and options like the factories, and default to the receiver's dtype and
// device instead of Float32 and [DefaultDevice]: x.NewZeros(vram.Shape{3, 4})
// matches x, x.NewZeros(vram.Shape{3, 4}, vram.Float64) changes the dtype. A
// nil or empty shape makes a 0-dimensional tensor. They panic with
// [ErrReleased] for a released receiver.

// NewZeros returns zeros of the given shape with t's dtype and device
// (new_zeros).
func (t *Tensor) NewZeros(shape Shape, opts ...Option) *Tensor {
	return t.newFull("new_zeros", shape, 0, opts)
}

// NewOnes returns ones of the given shape with t's dtype and device
// (new_ones).
func (t *Tensor) NewOnes(shape Shape, opts ...Option) *Tensor {
	return t.newFull("new_ones", shape, 1, opts)
}

// NewFull returns a tensor of the given shape filled with value, with t's
// dtype and device (new_full). A value that overflows the dtype panics as
// in [Full].
func (t *Tensor) NewFull(shape Shape, value float64, opts ...Option) *Tensor {
	return t.newFull("new_full", shape, value, opts)
}

func (t *Tensor) newFull(op string, shape Shape, value float64, opts []Option) *Tensor {
	o := resolveLike(op, t, opts)
	checkValue(op, value, o.dtype)
	shape = scalarIfNil(shape)
	out := newTensor(op, mustDevice(op, o.device), o.dtype, shape)
	out.fill(op, value)
	return finish(out, o)
}

// NewEmpty returns an uninitialized tensor of the given shape with t's dtype
// and device (new_empty).
func (t *Tensor) NewEmpty(shape Shape, opts ...Option) *Tensor {
	const op = "new_empty"
	o := resolveLike(op, t, opts)
	return finish(newTensor(op, mustDevice(op, o.device), o.dtype, scalarIfNil(shape)), o)
}

// scalarIfNil returns shape, or the 0-dimensional Shape{} for nil, so that
// Shape() of the result is never nil.
func scalarIfNil(shape Shape) Shape {
	if shape == nil {
		return Shape{}
	}
	return shape
}

// NewTensor returns a tensor holding data ([]float32, []float64, []int32,
// []int64, []int or []bool) converted to t's dtype, on t's device
// (new_tensor), with the given shape like [FromSlice]: a nil shape makes it
// 1-D. A single number (float32, float64, int32, int64, int or bool) makes
// a 0-dimensional tensor, as x.new_tensor(3.0) does, or one of a shape
// with one element. Options override the dtype and device. It panics with
// [ErrArgument] for other data types and with [ErrShape] when the shape
// does not hold len(data) elements.
func (t *Tensor) NewTensor(data any, shape Shape, opts ...Option) *Tensor {
	const op = "new_tensor"
	defer asOp(op)
	o := resolveLike(op, t, opts)
	opts = likeOptions(o)
	switch d := data.(type) {
	case float32:
		return newScalarTensor(d, shape, opts)
	case float64:
		return newScalarTensor(d, shape, opts)
	case int32:
		return newScalarTensor(d, shape, opts)
	case int64:
		return newScalarTensor(d, shape, opts)
	case int:
		return newScalarTensor(d, shape, opts)
	case bool:
		return newScalarTensor(d, shape, opts)
	case []float32:
		return FromSlice(d, shape, opts...)
	case []float64:
		return FromSlice(d, shape, opts...)
	case []int32:
		return FromSlice(d, shape, opts...)
	case []int64:
		return FromSlice(d, shape, opts...)
	case []int:
		return FromSlice(d, shape, opts...)
	case []bool:
		return FromSlice(d, shape, opts...)
	}
	panic(&Error{Op: "new_tensor", Kind: ErrArgument, Detail: fmt.Sprintf("unsupported data type %T", data)})
}

// newScalarTensor is NewTensor of one number v: a 0-dimensional tensor
// for a nil shape.
func newScalarTensor[T Element](v T, shape Shape, opts []Option) *Tensor {
	return FromSlice([]T{v}, scalarIfNil(shape), opts...)
}

// NewRandn returns standard normal values of the given shape with t's
// dtype and device. Options override them and may pass a [WithGenerator];
// it panics with [ErrDType] when the dtype is not a float.
func (t *Tensor) NewRandn(shape Shape, opts ...Option) *Tensor {
	const op = "new_randn"
	o := resolveLike(op, t, opts)
	return random(op, scalarIfNil(shape), true, likeOptions(o))
}

// Eye returns the n×m identity matrix (torch.eye(n, m)): ones on the main
// diagonal, zeros elsewhere, float32 on the default device unless options
// say otherwise (a bool dtype holds true on the diagonal). Pass m = n for
// a square matrix. It is filled on the device, with no host copy. It
// panics with [ErrArgument] for a negative n or m, and with [ErrDType] for
// [WithGrad] with a dtype that is not a float.
func Eye(n, m int, opts ...Option) *Tensor {
	const op = "eye"
	defer asOp(op)
	if n < 0 || m < 0 {
		fail(op, ErrArgument, "n and m must be nonnegative, got n=%d, m=%d", n, m)
	}
	o := resolve(Float32, opts)
	t := newTensor(op, mustDevice(op, o.device), o.dtype, Shape{n, m})
	ok := false
	defer func() {
		if !ok {
			t.Release()
		}
	}()
	t.fill(op, 0)
	if n > 0 && m > 0 {
		d := t.Diagonal(0, 0, 1)
		d.fill(op, 1)
		d.Release()
	}
	ok = true
	return finish(t, o)
}

// Linspace returns steps values evenly spaced from start to end, both
// included (torch.linspace), as float32 unless a dtype option is given. As
// in PyTorch, the first half of the values are counted up from start and
// the rest down from end, so both ends are exact; an integer dtype gets
// start + i·step truncated toward zero. One step gives start, zero steps
// an empty tensor. It panics with [ErrArgument] for negative steps, a
// bound that is NaN, or a value the dtype cannot hold.
func Linspace(start, end float64, steps int, opts ...Option) *Tensor {
	defer asOp("linspace")
	return spaced("linspace", start, end, steps, nil, opts)
}

// Logspace returns steps values base**v for v evenly spaced from start to
// end (torch.logspace), as float32 unless a dtype option is given; the
// powers are computed in float64 and rounded once. It panics as
// [Linspace] does.
func Logspace(start, end float64, steps int, base float64, opts ...Option) *Tensor {
	defer asOp("logspace")
	return spaced("logspace", start, end, steps, func(v float64) float64 { return math.Pow(base, v) }, opts)
}

// spaced returns the tensor of [Linspace] on the device and in the dtype of
// opts, each value passed through pow when pow is not nil ([Logspace],
// whose exponents are spaced as in float64 whatever the dtype). The tensor
// is allocated before any host buffer is made (see writeBytes): a number
// of steps that the device cannot hold fails there, rather than on a host
// slice of that length.
func spaced(op string, start, end float64, steps int, pow func(float64) float64, opts []Option) *Tensor {
	if steps < 0 {
		fail(op, ErrArgument, "number of steps must be nonnegative, got %d", steps)
	}
	if math.IsNaN(start) || math.IsNaN(end) {
		fail(op, ErrArgument, "start and end must be numbers, got %v and %v", start, end)
	}
	o := resolve(Float32, opts)
	t := newTensor(op, mustDevice(op, o.device), o.dtype, []int{steps})
	defer releaseOnPanic(t)
	truncate := pow == nil && !o.dtype.IsFloat()
	raw := make([]byte, steps*o.dtype.Size())
	for i := range steps {
		v := linspaceAt(start, end, steps, i, truncate)
		if pow != nil {
			v = pow(v)
		}
		checkValue(op, v, o.dtype)
		store(o.dtype, raw, i, v)
	}
	t.writeBytes(op, raw)
	return finish(t, o)
}

// linspaceAt returns value i of the steps values of [Linspace] from start
// to end, in float64: the first half counted up from start and the rest
// down from end, or start + i·step truncated toward zero when truncate is
// set (an integer dtype).
func linspaceAt(start, end float64, steps, i int, truncate bool) float64 {
	if steps == 1 {
		return start
	}
	step := (end - start) / float64(steps-1)
	switch {
	case truncate:
		return math.Trunc(start + step*float64(i))
	case i < steps/2:
		return start + step*float64(i)
	default:
		return end - step*float64(steps-1-i)
	}
}
