package cpu

import (
	"fmt"

	"github.com/vramgo/vram/backend"
)

// chunk is the number of reduced elements folded into one partial result.
// Longer reductions fold chunk after chunk and combine the partial results
// in chunk order, so the result does not depend on how many goroutines
// computed the chunks.
const chunk = 16 << 10

// Reduce reduces src over axes into dst, whose shape is src's with those
// axes set to 1.
func (dev *Device) Reduce(st backend.Stream, op backend.ReduceOp, dst, src backend.View, axes []int) (err error) {
	what := "reduce " + op.String()
	if err := begin(st, what, backend.CheckReduce(op, dst, src, axes)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	ops, err := resolveAll(what, dst, src)
	if err != nil {
		return err
	}
	d, s := ops[0], ops[1]
	reduced := make([]bool, len(s.shape))
	for _, ax := range axes {
		reduced[ax] = true
	}

	var outShape, outSrc, outDst, redShape, redSrc []int
	for i, n := range s.shape {
		if reduced[i] {
			redShape = append(redShape, n)
			redSrc = append(redSrc, s.strides[i])
		} else {
			outShape = append(outShape, n)
			outSrc = append(outSrc, s.strides[i])
			outDst = append(outDst, d.strides[i])
		}
	}
	nOut, nRed := backend.NumElements(outShape), backend.NumElements(redShape)
	if nRed == 0 {
		switch op {
		case backend.Sum:
			return dev.Fill(dev.DefaultStream(), dst, 0)
		case backend.Prod:
			return dev.Fill(dev.DefaultStream(), dst, 1)
		}
		return fmt.Errorf("cpu: %s: reduction over zero elements (source shape %v, axes %v) has no identity", what, s.shape, axes)
	}
	if nOut == 0 {
		return nil
	}
	out := newSpace(outShape, [][]int{outSrc, outDst}, []int{s.off, d.off})
	red := newSpace(redShape, [][]int{redSrc}, []int{0})
	switch computeKind(s.dt) {
	case kFloat32:
		return newReduction[float32](op, d, s, out, red).run()
	case kFloat64:
		return newReduction[float64](op, d, s, out, red).run()
	case kInt32:
		return newReduction[int32](op, d, s, out, red).run()
	default:
		return newReduction[int64](op, d, s, out, red).run()
	}
}

// reduction is one Reduce call in compute type C.
type reduction[C number] struct {
	op       backend.ReduceOp
	dst, src *operand
	out      *space // the kept dimensions; operands: src (0) and dst (1)
	red      *space // the reduced dimensions; operand: src, base 0
	intAcc   bool   // Sum and Prod accumulate in int64 rather than float64
	native   bool   // src is stored as C
}

func newReduction[C number](op backend.ReduceOp, dst, src *operand, out, red *space) *reduction[C] {
	return &reduction[C]{
		op: op, dst: dst, src: src, out: out, red: red,
		intAcc: !src.dt.IsFloat(),
		native: native[C](src.dt),
	}
}

// acc is the state of a reduction of some elements.
type acc[C number] struct {
	f   float64 // Sum, Prod of floats
	i   int64   // Sum, Prod of integers
	v   C       // Max, Min, ArgMax, ArgMin
	idx int64   // ArgMax, ArgMin
	set bool    // v and idx hold an element
}

func (r *reduction[C]) init() acc[C] {
	if r.op == backend.Prod {
		return acc[C]{f: 1, i: 1}
	}
	return acc[C]{}
}

// tileLen is the most outputs reduced together when the outputs are
// contiguous in the source and the reduced elements are not: the reduction
// then reads rows of tileLen source elements rather than one strided column
// per output.
const tileLen = 256

func (r *reduction[C]) run() error {
	nOut, nRed := r.out.size, r.red.size
	nChunks := (nRed + chunk - 1) / chunk
	work := nOut * nRed

	// The unit of work is a tile of outputs (one output, or up to tileLen
	// consecutive outputs along the innermost kept dimension) and a chunk
	// of the reduced elements. Which outputs share a tile and where chunks
	// start depend only on the shapes and strides.
	rowLen, tile := 1, 1
	if nd := len(r.out.shape); nd > 0 && r.out.inner[0] == 1 && len(r.red.shape) > 0 && r.red.inner[0] != 1 {
		rowLen = r.out.shape[nd-1]
		tile = min(tileLen, rowLen)
	}
	tilesPerRow := (rowLen + tile - 1) / tile
	nTiles := nOut / rowLen * tilesPerRow
	// tileAt returns the first output of tile t and the tile's length.
	tileAt := func(t int) (first, n int) {
		row, col := t/tilesPerRow, t%tilesPerRow*tile
		return row*rowLen + col, min(tile, rowLen-col)
	}

	var partials []acc[C]
	if nChunks > 1 {
		partials = make([]acc[C], nOut*nChunks)
	}
	err := parallel(nTiles*nChunks, work, func(lo, hi int) error {
		oc := newCursor(r.out)
		rc := newCursor(r.red)
		scratch := make([]C, min(max(block, tile), nRed*tile))
		accs := make([]acc[C], tile)
		for task := lo; task < hi; task++ {
			t, c := task/nChunks, task%nChunks
			first, n := tileAt(t)
			oc.reset(first, first+1, [maxOperands]int{})
			off, _, _ := oc.next()
			a := accs[:n]
			for i := range a {
				a[i] = r.init()
			}
			rlo, rhi := c*chunk, min(nRed, (c+1)*chunk)
			if tile == 1 {
				r.accumulate(&a[0], rc, scratch, off[0], rlo, rhi)
			} else {
				r.accumulateTile(a, rc, scratch, off[0], rlo, rhi)
			}
			for i := range a {
				if nChunks == 1 {
					r.finalize(&a[i], off[1]+i*r.out.inner[1])
				} else {
					partials[(first+i)*nChunks+c] = a[i]
				}
			}
		}
		return nil
	})
	if err != nil || nChunks == 1 {
		return err
	}
	// Combine each output's partial results in chunk order.
	return parallel(nOut, nOut*nChunks, func(lo, hi int) error {
		oc := newCursor(r.out)
		oc.reset(lo, hi, [maxOperands]int{})
		o := lo
		for {
			off, n, ok := oc.next()
			if !ok {
				return nil
			}
			for j := range n {
				p := partials[(o+j)*nChunks : (o+j+1)*nChunks]
				a := p[0]
				for _, b := range p[1:] {
					r.combine(&a, &b)
				}
				r.finalize(&a, off[1]+j*r.out.inner[1])
			}
			o += n
		}
	})
}

// accumulateTile folds elements [lo, hi) of the reduced space into the
// len(a) consecutive outputs whose first source element is at offset base
// (the outputs' source elements are adjacent). Each output still folds its
// elements in order.
func (r *reduction[C]) accumulateTile(a []acc[C], rc *cursor, scratch []C, base, lo, hi int) {
	rc.reset(lo, hi, [maxOperands]int{base})
	st := r.red.inner[0]
	m := len(a)
	var src []C
	if r.native {
		src = typed[C](r.src.raw)
	}
	pos := lo
	for {
		off, n, ok := rc.next()
		if !ok {
			return
		}
		for q := range n {
			o := off[0] + q*st
			var xs []C
			if r.native {
				xs = src[o : o+m]
			} else {
				xs = scratch[:m]
				load(r.src, o, 1, xs)
			}
			r.foldAcross(a, xs, int64(pos+q))
		}
		pos += n
	}
}

// foldAcross folds xs[i], which has index pos in the reduced space, into
// a[i] for every i.
func (r *reduction[C]) foldAcross(a []acc[C], xs []C, pos int64) {
	xs = xs[:len(a)]
	switch r.op {
	case backend.Sum:
		if r.intAcc {
			for i, x := range xs {
				a[i].i += int64(x)
			}
		} else {
			for i, x := range xs {
				a[i].f += float64(x)
			}
		}
	case backend.Prod:
		if r.intAcc {
			for i, x := range xs {
				a[i].i *= int64(x)
			}
		} else {
			for i, x := range xs {
				a[i].f *= float64(x)
			}
		}
	case backend.Max:
		for i, x := range xs {
			p := &a[i]
			if !p.set || x > p.v || x != x {
				p.v, p.set = x, true
			}
		}
	case backend.Min:
		for i, x := range xs {
			p := &a[i]
			if !p.set || x < p.v || x != x {
				p.v, p.set = x, true
			}
		}
	case backend.ArgMax:
		for i, x := range xs {
			p := &a[i]
			if !p.set || p.v == p.v && (x > p.v || x != x) {
				p.v, p.idx, p.set = x, pos, true
			}
		}
	case backend.ArgMin:
		for i, x := range xs {
			p := &a[i]
			if !p.set || p.v == p.v && (x < p.v || x != x) {
				p.v, p.idx, p.set = x, pos, true
			}
		}
	}
}

// accumulate folds elements [lo, hi) of the reduced space, for the output
// whose first source element is at offset base, into a.
func (r *reduction[C]) accumulate(a *acc[C], rc *cursor, scratch []C, base, lo, hi int) {
	rc.reset(lo, hi, [maxOperands]int{base})
	st := r.red.inner[0]
	var src []C
	if r.native {
		src = typed[C](r.src.raw)
	}
	pos := lo
	for {
		off, n, ok := rc.next()
		if !ok {
			return
		}
		for j := 0; j < n; j += len(scratch) {
			m := min(len(scratch), n-j)
			o := off[0] + j*st
			var xs []C
			if r.native && st == 1 {
				xs = src[o : o+m]
			} else {
				xs = scratch[:m]
				load(r.src, o, st, xs)
			}
			r.fold(a, xs, int64(pos+j))
		}
		pos += n
	}
}

// fold folds the elements xs, the first of which has index pos in the
// reduced space, into a.
func (r *reduction[C]) fold(a *acc[C], xs []C, pos int64) {
	switch r.op {
	case backend.Sum:
		if r.intAcc {
			s := a.i
			for _, x := range xs {
				s += int64(x)
			}
			a.i = s
		} else {
			// Four running sums hide the latency of the additions; the
			// order is still fixed by the block.
			var s0, s1, s2, s3 float64
			i := 0
			for ; i+4 <= len(xs); i += 4 {
				s0 += float64(xs[i])
				s1 += float64(xs[i+1])
				s2 += float64(xs[i+2])
				s3 += float64(xs[i+3])
			}
			for ; i < len(xs); i++ {
				s0 += float64(xs[i])
			}
			a.f += (s0 + s1) + (s2 + s3)
		}
	case backend.Prod:
		if r.intAcc {
			p := a.i
			for _, x := range xs {
				p *= int64(x)
			}
			a.i = p
		} else {
			p := a.f
			for _, x := range xs {
				p *= float64(x)
			}
			a.f = p
		}
	case backend.Max:
		if !a.set {
			a.v, a.set = xs[0], true
		}
		v := a.v
		for _, x := range xs {
			if x > v || x != x {
				v = x
			}
		}
		a.v = v
	case backend.Min:
		if !a.set {
			a.v, a.set = xs[0], true
		}
		v := a.v
		for _, x := range xs {
			if x < v || x != x {
				v = x
			}
		}
		a.v = v
	case backend.ArgMax:
		if !a.set {
			a.v, a.idx, a.set = xs[0], pos, true
		}
		v, idx := a.v, a.idx
		for j, x := range xs {
			// Strictly greater keeps the first of ties; the first NaN wins
			// and nothing replaces it.
			if v == v && (x > v || x != x) {
				v, idx = x, pos+int64(j)
			}
		}
		a.v, a.idx = v, idx
	case backend.ArgMin:
		if !a.set {
			a.v, a.idx, a.set = xs[0], pos, true
		}
		v, idx := a.v, a.idx
		for j, x := range xs {
			if v == v && (x < v || x != x) {
				v, idx = x, pos+int64(j)
			}
		}
		a.v, a.idx = v, idx
	}
}

// combine folds b, the partial result of a later chunk, into a.
func (r *reduction[C]) combine(a, b *acc[C]) {
	switch r.op {
	case backend.Sum:
		a.f += b.f
		a.i += b.i
	case backend.Prod:
		a.f *= b.f
		a.i *= b.i
	case backend.Max, backend.ArgMax:
		if a.v == a.v && (b.v > a.v || b.v != b.v) {
			a.v, a.idx = b.v, b.idx
		}
	case backend.Min, backend.ArgMin:
		if a.v == a.v && (b.v < a.v || b.v != b.v) {
			a.v, a.idx = b.v, b.idx
		}
	}
}

// finalize writes the result in a to dst's element at offset off.
func (r *reduction[C]) finalize(a *acc[C], off int) {
	switch r.op {
	case backend.Sum, backend.Prod:
		if r.intAcc {
			storeOne(r.dst, off, a.i)
		} else {
			storeOne(r.dst, off, a.f)
		}
	case backend.Max, backend.Min:
		storeOne(r.dst, off, a.v)
	default:
		storeOne(r.dst, off, a.idx)
	}
}

// storeOne writes v, converted to o's dtype, at element off of o.
func storeOne[T number](o *operand, off int, v T) {
	buf := [1]T{v}
	store(o, off, 0, buf[:])
}
