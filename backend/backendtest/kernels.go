package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/vramgo/vram/backend"
)

// eachIndex calls fn with every multi-index of shape in row-major order.
// fn must not keep idx.
func eachIndex(shape []int, fn func(idx []int)) {
	n := backend.NumElements(shape)
	idx := make([]int, len(shape))
	for range n {
		fn(idx)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// linear returns the row-major position of idx in shape.
func linear(idx, shape []int) int {
	p := 0
	for d, i := range idx {
		p = p*shape[d] + i
	}
	return p
}

type matmulCase struct {
	name       string
	b, m, k, n int
	la, lb, ld layout
	ba, bb     bool // a or b broadcast along the batch (stride 0)
}

var matmulCases = []matmulCase{
	{name: "basic", b: 1, m: 3, k: 4, n: 5},
	{name: "batched", b: 3, m: 4, k: 5, n: 2},
	{name: "a-transposed", b: 2, m: 3, k: 4, n: 5, la: swapped},
	{name: "b-transposed", b: 2, m: 3, k: 4, n: 5, lb: swapped},
	{name: "both-transposed", b: 2, m: 3, k: 4, n: 5, la: swapped, lb: swapped},
	{name: "dst-transposed", b: 2, m: 3, k: 4, n: 5, ld: swapped},
	{name: "all-transposed", b: 2, m: 3, k: 4, n: 5, la: swapped, lb: swapped, ld: swapped},
	{name: "reversed", b: 2, m: 3, k: 4, n: 5, la: transposed, lb: transposed, ld: transposed},
	{name: "strided", b: 2, m: 3, k: 4, n: 5, la: strided, lb: strided, ld: strided},
	{name: "offset", b: 2, m: 3, k: 4, n: 5, la: offset, lb: offset, ld: offset},
	{name: "broadcast-a", b: 3, m: 3, k: 4, n: 5, ba: true},
	{name: "broadcast-b", b: 3, m: 3, k: 4, n: 5, bb: true},
	{name: "broadcast-b-transposed", b: 3, m: 3, k: 4, n: 5, bb: true, lb: swapped},
	{name: "broadcast-both", b: 2, m: 3, k: 4, n: 5, ba: true, bb: true, la: offset},
	{name: "row", b: 2, m: 1, k: 7, n: 3},
	{name: "row-transposed", b: 2, m: 1, k: 7, n: 3, la: swapped, ld: swapped},
	{name: "column", b: 2, m: 3, k: 7, n: 1, lb: swapped, ld: swapped},
	{name: "dot", b: 2, m: 1, k: 9, n: 1, la: strided},
	{name: "outer", b: 1, m: 4, k: 1, n: 5, lb: strided},
	{name: "k0", b: 2, m: 3, k: 0, n: 4},
	{name: "m0", b: 2, m: 0, k: 3, n: 4},
	{name: "b0", b: 0, m: 2, k: 3, n: 4},
	{name: "large", b: 2, m: 65, k: 130, n: 67, lb: swapped},
	{name: "large-broadcast-b", b: 3, m: 70, k: 40, n: 66, bb: true},
	{name: "many-small", b: 40, m: 8, k: 16, n: 8, la: strided},
}

func (h *harness) testMatMul(t *testing.T) {
	for _, dt := range floatDTypes {
		for _, c := range matmulCases {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) { h.matmulCase(t, dt, c) })
		}
	}
}

func (h *harness) matmulCase(t *testing.T, dt backend.DType, c matmulCase) {
	operand := func(shape []int, bcast bool, lay layout, seed uint64) (backend.View, []float64) {
		st := append([]int{}, shape...)
		if bcast {
			st[0] = 1
		}
		vals := quantizeAll(dt, gen(domGeneral, backend.NumElements(st), seed))
		v := makeView(t, h.dev, dt, st, vals, lay)
		if bcast {
			v.Shape[0], v.Strides[0] = shape[0], 0
		}
		return v, vals
	}
	a, av := operand([]int{c.b, c.m, c.k}, c.ba, c.la, 11)
	b, bv := operand([]int{c.b, c.k, c.n}, c.bb, c.lb, 12)
	dshape := []int{c.b, c.m, c.n}
	d := makeView(t, h.dev, dt, dshape, filled(backend.NumElements(dshape), padValue), c.ld)
	h.ok(t, "MatMul", h.call(func() error { return h.dev.MatMul(h.dev.DefaultStream(), d, a, b) }))
	got := h.result(t, d)

	rtol, atol := tolerance(dt)
	bad := 0
	eachIndex(dshape, func(idx []int) {
		bi, i, j := idx[0], idx[1], idx[2]
		ab, bb := bi, bi
		if c.ba {
			ab = 0
		}
		if c.bb {
			bb = 0
		}
		var s, mag float64
		for k := range c.k {
			x := av[(ab*c.m+i)*c.k+k]
			y := bv[(bb*c.k+k)*c.n+j]
			s += x * y
			mag += math.Abs(x * y)
		}
		g := got[linear(idx, dshape)]
		if math.Abs(g-s) > atol+rtol*(mag+math.Abs(s)) {
			if bad < 5 {
				t.Errorf("dst%v = %v, want %v (sum of |a||b| %v)", idx, g, s, mag)
			}
			bad++
		}
	})
	if bad > 5 {
		t.Errorf("%d elements differ in all", bad)
	}
}

// dataDomain returns values suited to dt for data-movement tests.
func dataDomain(dt backend.DType) []float64 {
	switch {
	case dt.IsInt():
		return domInt
	case dt == backend.Bool:
		return domBool
	}
	return domGeneral
}

// indices returns n indices in [0, bound).
func indices(n, bound int, seed uint64) []float64 {
	dom := make([]float64, bound)
	for i := range dom {
		dom[i] = float64(i)
	}
	return gen(dom, n, seed)
}

type gatherCase struct {
	name       string
	src        []int
	axis       int
	index      []int
	ls, li, ld layout
}

var gatherCases = []gatherCase{
	{name: "axis0", src: []int{3, 4}, axis: 0, index: []int{5, 4}},
	{name: "axis1", src: []int{3, 4}, axis: 1, index: []int{3, 6}},
	{name: "axis1-narrow", src: []int{3, 4}, axis: 1, index: []int{2, 2}},
	{name: "3d", src: []int{2, 3, 4}, axis: 1, index: []int{2, 5, 4}, ls: transposed, li: strided, ld: offset},
	{name: "transposed", src: []int{4, 3}, axis: 0, index: []int{6, 3}, ls: transposed, li: transposed, ld: transposed},
	{name: "1d", src: []int{7}, axis: 0, index: []int{10}, ls: strided, ld: strided},
	{name: "empty", src: []int{3, 4}, axis: 0, index: []int{0, 4}},
	{name: "large", src: []int{50, 300}, axis: 0, index: []int{200, 300}, li: transposed},
}

func (h *harness) testGather(t *testing.T) {
	for _, dt := range backend.DTypes {
		for _, c := range gatherCases {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				sv := quantizeAll(dt, gen(dataDomain(dt), backend.NumElements(c.src), 3))
				iv := indices(backend.NumElements(c.index), c.src[c.axis], 4)
				src := makeView(t, h.dev, dt, c.src, sv, c.ls)
				idx := makeView(t, h.dev, backend.Int64, c.index, iv, c.li)
				d := makeView(t, h.dev, dt, c.index, filled(len(iv), padValue), c.ld)
				h.ok(t, "Gather", h.call(func() error { return h.dev.Gather(h.dev.DefaultStream(), d, src, idx, c.axis) }))
				want := make([]float64, 0, len(iv))
				eachIndex(c.index, func(p []int) {
					q := append([]int{}, p...)
					q[c.axis] = int(iv[linear(p, c.index)])
					want = append(want, sv[linear(q, c.src)])
				})
				expect(t, "result", dt, h.result(t, d), want)
			})
		}
	}
	for _, bad := range []float64{3, -1, 1 << 40} {
		t.Run(fmt.Sprintf("out-of-range/%v", bad), func(t *testing.T) {
			src := NewView(t, h.dev, backend.Float32, []int{3, 2}, []float64{1, 2, 3, 4, 5, 6})
			idx := NewView(t, h.dev, backend.Int64, []int{2, 2}, []float64{0, 1, 2, bad})
			d := NewView(t, h.dev, backend.Float32, []int{2, 2}, filled(4, 0))
			h.fails(t, "Gather with an out-of-range index", h.call(func() error { return h.dev.Gather(h.dev.DefaultStream(), d, src, idx, 0) }))
		})
	}
}

type scatterCase struct {
	name       string
	dst        []int
	axis       int
	src        []int
	ld, li, ls layout
}

var scatterCases = []scatterCase{
	{name: "axis0", dst: []int{3, 4}, axis: 0, src: []int{5, 4}},
	{name: "axis1", dst: []int{3, 3}, axis: 1, src: []int{3, 6}},
	{name: "narrow", dst: []int{3, 4}, axis: 1, src: []int{2, 9}},
	{name: "3d", dst: []int{2, 3, 4}, axis: 1, src: []int{2, 7, 4}, ld: strided, li: transposed, ls: offset},
	{name: "transposed", dst: []int{4, 3}, axis: 0, src: []int{6, 3}, ld: transposed, li: strided, ls: transposed},
	{name: "1d", dst: []int{4}, axis: 0, src: []int{11}, ld: offset},
	{name: "empty", dst: []int{3, 4}, axis: 0, src: []int{0, 4}},
	{name: "large", dst: []int{7, 2}, axis: 0, src: []int{40000, 2}, li: transposed},
	{name: "large-wide", dst: []int{300, 5}, axis: 1, src: []int{300, 200}, ls: transposed},
}

func (h *harness) testScatterAdd(t *testing.T) {
	for _, dt := range numDTypes {
		for _, c := range scatterCases {
			if (dt == backend.Float16 || dt == backend.BFloat16) && backend.NumElements(c.src) > 1000 {
				continue // long sums in 16 bits lose precision with any order
			}
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				dom := []float64{-2, -1, 0, 1, 2, 3}
				dv := quantizeAll(dt, gen(dom, backend.NumElements(c.dst), 5))
				sv := quantizeAll(dt, gen(dom, backend.NumElements(c.src), 6))
				iv := indices(len(sv), c.dst[c.axis], 7)
				d := makeView(t, h.dev, dt, c.dst, dv, c.ld)
				idx := makeView(t, h.dev, backend.Int64, c.src, iv, c.li)
				src := makeView(t, h.dev, dt, c.src, sv, c.ls)
				h.ok(t, "ScatterAdd", h.call(func() error { return h.dev.ScatterAdd(h.dev.DefaultStream(), d, idx, src, c.axis) }))
				want := append([]float64{}, dv...)
				eachIndex(c.src, func(p []int) {
					q := append([]int{}, p...)
					q[c.axis] = int(iv[linear(p, c.src)])
					want[linear(q, c.dst)] += sv[linear(p, c.src)]
				})
				expect(t, "result", dt, h.result(t, d), quantizeAll(dt, want))
			})
		}
	}
	for _, bad := range []float64{2, -1} {
		t.Run(fmt.Sprintf("out-of-range/%v", bad), func(t *testing.T) {
			d := NewView(t, h.dev, backend.Float32, []int{2, 2}, filled(4, 0))
			idx := NewView(t, h.dev, backend.Int64, []int{3, 2}, []float64{0, 1, bad, 0, 1, 1})
			src := NewView(t, h.dev, backend.Float32, []int{3, 2}, []float64{1, 2, 3, 4, 5, 6})
			h.fails(t, "ScatterAdd with an out-of-range index", h.call(func() error { return h.dev.ScatterAdd(h.dev.DefaultStream(), d, idx, src, 0) }))
		})
	}
}
