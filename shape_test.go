package vram

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/sim"
	"github.com/vramgo/vram/memory"
)

// badShapes are shapes no tensor can have, for every dtype: a negative
// size, or a product of the nonzero sizes beyond an int.
var badShapes = []Shape{
	{-1},
	{2, -3},
	{math.MinInt},
	{1 << 40, 1 << 40},
	{3, 1 << 62},
	{1 << 62, 3},
	{math.MaxInt, 2},
	{1 << 31, 1 << 31, 4},
	{1 << 21, 1 << 21, 1 << 21},
	{0, 1 << 40, 1 << 40}, // empty, but its strides would wrap
	{1 << 40, 1 << 40, 0},
	{1<<62 + 1, 4},
}

// bytesTooLarge are shapes whose element count fits but whose size in
// bytes at the given dtype does not.
var bytesTooLarge = []struct {
	shape Shape
	dt    DType
}{
	{Shape{1 << 61}, Float32},
	{Shape{math.MaxInt}, Float32},
	{Shape{1 << 62}, Float16},
	{Shape{1 << 62}, BFloat16},
	{Shape{1 << 60}, Float64},
	{Shape{1 << 60}, Int64},
	{Shape{1 << 31, 1 << 30}, Float32},
	{Shape{0, 1 << 61}, Float32},
}

// wantShapeError runs f and fails unless it panicked with an *Error of kind
// ErrShape (or kind, when given) naming op, on one line unless it reports
// an out-of-memory diagnosis.
func wantShapeError(t *testing.T, op string, f func(), kind ...error) {
	t.Helper()
	want := ErrShape
	if len(kind) > 0 {
		want = kind[0]
	}
	err := Catch(f)
	var ve *Error
	if !errors.As(err, &ve) || !errors.Is(err, want) {
		t.Fatalf("got %v, want a *vram.Error of kind %v", err, want)
	}
	if ve.Op != op {
		t.Errorf("error %v names op %q, want %q", err, ve.Op, op)
	}
	if want != ErrOutOfMemory && strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is not one line", err)
	}
}

var (
	planOnce sync.Once
	planDev  Device
	planErr  error
)

// planningDevice returns a shape-only sim device (sim:3), or skips.
func planningDevice(t *testing.T) Device {
	t.Helper()
	planOnce.Do(func() {
		if !Sim(3).Available() {
			planErr = errors.New("sim:3 not available")
			return
		}
		b, _ := backend.Lookup("sim")
		d, err := b.Device(3)
		if err == nil {
			err = d.(*sim.Device).SetShapeOnly(true)
		}
		planDev, planErr = Sim(3), err
	})
	if planErr != nil {
		t.Skip(planErr)
	}
	return planDev
}

func TestShapeNumElements(t *testing.T) {
	tests := []struct {
		s    Shape
		want int
	}{
		{Shape{}, 1},
		{nil, 1},
		{Shape{0}, 0},
		{Shape{5, 0, 7}, 0},
		{Shape{2, 3, 4}, 24},
		{Shape{1 << 31, 1 << 31}, 1 << 62},
		{Shape{math.MaxInt}, math.MaxInt},
		{Shape{0, math.MaxInt}, 0},
	}
	for _, tt := range tests {
		if got := tt.s.NumElements(); got != tt.want {
			t.Errorf("%v.NumElements() = %d, want %d", tt.s, got, tt.want)
		}
	}
	for _, s := range badShapes {
		t.Run(s.String(), func(t *testing.T) {
			wantShapeError(t, "num elements", func() { s.NumElements() })
		})
	}
}

// TestConstructorsRejectBadShapes runs every constructor on every bad shape,
// on the CPU and on a shape-only device, and checks that nothing was
// allocated.
func TestConstructorsRejectBadShapes(t *testing.T) {
	devs := []Device{CPU}
	if Sim(3).Available() {
		devs = append(devs, planningDevice(t))
	}
	base := func(dt DType, d Device) *Tensor { return Ones(Shape{2}, dt, d) }
	type ctor struct {
		name, op string
		f        func(Shape, DType, Device)
	}
	ctors := []ctor{
		{"Empty", "empty", func(s Shape, dt DType, d Device) { Empty(s, dt, d) }},
		{"Zeros", "zeros", func(s Shape, dt DType, d Device) { Zeros(s, dt, d) }},
		{"Ones", "ones", func(s Shape, dt DType, d Device) { Ones(s, dt, d) }},
		{"Full", "full", func(s Shape, dt DType, d Device) { Full(s, 2, dt, d) }},
		{"FromSlice", "from slice", func(s Shape, dt DType, d Device) { FromSlice([]float32{}, s, dt, d) }},
		{"NewZeros", "new_zeros", func(s Shape, dt DType, d Device) { base(dt, d).NewZeros(s) }},
		{"NewOnes", "new_ones", func(s Shape, dt DType, d Device) { base(dt, d).NewOnes(s) }},
		{"NewFull", "new_full", func(s Shape, dt DType, d Device) { base(dt, d).NewFull(s, 3) }},
		{"NewEmpty", "new_empty", func(s Shape, dt DType, d Device) { base(dt, d).NewEmpty(s) }},
	}
	floatCtors := []ctor{
		{"Rand", "rand", func(s Shape, dt DType, d Device) { Rand(s, dt, d) }},
		{"Randn", "randn", func(s Shape, dt DType, d Device) { Randn(s, dt, d) }},
		{"Uniform", "uniform", func(s Shape, dt DType, d Device) { Uniform(s, -1, 1, dt, d) }},
		{"NewRandn", "new_randn", func(s Shape, dt DType, d Device) { base(dt, d).NewRandn(s) }},
	}
	for _, d := range devs {
		settle(d)
		before := MemoryAllocated(d)
		for _, c := range append(ctors, floatCtors...) {
			for _, s := range badShapes {
				t.Run(d.String()+"/"+c.name+"/"+s.String(), func(t *testing.T) {
					Tidy(func() { wantShapeError(t, c.op, func() { c.f(s, Float32, d) }) })
				})
			}
			for _, tc := range bytesTooLarge {
				if random := c.op == "rand" || c.op == "randn" || c.op == "uniform" || c.op == "new_randn"; random && !tc.dt.IsFloat() {
					continue // a dtype error comes first
				}
				t.Run(d.String()+"/"+c.name+"/"+tc.dt.String()+tc.shape.String(), func(t *testing.T) {
					Tidy(func() { wantShapeError(t, c.op, func() { c.f(tc.shape, tc.dt, d) }) })
				})
			}
		}
		if got := MemoryAllocated(d); got > before {
			t.Errorf("%s: %d bytes allocated after the failed constructors, %d before", d, got, before)
		}
	}
}

// TestShapeOnlyPlanning checks what a plan on a shape-only device learns:
// a shape that cannot exist is a shape error (never a 0-byte "fit"), one
// that exists but is too big for the device is out of memory, and one that
// no device holds is out of memory wrapping memory.ErrTooLarge.
func TestShapeOnlyPlanning(t *testing.T) {
	d := planningDevice(t)
	wantShapeError(t, "zeros", func() { Zeros(Shape{1 << 40, 1 << 40}, d) })
	wantShapeError(t, "zeros", func() { Zeros(Shape{3, 1 << 62}, d) })
	wantShapeError(t, "zeros", func() { Zeros(Shape{1 << 61}, d) }) // 2^63 bytes of float32
	wantShapeError(t, "zeros", func() { Zeros(Shape{1 << 20, 1 << 20}, d) }, ErrOutOfMemory)
	wantShapeError(t, "zeros", func() { Zeros(Shape{1 << 60}, d) }, ErrOutOfMemory) // 4 EiB: MaxAllocSize itself
	err := Catch(func() { Zeros(Shape{1<<62 + 1}, Bool, d) })
	if !errors.Is(err, ErrOutOfMemory) || !errors.Is(err, memory.ErrTooLarge) {
		t.Fatalf("a request above memory.MaxAllocSize gave %v, want ErrOutOfMemory wrapping memory.ErrTooLarge", err)
	}
	// A plan that fits.
	Tidy(func() {
		x := Zeros(Shape{1 << 10, 1 << 10}, d)
		if x.NumElements() != 1<<20 || x.Bytes() != 4<<20 {
			t.Fatalf("planned tensor has %d elements, %d bytes", x.NumElements(), x.Bytes())
		}
	})
}

// TestShapeOnlyReadsZeros checks what Config.SimShapeOnly promises: values
// read on the host from a shape-only device, however they are read, are
// zeros and not an error, so that a training step runs there unchanged.
func TestShapeOnlyReadsZeros(t *testing.T) {
	d := planningDevice(t)
	tests := []struct {
		name string
		read func(x *Tensor) []float64
	}{
		{"Item", func(x *Tensor) []float64 { return []float64{x.Sum().Item()} }},
		{"Float64s", func(x *Tensor) []float64 { return x.Float64s() }},
		{"To(CPU)", func(x *Tensor) []float64 { return x.To(CPU).Float64s() }},
		{"Float32s", func(x *Tensor) []float64 {
			var out []float64
			for _, v := range x.Float32s() {
				out = append(out, float64(v))
			}
			return out
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Tidy(func() {
				var got []float64
				if err := Catch(func() { got = tc.read(Full(Shape{2, 3}, 7, d)) }); err != nil {
					t.Fatalf("reading a shape-only tensor: %v", err)
				}
				for i, v := range got {
					if v != 0 {
						t.Fatalf("value %d is %v, want 0", i, v)
					}
				}
			})
		})
	}
	Tidy(func() {
		if err := Catch(func() { _ = Ones(Shape{2}, d).String() }); err != nil {
			t.Fatalf("String of a shape-only tensor: %v", err)
		}
	})
}

// TestHostBuffersAfterDevice checks that factories computing values on the
// host ask the device first: a size it cannot hold fails as out of memory
// before a host buffer of that size is made (which would take the process
// down).
func TestHostBuffersAfterDevice(t *testing.T) {
	if !Sim(0).Available() {
		t.Skip("sim:0 not available")
	}
	huge := Shape{1 << 38, 1 << 4} // 16 TiB of float32
	for name, f := range map[string]func(){
		"randn":  func() { Randn(huge, Sim(0)) }, // the path of Rand and Uniform too
		"arange": func() { Arange(0, 1<<42, 1, Sim(0)) },
	} {
		t.Run(name, func(t *testing.T) { wantShapeError(t, name, f, ErrOutOfMemory) })
	}
}

func TestArangeRange(t *testing.T) {
	tests := []struct {
		name             string
		start, end, step float64
		kind             error
	}{
		{"nan start", math.NaN(), 1, 1, ErrArgument},
		{"nan end", 0, math.NaN(), 1, ErrArgument},
		{"inf end", 0, math.Inf(1), 1, ErrArgument},
		{"-inf start", math.Inf(-1), 0, 1, ErrArgument},
		{"nan step", 0, 1, math.NaN(), ErrArgument},
		{"zero step", 0, 1, 0, ErrArgument},
		{"-0 step", 0, 1, math.Copysign(0, -1), ErrArgument},
		{"inf step", 0, 1, math.Inf(1), ErrArgument},
		{"1e300 elements", 0, 1e300, 1, ErrShape},
		{"2^63 elements", 0, 1 << 63, 1, ErrShape},
		{"span overflows", -1e308, 1e308, 1, ErrShape},
		{"tiny step", 0, 1, 1e-300, ErrShape},
		{"2^62 float32", 0, 1 << 62, 1, ErrShape}, // fits an int, not as bytes
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantShapeError(t, "arange", func() { Arange(tt.start, tt.end, tt.step) }, tt.kind)
		})
	}
	// A step pointing away from end is refused, as PyTorch refuses it,
	// before the span's size overflows.
	if err := Catch(func() { Arange(-1e308, 1e308, -1) }); !errors.Is(err, ErrArgument) {
		t.Fatalf("a step pointing away over an overflowing span: %v, want ErrArgument", err)
	}
}

// TestViewsRejectBadShapes covers the views that can make a shape larger
// than their input's, and the index arithmetic of the others.
func TestViewsRejectBadShapes(t *testing.T) {
	one := Ones(Shape{1})
	four := Arange(0, 4, 1)
	empty := Zeros(Shape{0})
	col := Ones(Shape{1, 1})
	bits := Ones(Shape{1}, Bool)
	defer func() {
		for _, x := range []*Tensor{one, four, empty, col, bits} {
			x.Release()
		}
	}()
	cases := []struct {
		name, op string
		f        func()
		kind     error
	}{
		{"expand overflow", "expand", func() { one.Expand(1<<40, 1<<40) }, ErrShape},
		{"expand bytes", "expand", func() { one.Expand(1 << 61) }, ErrShape},
		{"expand negative", "expand", func() { one.Expand(-2) }, ErrShape},
		{"expand new -1", "expand", func() { one.Expand(-1, 1) }, ErrShape},
		{"expand min int", "expand", func() { col.Expand(math.MinInt, 1) }, ErrShape},
		{"expand 2-D overflow", "expand", func() { col.Expand(1<<62, 4) }, ErrShape},
		{"expand as", "expand_as", func() {
			// No factory makes a tensor of this shape: give a view one.
			huge := one.Detach()
			defer huge.Release()
			huge.shape = []int{3, 1 << 62}
			one.ExpandAs(huge)
		}, ErrShape},
		{"reshape wraps to 4", "reshape", func() { four.Reshape(1<<62+1, 4) }, ErrShape},
		{"view wraps to 4", "view", func() { four.View(1<<62+1, 4) }, ErrShape},
		{"reshape infer wraps", "reshape", func() { four.Reshape(-1, 1<<62+1, 4) }, ErrShape},
		{"view infer wraps", "view", func() { four.View(-1, 1<<62+1, 4) }, ErrShape},
		{"reshape empty overflow", "reshape", func() { empty.Reshape(0, 1<<40, 1<<40) }, ErrShape},
		{"reshape empty infer", "reshape", func() { empty.Reshape(-1, 1<<40, 1<<40) }, ErrShape},
		{"reshape two -1", "reshape", func() { four.Reshape(-1, -1) }, ErrShape},
		{"reshape -2", "reshape", func() { four.Reshape(-2, -2) }, ErrShape},
		{"reshape min int", "reshape", func() { four.Reshape(math.MinInt, -4) }, ErrShape},
		{"narrow length wraps", "narrow", func() { four.Narrow(0, 1, math.MaxInt) }, ErrIndex},
		{"narrow start past end", "narrow", func() { four.Narrow(0, math.MaxInt, 1) }, ErrIndex},
		{"narrow negative length", "narrow", func() { four.Narrow(0, 1, -1) }, ErrIndex},
		{"narrow min int start", "narrow", func() { four.Narrow(0, math.MinInt, 1) }, ErrIndex},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			Tidy(func() { wantShapeError(t, c.op, c.f, c.kind) })
		})
	}
	// Steps that used to wrap the length.
	for _, step := range []int{math.MaxInt, math.MaxInt - 1, 1 << 62, 5} {
		Tidy(func() {
			s := four.Slice(0, 0, 4, step)
			if !slices.Equal(s.Shape(), Shape{1}) || s.Item() != 0 {
				t.Fatalf("Slice(0, 0, 4, %d) = %v", step, s)
			}
			s = four.Slice(0, 1, math.MaxInt, step)
			if !slices.Equal(s.Shape(), Shape{1}) || s.Item() != 1 {
				t.Fatalf("Slice(0, 1, MaxInt, %d) = %v", step, s)
			}
		})
	}
	Tidy(func() {
		if s := four.Slice(0, 0, 4, 3); !slices.Equal(s.Shape(), Shape{2}) || s.Float64s()[1] != 3 {
			t.Fatalf("Slice(0, 0, 4, 3) = %v", s)
		}
	})
	// A valid broadcast view of 2^62 one-byte elements is fine.
	Tidy(func() {
		v := bits.Expand(1 << 62)
		if v.NumElements() != 1<<62 || v.Bytes() != 1<<62 {
			t.Fatalf("expanded view: %d elements, %d bytes", v.NumElements(), v.Bytes())
		}
	})
}

// TestInferredSizeAmbiguous checks that a -1 beside a size of 0 is
// of an empty tensor is refused with an error that says why, as
// PyTorch's "the unspecified dimension size -1 can be any value and is
// ambiguous": every size gives the tensor's 0 elements.
func TestInferredSizeAmbiguous(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		empty := Zeros(Shape{0, 3}, dev)
		for _, c := range []struct {
			name, op string
			f        func()
		}{
			{"reshape empty", "reshape", func() { empty.Reshape(0, -1) }},
			{"reshape empty, -1 first", "reshape", func() { empty.Reshape(-1, 3, 0) }},
			{"view empty", "view", func() { empty.View(-1, 0) }},
			{"unflatten empty", "unflatten", func() { empty.Unflatten(0, 0, -1) }},
		} {
			err := Catch(func() { Tidy(c.f) })
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrShape) || e.Op != c.op || !strings.Contains(err.Error(), "ambiguous") {
				t.Errorf("%s: %s: error %v, want ErrShape from %s saying the -1 is ambiguous", dev, c.name, err, c.op)
			}
		}
		empty.Release()
	}
}

// TestResultShapesOverflow covers ops whose result shape comes from their
// inputs' (broadcast, concatenation, matmul): views of 2^40 or more
// elements combine into results no tensor can have.
func TestResultShapesOverflow(t *testing.T) {
	one := Ones(Shape{1})
	bits := Ones(Shape{1}, Bool)
	defer one.Release()
	defer bits.Release()
	cases := []struct {
		name, op string
		f        func()
		kind     error
	}{
		{"add", "add", func() { one.Expand(1 << 40).Unsqueeze(1).Add(one.Expand(1 << 40)) }, ErrShape},
		{"mul", "mul", func() { one.Expand(1 << 40).Unsqueeze(1).Mul(one.Expand(1 << 40)) }, ErrShape},
		{"eq", "eq", func() { one.Expand(1 << 40).Unsqueeze(1).Eq(one.Expand(1 << 40)) }, ErrShape},
		{"where", "where", func() {
			Where(bits.Expand(1<<40).Unsqueeze(1), one.Expand(1<<40), one)
		}, ErrShape},
		{"matmul", "matmul", func() { one.Expand(1<<31, 1).MatMul(one.Expand(1, 1<<31)) }, ErrShape},
		{"matmul batch", "matmul", func() {
			one.Expand(1<<40, 1, 1).MatMul(one.Expand(1, 1, 1<<40))
		}, ErrShape},
		{"cat wraps to 0", "cat", func() {
			v := bits.Expand(1 << 62)
			Cat([]*Tensor{v, v, v, v}, 0)
		}, ErrShape},
		{"cat past int", "cat", func() {
			v := bits.Expand(1 << 62)
			Cat([]*Tensor{v, v}, 0)
		}, ErrShape},
		{"cat bytes", "cat", func() {
			v := one.Expand(1 << 60)
			Cat([]*Tensor{v, v}, 0) // 2^61 float32 elements: 2^63 bytes
		}, ErrShape},
		{"stack", "stack", func() {
			v := bits.Expand(1 << 62)
			Stack([]*Tensor{v, v, v, v}, 0)
		}, ErrShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			Tidy(func() { wantShapeError(t, c.op, c.f, c.kind) })
		})
	}
}

// TestCatAtTheLimit concatenates to exactly MaxInt one-byte elements on a
// shape-only device: the count fits, the device refuses the size.
func TestCatAtTheLimit(t *testing.T) {
	d := planningDevice(t)
	Tidy(func() {
		b := Ones(Shape{1}, Bool, d)
		err := Catch(func() { Cat([]*Tensor{b.Expand(1 << 62), b.Expand(1<<62 - 1)}, 0) })
		if !errors.Is(err, ErrOutOfMemory) || !errors.Is(err, memory.ErrTooLarge) {
			t.Fatalf("got %v, want out of memory wrapping memory.ErrTooLarge", err)
		}
	})
}

func FuzzCheckShape(f *testing.F) {
	f.Add(int64(2), int64(3), int64(4), uint8(4))
	f.Add(int64(1<<40), int64(1<<40), int64(1), uint8(1))
	f.Add(int64(0), int64(1<<62), int64(4), uint8(8))
	f.Add(int64(-1), int64(1), int64(1), uint8(2))
	f.Fuzz(func(t *testing.T, a, b, c int64, size uint8) {
		if size == 0 {
			return
		}
		shape := []int{int(a), int(b), int(c)}
		n, nbytes, err := backend.CheckShape(shape, int(size))
		if err != nil {
			return
		}
		// The exact products, in float64, must agree within its precision.
		span := 1.0
		exact := 1.0
		for _, d := range shape {
			if d < 0 {
				t.Fatalf("%v accepted with a negative size", shape)
			}
			span *= math.Max(float64(d), 1)
			exact *= float64(d)
		}
		if span*float64(size) > math.MaxInt64*(1+1e-9) {
			t.Fatalf("%v of %d-byte elements accepted: %g bytes", shape, size, span*float64(size))
		}
		if math.Abs(float64(n)-exact) > exact*1e-9 || math.Abs(float64(nbytes)-exact*float64(size)) > exact*float64(size)*1e-9 {
			t.Fatalf("%v: %d elements, %d bytes; want %g, %g", shape, n, nbytes, exact, exact*float64(size))
		}
	})
}

// TestEmptyTensorStrides pins PyTorch's strides for tensors with a size of
// 0, which count that size as 1, and that such tensors take in-place
// writes: with strides of 0 before the empty dimension, Zeros{3, 0}
// looked expanded and FillInPlace refused it.
func TestEmptyTensorStrides(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range []struct {
			shape   Shape
			format  MemoryFormat
			strides []int
		}{
			{Shape{3, 0}, ContiguousFormat, []int{1, 1}},
			{Shape{0, 3}, ContiguousFormat, []int{3, 1}},
			{Shape{5, 0, 7}, ContiguousFormat, []int{7, 7, 1}},
			{Shape{2, 0, 3, 4}, ChannelsLast, []int{12, 1, 4, 1}},
			{Shape{2, 3, 0, 4}, ChannelsLast, []int{12, 1, 12, 3}},
		} {
			z := Zeros(tc.shape, dev)
			if tc.format == ChannelsLast {
				z = z.Contiguous(ChannelsLast)
			}
			if got := z.Strides(); !slices.Equal(got, tc.strides) {
				t.Errorf("%s: %v in %v: strides %v, want %v", dev, tc.shape, tc.format, got, tc.strides)
			}
			if tc.format == ContiguousFormat && !z.IsContiguous() {
				t.Errorf("%s: %v is not contiguous", dev, tc.shape)
			}
			if err := Catch(func() {
				z.FillInPlace(1)
				z.AddScalarInPlace(1)
				z.CopyFrom(Zeros(tc.shape, dev))
				v := z.Narrow(0, z.Size(0), 0) // an offset past the end of the storage
				if n := len(v.Float32s()); n != 0 {
					t.Errorf("%s: %v: a narrow of it reads %d values", dev, tc.shape, n)
				}
			}); err != nil {
				t.Errorf("%s: %v: %v", dev, tc.shape, err)
			}
		}
		if got := Zeros(Shape{3, 0}, dev).Reshape(0, 3).Strides(); !slices.Equal(got, []int{3, 1}) {
			t.Errorf("%s: [3, 0] reshaped to [0, 3]: strides %v, want [3 1]", dev, got)
		}
	}
}

// TestScalarDims pins PyTorch's reading of dimension 0 and -1 of a
// 0-dimensional tensor as the tensor itself in squeeze, transpose, flatten
// and the reductions (they panicked with ErrIndex), the ErrIndex of any
// other dimension there, and the ErrArgument of a dimension that Squeeze
// is given twice, which PyTorch refuses too.
func TestScalarDims(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		for _, tc := range []struct {
			name  string
			fn    func(s *Tensor) *Tensor
			shape Shape
			value float64
			grad  float64 // NaN: the result takes no gradient
		}{
			{"Squeeze(0)", func(s *Tensor) *Tensor { return s.Squeeze(0) }, Shape{}, 2.5, 1},
			{"Squeeze(-1)", func(s *Tensor) *Tensor { return s.Squeeze(-1) }, Shape{}, 2.5, 1},
			{"Transpose(0, -1)", func(s *Tensor) *Tensor { return s.Transpose(0, -1) }, Shape{}, 2.5, 1},
			{"Flatten(-1, 0)", func(s *Tensor) *Tensor { return s.Flatten(-1, 0) }, Shape{1}, 2.5, 1},
			{"Sum(0)", func(s *Tensor) *Tensor { return s.Sum(0) }, Shape{}, 2.5, 1},
			{"SumKeepDim(-1)", func(s *Tensor) *Tensor { return s.SumKeepDim(-1) }, Shape{}, 2.5, 1},
			{"Mean(0)", func(s *Tensor) *Tensor { return s.Mean(0) }, Shape{}, 2.5, 1},
			{"Max(-1)", func(s *Tensor) *Tensor { return s.Max(-1) }, Shape{}, 2.5, 1},
			{"Softmax(0)", func(s *Tensor) *Tensor { return s.Softmax(0) }, Shape{}, 1, 0},
			{"Softmax(-1)", func(s *Tensor) *Tensor { return s.Softmax(-1) }, Shape{}, 1, 0},
			{"LogSoftmax(0)", func(s *Tensor) *Tensor { return s.LogSoftmax(0) }, Shape{}, 0, 0},
			{"LogSoftmax(-1)", func(s *Tensor) *Tensor { return s.LogSoftmax(-1) }, Shape{}, 0, 0},
			{"ArgMax(0, false)", func(s *Tensor) *Tensor { return s.ArgMax(0, false) }, Shape{}, 0, math.NaN()},
			{"ArgMax(-1, true)", func(s *Tensor) *Tensor { return s.ArgMax(-1, true) }, Shape{}, 0, math.NaN()},
			{"ArgMin(0, true)", func(s *Tensor) *Tensor { return s.ArgMin(0, true) }, Shape{}, 0, math.NaN()},
			{"ArgMin(-1, false)", func(s *Tensor) *Tensor { return s.ArgMin(-1, false) }, Shape{}, 0, math.NaN()},
			{"Gather(0, 0-d)", func(s *Tensor) *Tensor { return s.Gather(0, Scalar(0, dev, Int64)) }, Shape{}, 2.5, 1},
			{"Gather(-1, 0-d)", func(s *Tensor) *Tensor { return s.Gather(-1, Scalar(0, dev, Int64)) }, Shape{}, 2.5, 1},
		} {
			s := Scalar(2.5, dev, Float64, WithGrad())
			var out *Tensor
			if err := Catch(func() { out = tc.fn(s) }); err != nil {
				t.Errorf("%s: %s of a 0-d tensor: %v", dev, tc.name, err)
				continue
			}
			if !slices.Equal(out.Shape(), tc.shape) || out.Item() != tc.value {
				t.Errorf("%s: %s of a 0-d tensor: shape %v value %v, want %v and %v", dev, tc.name, out.Shape(), out.Item(), tc.shape, tc.value)
			}
			if math.IsNaN(tc.grad) {
				continue
			}
			out.Sum().Backward()
			if g := s.Grad(); g == nil || g.Item() != tc.grad {
				t.Errorf("%s: %s of a 0-d tensor: gradient %v, want %v", dev, tc.name, g, tc.grad)
			}
		}
		s := Scalar(1, dev)
		for _, tc := range []struct {
			name string
			fn   func()
			kind error
		}{
			{"Squeeze(1)", func() { s.Squeeze(1) }, ErrIndex},
			{"Transpose(0, 1)", func() { s.Transpose(0, 1) }, ErrIndex},
			{"Flatten(5, 9)", func() { s.Flatten(5, 9) }, ErrIndex},
			{"Sum(-2)", func() { s.Sum(-2) }, ErrIndex},
			{"Select(0, 0)", func() { s.Select(0, 0) }, ErrIndex},
			{"Narrow(0, 0, 1)", func() { s.Narrow(0, 0, 1) }, ErrIndex},
			{"Softmax(1)", func() { s.Softmax(1) }, ErrIndex},
			{"LogSoftmax(-2)", func() { s.LogSoftmax(-2) }, ErrIndex},
			{"ArgMax(1)", func() { s.ArgMax(1, false) }, ErrIndex},
			{"ArgMin(-2)", func() { s.ArgMin(-2, true) }, ErrIndex},
			{"Gather(1)", func() { s.Gather(1, Scalar(0, dev, Int64)) }, ErrIndex},
			{"Gather index 1", func() { s.Gather(0, Scalar(1, dev, Int64)) }, ErrIndex},
			{"Gather 1-d index", func() { s.Gather(0, Zeros(Shape{1}, dev, Int64)) }, ErrShape},
			{"Cat", func() { Cat([]*Tensor{s, s}, 0) }, ErrShape},
			{"Squeeze(0, -3) of [1, 3, 1]", func() { Zeros(Shape{1, 3, 1}, dev).Squeeze(0, -3) }, ErrArgument},
		} {
			if err := Catch(tc.fn); !errors.Is(err, tc.kind) {
				t.Errorf("%s: %s: got %v, want %v", dev, tc.name, err, tc.kind)
			}
		}
	}
}

// TestCatSkipsLegacyEmpty checks PyTorch's rule that Cat skips 1-D empty
// tensors among tensors of more dimensions, in the value and the gradient,
// while any other shape that does not fit is still refused.
func TestCatSkipsLegacyEmpty(t *testing.T) {
	for _, dev := range []Device{CPU, Sim(0)} {
		t.Run(dev.String(), func(t *testing.T) {
			Tidy(func() {
				x := Arange(0, 6, 1, dev, Float64).Reshape(2, 3)
				x.SetRequiresGrad(true)
				e := Zeros(Shape{0}, dev, Float64, WithGrad())
				y := Cat([]*Tensor{e, x, e, x}, 1)
				if !slices.Equal(y.Shape(), Shape{2, 6}) || !slices.Equal(y.Float64s(), []float64{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}) {
					t.Fatalf("cat: %v %v", y.Shape(), y.Float64s())
				}
				y.Sum().Backward()
				if !slices.Equal(x.Grad().Float64s(), []float64{2, 2, 2, 2, 2, 2}) || !slices.Equal(e.Grad().Shape(), Shape{0}) {
					t.Errorf("gradients %v and %v", x.Grad().Float64s(), e.Grad().Shape())
				}
				if s := Cat([]*Tensor{e, e}, 0).Shape(); !slices.Equal(s, Shape{0}) {
					t.Errorf("empty with empty: %v", s)
				}
				if err := Catch(func() { Cat([]*Tensor{x, Zeros(Shape{2}, dev, Float64)}, 0) }); !errors.Is(err, ErrShape) {
					t.Errorf("a 1-D tensor that is not empty: %v", err)
				}
			})
		})
	}
}

// TestErrorsNameTheArguments checks that an error names the arguments as
// the caller wrote them (a negative start or dimension stays negative),
// not the values an operation resolved them to, and the operation called,
// not one it is built from.
func TestErrorsNameTheArguments(t *testing.T) {
	v := Arange(0, 4, 1)
	m := Zeros(Shape{2, 3})
	for _, tc := range []struct {
		name string
		fn   func()
		want string
	}{
		{"Narrow negative start", func() { v.Narrow(0, -5, 1) }, "start -5 and length 1"},
		{"Narrow negative start, negative dim", func() { v.Narrow(-1, -5, 2) }, "start -5 and length 2 out of bounds for dimension -1"},
		{"Narrow length", func() { v.Narrow(0, -2, 3) }, "start -2 and length 3"},
		{"Select", func() { v.Select(-1, -5) }, "index -5 out of range for dimension -1"},
		{"Cat negative dim", func() { Cat([]*Tensor{m, Zeros(Shape{3, 3})}, -1) }, "outside dimension -1"},
		{"Sum", func() { m.Sum(-3) }, "dimension -3"},
		{"Unsqueeze", func() { m.Unsqueeze(-4) }, "dimension -4"},
		{"Var of int64", func() { m.Long().Var(nil, 1, false) }, "var: var needs a floating-point tensor, got int64"},
		{"Std of bool", func() { m.Cast(Bool).Std([]int{0}, 0, true) }, "std: std needs a floating-point tensor, got bool"},
	} {
		err := Catch(tc.fn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
