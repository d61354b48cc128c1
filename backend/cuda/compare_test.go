package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/backend/backendtest"
	_ "github.com/vramgo/vram/backend/cpu"
)

// The comparison suite runs every kernel on the GPU and on the CPU backend
// (the reference meaning of each op) over fresh random inputs in many
// layouts, and compares the results within each dtype's tolerance. Outputs
// are poisoned first; NaN matches only NaN.

func cpuDevice(t testing.TB) backend.Device {
	b, ok := backend.Lookup("cpu")
	if !ok {
		t.Fatal("no cpu backend")
	}
	d, err := b.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// lay is how a test operand lies in its buffer.
type lay int

const (
	layContig lay = iota
	layTransposed
	layStrided // every other element, after one of padding
	layBcast   // stride 0 along the first dimension of size > 1
	// layChannelsLast is a dense 4-D [N, C, H, W] operand with strides
	// [H·W·C, 1, W·C, C] (NHWC); not in lays, as it needs 4-D shapes.
	layChannelsLast
)

var lays = []lay{layContig, layTransposed, layStrided, layBcast}

func (l lay) String() string {
	return [...]string{"contig", "transposed", "strided", "bcast", "channels_last"}[l]
}

// twin holds one operand on both devices.
type twin struct{ g, c backend.View }

// pair runs each check on the GPU and the CPU.
type pair struct {
	t   *testing.T
	g   *Device
	c   backend.Device
	rng *rand.Rand
}

// place allocates an operand of shape and layout on both devices holding
// vals (row-major over shape), and pads its buffer with pad.
func (p *pair) place(dt backend.DType, shape []int, l lay, vals []float64, pad float64) twin {
	t := p.t
	n := backend.NumElements(shape)
	nd := len(shape)
	strides := make([]int, nd)
	off, elems := 0, max(n, 1)
	switch l {
	case layTransposed:
		acc := 1
		for i := range nd {
			strides[i] = acc
			acc *= max(shape[i], 1)
		}
	case layStrided:
		copy(strides, backend.ContiguousStrides(shape))
		for i := range strides {
			strides[i] *= 2
		}
		off, elems = 1, 2*n+2
	case layChannelsLast:
		if nd != 4 {
			t.Fatalf("channels-last operand of shape %v: want 4-D", shape)
		}
		c, h, w := shape[1], shape[2], shape[3]
		copy(strides, []int{h * w * c, 1, w * c, c})
	default:
		copy(strides, backend.ContiguousStrides(shape))
	}
	if l == layBcast {
		for i, s := range shape {
			if s > 1 {
				// Elements along dimension i repeat: the stored tensor is
				// shape with that dimension 1.
				for j := range i {
					strides[j] /= s
				}
				strides[i] = 0
				elems = max(n/s, 1)
				// vals must repeat too: keep the first slice.
				sub := backend.ContiguousStrides(shape)
				for k := range vals {
					idx := (k / sub[i] % s) * sub[i]
					vals[k] = vals[k-idx]
				}
				break
			}
		}
	}
	host := make([]float64, elems)
	for i := range host {
		host[i] = pad
	}
	v := backend.View{DType: dt, Shape: shape, Strides: strides, Offset: off}
	i := 0
	eachOffset(v, func(o int) { host[o] = vals[i]; i++ })
	out := twin{}
	for k, dev := range []backend.Device{p.g, p.c} {
		buf, err := dev.Alloc(int64(elems*dt.Size()), dev.DefaultStream(), "test")
		if err != nil {
			t.Fatal(err)
		}
		whole := backend.View{Buf: buf, DType: dt, Shape: []int{elems}, Strides: []int{1}}
		if err := dev.CopyFromHost(dev.DefaultStream(), whole, backendtest.Encode(dt, host)); err != nil {
			t.Fatal(err)
		}
		vv := v
		vv.Buf = buf
		vv.Shape = append([]int(nil), shape...)
		vv.Strides = append([]int(nil), strides...)
		if k == 0 {
			out.g = vv
		} else {
			out.c = vv
		}
	}
	return out
}

func eachOffset(v backend.View, fn func(off int)) {
	n := v.NumElements()
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

// read returns v's elements in row-major order.
func read(t testing.TB, dev backend.Device, v backend.View) []float64 {
	n := int(v.Buf.Bytes()) / v.DType.Size()
	raw := make([]byte, n*v.DType.Size())
	if err := dev.CopyToHost(dev.DefaultStream(), raw, backend.View{Buf: v.Buf, DType: v.DType, Shape: []int{n}, Strides: []int{1}}); err != nil {
		t.Fatal(err)
	}
	all := backendtest.Decode(v.DType, raw)
	out := make([]float64, 0, v.NumElements())
	eachOffset(v, func(o int) { out = append(out, all[o]) })
	return out
}

// poison is the value outputs hold before a kernel runs.
func poison(dt backend.DType) float64 {
	if dt.IsFloat() {
		return math.NaN()
	}
	if dt == backend.Bool {
		return 1
	}
	return 77
}

// output allocates a poisoned output on both devices.
func (p *pair) output(dt backend.DType, shape []int, l lay) twin {
	if l == layBcast {
		l = layContig
	}
	n := backend.NumElements(shape)
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = poison(dt)
	}
	return p.place(dt, shape, l, vals, poison(dt))
}

// random draws n values of dtype dt from [lo, hi] (integers: rounded).
func (p *pair) random(dt backend.DType, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		x := lo + (hi-lo)*p.rng.Float64()
		switch {
		case dt == backend.Bool:
			x = float64(p.rng.IntN(2))
		case !dt.IsFloat():
			x = math.Round(x)
		}
		v[i] = backendtest.Quantize(dt, x)
	}
	return v
}

// run runs fn on both devices (GPU first) and synchronizes. It returns the
// GPU's error after checking that the CPU agrees on failing.
func (p *pair) run(name string, fn func(dev backend.Device, side int) error) bool {
	p.t.Helper()
	gerr := fn(p.g, 0)
	if gerr == nil {
		gerr = p.g.Synchronize()
	}
	cerr := fn(p.c, 1)
	if (gerr == nil) != (cerr == nil) {
		p.t.Errorf("%s: GPU error %v, CPU error %v", name, gerr, cerr)
		return false
	}
	return gerr == nil
}

// tol returns the relative and absolute tolerance of dtype dt.
func tol(dt backend.DType) (float64, float64) {
	switch dt {
	case backend.Float64:
		return 1e-12, 1e-12
	case backend.Float32:
		return 1e-6, 1e-6
	case backend.Float16:
		return 1e-3, 1e-3
	case backend.BFloat16:
		return 1e-2, 1e-2
	}
	return 0, 0
}

// compare checks the GPU's output against the CPU's. mag, when not nil,
// scales the tolerance per element (sums of absolute values).
func (p *pair) compare(name string, out twin, rtol, atol float64, mag []float64) {
	p.t.Helper()
	g, c := read(p.t, p.g, out.g), read(p.t, p.c, out.c)
	bad := 0
	for i := range c {
		want, got := c[i], g[i]
		ok := false
		switch {
		case math.IsNaN(want):
			ok = math.IsNaN(got)
		case math.IsInf(want, 0):
			ok = got == want
		default:
			bound := atol + rtol*math.Abs(want)
			if mag != nil {
				bound = atol + rtol*mag[i]
			}
			ok = math.Abs(got-want) <= bound
		}
		if !ok {
			if bad < 3 {
				p.t.Errorf("%s: element %d: GPU %v, CPU %v", name, i, got, want)
			}
			bad++
		}
	}
	if bad > 3 {
		p.t.Errorf("%s: %d of %d elements differ", name, bad, len(c))
	}
}

var cmpShapes = [][]int{{}, {0, 5}, {7}, {33, 65}, {4, 9, 10}, {17, 1, 31, 3}, {1<<16 + 3}}

func newPair(t *testing.T) *pair {
	d := gpu(t, 0)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return &pair{t: t, g: d, c: cpuDevice(t), rng: rand.New(rand.NewPCG(seed, seed>>1))}
}

// domain returns the input range of a unary op.
func unaryDomain(op backend.UnaryOp) (float64, float64) {
	switch op {
	case backend.Log, backend.Sqrt, backend.Rsqrt, backend.PowScalar:
		return 0.05, 5
	case backend.Log1p:
		return -0.9, 5
	}
	return -4, 4
}

func TestCompareElementwise(t *testing.T) {
	p := newPair(t)
	for op := backend.UnaryOp(0); op <= backend.LogicalNot; op++ {
		for _, dt := range backend.DTypes {
			if !backend.UnaryDefined(op, dt) {
				continue
			}
			param := 0.0
			switch op {
			case backend.PowScalar:
				param = 2.5
				if !dt.IsFloat() {
					param = 3
				}
			case backend.LeakyRelu:
				param = 0.1
			}
			ddt := dt
			if op == backend.IsNaN || op == backend.LogicalNot {
				ddt = backend.Bool
			}
			for si, shape := range cmpShapes {
				l := lays[si%len(lays)]
				lo, hi := unaryDomain(op)
				if !dt.IsFloat() {
					lo, hi = -9, 9
				}
				x := p.place(dt, shape, l, p.random(dt, backend.NumElements(shape), lo, hi), 0)
				out := p.output(ddt, shape, lays[(si+1)%len(lays)])
				name := fmt.Sprintf("%s/%s/%v/%s", op, dt, shape, l)
				if p.run(name, func(dev backend.Device, s int) error {
					return dev.Unary(dev.DefaultStream(), op, pick(out, s), pick(x, s), param)
				}) {
					r, a := tol(ddt)
					p.compare(name, out, r, a, nil)
				}
			}
		}
	}
	for op := range backend.BinaryOp(backend.NumBinaryOps) {
		for _, dt := range backend.DTypes {
			if !backend.BinaryDefined(op, dt) {
				continue
			}
			ddt := dt
			if op.IsComparison() {
				ddt = backend.Bool
			}
			for si, shape := range cmpShapes {
				n := backend.NumElements(shape)
				la, lb := lays[si%len(lays)], lays[(si+2)%len(lays)]
				alo, ahi, blo, bhi := -4.0, 4.0, -4.0, 4.0
				switch {
				case op == backend.Pow && dt.IsFloat():
					alo, blo, bhi = 0.1, -2, 2
				case op == backend.Pow:
					alo, ahi, blo, bhi = -3, 3, 0, 5
				case op.IsComparison():
					alo, ahi, blo, bhi = -1, 1, -1, 1
				}
				av := p.random(dt, n, alo, ahi)
				bv := p.random(dt, n, blo, bhi)
				if op == backend.Div {
					for i := range bv {
						if bv[i] == 0 {
							bv[i] = 1
						}
					}
				}
				a := p.place(dt, shape, la, av, 0)
				b := p.place(dt, shape, lb, bv, 0)
				out := p.output(ddt, shape, lays[(si+1)%len(lays)])
				name := fmt.Sprintf("%s/%s/%v/%s,%s", op, dt, shape, la, lb)
				if p.run(name, func(dev backend.Device, s int) error {
					return dev.Binary(dev.DefaultStream(), op, pick(out, s), pick(a, s), pick(b, s))
				}) {
					r, at := tol(ddt)
					p.compare(name, out, r, at, nil)
				}
				scalars := []float64{2, -1.5}
				if dt == backend.Int64 && (op == backend.Add || op == backend.Sub || op == backend.Eq || op == backend.Lt) {
					// Beyond 2^62 but an int64: computed exactly in int64.
					scalars = append(scalars, 1<<62+1024)
				}
				for _, sc := range scalars {
					for _, rev := range []bool{false, true} {
						if op == backend.Pow && (rev || !dt.IsFloat() && sc < 0) {
							continue
						}
						if op == backend.Div && rev && !dt.IsFloat() {
							continue // zeros in a
						}
						out := p.output(ddt, shape, layContig)
						name := fmt.Sprintf("scalar %s(%v,%v)/%s/%v", op, sc, rev, dt, shape)
						if p.run(name, func(dev backend.Device, s int) error {
							return dev.Scalar(dev.DefaultStream(), op, pick(out, s), pick(a, s), sc, rev)
						}) {
							r, at := tol(ddt)
							p.compare(name, out, r, at, nil)
						}
					}
				}
			}
		}
	}
	for _, dt := range backend.DTypes {
		for si, shape := range cmpShapes {
			n := backend.NumElements(shape)
			c := p.place(backend.Bool, shape, lays[si%4], p.random(backend.Bool, n, 0, 1), 0)
			a := p.place(dt, shape, lays[(si+1)%4], p.random(dt, n, -50, 50), 0)
			b := p.place(dt, shape, lays[(si+3)%4], p.random(dt, n, -50, 50), 0)
			out := p.output(dt, shape, lays[(si+2)%4])
			name := fmt.Sprintf("where/%s/%v", dt, shape)
			if p.run(name, func(dev backend.Device, s int) error {
				return dev.Where(dev.DefaultStream(), pick(out, s), pick(c, s), pick(a, s), pick(b, s))
			}) {
				p.compare(name, out, 0, 0, nil)
			}
			for _, to := range backend.DTypes {
				out := p.output(to, shape, lays[(si+2)%4])
				name := fmt.Sprintf("copy/%s->%s/%v", dt, to, shape)
				if p.run(name, func(dev backend.Device, s int) error { return dev.Copy(dev.DefaultStream(), pick(out, s), pick(a, s)) }) {
					p.compare(name, out, 0, 0, nil)
				}
			}
			for _, v := range []float64{0.1, -2.75, math.NaN(), 1e6} {
				out := p.output(dt, shape, lays[si%4])
				name := fmt.Sprintf("fill/%s/%v/%v", dt, v, shape)
				if p.run(name, func(dev backend.Device, s int) error { return dev.Fill(dev.DefaultStream(), pick(out, s), v) }) {
					p.compare(name, out, 0, 0, nil)
				}
			}
		}
	}
}

func pick(w twin, side int) backend.View {
	if side == 0 {
		return w.g
	}
	return w.c
}

func TestCompareReduce(t *testing.T) {
	p := newPair(t)
	cases := []struct {
		shape []int
		axes  [][]int
	}{
		{[]int{37, 1000}, [][]int{{0}, {1}, {0, 1}}},
		{[]int{3, 5, 7, 11}, [][]int{{1, 3}, {0, 2}, {3}}},
		{[]int{5, 300001}, [][]int{{1}}},
		{[]int{70000, 3}, [][]int{{0}}},
		{[]int{0, 4}, [][]int{{1}}},
	}
	for ci, c := range cases {
		for _, dt := range backend.DTypes {
			for _, op := range []backend.ReduceOp{backend.Sum, backend.Prod, backend.Max, backend.Min, backend.ArgMax, backend.ArgMin} {
				for _, axes := range c.axes {
					if (op == backend.ArgMax || op == backend.ArgMin) && len(axes) != 1 {
						continue
					}
					n := backend.NumElements(c.shape)
					lo, hi := -3.0, 3.0
					if op == backend.Prod {
						lo, hi = 0.995, 1.005
						if !dt.IsFloat() {
							lo, hi = -1, 1
						}
					}
					vals := p.random(dt, n, lo, hi)
					l := lays[ci%3]
					x := p.place(dt, c.shape, l, vals, 0)
					dshape := append([]int(nil), c.shape...)
					for _, a := range axes {
						dshape[a] = 1
					}
					ddt := dt
					if op >= backend.ArgMax {
						ddt = backend.Int64
					}
					out := p.output(ddt, dshape, layStrided)
					name := fmt.Sprintf("%s/%s/%v/axes%v/%s", op, dt, c.shape, axes, l)
					if !p.run(name, func(dev backend.Device, s int) error {
						return dev.Reduce(dev.DefaultStream(), op, pick(out, s), pick(x, s), axes)
					}) {
						continue
					}
					r, a := tol(ddt)
					var mag []float64
					if op == backend.Sum && dt.IsFloat() {
						// Scale by the sum of absolute values: float32
						// accumulation on the GPU, float64 on the CPU.
						abs := make([]float64, n)
						for i, v := range vals {
							abs[i] = math.Abs(v)
						}
						mag = reduceSums(c.shape, axes, abs)
						if dt == backend.Float32 {
							r = 1e-5
						}
					}
					if op == backend.Prod && dt == backend.Float32 {
						r = 1e-4
					}
					p.compare(name, out, r, a, mag)
				}
			}
		}
	}
}

// TestCompareReduceWidening compares Sum and Prod of float16 and bfloat16
// into a float32 destination (the accumulator, not rounded to 16 bits) with
// the CPU's, over sizes where a 16-bit result would overflow or a 16-bit
// accumulator stall.
func TestCompareReduceWidening(t *testing.T) {
	p := newPair(t)
	cases := []struct {
		shape []int
		axes  [][]int
	}{
		{[]int{1 << 20}, [][]int{{0}}},
		{[]int{37, 1000}, [][]int{{0}, {1}, {0, 1}}},
		{[]int{3, 5, 7, 11}, [][]int{{1, 3}, {0, 2}}},
		{[]int{5, 300001}, [][]int{{1}}},
		{[]int{70000, 3}, [][]int{{0}}},
		{[]int{0, 4}, [][]int{{0}}},
	}
	for ci, c := range cases {
		for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
			for _, op := range []backend.ReduceOp{backend.Sum, backend.Prod} {
				for _, axes := range c.axes {
					n := backend.NumElements(c.shape)
					lo, hi := 0.0, 2.0
					if op == backend.Prod {
						lo, hi = 0.995, 1.005
					}
					vals := p.random(dt, n, lo, hi)
					l := lays[ci%3]
					x := p.place(dt, c.shape, l, vals, 0)
					dshape := append([]int(nil), c.shape...)
					for _, a := range axes {
						dshape[a] = 1
					}
					out := p.output(backend.Float32, dshape, layStrided)
					name := fmt.Sprintf("%s/%s->float32/%v/axes%v/%s", op, dt, c.shape, axes, l)
					if !p.run(name, func(dev backend.Device, s int) error {
						return dev.Reduce(dev.DefaultStream(), op, pick(out, s), pick(x, s), axes)
					}) {
						continue
					}
					var mag []float64
					r := 1e-4 // float32 products of up to 300001 factors
					if op == backend.Sum {
						mag, r = reduceSums(c.shape, axes, vals), 1e-5 // the values are positive
					}
					p.compare(name, out, r, 1e-6, mag)
				}
			}
		}
	}
}

// reduceSums sums vals (row-major over shape) over axes.
func reduceSums(shape, axes []int, vals []float64) []float64 {
	red := make([]bool, len(shape))
	for _, a := range axes {
		red[a] = true
	}
	oshape := append([]int(nil), shape...)
	for _, a := range axes {
		oshape[a] = 1
	}
	ost := backend.ContiguousStrides(oshape)
	out := make([]float64, backend.NumElements(oshape))
	idx := make([]int, len(shape))
	for _, v := range vals {
		o := 0
		for d, i := range idx {
			if !red[d] {
				o += i * ost[d]
			}
		}
		out[o] += v
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

func TestCompareMatMul(t *testing.T) {
	p := newPair(t)
	cases := []struct {
		b, m, k, n int
		la, lb     lay
	}{
		{1, 128, 256, 64, layContig, layContig},
		{3, 65, 130, 67, layTransposed, layContig},
		{2, 33, 17, 129, layContig, layStrided},
		{4, 16, 64, 8, layContig, layBcast},
		{2, 1, 300, 1, layStrided, layTransposed},
		{1, 512, 512, 512, layContig, layTransposed},
	}
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16} {
		for _, tf32 := range []bool{false, true} {
			if tf32 && dt != backend.Float32 {
				continue
			}
			SetAllowTF32(tf32)
			for _, c := range cases {
				av := p.random(dt, c.b*c.m*c.k, -2, 2)
				bv := p.random(dt, c.b*c.k*c.n, -2, 2)
				a := p.place(dt, []int{c.b, c.m, c.k}, c.la, av, 0)
				b := p.place(dt, []int{c.b, c.k, c.n}, c.lb, bv, 0)
				// |a| x |b| on the CPU scales the tolerance.
				abs := func(v []float64) []float64 {
					o := make([]float64, len(v))
					for i, x := range v {
						o[i] = math.Abs(x)
					}
					return o
				}
				aa := p.place(backend.Float64, []int{c.b, c.m, c.k}, c.la, abs(av), 0)
				ab := p.place(backend.Float64, []int{c.b, c.k, c.n}, c.lb, abs(bv), 0)
				mo := p.output(backend.Float64, []int{c.b, c.m, c.n}, layContig)
				if err := p.c.MatMul(p.c.DefaultStream(), mo.c, aa.c, ab.c); err != nil {
					t.Fatal(err)
				}
				mag := read(t, p.c, mo.c)
				out := p.output(dt, []int{c.b, c.m, c.n}, layContig)
				name := fmt.Sprintf("%s(tf32 %v)/%dx%dx%dx%d/%s,%s", dt, tf32, c.b, c.m, c.k, c.n, c.la, c.lb)
				if !p.run(name, func(dev backend.Device, s int) error {
					return dev.MatMul(dev.DefaultStream(), pick(out, s), pick(a, s), pick(b, s))
				}) {
					continue
				}
				r, at := 1e-4, 1e-5
				switch {
				case dt == backend.Float64:
					r, at = 1e-12, 1e-12
				case tf32:
					r = 1e-3
				case dt == backend.Float16:
					r, at = 2e-3, 1e-3
				case dt == backend.BFloat16:
					r, at = 1e-2, 1e-2
				}
				p.compare(name, out, r, at, mag)
			}
		}
	}
	SetAllowTF32(false)
}

func TestCompareIndexing(t *testing.T) {
	p := newPair(t)
	for _, dt := range backend.DTypes {
		for _, c := range []struct {
			src, idx []int
			axis     int
		}{{[]int{50, 30}, []int{200, 30}, 0}, {[]int{7, 9, 11}, []int{7, 20, 11}, 1}, {[]int{1000}, []int{5000}, 0}} {
			sv := p.random(dt, backend.NumElements(c.src), -9, 9)
			iv := p.random(backend.Int64, backend.NumElements(c.idx), 0, float64(c.src[c.axis]-1))
			src := p.place(dt, c.src, layTransposed, sv, 0)
			idx := p.place(backend.Int64, c.idx, layStrided, iv, 0)
			out := p.output(dt, c.idx, layContig)
			name := fmt.Sprintf("gather/%s/%v", dt, c.src)
			if p.run(name, func(dev backend.Device, s int) error {
				return dev.Gather(dev.DefaultStream(), pick(out, s), pick(src, s), pick(idx, s), c.axis)
			}) {
				p.compare(name, out, 0, 0, nil)
			}
			if dt == backend.Bool {
				continue
			}
			// Scatter-add the gathered shape back, small integers so that
			// every order of additions gives the same sums.
			add := p.place(dt, c.idx, layContig, p.random(backend.Int64, backend.NumElements(c.idx), -3, 3), 0)
			dst := p.place(dt, c.src, layStrided, p.random(backend.Int64, backend.NumElements(c.src), -3, 3), 0)
			name = fmt.Sprintf("scatter-add/%s/%v", dt, c.src)
			if p.run(name, func(dev backend.Device, s int) error {
				return dev.ScatterAdd(dev.DefaultStream(), pick(dst, s), pick(idx, s), pick(add, s), c.axis)
			}) {
				r, a := tol(dt)
				if dt == backend.Float16 || dt == backend.BFloat16 {
					r, a = 1e-2, 0.5 // sums of up to 20 terms rounded in 16 bits, in any order
				}
				p.compare(name, dst, r, a, nil)
			}
		}
	}
}

// TestOver2p31 runs ops over more than 2^31 and 2^32 elements: a Fill and a
// Sum of 2^31+5 float16 values, and a strided LogicalNot over 2^32+6 bools.
func TestOver2p31(t *testing.T) {
	d := gpu(t, 0)
	n := 1<<31 + 5
	buf, err := d.Alloc(int64(2*n), d.DefaultStream(), "big")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(buf, d.DefaultStream())
	x := backend.View{Buf: buf, DType: backend.Float16, Shape: []int{n}, Strides: []int{1}}
	if err := d.Fill(d.DefaultStream(), x, math.Ldexp(1, -24)); err != nil {
		t.Fatal(err)
	}
	sum := backendtest.NewView(t, d, backend.Float16, []int{1}, []float64{7})
	if err := d.Reduce(d.DefaultStream(), backend.Sum, sum, x, []int{0}); err != nil {
		t.Fatal(err)
	}
	if got := backendtest.ReadView(t, d, sum)[0]; got != 128 {
		t.Errorf("sum of 2^31+5 float16 2^-24 = %v, want 128", got)
	}

	k := 1<<31 + 3 // the bool tensor has 2k = 2^32+6 elements
	sb, err := d.Alloc(int64(2*k), d.DefaultStream(), "big")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(sb, d.DefaultStream())
	db, err := d.Alloc(int64(2*k), d.DefaultStream(), "big")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(db, d.DefaultStream())
	row0 := backend.View{Buf: sb, DType: backend.Bool, Shape: []int{k}, Strides: []int{1}}
	row1 := backend.View{Buf: sb, DType: backend.Bool, Shape: []int{k}, Strides: []int{1}, Offset: k}
	if err := errorsJoin(d.Fill(d.DefaultStream(), row0, 1), d.Fill(d.DefaultStream(), row1, 0)); err != nil {
		t.Fatal(err)
	}
	// dst[i, j] = !src[j, i], with src read transposed: dst[:, 0] is false
	// and dst[:, 1] true.
	src := backend.View{Buf: sb, DType: backend.Bool, Shape: []int{k, 2}, Strides: []int{1, k}}
	dst := backend.View{Buf: db, DType: backend.Bool, Shape: []int{k, 2}, Strides: []int{2, 1}}
	if err := d.Unary(d.DefaultStream(), backend.LogicalNot, dst, src, 0); err != nil {
		t.Fatal(err)
	}
	for _, op := range []backend.ReduceOp{backend.Max, backend.Min} {
		r := backendtest.NewView(t, d, backend.Bool, []int{1, 2}, []float64{1, 0})
		if err := d.Reduce(d.DefaultStream(), op, r, dst, []int{0}); err != nil {
			t.Fatal(err)
		}
		if got := backendtest.ReadView(t, d, r); got[0] != 0 || got[1] != 1 {
			t.Errorf("%s over the columns of the 2^32+6 result: %v, want [0 1]", op, got)
		}
	}
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
