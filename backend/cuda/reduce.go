package cuda

import (
	"fmt"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

// Reductions (kernels/reduce.cu). Each output's reduced elements are split
// into chunks, and a group of G threads folds one chunk: G = 1 (a thread)
// when the outputs lie next to each other in the source and the reduced
// elements do not (a column sum: neighbouring threads read neighbouring
// addresses), a warp for short rows, a block for long ones. The number of
// chunks depends only on the shapes, never on the GPU, so a reduction
// gives the same bits on every run and every card.
const (
	// reduceThreads is the number of threads a reduction aims to keep
	// busy, by splitting long reductions into chunks.
	reduceThreads = 1 << 17
	// minPerThread is the fewest elements a thread folds when a reduction
	// is split into chunks.
	minPerThread = 32
	// warpRowMax is the longest row folded by a warp rather than a block.
	warpRowMax = 4096
	// accBytes is the size of one partial result (kernels' Acc<T>).
	accBytes = 16
)

// reduceNames[op][G] names the kernel of groups of G threads (0: the
// kernel that joins the chunks); wideNames does for the widened Sum and
// Prod of a 16-bit float into float32 (red_sumw_*, red_prodw_*).
var reduceNames, wideNames [backend.ArgMin + 1]map[int]string

func init() {
	names := func(s string) map[int]string {
		return map[int]string{1: "red_" + s + "_g1", 32: "red_" + s + "_g32", 256: "red_" + s + "_g256", 0: "red_" + s + "_fin"}
	}
	for op := range reduceNames {
		s := backend.ReduceOp(op).String()
		reduceNames[op] = names(s)
		if op := backend.ReduceOp(op); op == backend.Sum || op == backend.Prod {
			wideNames[op] = names(s + "w")
		}
	}
}

// Reduce reduces src over axes into dst (see backend.Kernels). dst has
// src's dtype, int64 for ArgMax and ArgMin, or float32 for a Sum or Prod
// of float16 or bfloat16 (the float accumulator, not rounded to 16 bits).
func (dev *Device) Reduce(s backend.Stream, op backend.ReduceOp, dst, src backend.View, axes []int) error {
	what := "reduce " + op.String()
	d, err := dev.begin(s, what, backend.CheckReduce(op, dst, src, axes))
	if err != nil {
		return err
	}
	reduced := make([]bool, len(src.Shape))
	for _, ax := range axes {
		reduced[ax] = true
	}
	var outShape, outSrc, outDst, redShape, redSrc []int
	for i, n := range src.Shape {
		if reduced[i] {
			redShape = append(redShape, n)
			redSrc = append(redSrc, src.Strides[i])
		} else {
			outShape = append(outShape, n)
			outSrc = append(outSrc, src.Strides[i])
			outDst = append(outDst, dst.Strides[i])
		}
	}
	nOut, nRed := int64(backend.NumElements(outShape)), int64(backend.NumElements(redShape))
	if nRed == 0 {
		switch op {
		case backend.Sum:
			return d.Fill(d.st, dst, 0)
		case backend.Prod:
			return d.Fill(d.st, dst, 1)
		}
		return fmt.Errorf("cuda: %s: reduction over zero elements (source shape %v, axes %v) has no identity", what, src.Shape, axes)
	}
	if nOut == 0 {
		return nil
	}
	sp, err := d.ptrOf(what, src)
	if err != nil {
		return err
	}
	dp, err := d.ptrOf(what, dst)
	if err != nil {
		return err
	}
	om, omst := merge(outShape, [][]int{outSrc, outDst})
	rm, rmst := merge(redShape, [][]int{redSrc})
	if len(om) > maxDims || len(rm) > maxDims {
		return fmt.Errorf("cuda: %s: more than %d dimensions after merging (shape %v, strides %v): %w", what, maxDims, src.Shape, src.Strides, backend.ErrNotImplemented)
	}

	g := 256
	switch {
	case len(rm) == 0:
		g = 1
	case len(om) > 0 && omst[0][len(om)-1] == 1 && rmst[0][len(rm)-1] != 1:
		g = 1
	case nRed <= warpRowMax:
		g = 32
	}
	chunks := int64(1)
	if want := int64(reduceThreads / g); nOut < want {
		chunks = (want + nOut - 1) / nOut
		chunks = min(chunks, max(1, nRed/int64(g*minPerThread)))
	}
	chunk := (nRed + chunks - 1) / chunks
	chunks = (nRed + chunk - 1) / chunk

	key := modKey{fam: famReduce, dt: src.DType, op: op.String()}
	names := reduceNames[op]
	if backend.WidensReduce(op, dst.DType, src.DType) {
		names = wideNames[op]
	}
	return d.run(func() error {
		f, err := d.function(key, names[g])
		if err != nil {
			return err
		}
		var part *Buffer
		if chunks > 1 {
			// From the pool of the reduction's stream, as matmul's
			// temporaries.
			b, err := d.Alloc(nOut*chunks*accBytes, d.st, "")
			if err != nil {
				return err
			}
			part = b.(*Buffer)
			defer d.Free(part, d.st)
		}
		a := d.getArgs()
		defer d.putArgs(a)
		var pp cuda.DevicePtr
		if part != nil {
			pp = part.ptr
		}
		a.Ptr(sp).Ptr(dp).Ptr(pp).Int64(nOut).Int64(nRed).Int64(chunks).Int64(chunk)
		addIdx(a, nOut, om, omst)
		addIdx(a, nRed, rm, rmst)
		tasks := nOut * chunks
		blocks := min((tasks*int64(g)+blockThreads-1)/blockThreads, int64(d.sms*blocksPerSM))
		if err := d.launch(f, uint32(max(1, blocks)), a); err != nil {
			return err
		}
		if chunks == 1 {
			return nil
		}
		fin, err := d.function(key, names[0])
		if err != nil {
			return err
		}
		a.Reset()
		a.Ptr(pp).Ptr(dp).Int64(nOut).Int64(chunks)
		addIdx(a, nOut, om, omst[1:])
		return d.launch(fin, d.grid(nOut), a)
	})
}
