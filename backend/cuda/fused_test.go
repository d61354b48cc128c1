package cuda

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram/backend"
)

// absPlace places |vals| as float64 on both devices, for tolerances.
func (p *pair) absPlace(shape []int, l lay, vals []float64) twin {
	o := make([]float64, len(vals))
	for i, x := range vals {
		o[i] = math.Abs(x)
	}
	return p.place(backend.Float64, shape, l, o, 0)
}

// fusedTol is the tolerance of a fused product in dt, relative to the sum
// of absolute values of the terms.
func fusedTol(dt backend.DType) (float64, float64) {
	switch dt {
	case backend.Float16:
		return 2e-3, 1e-3
	case backend.BFloat16:
		return 1e-2, 1e-2
	}
	return 1e-4, 1e-5
}

// TestCompareFusedMatMul checks MatMulBias (with and without ReLU) and
// MatMulRowSum against the CPU's, in the layouts a linear layer uses: x·Wᵀ
// with W stored [out, in], and gᵀ·x for the weight gradient. The layer's
// own layouts must be fused on the GPU; others may decline with
// ErrNotImplemented (the caller then composes).
func TestCompareFusedMatMul(t *testing.T) {
	p := newPair(t)
	cases := []struct {
		m, k, n int
		la, lb  lay
		must    bool // the layout of a linear layer: must be fused
	}{
		{256, 512, 384, layContig, layTransposed, true},
		{1024, 256, 512, layContig, layTransposed, true},
		{64, 96, 128, layContig, layContig, false},
		{33, 17, 65, layTransposed, layContig, false},
		{7, 5, 3, layContig, layTransposed, false},
	}
	for _, dt := range []backend.DType{backend.Float32, backend.Float16, backend.BFloat16} {
		for _, c := range cases {
			av := p.random(dt, c.m*c.k, -2, 2)
			bv := p.random(dt, c.k*c.n, -2, 2)
			biasv := p.random(dt, c.n, -2, 2)
			a := p.place(dt, []int{c.m, c.k}, c.la, av, 0)
			b := p.place(dt, []int{c.k, c.n}, c.lb, bv, 0)
			bias := p.place(dt, []int{c.n}, layContig, biasv, 0)
			mo := p.output(backend.Float64, []int{1, c.m, c.n}, layContig)
			aa, ab := p.absPlace([]int{1, c.m, c.k}, c.la, av), p.absPlace([]int{1, c.k, c.n}, c.lb, bv)
			if err := p.c.MatMul(p.c.DefaultStream(), mo.c, aa.c, ab.c); err != nil {
				t.Fatal(err)
			}
			mag := read(t, p.c, mo.c)
			for i := range mag {
				mag[i] += math.Abs(biasv[i%c.n])
			}
			r, at := fusedTol(dt)
			for _, relu := range []bool{false, true} {
				name := fmt.Sprintf("bias(relu %v)/%s/%dx%dx%d/%s,%s", relu, dt, c.m, c.k, c.n, c.la, c.lb)
				out := p.output(dt, []int{c.m, c.n}, layContig)
				gerr := p.g.MatMulBias(p.g.DefaultStream(), out.g, a.g, b.g, bias.g, relu)
				if errors.Is(gerr, backend.ErrNotImplemented) && !c.must {
					t.Logf("%s: not fused on the GPU: %v", name, gerr)
					continue
				}
				if gerr == nil {
					gerr = p.g.Synchronize()
				}
				if gerr != nil {
					t.Errorf("%s: %v", name, gerr)
					continue
				}
				if err := p.c.(backend.FusedMatMul).MatMulBias(p.c.DefaultStream(), out.c, a.c, b.c, bias.c, relu); err != nil {
					t.Fatal(err)
				}
				p.compare(name, out, r, at, mag)
			}

			// The weight gradient: dst = a·b with rowSum = Σ_k a[i,k].
			name := fmt.Sprintf("rowsum/%s/%dx%dx%d/%s,%s", dt, c.m, c.k, c.n, c.la, c.lb)
			out := p.output(dt, []int{c.m, c.n}, layContig)
			rs := p.output(dt, []int{c.m}, layContig)
			gerr := p.g.MatMulRowSum(p.g.DefaultStream(), out.g, a.g, b.g, rs.g)
			if errors.Is(gerr, backend.ErrNotImplemented) {
				// Whether cuBLASLt has a bias-gradient kernel for this dtype
				// and layout is its choice; the caller composes otherwise.
				t.Logf("%s: not fused on the GPU: %v", name, gerr)
				continue
			}
			if gerr == nil {
				gerr = p.g.Synchronize()
			}
			if gerr != nil {
				t.Errorf("%s: %v", name, gerr)
				continue
			}
			t.Logf("%s: fused", name)
			if err := p.c.(backend.FusedMatMul).MatMulRowSum(p.c.DefaultStream(), out.c, a.c, b.c, rs.c); err != nil {
				t.Fatal(err)
			}
			p.compare(name, out, r, at, read(t, p.c, mo.c))
			rmag := make([]float64, c.m)
			for i := range c.m {
				for j := range c.k {
					rmag[i] += math.Abs(av[i*c.k+j])
				}
			}
			p.compare(name+"/sums", rs, r, at, rmag)
		}
	}
}

// TestCompareRowBroadcast checks the row-broadcast binary kernels (a bias
// along the last dimension) on tensors larger than one pass of the grid,
// with rows a multiple of 4 (vectorised) or not, the vector on either side.
func TestCompareRowBroadcast(t *testing.T) {
	p := newPair(t)
	for _, dt := range []backend.DType{backend.Float32, backend.BFloat16} {
		for _, sh := range [][2]int{{3000, 1028}, {2000, 1001}, {4096, 4}} {
			rows, n := sh[0], sh[1]
			full := p.place(dt, []int{rows, n}, layContig, p.random(dt, rows*n, -3, 3), 0)
			vec := p.place(dt, []int{n}, layContig, p.random(dt, n, -3, 3), 0)
			row := func(v backend.View) backend.View {
				v.Shape, v.Strides = []int{rows, n}, []int{0, 1}
				return v
			}
			vrow := twin{g: row(vec.g), c: row(vec.c)}
			for _, op := range []backend.BinaryOp{backend.Add, backend.Sub, backend.AddRelu, backend.AddGelu, backend.ReluBackward, backend.GeluBackward} {
				for side := range 2 {
					x, y := full, vrow
					if side == 1 {
						x, y = vrow, full
					}
					name := fmt.Sprintf("%s/%s/%dx%d/vector %d", op, dt, rows, n, 1-side)
					out := p.output(dt, []int{rows, n}, layContig)
					if !p.run(name, func(dev backend.Device, s int) error {
						return dev.Binary(dev.DefaultStream(), op, pick(out, s), pick(x, s), pick(y, s))
					}) {
						continue
					}
					r, at := tol(dt)
					p.compare(name, out, 4*r, 4*at, nil)
				}
			}
		}
	}
}

// TestCompareTransposedTiles checks the tiled binary kernels, where one
// input is a transposed view: full and partial tiles, either input
// transposed, several dtypes and result types.
func TestCompareTransposedTiles(t *testing.T) {
	p := newPair(t)
	for _, c := range []struct {
		op backend.BinaryOp
		dt backend.DType
	}{
		{backend.Add, backend.Float32}, {backend.Sub, backend.Float32}, {backend.Maximum, backend.Float16},
		{backend.AddGelu, backend.BFloat16}, {backend.Mul, backend.Int32}, {backend.Lt, backend.Float32},
		{backend.LogicalAnd, backend.Bool}, {backend.Add, backend.Float64},
	} {
		for _, sh := range [][2]int{{33, 65}, {64, 32}, {1000, 1500}} {
			rows, cols := sh[0], sh[1]
			lo, hi := -4.0, 4.0
			full := p.place(c.dt, []int{rows, cols}, layContig, p.random(c.dt, rows*cols, lo, hi), 0)
			tr := p.place(c.dt, []int{rows, cols}, layTransposed, p.random(c.dt, rows*cols, lo, hi), 0)
			ddt := c.dt
			if c.op.IsComparison() {
				ddt = backend.Bool
			}
			for side := range 2 {
				x, y := full, tr
				if side == 1 {
					x, y = tr, full
				}
				name := fmt.Sprintf("%s/%s/%dx%d/transposed %d", c.op, c.dt, rows, cols, 1-side)
				out := p.output(ddt, []int{rows, cols}, layContig)
				if !p.run(name, func(dev backend.Device, s int) error {
					return dev.Binary(dev.DefaultStream(), c.op, pick(out, s), pick(x, s), pick(y, s))
				}) {
					continue
				}
				r, at := tol(ddt)
				p.compare(name, out, 4*r, 4*at, nil)
			}
		}
	}
}

// TestCompareTransposedCopies checks the tiled copies from a transposed
// view (Contiguous of a transpose), with and without a dtype conversion.
func TestCompareTransposedCopies(t *testing.T) {
	p := newPair(t)
	for _, c := range [][2]backend.DType{
		{backend.Float32, backend.Float32}, {backend.Float64, backend.Float64}, {backend.BFloat16, backend.BFloat16},
		{backend.Bool, backend.Bool}, {backend.Float32, backend.BFloat16}, {backend.Int32, backend.Float32},
		{backend.Bool, backend.Float16},
	} {
		from, to := c[0], c[1]
		for _, sh := range [][2]int{{33, 65}, {64, 32}, {1000, 1500}} {
			rows, cols := sh[0], sh[1]
			src := p.place(from, []int{rows, cols}, layTransposed, p.random(from, rows*cols, -100, 100), 0)
			name := fmt.Sprintf("%s->%s/%dx%d", from, to, rows, cols)
			out := p.output(to, []int{rows, cols}, layContig)
			if !p.run(name, func(dev backend.Device, s int) error {
				return dev.Copy(dev.DefaultStream(), pick(out, s), pick(src, s))
			}) {
				continue
			}
			p.compare(name, out, 0, 0, nil)
		}
	}
}

// TestFusedMatMulBiasRoundsOnce checks that the fused product adds the bias
// to the float32 product before rounding to 16 bits, on the GPU as on the
// CPU (which a sim device runs): with a·b = big + 1 and a bias of 1, where
// big + 1 is a tie that rounds to big, one rounding gives big + 2 and two
// give big.
func TestFusedMatMulBiasRoundsOnce(t *testing.T) {
	p := newPair(t)
	const m, k, n = 64, 64, 64
	for _, dt := range []backend.DType{backend.Float16, backend.BFloat16} {
		big := 2048.0
		if dt == backend.BFloat16 {
			big = 256
		}
		av, bv, biasv := make([]float64, m*k), make([]float64, k*n), make([]float64, n)
		for i := range m {
			av[i*k], av[i*k+1] = 1, 1
		}
		for j := range n {
			bv[j], bv[n+j], biasv[j] = big, 1, 1
		}
		a := p.place(dt, []int{m, k}, layContig, av, 0)
		b := p.place(dt, []int{k, n}, layTransposed, bv, 0)
		bias := p.place(dt, []int{n}, layContig, biasv, 0)
		out := p.output(dt, []int{m, n}, layContig)
		name := fmt.Sprintf("bias/%s", dt)
		if !p.run(name, func(dev backend.Device, s int) error {
			return dev.(backend.FusedMatMul).MatMulBias(dev.DefaultStream(), pick(out, s), pick(a, s), pick(b, s), pick(bias, s), false)
		}) {
			continue
		}
		p.compare(name, out, 0, 0, nil)
		for i, v := range read(t, p.c, out.c) {
			if v != big+2 {
				t.Fatalf("%s: CPU element %d = %v, want %v", name, i, v, big+2)
			}
		}
	}
}
