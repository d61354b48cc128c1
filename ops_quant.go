package vram

import (
	"errors"
	"slices"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
)

// int8Path forces one way of computing [LinearInt8], for tests: 0 picks the
// best the device has; int8Dequant skips backend.Int8Linear; int8Composed
// also skips backend.Int8Dequantizer.
var int8Path atomic.Int32

const (
	int8Dequant  = 1
	int8Composed = 2
)

// LinearInt8 returns x·wᵀ + bias for x [..., in], an int8 weight wq
// [out, in] with one scale per output channel, scale [out], so that
// w[n,k] = wq[n,k]·scale[n], and bias [out] or nil; the result has shape
// [..., out] and x's floating-point dtype. It is the forward pass of a
// weight-only quantized linear layer (package nn/quant).
//
// The float weight is never kept: a device with a fused int8 product (the
// CPU) computes from the int8 values directly, one block of output
// channels at a time; otherwise (CUDA) one kernel expands the weight into a
// transient buffer of x's dtype that the product reads and that goes back
// to the caching allocator right after it, so a model holds one layer's
// float weight at a time at most, and only while that layer runs. Devices
// with neither compose the expansion from a copy and a multiplication.
//
// scale and bias are cast to x's dtype when they have another
// floating-point dtype (they are vectors of out elements). Inside
// amp.Autocast a float32 x is cast to the autocast dtype first, as for
// [Linear]. Gradients flow
// to x only: wq is int8, and a scale or bias that requires grad panics with
// [ErrAutograd] while grad mode is on, as quantized layers are for
// inference (quantize a trained model; train the float one). Other
// misuse panics with [ErrDType] (wq not int8, x not floating-point) or
// [ErrShape].
func LinearInt8(x, wq, scale, bias *Tensor) *Tensor {
	const op = "linear_int8"
	defer asOp(op)
	notNil(op, x, wq, scale)
	if g := current(); g != nil && g.autocast != nil {
		ops, done := autocastLow(op, x)
		defer done()
		x = ops[0]
	}
	ds, held := sameDevice(op, compact([]*Tensor{x, wq, scale, bias})...)
	defer held.unpin()
	dt := x.dtype
	if !dt.IsFloat() {
		fail(op, ErrDType, "input must be floating-point, got %s", dt)
	}
	if wq.dtype != Int8 {
		fail(op, ErrDType, "weight must be int8, got %s; quantize it with nn/quant", wq.dtype)
	}
	for _, v := range compact([]*Tensor{scale, bias}) {
		if !v.dtype.IsFloat() {
			fail(op, ErrDType, "scale and bias must be floating-point, got %s", v.dtype)
		}
	}
	if len(wq.shape) != 2 {
		fail(op, ErrShape, "weight must be [out, in], got shape %v", Shape(wq.shape))
	}
	nOut, nIn := wq.shape[0], wq.shape[1]
	if len(x.shape) == 0 || x.shape[len(x.shape)-1] != nIn {
		fail(op, ErrShape, "input of shape %v does not end in the weight's %d input features", Shape(x.shape), nIn)
	}
	if len(scale.shape) != 1 || scale.shape[0] != nOut {
		fail(op, ErrShape, "scale must be [%d], got shape %v", nOut, Shape(scale.shape))
	}
	if bias != nil && (len(bias.shape) != 1 || bias.shape[0] != nOut) {
		fail(op, ErrShape, "bias must be [%d], got shape %v", nOut, Shape(bias.shape))
	}
	if needsGrad(scale, bias) {
		fail(op, ErrAutograd, "int8 linear layers are inference-only: the scale and bias must not require grad "+
			"(train the float model, then quantize it; or run under vram.NoGrad)")
	}

	// Contiguous operands of x's dtype, released on return.
	var tmp []*Tensor
	defer func() {
		for _, t := range tmp {
			t.Release()
		}
	}()
	contig := func(t *Tensor, dt DType) *Tensor {
		c := castRaw(t, dt)
		if !c.IsContiguous() {
			cc := c.contiguous(op)
			c.Release()
			c = cc
		}
		tmp = append(tmp, c)
		return c
	}
	rows := backend.NumElements(x.shape[:len(x.shape)-1])
	xr := raw2(x, rows, nIn)
	x2 := contig(xr, dt)
	xr.Release()
	wc := contig(wq, Int8)
	sc := contig(scale, dt)
	var bc *Tensor
	if bias != nil {
		bc = contig(bias, dt)
	}

	y2 := int8Product(op, ds, x2, wc, sc, bc)
	outShape := append(slices.Clone(x.shape[:len(x.shape)-1]), nOut)
	out := y2.view(outShape, backend.ContiguousStrides(outShape), 0)
	y2.Release()
	if !needsGrad(x) {
		return out
	}
	xShape := slices.Clone(x.shape)
	sv := save(wc, sc)
	record(op, out, []*Tensor{x}, sv, func(g *Tensor) []*Tensor {
		g2 := raw2(g, rows, nOut)
		defer g2.Release()
		w := dequantizeInt8(op, ds, sv[0], sv[1], g2.dtype)
		defer w.Release()
		gx := matmulRaw(op, g2, w)
		v := gx.view(xShape, backend.ContiguousStrides(xShape), 0)
		gx.Release()
		return []*Tensor{v}
	})
	return out
}

// int8Product computes x·(wq⊙scale)ᵀ + bias (bias may be nil) for
// contiguous x [rows, in], wq, scale and bias of x's dtype, as a new
// [rows, out] tensor, through the best path the device has.
func int8Product(op string, ds *devState, x, wq, scale, bias *Tensor) *Tensor {
	rows, nOut, nIn := x.shape[0], wq.shape[0], wq.shape[1]
	path := int8Path.Load()
	if il, ok := ds.bd.(backend.Int8Linear); ok && path == 0 {
		y := newTensor(op, ds, x.dtype, []int{rows, nOut})
		bv := backend.View{}
		if bias != nil {
			bv = bias.bv()
		}
		err := il.MatMulInt8Weight(ds.stream(), y.bv(), x.bv(), wq.bv(), scale.bv(), bv)
		if err == nil {
			return y
		}
		y.Release()
		if !errors.Is(err, backend.ErrNotImplemented) {
			check(op, err)
		}
	}
	// The transient float weight [out, in], read as wᵀ [in, out].
	w := dequantizeInt8(op, ds, wq, scale, x.dtype)
	defer w.Release()
	wt := w.view([]int{nIn, nOut}, []int{1, nIn}, 0)
	defer wt.Release()
	if fm, ok := ds.bd.(backend.FusedMatMul); ok && bias != nil && !noFusedMatMul.Load() {
		y := newTensor(op, ds, x.dtype, []int{rows, nOut})
		err := fm.MatMulBias(ds.stream(), y.bv(), x.bv(), wt.bv(), bias.bv(), false)
		if err == nil {
			return y
		}
		y.Release()
		if !errors.Is(err, backend.ErrNotImplemented) {
			check(op, err)
		}
	}
	p := matmulRaw(op, x, wt)
	if bias == nil {
		return p
	}
	return addReleasing(op, backend.Add, p, bias)
}

// dequantizeInt8 returns wq⊙scale as a new contiguous [out, in] tensor of
// dtype dt, for contiguous wq (int8) and scale [out] (cast to dt here when
// it has another dtype): one kernel where the device has
// backend.Int8Dequantizer, else a cast and a multiplication by the
// broadcast scale, both rounded to dt as the kernel rounds.
func dequantizeInt8(op string, ds *devState, wq, scale *Tensor, dt DType) *Tensor {
	sc := castRaw(scale, dt)
	defer sc.Release()
	w := newTensor(op, ds, dt, wq.shape)
	if dq, ok := ds.bd.(backend.Int8Dequantizer); ok && int8Path.Load() != int8Composed {
		err := dq.DequantizeInt8(ds.stream(), w.bv(), wq.bv(), sc.bv())
		if err == nil {
			return w
		}
		if !errors.Is(err, backend.ErrNotImplemented) {
			w.Release()
			check(op, err)
		}
	}
	bs := ds.stream()
	if err := ds.bd.Copy(bs, w.bv(), wq.bv()); err != nil {
		w.Release()
		check(op, err)
	}
	col := sc.bv()
	col.Shape, col.Strides = slices.Clone(wq.shape), []int{sc.strides[0], 0}
	if err := ds.bd.Binary(bs, backend.Mul, w.bv(), w.bv(), col); err != nil {
		w.Release()
		check(op, err)
	}
	return w
}
