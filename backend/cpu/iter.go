package cpu

import (
	"fmt"
	"runtime"
	"sync"
)

// maxOperands is the most strided operands one iteration space walks
// together (Where has four: dst, cond, a, b).
const maxOperands = 4

// space is the iteration space of up to maxOperands views of one shape. Its
// dimensions are the views' dimensions with those of size 1 dropped and
// neighbours merged wherever every operand is contiguous across them, so
// that all-contiguous operands give a single dimension (one run).
type space struct {
	shape   []int              // merged dimensions, outermost first
	strides [maxOperands][]int // per operand, per merged dimension
	base    [maxOperands]int   // element offset of the first element
	nops    int                // operands in use
	size    int                // number of elements
	inner   [maxOperands]int   // stride of the innermost dimension (0 for a scalar space)
}

// newSpace builds the iteration space of shape for the given operands, each
// described by its strides and base offset.
func newSpace(shape []int, strides [][]int, bases []int) *space {
	sp := &space{nops: len(strides), size: 1}
	for _, d := range shape {
		sp.size *= d
	}
	for k := range sp.nops {
		sp.base[k] = bases[k]
		sp.strides[k] = make([]int, 0, len(shape))
	}
	for d, n := range shape {
		if n == 1 {
			continue
		}
		last := len(sp.shape) - 1
		merge := last >= 0
		for k := 0; merge && k < sp.nops; k++ {
			if sp.strides[k][last] != strides[k][d]*n {
				merge = false
			}
		}
		if merge {
			sp.shape[last] *= n
			for k := range sp.nops {
				sp.strides[k][last] = strides[k][d]
			}
			continue
		}
		sp.shape = append(sp.shape, n)
		for k := range sp.nops {
			sp.strides[k] = append(sp.strides[k], strides[k][d])
		}
	}
	if nd := len(sp.shape); nd > 0 {
		for k := range sp.nops {
			sp.inner[k] = sp.strides[k][nd-1]
		}
	}
	return sp
}

// spaceOf builds the iteration space of operands that all have the shape of
// the first one.
func spaceOf(ops ...*operand) *space {
	strides := make([][]int, len(ops))
	bases := make([]int, len(ops))
	for k, o := range ops {
		strides[k] = o.strides
		bases[k] = o.off
	}
	return newSpace(ops[0].shape, strides, bases)
}

// cursor walks a range of a space's elements (in row-major order) as runs
// along the innermost dimension. One cursor serves one goroutine; reset
// reuses it without allocating.
type cursor struct {
	sp  *space
	idx []int
	off [maxOperands]int
	pos int
	hi  int
}

func newCursor(sp *space) *cursor {
	return &cursor{sp: sp, idx: make([]int, len(sp.shape))}
}

// reset positions the cursor at element lo of the space, to stop before
// element hi, with extra added to every operand's offsets.
func (c *cursor) reset(lo, hi int, extra [maxOperands]int) {
	sp := c.sp
	c.pos, c.hi = lo, hi
	for k := range sp.nops {
		c.off[k] = sp.base[k] + extra[k]
	}
	rem := lo
	for d := len(sp.shape) - 1; d >= 0; d-- {
		i := rem % sp.shape[d]
		rem /= sp.shape[d]
		c.idx[d] = i
		for k := range sp.nops {
			c.off[k] += i * sp.strides[k][d]
		}
	}
}

// next returns the offsets of the next run's first element for every
// operand and the run's length (consecutive elements along the innermost
// dimension, whose strides are sp.inner). ok is false at the end.
func (c *cursor) next() (off [maxOperands]int, n int, ok bool) {
	if c.pos >= c.hi {
		return off, 0, false
	}
	sp := c.sp
	off = c.off
	nd := len(sp.shape)
	if nd == 0 {
		c.pos++
		return off, 1, true
	}
	in := nd - 1
	n = min(sp.shape[in]-c.idx[in], c.hi-c.pos)
	c.pos += n
	if c.pos >= c.hi {
		return off, n, true
	}
	// The run ended at the end of a row: move to the next row.
	for k := range sp.nops {
		c.off[k] -= c.idx[in] * sp.strides[k][in]
	}
	c.idx[in] = 0
	for d := in - 1; d >= 0; d-- {
		c.idx[d]++
		for k := range sp.nops {
			c.off[k] += sp.strides[k][d]
		}
		if c.idx[d] < sp.shape[d] {
			break
		}
		for k := range sp.nops {
			c.off[k] -= sp.shape[d] * sp.strides[k][d]
		}
		c.idx[d] = 0
	}
	return off, n, true
}

// parallelThreshold is the amount of work (roughly, elements touched) below
// which a kernel runs on the calling goroutine.
const parallelThreshold = 32 << 10

// parallel calls fn over [0, n) split into contiguous ranges, on several
// goroutines when work exceeds parallelThreshold and more than one CPU is
// available, and on the calling goroutine otherwise. How the range is split
// depends on the number of CPUs, so fn must give results that do not depend
// on the split. A panic in fn is recovered and returned as an error; the
// first error in range order is returned.
func parallel(n, work int, fn func(lo, hi int) error) error {
	if n <= 0 {
		return nil
	}
	workers := runtime.GOMAXPROCS(0)
	if work <= parallelThreshold || workers <= 1 || n == 1 {
		return protect(fn, 0, n)
	}
	// Give every worker a fair share of work, but not less than about a
	// threshold's worth.
	workers = min(workers, n, max(2, work/(parallelThreshold/2)))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = protect(fn, lo, hi)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// protect calls fn(lo, hi) and turns a panic into an error.
func protect(fn func(lo, hi int) error, lo, hi int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cpu: kernel panicked: %v", r)
		}
	}()
	return fn(lo, hi)
}
