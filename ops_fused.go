package vram

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
)

// Activation is an activation function that a fused op applies to its
// result in the same pass ([BiasAct], [LinearAct]).
type Activation uint8

// The activations of the fused ops.
const (
	ActNone Activation = iota // the identity
	ActReLU                   // max(x, 0), as [Tensor.Relu]
	ActGELU                   // the exact GELU x·Φ(x), as [Tensor.Gelu]
)

// String returns the activation's name, such as "relu".
func (a Activation) String() string {
	switch a {
	case ActNone:
		return "none"
	case ActReLU:
		return "relu"
	case ActGELU:
		return "gelu"
	}
	return fmt.Sprintf("Activation(%d)", uint8(a))
}

func (a Activation) check(op string) {
	if a > ActGELU {
		fail(op, ErrArgument, "unknown activation %v; use ActNone, ActReLU or ActGELU", a)
	}
}

// addOp is the backend op computing act(x + b).
func (a Activation) addOp() backend.BinaryOp {
	switch a {
	case ActReLU:
		return backend.AddRelu
	case ActGELU:
		return backend.AddGelu
	}
	return backend.Add
}

// unaryOp is the backend op of the activation alone (not ActNone).
func (a Activation) unaryOp() backend.UnaryOp {
	if a == ActGELU {
		return backend.Gelu
	}
	return backend.Relu
}

// fusedFloat checks that the tensors of a fused op are floating-point
// tensors of one dtype, and returns it.
func fusedFloat(op string, ts ...*Tensor) DType {
	var dt DType
	for _, t := range ts {
		if t == nil {
			continue
		}
		if !t.dtype.IsFloat() {
			fail(op, ErrDType, "needs floating-point tensors, got %s", t.dtype)
		}
		if dt == 0 {
			dt = t.dtype
		} else if t.dtype != dt {
			fail(op, ErrDType, "dtypes %s and %s differ; Cast one of them", dt, t.dtype)
		}
	}
	return dt
}

// BiasAct returns act(x + bias), bias broadcasting against x as in
// [Tensor.Add], in one elementwise pass where [Tensor.Add] followed by
// [Tensor.Relu] or [Tensor.Gelu] takes two and an intermediate tensor. A
// bias of x's last dimension, the usual case, runs on CUDA as a contiguous
// kernel that reads the bias once per row. The backward pass is one kernel
// for the activation's gradient (GELU recomputes x + bias instead of
// keeping it) and a reduction for the bias. Both tensors must be
// floating-point of one dtype ([ErrDType]); other rules are Add's.
func BiasAct(x, bias *Tensor, act Activation) *Tensor {
	const op = "bias_act"
	defer asOp(op)
	act.check(op)
	_, held := sameDevice(op, x, bias)
	defer held.unpin()
	fusedFloat(op, x, bias)
	out := binaryRaw(op, act.addOp(), x, bias)
	if !needsGrad(x, bias) {
		return out
	}
	xs, bs := slices.Clone(x.shape), slices.Clone(bias.shape)
	rx, rb := x.requiresGrad.Load(), bias.requiresGrad.Load()
	var sv []*Tensor
	switch act {
	case ActReLU:
		sv = save(out)
	case ActGELU:
		sv = save(x, bias)
	}
	record(op, out, []*Tensor{x, bias}, sv, func(g *Tensor) []*Tensor {
		gp := g
		switch act {
		case ActReLU:
			gp = binaryRaw(op, backend.ReluBackward, g, sv[0])
		case ActGELU:
			pre := binaryRaw(op, backend.Add, sv[0], sv[1])
			gp = binaryRaw(op, backend.GeluBackward, g, pre)
		}
		return []*Tensor{gradIf(rx, func() *Tensor { return sumTo(gp, xs) }), gradIf(rb, func() *Tensor { return sumTo(gp, bs) })}
	})
	return out
}

// Linear returns x·weightᵀ + bias for x [..., in], weight [out, in] and
// bias [out] or nil, of shape [..., out] (torch.nn.functional.linear). See
// [LinearAct].
func Linear(x, weight, bias *Tensor) *Tensor { return LinearAct(x, weight, bias, ActNone) }

// LinearAct returns act(x·weightᵀ + bias) for x [..., in], weight
// [out, in] and bias [out] or nil, of shape [..., out]: a linear layer and
// its activation as one op. Where the device has fused products (CUDA's
// cuBLASLt epilogues) the bias and a ReLU are applied by the product itself
// and the bias gradient is summed by the weight-gradient product, so a
// layer's forward pass is one kernel and its backward two; elsewhere it
// composes [Tensor.MatMul], [BiasAct] and a sum, with the same results up
// to rounding. The weight gradient comes out as contiguous [out, in], ready
// to accumulate. The tensors must be floating-point of one dtype on one
// device; shapes that do not fit panic with [ErrShape].
func LinearAct(x, weight, bias *Tensor, act Activation) *Tensor {
	const op = "linear"
	defer asOp(op)
	act.check(op)
	notNil(op, x, weight)
	if g := current(); g != nil && g.autocast != nil {
		ops, done := autocastLow(op, x, weight, bias)
		defer done()
		x, weight, bias = ops[0], ops[1], ops[2]
	}
	ds, held := sameDevice(op, compact([]*Tensor{x, weight, bias})...)
	defer held.unpin()
	fusedFloat(op, x, weight, bias)
	if len(weight.shape) != 2 {
		fail(op, ErrShape, "weight must be [out, in], got shape %v", Shape(weight.shape))
	}
	nOut, nIn := weight.shape[0], weight.shape[1]
	if len(x.shape) == 0 || x.shape[len(x.shape)-1] != nIn {
		fail(op, ErrShape, "input of shape %v does not end in the weight's %d input features", Shape(x.shape), nIn)
	}
	if bias != nil && (len(bias.shape) != 1 || bias.shape[0] != nOut) {
		fail(op, ErrShape, "bias must be [%d], got shape %v", nOut, Shape(bias.shape))
	}
	rows := backend.NumElements(x.shape[:len(x.shape)-1])
	x2 := raw2(x, rows, nIn)
	defer x2.Release()
	wt := weight.view([]int{nIn, nOut}, []int{weight.strides[1], weight.strides[0]}, weight.offset)
	defer wt.Release()

	var y2 *Tensor
	var pre *Tensor // kept for GELU's backward
	fm, _ := ds.bd.(backend.FusedMatMul)
	if noFusedMatMul.Load() {
		fm = nil
	}
	if bias != nil && fm != nil {
		y2 = newTensor(op, ds, x.dtype, []int{rows, nOut})
		err := fm.MatMulBias(ds.stream(), y2.bv(), x2.bv(), wt.bv(), bias.bv(), act == ActReLU)
		switch {
		case errors.Is(err, backend.ErrNotImplemented):
			y2.Release()
			y2 = nil
		case err != nil:
			y2.Release()
			check(op, err)
		case act == ActGELU:
			pre = y2
			y2 = pre.unaryRaw(backend.Gelu)
		}
	}
	if y2 == nil {
		p := matmulRaw(op, x2, wt)
		switch {
		case bias == nil && act == ActNone:
			y2 = p
		case bias == nil:
			y2 = p.unaryRaw(act.unaryOp())
			if act == ActGELU {
				pre = p
			} else {
				p.Release()
			}
		case act == ActGELU:
			pre = addReleasing(op, backend.Add, p, bias)
			y2 = pre.unaryRaw(backend.Gelu)
		default:
			y2 = addReleasing(op, act.addOp(), p, bias)
		}
	}
	outShape := append(slices.Clone(x.shape[:len(x.shape)-1]), nOut)
	out := y2.view(outShape, backend.ContiguousStrides(outShape), 0)
	y2.Release()
	if !needsGrad(x, weight, bias) {
		if pre != nil {
			pre.Release()
		}
		return out
	}
	rx, rw, rb := x.requiresGrad.Load(), weight.requiresGrad.Load(), bias != nil && bias.requiresGrad.Load()
	xShape := slices.Clone(x.shape)
	// Saved: the input (for the weight gradient), the weight (for the input
	// gradient) and what the activation's gradient needs.
	sv := []*Tensor{nil, nil, nil}
	if rw {
		sv[0] = x2.share()
	}
	if rx {
		sv[1] = weight.share()
	}
	switch act {
	case ActReLU:
		sv[2] = out.share()
	case ActGELU:
		sv[2] = Keep(pre) // the graph's, whatever Tidy it was made in
		pre = nil
	}
	record(op, out, []*Tensor{x, weight, bias}, compact(sv), func(g *Tensor) []*Tensor {
		g2 := raw2(g, rows, nOut)
		switch act {
		case ActReLU:
			y := raw2(sv[2], rows, nOut)
			g2 = binaryRaw(op, backend.ReluBackward, g2, y)
		case ActGELU:
			g2 = binaryRaw(op, backend.GeluBackward, g2, sv[2])
		}
		if !g2.IsContiguous() {
			g2 = g2.Contiguous()
		}
		var gx, gw, gb *Tensor
		if rx {
			gx = matmulRaw(op, g2, sv[1]).view(xShape, backend.ContiguousStrides(xShape), 0)
		}
		g2t := g2.view([]int{nOut, rows}, []int{1, nOut}, g2.offset)
		if rw {
			gw = newTensor(op, ds, g2.dtype, []int{nOut, nIn})
			done := false
			if rb && fm != nil {
				gb = newTensor(op, ds, g2.dtype, []int{nOut})
				err := fm.MatMulRowSum(ds.stream(), gw.bv(), g2t.bv(), sv[0].bv(), gb.bv())
				if err == nil {
					done = true
				} else if !errors.Is(err, backend.ErrNotImplemented) {
					check(op, err)
				} else {
					gb.Release()
					gb = nil
				}
			}
			if !done {
				gw.Release()
				gw = matmulRaw(op, g2t, sv[0])
			}
		}
		if rb && gb == nil {
			gb = reduceRaw(op, backend.Sum, g2, []int{0}).view([]int{nOut}, []int{1}, 0)
		}
		return []*Tensor{gx, gw, gb}
	})
	if pre != nil {
		pre.Release()
	}
	return out
}

// addReleasing returns binaryRaw(op, k, p, bias) and releases p, also when
// binaryRaw panics (bias released on another goroutine meanwhile).
func addReleasing(op string, k backend.BinaryOp, p, bias *Tensor) *Tensor {
	defer p.Release()
	return binaryRaw(op, k, p, bias)
}

// noFusedMatMul turns the fused products off, for tests of the composed
// path.
var noFusedMatMul atomic.Bool

// raw2 returns t as a [rows, cols] tensor without recording: a view when
// t's layout allows it, else a contiguous copy.
func raw2(t *Tensor, rows, cols int) *Tensor {
	ns := []int{rows, cols}
	if st := computeView(t.shape, t.strides, ns); st != nil {
		return t.view(ns, st, t.offset)
	}
	c := newTensor("reshape", t.ds(), t.dtype, t.shape)
	check("reshape", t.ds().bd.Copy(t.ds().stream(), c.bv(), t.bv()))
	defer c.Release()
	return c.view(ns, backend.ContiguousStrides(ns), 0)
}

// compact drops the nil entries of ts.
func compact(ts []*Tensor) []*Tensor {
	var out []*Tensor
	for _, t := range ts {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}
