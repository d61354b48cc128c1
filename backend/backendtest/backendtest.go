// Package backendtest is a conformance suite for [backend.Device]
// implementations. A backend's tests call [Run] with one of its devices:
//
//	func TestConformance(t *testing.T) {
//		dev, err := (&mybackend.Backend{}).Device(0)
//		if err != nil {
//			t.Fatal(err)
//		}
//		backendtest.Run(t, dev)
//	}
//
// The suite allocates through the device and moves data only with
// CopyFromHost and CopyToHost, so it runs unchanged on devices whose memory
// the host cannot read. It checks every kernel for every dtype where the
// kernel is meaningful, on contiguous, transposed, strided, offset,
// broadcast (stride 0), empty and 0-d views, in place, and compares with
// float64 references computed on the host.
package backendtest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vramgo/vram/backend"
)

// Options adjusts [RunOptions].
type Options struct {
	// AllowNotImplemented skips (rather than fails) a subtest whose kernel
	// returns an error wrapping backend.ErrNotImplemented, for backends that
	// lack some ops or dtypes.
	AllowNotImplemented bool
}

// Run runs the conformance suite on dev, requiring every kernel it checks.
func Run(t *testing.T, dev backend.Device) { RunOptions(t, dev, Options{}) }

// RunOptions runs the conformance suite on dev with the given options.
func RunOptions(t *testing.T, dev backend.Device, opt Options) {
	h := &harness{dev: dev, opt: opt}
	t.Run("Memory", h.testMemory)
	t.Run("HostCopies", h.testHostCopies)
	t.Run("Fill", h.testFill)
	t.Run("Copy", h.testCopy)
	t.Run("Unary", h.testUnary)
	t.Run("Binary", h.testBinary)
	t.Run("Scalar", h.testScalar)
	t.Run("Where", h.testWhere)
	t.Run("Reduce", h.testReduce)
	t.Run("ArgReduce", h.testArgReduce)
	t.Run("MatMul", h.testMatMul)
	t.Run("Gather", h.testGather)
	t.Run("ScatterAdd", h.testScatterAdd)
	t.Run("FusedSteps", h.testFusedSteps)
	t.Run("Int8Weights", h.testInt8Weights)
	t.Run("Arguments", h.testArguments)
	t.Run("Streams", h.testStreams)
}

// harness holds the device under test.
type harness struct {
	dev backend.Device
	opt Options
}

// call runs a kernel and then synchronizes, returning the first error.
func (h *harness) call(f func() error) error {
	if err := f(); err != nil {
		return err
	}
	return h.dev.DefaultStream().Synchronize()
}

// ok fails the test if err is not nil (or skips it, for an allowed
// ErrNotImplemented).
func (h *harness) ok(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if h.opt.AllowNotImplemented && errors.Is(err, backend.ErrNotImplemented) {
		t.Skipf("%s: %v", what, err)
	}
	t.Fatalf("%s: %v", what, err)
}

// fails checks that err is not nil.
func (h *harness) fails(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want one", what)
	}
}

// result reads the elements of v and checks that the padding around it
// (up to a few elements past its last one) still holds padValue.
func (h *harness) result(t *testing.T, v backend.View) []float64 {
	t.Helper()
	all := readBuffer(t, h.dev, v.Buf, v.DType)
	in := make([]bool, len(all))
	out := make([]float64, 0, v.NumElements())
	last := -1
	eachOffset(v, func(off int) {
		in[off] = true
		out = append(out, all[off])
		last = max(last, off)
	})
	pad := Quantize(v.DType, padValue)
	for i := 0; i < len(all) && i < last+3; i++ {
		if !in[i] && all[i] != pad {
			t.Errorf("element %d of the buffer, outside the destination view, changed from %v to %v", i, pad, all[i])
			break
		}
	}
	return out
}

// tolerance returns the relative and absolute error allowed for results of
// dtype dt.
func tolerance(dt backend.DType) (rtol, atol float64) {
	switch dt {
	case backend.Float64:
		return 1e-12, 1e-12
	case backend.Float32:
		return 1e-5, 1e-6
	case backend.Float16:
		return 2e-3, 1e-3
	case backend.BFloat16:
		return 1.6e-2, 1e-2
	}
	return 0, 0
}

func closeTo(got, want, rtol, atol float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	if math.IsInf(want, 0) || rtol == 0 && atol == 0 {
		return got == want
	}
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)
}

// expect compares got with want within dt's tolerance.
func expect(t *testing.T, what string, dt backend.DType, got, want []float64) {
	t.Helper()
	rtol, atol := tolerance(dt)
	expectTol(t, what, got, want, rtol, atol)
}

func expectTol(t *testing.T, what string, got, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if !closeTo(got[i], want[i], rtol, atol) {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements differ in all", what, bad)
	}
}

// gen returns n values drawn (deterministically, from seed) from dom.
func gen(dom []float64, n int, seed uint64) []float64 {
	out := make([]float64, n)
	for i := range out {
		x := uint64(i)*0x9e3779b97f4a7c15 + seed*0xbf58476d1ce4e5b9 + 1
		x ^= x >> 31
		x *= 0x94d049bb133111eb
		x ^= x >> 29
		out[i] = dom[x%uint64(len(dom))]
	}
	return out
}

func quantizeAll(dt backend.DType, v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = Quantize(dt, x)
	}
	return out
}

func filled(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

var floatDTypes = []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16}
var intDTypes = []backend.DType{backend.Int32, backend.Int64, backend.Int8}
var numDTypes = append(append([]backend.DType{}, floatDTypes...), intDTypes...)

func (h *harness) testMemory(t *testing.T) {
	s := h.dev.DefaultStream()
	for _, n := range []int64{0, 1, 24, 1000} {
		b, err := h.dev.Alloc(n, s, "test")
		if err != nil {
			t.Fatalf("Alloc(%d): %v", n, err)
		}
		if b.Bytes() < n {
			t.Errorf("Alloc(%d).Bytes() = %d", n, b.Bytes())
		}
		if hb, ok := b.(backend.HostBuffer); ok && int64(len(hb.Host())) < n {
			t.Errorf("Alloc(%d).Host() has %d bytes", n, len(hb.Host()))
		}
		h.dev.Free(b, s)
	}
	if err := s.Synchronize(); err != nil {
		t.Errorf("Synchronize: %v", err)
	}
}

func (h *harness) testHostCopies(t *testing.T) {
	for _, dt := range backend.DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			vals := quantizeAll(dt, []float64{1.5, -2, 0, 3, 100})
			v := makeView(t, h.dev, dt, []int{5}, filled(5, 0), offset)
			if err := h.dev.CopyFromHost(h.dev.DefaultStream(), v, Encode(dt, vals)); err != nil {
				t.Fatalf("CopyFromHost: %v", err)
			}
			raw := make([]byte, 5*dt.Size())
			if err := h.dev.CopyToHost(h.dev.DefaultStream(), raw, v); err != nil {
				t.Fatalf("CopyToHost: %v", err)
			}
			h.ok(t, "Synchronize", h.dev.DefaultStream().Synchronize())
			expect(t, "round trip", dt, Decode(dt, raw), vals)
			expect(t, "view", dt, h.result(t, v), vals)

			// 2-d, and empty views.
			m := NewView(t, h.dev, dt, []int{2, 3}, quantizeAll(dt, []float64{1, 2, 3, 4, 5, 6}))
			expect(t, "2-d", dt, ReadView(t, h.dev, m), quantizeAll(dt, []float64{1, 2, 3, 4, 5, 6}))
			empty := backend.View{Buf: v.Buf, DType: dt, Shape: []int{0, 3}, Strides: []int{3, 1}}
			if err := h.dev.CopyFromHost(h.dev.DefaultStream(), empty, nil); err != nil {
				t.Errorf("CopyFromHost of an empty view: %v", err)
			}
			if err := h.dev.CopyToHost(h.dev.DefaultStream(), nil, empty); err != nil {
				t.Errorf("CopyToHost of an empty view: %v", err)
			}
			h.fails(t, "CopyFromHost with too few bytes", h.call(func() error { return h.dev.CopyFromHost(h.dev.DefaultStream(), v, raw[:len(raw)-dt.Size()]) }))
			h.fails(t, "CopyToHost with too many bytes", h.call(func() error { return h.dev.CopyToHost(h.dev.DefaultStream(), make([]byte, len(raw)+dt.Size()), v) }))
		})
	}
}

func (h *harness) testFill(t *testing.T) {
	shapes := []struct {
		name  string
		shape []int
		lay   layout
	}{
		{"contiguous", []int{3, 4}, contiguous},
		{"transposed", []int{3, 4}, transposed},
		{"offset", []int{2, 3, 2}, offset},
		{"strided", []int{3, 4}, strided},
		{"0-d", []int{}, offset},
		{"zero-size", []int{0, 4}, contiguous},
		{"large", []int{300, 257}, strided},
	}
	for _, dt := range backend.DTypes {
		values := []float64{2.5, -1, 0}
		if dt.IsFloat() || dt == backend.Bool {
			values = append(values, math.NaN())
		}
		if dt.IsFloat() {
			values = append(values, math.Inf(-1), 0.1)
		}
		for _, val := range values {
			for _, s := range shapes {
				t.Run(fmt.Sprintf("%s/%v/%s", dt, val, s.name), func(t *testing.T) {
					n := backend.NumElements(s.shape)
					v := makeView(t, h.dev, dt, s.shape, filled(n, padValue), s.lay)
					h.ok(t, "Fill", h.call(func() error { return h.dev.Fill(h.dev.DefaultStream(), v, val) }))
					want := val
					if dt.IsInt() {
						want = math.Trunc(val)
					}
					expect(t, "Fill", dt, h.result(t, v), filled(n, Quantize(dt, want)))
				})
			}
		}
	}
}

// scenario is a layout of the operands of an elementwise kernel.
type scenario struct {
	name    string
	shape   []int
	lay     []layout // per input
	bcast   [][]int  // per input: nil, or the shape broadcast to shape
	dst     layout
	inplace int // index of the input that dst is, or -1
}

// scenarios returns the layouts tested for an elementwise kernel of nin
// inputs.
func scenarios(nin int) []scenario {
	all := func(l layout) []layout {
		out := make([]layout, nin)
		for i := range out {
			out[i] = l
		}
		return out
	}
	mixed := make([]layout, nin)
	for i := range mixed {
		mixed[i] = []layout{transposed, strided, offset}[i%3]
	}
	large := all(contiguous)
	large[0] = transposed
	sc := func(name string, shape []int, lay []layout, dst layout) scenario {
		return scenario{name: name, shape: shape, lay: lay, bcast: make([][]int, nin), dst: dst, inplace: -1}
	}
	list := []scenario{
		sc("contiguous", []int{3, 4}, all(contiguous), contiguous),
		sc("transposed", []int{3, 4}, all(transposed), contiguous),
		sc("offset", []int{3, 4}, all(offset), offset),
		sc("strided", []int{3, 4}, all(strided), strided),
		sc("transposed-dst", []int{3, 4}, all(contiguous), transposed),
		sc("mixed-3d", []int{2, 3, 5}, mixed, strided),
		sc("zero-size", []int{0, 4}, all(contiguous), contiguous),
		sc("zero-size-inner", []int{3, 0}, all(transposed), offset),
		sc("0-d", []int{}, all(offset), offset),
		// Large enough for backends that split work among threads.
		sc("large", []int{131, 300}, large, strided),
		sc("large-contiguous", []int{40000}, all(contiguous), contiguous),
	}
	for k := range nin {
		for _, b := range []struct {
			name  string
			src   []int
			shape []int
		}{{"row", []int{1, 4}, []int{3, 4}}, {"column", []int{3, 1}, []int{3, 4}}, {"scalar", []int{}, []int{3, 4}},
			{"row-odd", []int{1, 7}, []int{5, 7}}, {"row-3d", []int{8}, []int{2, 3, 8}}} {
			s := sc(fmt.Sprintf("broadcast-%s-%d", b.name, k), b.shape, all(contiguous), contiguous)
			s.bcast[k] = b.src
			list = append(list, s)
		}
		s := sc(fmt.Sprintf("inplace-%d", k), []int{3, 4}, all(strided), contiguous)
		s.inplace = k
		list = append(list, s)
		s = sc(fmt.Sprintf("inplace-transposed-%d", k), []int{4, 3}, all(transposed), contiguous)
		s.inplace = k
		list = append(list, s)
	}
	return list
}

// ewCase is an elementwise kernel to check.
type ewCase struct {
	in    []backend.DType // per input
	dst   backend.DType
	doms  [][]float64 // per input, the values to draw from
	ref   func(x []float64) float64
	run   func(dst backend.View, in []backend.View) error
	quick bool // only the basic scenarios
}

// largeDTypes are the input dtypes for which elementwise kernels are also
// checked on large views (native float, 16-bit float, integer and bool
// storage).
var largeDTypes = map[backend.DType]bool{backend.Float32: true, backend.Float16: true, backend.Int32: true, backend.Bool: true}

// elementwise checks c in every scenario.
func (h *harness) elementwise(t *testing.T, c ewCase) {
	t.Helper()
	for _, sc := range scenarios(len(c.in)) {
		if sc.inplace >= 0 && c.in[sc.inplace] != c.dst {
			continue
		}
		if c.quick && sc.name != "contiguous" && sc.name != "transposed" && sc.name != "broadcast-scalar-0" {
			continue
		}
		if strings.HasPrefix(sc.name, "large") && !largeDTypes[c.in[0]] {
			continue // keep the suite quick: one dtype of each storage kind
		}
		t.Run(sc.name, func(t *testing.T) { h.scenario(t, c, sc) })
	}
}

func (h *harness) scenario(t *testing.T, c ewCase, sc scenario) {
	n := backend.NumElements(sc.shape)
	ins := make([]backend.View, len(c.in))
	full := make([][]float64, len(c.in))
	for k, dt := range c.in {
		src := sc.shape
		if sc.bcast[k] != nil {
			src = sc.bcast[k]
		}
		vals := quantizeAll(dt, gen(c.doms[k], backend.NumElements(src), uint64(k+1)))
		if sc.bcast[k] != nil {
			ins[k] = broadcastView(t, h.dev, dt, src, sc.shape, vals)
			full[k] = expand(vals, src, sc.shape)
		} else {
			ins[k] = makeView(t, h.dev, dt, sc.shape, vals, sc.lay[k])
			full[k] = vals
		}
	}
	var dst backend.View
	if sc.inplace >= 0 {
		dst = ins[sc.inplace]
	} else {
		dst = makeView(t, h.dev, c.dst, sc.shape, filled(n, padValue), sc.dst)
	}
	h.ok(t, "kernel", h.call(func() error { return c.run(dst, ins) }))
	want := make([]float64, n)
	x := make([]float64, len(c.in))
	for i := range want {
		for k := range x {
			x[k] = full[k][i]
		}
		want[i] = Quantize(c.dst, c.ref(x))
	}
	expect(t, "result", c.dst, h.result(t, dst), want)
}

// Value domains, exactly representable in every float dtype.
var (
	domGeneral  = []float64{-3, -2.5, -1.5, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 1, 1.5, 2.5, 3}
	domPositive = []float64{0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6}
	domNonzero  = []float64{-3, -2.5, -1.5, -0.75, -0.5, 0.25, 0.5, 1, 1.5, 2.5, 3}
	domLog1p    = []float64{-0.75, -0.5, -0.25, 0, 0.25, 0.5, 1, 1.5, 2.5, 3, 5}
	domHalves   = []float64{-3.5, -2.5, -2.25, -1.5, -0.5, 0, 0.5, 0.75, 1, 1.5, 2.5, 3.75}
	domSpecial  = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1.5, 2}
	domInt      = []float64{-11, -7, -3, -2, -1, 0, 1, 2, 3, 5, 8, 11}
	domIntNZ    = []float64{-11, -7, -3, -2, -1, 1, 2, 3, 5, 8, 11}
	domSmall    = []float64{-1, 0, 0.5, 1, 2}
	domSmallInt = []float64{-1, 0, 1, 2, 3}
	domBool     = []float64{0, 1}
	domExponent = []float64{-2, -1, -0.5, 0, 0.5, 1, 2, 3}
	domBase     = []float64{-3, -2, -1, 0, 1, 2, 3}
	domIntExp   = []float64{0, 1, 2, 3}
)

func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0 // zero of either sign, and NaN, as PyTorch's sign gives
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ipow is integer power; negative exponents are not used by the suite.
func ipow(x, e float64) float64 {
	r := 1.0
	for range int(e) {
		r *= x
	}
	return r
}

type unaryCase struct {
	op    backend.UnaryOp
	param float64
	ref   func(x, p float64) float64
	dom   []float64
	ints  bool // also defined on int32 and int64
	bools bool // dst is bool; defined on every dtype
}

var unaryCases = []unaryCase{
	{op: backend.Neg, ref: func(x, _ float64) float64 { return -x }, dom: domGeneral, ints: true},
	{op: backend.Abs, ref: func(x, _ float64) float64 { return math.Abs(x) }, dom: domGeneral, ints: true},
	{op: backend.Sign, ref: func(x, _ float64) float64 { return sign(x) }, dom: domGeneral, ints: true},
	{op: backend.Exp, ref: func(x, _ float64) float64 { return math.Exp(x) }, dom: domGeneral},
	{op: backend.Log, ref: func(x, _ float64) float64 { return math.Log(x) }, dom: domPositive},
	{op: backend.Log1p, ref: func(x, _ float64) float64 { return math.Log1p(x) }, dom: domLog1p},
	{op: backend.Expm1, ref: func(x, _ float64) float64 { return math.Expm1(x) }, dom: domGeneral},
	{op: backend.Sqrt, ref: func(x, _ float64) float64 { return math.Sqrt(x) }, dom: domPositive},
	{op: backend.Rsqrt, ref: func(x, _ float64) float64 { return 1 / math.Sqrt(x) }, dom: domPositive},
	{op: backend.Square, ref: func(x, _ float64) float64 { return x * x }, dom: domGeneral, ints: true},
	{op: backend.Reciprocal, ref: func(x, _ float64) float64 { return 1 / x }, dom: domNonzero},
	{op: backend.Sin, ref: func(x, _ float64) float64 { return math.Sin(x) }, dom: domGeneral},
	{op: backend.Cos, ref: func(x, _ float64) float64 { return math.Cos(x) }, dom: domGeneral},
	{op: backend.Tanh, ref: func(x, _ float64) float64 { return math.Tanh(x) }, dom: domGeneral},
	{op: backend.Sigmoid, ref: func(x, _ float64) float64 { return sigmoid(x) }, dom: domGeneral},
	{op: backend.Relu, ref: func(x, _ float64) float64 { return math.Max(x, 0) }, dom: domGeneral, ints: true},
	{op: backend.Gelu, ref: func(x, _ float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }, dom: domGeneral},
	{op: backend.GeluTanh, ref: func(x, _ float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}, dom: domGeneral},
	{op: backend.GeluGrad, ref: func(x, _ float64) float64 {
		return 0.5*(1+math.Erf(x/math.Sqrt2)) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
	}, dom: domGeneral},
	{op: backend.Silu, ref: func(x, _ float64) float64 { return x * sigmoid(x) }, dom: domGeneral},
	{op: backend.Erf, ref: func(x, _ float64) float64 { return math.Erf(x) }, dom: domGeneral},
	{op: backend.Floor, ref: func(x, _ float64) float64 { return math.Floor(x) }, dom: domHalves, ints: true},
	{op: backend.Ceil, ref: func(x, _ float64) float64 { return math.Ceil(x) }, dom: domHalves, ints: true},
	{op: backend.Round, ref: func(x, _ float64) float64 { return math.RoundToEven(x) }, dom: domHalves, ints: true},
	{op: backend.PowScalar, param: 2, ref: math.Pow, dom: domGeneral, ints: true},
	{op: backend.PowScalar, param: 3, ref: math.Pow, dom: domGeneral, ints: true},
	{op: backend.PowScalar, param: 0.5, ref: math.Pow, dom: domPositive},
	{op: backend.PowScalar, param: -1.5, ref: math.Pow, dom: domPositive},
	{op: backend.LeakyRelu, param: 0.125, ref: func(x, p float64) float64 {
		if x < 0 {
			return p * x
		}
		return x
	}, dom: domGeneral},
	{op: backend.IsNaN, ref: func(x, _ float64) float64 { return b2f(x != x) }, dom: domSpecial, ints: true, bools: true},
	{op: backend.LogicalNot, ref: func(x, _ float64) float64 { return b2f(x == 0) }, dom: domSpecial, ints: true, bools: true},
}

func (h *harness) testUnary(t *testing.T) {
	for _, c := range unaryCases {
		dts := floatDTypes
		if c.ints {
			dts = numDTypes
		}
		if c.bools {
			dts = backend.DTypes
		}
		for _, dt := range dts {
			dom := c.dom
			if !dt.IsFloat() {
				dom = domInt
				if c.op == backend.PowScalar {
					dom = domBase
				}
			}
			dst := dt
			if c.bools {
				dst = backend.Bool
			}
			name := c.op.String()
			if c.op == backend.PowScalar || c.op == backend.LeakyRelu {
				name += fmt.Sprint("(", c.param, ")")
			}
			t.Run(name+"/"+dt.String(), func(t *testing.T) {
				h.elementwise(t, ewCase{
					in: []backend.DType{dt}, dst: dst, doms: [][]float64{dom},
					ref: func(x []float64) float64 { return c.ref(x[0], c.param) },
					run: func(d backend.View, in []backend.View) error {
						return h.dev.Unary(h.dev.DefaultStream(), c.op, d, in[0], c.param)
					},
				})
			})
		}
	}
}

type binaryCase struct {
	op       backend.BinaryOp
	ref      func(x, y float64) float64
	domA     []float64
	domB     []float64
	intRef   func(x, y float64) float64 // integer semantics, if different
	intDomA  []float64
	intDomB  []float64
	ints     bool
	bools    bool // also on bool inputs
	quickInt bool
}

func cmp(f func(x, y float64) bool) func(x, y float64) float64 {
	return func(x, y float64) float64 { return b2f(f(x, y)) }
}

func nanMax(x, y float64) float64 {
	if x != x || y != y {
		return math.NaN()
	}
	return math.Max(x, y)
}

func nanMin(x, y float64) float64 {
	if x != x || y != y {
		return math.NaN()
	}
	return math.Min(x, y)
}

var binaryCases = []binaryCase{
	{op: backend.Add, ref: func(x, y float64) float64 { return x + y }, domA: domGeneral, domB: domGeneral, ints: true},
	{op: backend.Sub, ref: func(x, y float64) float64 { return x - y }, domA: domGeneral, domB: domGeneral, ints: true},
	{op: backend.Mul, ref: func(x, y float64) float64 { return x * y }, domA: domGeneral, domB: domGeneral, ints: true},
	{op: backend.Div, ref: func(x, y float64) float64 { return x / y }, domA: domGeneral, domB: domNonzero, ints: true,
		intRef: func(x, y float64) float64 { return math.Trunc(x / y) }, intDomA: domInt, intDomB: domIntNZ},
	{op: backend.Pow, ref: math.Pow, domA: domPositive, domB: domExponent, ints: true,
		intRef: ipow, intDomA: domBase, intDomB: domIntExp},
	{op: backend.Maximum, ref: nanMax, domA: domGeneral, domB: domGeneral, ints: true},
	{op: backend.Minimum, ref: nanMin, domA: domGeneral, domB: domGeneral, ints: true},
	{op: backend.Eq, ref: cmp(func(x, y float64) bool { return x == y }), domA: domSmall, domB: domSmall, ints: true, bools: true},
	{op: backend.Ne, ref: cmp(func(x, y float64) bool { return x != y }), domA: domSmall, domB: domSmall, ints: true, bools: true},
	{op: backend.Lt, ref: cmp(func(x, y float64) bool { return x < y }), domA: domSmall, domB: domSmall, ints: true, bools: true},
	{op: backend.Le, ref: cmp(func(x, y float64) bool { return x <= y }), domA: domSmall, domB: domSmall, ints: true, bools: true},
	{op: backend.Gt, ref: cmp(func(x, y float64) bool { return x > y }), domA: domSmall, domB: domSmall, ints: true, bools: true},
	{op: backend.Ge, ref: cmp(func(x, y float64) bool { return x >= y }), domA: domSmall, domB: domSmall, ints: true, bools: true},
	{op: backend.LogicalAnd, ref: cmp(func(x, y float64) bool { return x != 0 && y != 0 }), domA: domSmall, domB: domSmall, ints: true, bools: true},
	{op: backend.LogicalOr, ref: cmp(func(x, y float64) bool { return x != 0 || y != 0 }), domA: domSmall, domB: domSmall, ints: true, bools: true},
	{op: backend.ReluBackward, ref: func(g, y float64) float64 {
		if y > 0 {
			return g
		}
		return 0
	}, domA: domGeneral, domB: domGeneral},
	{op: backend.GeluBackward, ref: func(g, x float64) float64 {
		return g * (0.5*(1+math.Erf(x/math.Sqrt2)) + x/math.Sqrt(2*math.Pi)*math.Exp(-0.5*x*x))
	}, domA: domGeneral, domB: domGeneral},
	{op: backend.AddRelu, ref: func(x, y float64) float64 { return math.Max(x+y, 0) }, domA: domGeneral, domB: domGeneral},
	{op: backend.AddGelu, ref: func(x, y float64) float64 { s := x + y; return 0.5 * s * (1 + math.Erf(s/math.Sqrt2)) }, domA: domGeneral, domB: domGeneral},
}

func (h *harness) testBinary(t *testing.T) {
	for _, c := range binaryCases {
		dts := floatDTypes
		if c.ints {
			dts = numDTypes
		}
		if c.bools {
			dts = backend.DTypes
		}
		for _, dt := range dts {
			ref, da, db := c.ref, c.domA, c.domB
			if !dt.IsFloat() {
				if c.intRef != nil {
					ref = c.intRef
				}
				if c.intDomA != nil {
					da, db = c.intDomA, c.intDomB
				} else if c.op.IsComparison() {
					da, db = domSmallInt, domSmallInt
				} else {
					da, db = domInt, domInt
				}
				if dt == backend.Bool {
					da, db = domBool, domBool
				}
			}
			dst := dt
			if c.op.IsComparison() {
				dst = backend.Bool
			}
			t.Run(c.op.String()+"/"+dt.String(), func(t *testing.T) {
				h.elementwise(t, ewCase{
					in: []backend.DType{dt, dt}, dst: dst, doms: [][]float64{da, db},
					ref: func(x []float64) float64 { return ref(x[0], x[1]) },
					run: func(d backend.View, in []backend.View) error {
						return h.dev.Binary(h.dev.DefaultStream(), c.op, d, in[0], in[1])
					},
				})
			})
		}
	}

	// NaN handling: Maximum and Minimum propagate NaN; comparisons with NaN
	// are false but Ne.
	nanA := []float64{math.NaN(), 1, math.NaN(), 2, math.Inf(1), -1}
	nanB := []float64{1, math.NaN(), math.NaN(), 3, 0, math.Inf(-1)}
	for _, dt := range floatDTypes {
		for _, c := range binaryCases {
			if c.op == backend.Div || c.op == backend.Pow || c.op >= backend.LogicalAnd {
				continue
			}
			t.Run("NaN/"+c.op.String()+"/"+dt.String(), func(t *testing.T) {
				a := NewView(t, h.dev, dt, []int{6}, nanA)
				b := NewView(t, h.dev, dt, []int{6}, nanB)
				dst := dt
				if c.op.IsComparison() {
					dst = backend.Bool
				}
				d := makeView(t, h.dev, dst, []int{6}, filled(6, padValue), contiguous)
				h.ok(t, "Binary", h.call(func() error { return h.dev.Binary(h.dev.DefaultStream(), c.op, d, a, b) }))
				want := make([]float64, 6)
				for i := range want {
					want[i] = Quantize(dst, c.ref(nanA[i], nanB[i]))
				}
				expect(t, "result", dst, h.result(t, d), want)
			})
		}
	}

	for _, dt := range intDTypes {
		t.Run("DivByZero/"+dt.String(), func(t *testing.T) {
			a := NewView(t, h.dev, dt, []int{3}, []float64{1, 2, 3})
			b := NewView(t, h.dev, dt, []int{3}, []float64{1, 0, 1})
			d := NewView(t, h.dev, dt, []int{3}, []float64{0, 0, 0})
			h.fails(t, "integer division by zero", h.call(func() error { return h.dev.Binary(h.dev.DefaultStream(), backend.Div, d, a, b) }))
		})
	}
}

func (h *harness) testScalar(t *testing.T) {
	type scalarCase struct {
		op       backend.BinaryOp
		s        float64
		reversed bool
	}
	var cases []scalarCase
	for _, op := range []backend.BinaryOp{backend.Add, backend.Sub, backend.Mul, backend.Div, backend.Pow,
		backend.Maximum, backend.Minimum, backend.Eq, backend.Lt, backend.Ge, backend.LogicalAnd} {
		for _, rev := range []bool{false, true} {
			cases = append(cases, scalarCase{op, 2, rev}, scalarCase{op, -1.5, rev}, scalarCase{op, 0, rev})
		}
	}
	for _, c := range cases {
		for _, dt := range numDTypes {
			bc := binaryCases[c.op] // binaryCases is in op order
			ref, dom := bc.ref, domGeneral
			if c.op.IsComparison() {
				dom = domSmall
			}
			if !dt.IsFloat() {
				if c.s != math.Trunc(c.s) {
					continue // a fractional scalar with integers is promoted by the caller
				}
				if bc.intRef != nil {
					ref = bc.intRef
				}
				dom = domInt
			}
			switch c.op {
			case backend.Div:
				if c.s == 0 && !c.reversed {
					continue
				}
				if c.reversed {
					dom = domNonzero
					if !dt.IsFloat() {
						dom = domIntNZ
					}
				}
			case backend.Pow:
				if c.reversed {
					dom = domExponent
					if c.s <= 0 {
						continue
					}
					if !dt.IsFloat() {
						dom = domIntExp
					}
				} else {
					dom = domPositive
					if !dt.IsFloat() {
						dom = domBase
						if c.s < 0 {
							continue
						}
					}
				}
			}
			dst := dt
			if c.op.IsComparison() {
				dst = backend.Bool
			}
			t.Run(fmt.Sprintf("%s(%v,reversed=%v)/%s", c.op, c.s, c.reversed, dt), func(t *testing.T) {
				s := Quantize(dt, c.s)
				h.elementwise(t, ewCase{
					in: []backend.DType{dt}, dst: dst, doms: [][]float64{dom},
					ref: func(x []float64) float64 {
						if c.reversed {
							return ref(s, x[0])
						}
						return ref(x[0], s)
					},
					run: func(d backend.View, in []backend.View) error {
						return h.dev.Scalar(h.dev.DefaultStream(), c.op, d, in[0], c.s, c.reversed)
					},
					quick: c.s != 2 || c.reversed && c.op != backend.Sub && c.op != backend.Div && c.op != backend.Pow,
				})
			})
		}
	}
	for _, dt := range intDTypes {
		t.Run("DivByZero/"+dt.String(), func(t *testing.T) {
			a := NewView(t, h.dev, dt, []int{3}, []float64{1, 2, 3})
			d := NewView(t, h.dev, dt, []int{3}, []float64{0, 0, 0})
			h.fails(t, "integer division by zero", h.call(func() error { return h.dev.Scalar(h.dev.DefaultStream(), backend.Div, d, a, 0, false) }))
		})
	}
}

func (h *harness) testWhere(t *testing.T) {
	for _, dt := range backend.DTypes {
		dom := domGeneral
		if dt.IsInt() {
			dom = domInt
		} else if dt == backend.Bool {
			dom = domBool
		}
		t.Run(dt.String(), func(t *testing.T) {
			h.elementwise(t, ewCase{
				in: []backend.DType{backend.Bool, dt, dt}, dst: dt, doms: [][]float64{domBool, dom, dom},
				ref: func(x []float64) float64 {
					if x[0] != 0 {
						return x[1]
					}
					return x[2]
				},
				run: func(d backend.View, in []backend.View) error {
					return h.dev.Where(h.dev.DefaultStream(), d, in[0], in[1], in[2])
				},
			})
		})
	}
}

func (h *harness) testCopy(t *testing.T) {
	dom := []float64{-2.75, -1, 0, 0.5, 1.5, 3, 100, -0.25, 7.5, 2, -3.5, 1}
	for _, from := range backend.DTypes {
		for _, to := range backend.DTypes {
			t.Run(from.String()+"->"+to.String(), func(t *testing.T) {
				h.elementwise(t, ewCase{
					in: []backend.DType{from}, dst: to, doms: [][]float64{dom},
					ref: func(x []float64) float64 { return x[0] }, // Quantize truncates and tests nonzero
					run: func(d backend.View, in []backend.View) error { return h.dev.Copy(h.dev.DefaultStream(), d, in[0]) },
				})
			})
		}
		if from.IsFloat() {
			t.Run(from.String()+"->bool/NaN", func(t *testing.T) {
				vals := []float64{math.NaN(), 0, math.Copysign(0, -1), math.Inf(-1)}
				src := NewView(t, h.dev, from, []int{4}, vals)
				d := makeView(t, h.dev, backend.Bool, []int{4}, filled(4, 0), offset)
				h.ok(t, "Copy", h.call(func() error { return h.dev.Copy(h.dev.DefaultStream(), d, src) }))
				expect(t, "result", backend.Bool, h.result(t, d), []float64{1, 0, 0, 1})
			})
		}
	}
}

// reduceRef reduces vals (row-major over shape) over axes with f, which
// receives each output's inputs in row-major order.
func reduceRef(vals []float64, shape, axes []int, f func([]float64) float64) []float64 {
	red := make([]bool, len(shape))
	for _, a := range axes {
		red[a] = true
	}
	outShape := make([]int, len(shape))
	for i, n := range shape {
		outShape[i] = n
		if red[i] {
			outShape[i] = 1
		}
	}
	groups := make([][]float64, backend.NumElements(outShape))
	os := backend.ContiguousStrides(outShape)
	idx := make([]int, len(shape))
	for _, v := range vals {
		o := 0
		for d, i := range idx {
			if !red[d] {
				o += i * os[d]
			}
		}
		groups[o] = append(groups[o], v)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	out := make([]float64, len(groups))
	for i, g := range groups {
		out[i] = f(g)
	}
	return out
}

func reducedShape(shape, axes []int) []int {
	out := append([]int{}, shape...)
	for _, a := range axes {
		out[a] = 1
	}
	return out
}

var reduceRefs = map[backend.ReduceOp]func([]float64) float64{
	backend.Sum: func(g []float64) float64 {
		s := 0.0
		for _, x := range g {
			s += x
		}
		return s
	},
	backend.Prod: func(g []float64) float64 {
		p := 1.0
		for _, x := range g {
			p *= x
		}
		return p
	},
	backend.Max: func(g []float64) float64 {
		m := math.Inf(-1)
		for _, x := range g {
			m = nanMax(m, x)
		}
		return m
	},
	backend.Min: func(g []float64) float64 {
		m := math.Inf(1)
		for _, x := range g {
			m = nanMin(m, x)
		}
		return m
	},
	backend.ArgMax: func(g []float64) float64 { return argRef(g, func(x, y float64) bool { return x > y }) },
	backend.ArgMin: func(g []float64) float64 { return argRef(g, func(x, y float64) bool { return x < y }) },
}

// argRef returns the index of the first element that no other beats, NaN
// beating everything (like PyTorch).
func argRef(g []float64, better func(x, y float64) bool) float64 {
	best := 0
	for i, x := range g {
		if g[best] != g[best] {
			break
		}
		if x != x || better(x, g[best]) {
			best = i
		}
	}
	return float64(best)
}

// reduceCase checks one reduction of src (laid out as lay, or broadcast
// from bcast) into a dst laid out as dlay.
func (h *harness) reduceCase(t *testing.T, op backend.ReduceOp, dt backend.DType, shape, axes []int, vals []float64, lay layout, bcast []int, dlay layout) {
	t.Helper()
	ddt := dt
	if op == backend.ArgMax || op == backend.ArgMin {
		ddt = backend.Int64
	}
	h.reduceCaseTo(t, op, dt, ddt, shape, axes, vals, lay, bcast, dlay)
}

// reduceCaseTo is reduceCase with a destination of dtype ddt.
func (h *harness) reduceCaseTo(t *testing.T, op backend.ReduceOp, dt, ddt backend.DType, shape, axes []int, vals []float64, lay layout, bcast []int, dlay layout) {
	t.Helper()
	var src backend.View
	full := vals
	if bcast != nil {
		src = broadcastView(t, h.dev, dt, bcast, shape, vals)
		full = expand(vals, bcast, shape)
	} else {
		src = makeView(t, h.dev, dt, shape, vals, lay)
	}
	dshape := reducedShape(shape, axes)
	d := makeView(t, h.dev, ddt, dshape, filled(backend.NumElements(dshape), padValue), dlay)
	h.ok(t, "Reduce", h.call(func() error { return h.dev.Reduce(h.dev.DefaultStream(), op, d, src, axes) }))
	want := quantizeAll(ddt, reduceRef(full, shape, axes, reduceRefs[op]))
	expect(t, "result", ddt, h.result(t, d), want)
}

func (h *harness) testReduce(t *testing.T) {
	shape := []int{2, 3, 4}
	axesSets := [][]int{{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}}
	type srcLayout struct {
		name  string
		lay   layout
		bcast []int
	}
	layouts := []srcLayout{{"contiguous", contiguous, nil}, {"transposed", transposed, nil}, {"offset", offset, nil},
		{"strided", strided, nil}, {"broadcast", 0, []int{2, 1, 4}}}
	for _, op := range []backend.ReduceOp{backend.Sum, backend.Prod, backend.Max, backend.Min} {
		for _, dt := range numDTypes {
			dom := domGeneral
			switch {
			case op == backend.Prod && dt.IsFloat():
				dom = []float64{1, -1, 2, 0.5, -2, -0.5, 1, 1.5}
			case op == backend.Prod:
				dom = []float64{1, -1, 2, -1, 1, 1, 3}
			case !dt.IsFloat():
				dom = domInt
			}
			for _, axes := range axesSets {
				for li, l := range layouts {
					dlay := []layout{contiguous, strided, offset}[li%3]
					t.Run(fmt.Sprintf("%s/%s/axes%v/%s", op, dt, axes, l.name), func(t *testing.T) {
						srcShape := shape
						if l.bcast != nil {
							srcShape = l.bcast
						}
						vals := quantizeAll(dt, gen(dom, backend.NumElements(srcShape), 7))
						h.reduceCase(t, op, dt, shape, axes, vals, l.lay, l.bcast, dlay)
					})
				}
			}
		}
	}

	// Max and Min propagate NaN.
	for _, dt := range floatDTypes {
		for _, op := range []backend.ReduceOp{backend.Max, backend.Min} {
			for _, axes := range [][]int{{0}, {1}, {0, 1}} {
				t.Run(fmt.Sprintf("NaN/%s/%s/axes%v", op, dt, axes), func(t *testing.T) {
					vals := []float64{1, math.NaN(), 3, -4, 5, 6, math.Inf(-1), 8, 9, 10, math.NaN(), -12}
					h.reduceCase(t, op, dt, []int{3, 4}, axes, vals, contiguous, nil, contiguous)
				})
			}
		}
	}

	// Reductions over no elements: Sum gives 0, Prod 1, Max and Min fail.
	for _, dt := range numDTypes {
		t.Run("empty/"+dt.String(), func(t *testing.T) {
			for _, op := range []backend.ReduceOp{backend.Sum, backend.Prod} {
				h.reduceCase(t, op, dt, []int{0, 3}, []int{0}, nil, contiguous, nil, strided)
				h.reduceCase(t, op, dt, []int{3, 0}, []int{1}, nil, contiguous, nil, contiguous)
				h.reduceCase(t, op, dt, []int{3, 0}, []int{0}, nil, contiguous, nil, contiguous)
				h.reduceCase(t, op, dt, []int{0}, []int{0}, nil, contiguous, nil, contiguous)
			}
			for _, op := range []backend.ReduceOp{backend.Max, backend.Min, backend.ArgMax, backend.ArgMin} {
				ddt := dt
				if op >= backend.ArgMax {
					ddt = backend.Int64
				}
				src := NewView(t, h.dev, dt, []int{0, 3}, nil)
				d := NewView(t, h.dev, ddt, []int{1, 3}, []float64{0, 0, 0})
				h.fails(t, op.String()+" over no elements", h.call(func() error { return h.dev.Reduce(h.dev.DefaultStream(), op, d, src, []int{0}) }))
			}
		})
	}

	// 0-d views.
	for _, dt := range numDTypes {
		for _, op := range []backend.ReduceOp{backend.Sum, backend.Prod, backend.Max, backend.Min} {
			t.Run(fmt.Sprintf("0-d/%s/%s", op, dt), func(t *testing.T) {
				h.reduceCase(t, op, dt, []int{}, []int{}, []float64{5}, offset, nil, offset)
			})
		}
	}

	// Long reductions, which backends split: they must still be accurate.
	t.Run("large/float32", func(t *testing.T) {
		n := 200003
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = Quantize(backend.Float32, float64(i%1000)/1000+0.001)
		}
		h.reduceCase(t, backend.Sum, backend.Float32, []int{n}, []int{0}, vals, contiguous, nil, contiguous)
		h.reduceCase(t, backend.Max, backend.Float32, []int{n}, []int{0}, vals, strided, nil, contiguous)
		h.reduceCase(t, backend.Sum, backend.Float32, []int{n / 7, 7}, []int{0}, vals[:n/7*7], contiguous, nil, strided)
		h.reduceCase(t, backend.Sum, backend.Float32, []int{7, n / 7}, []int{1}, vals[:n/7*7], transposed, nil, contiguous)
	})
	for _, c := range []struct {
		dt backend.DType
		n  int
	}{{backend.Float16, 4096}, {backend.BFloat16, 1024}} {
		t.Run("accumulation/"+c.dt.String(), func(t *testing.T) {
			// Sums past the point where adding 1 in the dtype itself would
			// stop changing the total.
			h.reduceCase(t, backend.Sum, c.dt, []int{c.n}, []int{0}, filled(c.n, 1), contiguous, nil, contiguous)
		})
	}

	// Sum and Prod of the 16-bit floats into float32: the accumulator
	// itself, where the 16-bit result would overflow (float16) or lose
	// digits, over long rows (a block of threads per row on a GPU), long
	// columns (a thread per output) and chunked reductions.
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		t.Run("widening/"+dt.String(), func(t *testing.T) {
			const n = 1 << 20
			h.reduceCaseTo(t, backend.Sum, dt, backend.Float32, []int{n}, []int{0}, filled(n, 1), contiguous, nil, contiguous)
			hundredths := make([]float64, 100003)
			for i := range hundredths {
				hundredths[i] = Quantize(dt, float64(i%100+1)/100)
			}
			h.reduceCaseTo(t, backend.Sum, dt, backend.Float32, []int{len(hundredths)}, []int{0}, hundredths, strided, nil, offset)
			h.reduceCaseTo(t, backend.Sum, dt, backend.Float32, []int{3, 70000}, []int{1}, filled(3*70000, 1), transposed, nil, strided)
			h.reduceCaseTo(t, backend.Sum, dt, backend.Float32, []int{70000, 3}, []int{0}, filled(3*70000, 1), contiguous, nil, contiguous)
			h.reduceCaseTo(t, backend.Sum, dt, backend.Float32, []int{2, 3, 4}, []int{0, 2}, quantizeAll(dt, gen(domGeneral, 24, 5)), contiguous, nil, contiguous)
			h.reduceCaseTo(t, backend.Sum, dt, backend.Float32, []int{0, 3}, []int{0}, nil, contiguous, nil, contiguous)
			// Products of about 2^21, past float16's 65504, exact in float32.
			twos := filled(4096, 1)
			for i := 0; i < len(twos); i += 97 {
				twos[i] = 2
			}
			h.reduceCaseTo(t, backend.Prod, dt, backend.Float32, []int{2048, 2}, []int{0}, twos, contiguous, nil, contiguous)
			h.reduceCaseTo(t, backend.Prod, dt, backend.Float32, []int{2, 2048}, []int{1}, twos, contiguous, nil, strided)
			h.reduceCaseTo(t, backend.Prod, dt, backend.Float32, []int{2, 3, 4}, []int{1}, quantizeAll(dt, gen([]float64{1, -1, 2, 0.5, -2}, 24, 3)), transposed, nil, contiguous)
		})
	}
}

func (h *harness) testArgReduce(t *testing.T) {
	for _, op := range []backend.ReduceOp{backend.ArgMax, backend.ArgMin} {
		for _, dt := range numDTypes {
			// Rows with ties: the first index wins.
			tie := []float64{1, 5, 5, 2, 3, -1, 4, -1, 7, 7, 7, 7}
			for _, axis := range []int{0, 1} {
				for i, lay := range []layout{contiguous, transposed, strided} {
					dlay := []layout{contiguous, strided, offset}[i]
					t.Run(fmt.Sprintf("%s/%s/ties/axis%d/%s", op, dt, axis, lay), func(t *testing.T) {
						h.reduceCase(t, op, dt, []int{3, 4}, []int{axis}, tie, lay, nil, dlay)
					})
				}
			}
			for axis := range 3 {
				t.Run(fmt.Sprintf("%s/%s/3d/axis%d", op, dt, axis), func(t *testing.T) {
					dom := domGeneral
					if !dt.IsFloat() {
						dom = domInt
					}
					vals := quantizeAll(dt, gen(dom, 24, 3))
					h.reduceCase(t, op, dt, []int{2, 3, 4}, []int{axis}, vals, transposed, nil, offset)
				})
			}
		}
		for _, dt := range floatDTypes {
			t.Run(fmt.Sprintf("%s/%s/NaN", op, dt), func(t *testing.T) {
				vals := []float64{1, math.NaN(), 7, math.NaN(), -3, 2, 9, 0, math.NaN(), 1, 1, 1}
				h.reduceCase(t, op, dt, []int{3, 4}, []int{1}, vals, contiguous, nil, contiguous)
				h.reduceCase(t, op, dt, []int{3, 4}, []int{0}, vals, transposed, nil, contiguous)
				h.reduceCase(t, op, dt, []int{3, 4}, []int{0}, vals, contiguous, nil, strided)
			})
		}
		t.Run(op.String()+"/large", func(t *testing.T) {
			n := 100000
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = float64(i % 97)
			}
			vals[20000], vals[90000] = 1000, 1000
			vals[30000], vals[80000] = -1000, -1000
			h.reduceCase(t, op, backend.Float32, []int{n}, []int{0}, vals, contiguous, nil, contiguous)
			h.reduceCase(t, op, backend.Int64, []int{n}, []int{0}, vals, strided, nil, contiguous)
			vals[70000] = math.NaN()
			h.reduceCase(t, op, backend.Float32, []int{n}, []int{0}, vals, contiguous, nil, contiguous)
			h.reduceCase(t, op, backend.Float64, []int{2, n / 2}, []int{1}, vals, transposed, nil, contiguous)
		})
	}
}
