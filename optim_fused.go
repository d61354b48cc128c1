package vram

import (
	"errors"
	"slices"

	"github.com/vramgo/vram/backend"
)

// FusedAdamStep does one Adam (decoupled false) or AdamW (decoupled true)
// step of parameter p with gradient g and moment estimates m and v, in
// place, in one fused pass: one kernel launch on CUDA, the same arithmetic
// on the CPU and sim devices. It computes what package optim's Adam
// computes with a dozen ops:
//
//	g = g + weightDecay·p                    (Adam; AdamW instead: p = p·(1 - lr·weightDecay))
//	m = beta1·m + (1 - beta1)·g
//	v = beta2·v + (1 - beta2)·g²
//	p = p - lr/(1 - beta1^step) · m / (sqrt(v)/sqrt(1 - beta2^step) + eps)
//
// in float32 (float64 for float64 tensors), also for float16 and
// bfloat16, whose m and v are rounded to their dtype when stored; g is left
// unchanged. It is an
// optimizer's building block: p may require grad (it is updated like the
// ...InPlace methods would inside [NoGrad], without recording anything),
// but m and v may not unless gradients are disabled.
//
// It returns false, doing nothing, when the fused step does not apply: the
// device has no fused step, the tensors do not share one dense layout
// (row-major, channels-last or any other order without gaps, which the
// step reads as flat arrays), the dtypes differ or are not floating-point,
// or the shapes differ; the caller then composes the step from ordinary
// ops. It panics with a
// [*DeviceMismatchError] when the tensors are on different devices, with
// an [*Error] for a released tensor, a step below 1, or m or v requiring
// grad while gradients are enabled.
func FusedAdamStep(p, g, m, v *Tensor, lr, beta1, beta2, eps, weightDecay float64, step int, decoupled bool) bool {
	const op = "adam_step"
	notNil(op, p, g, m, v)
	ds, held := sameDevice(op, p, g, m, v)
	defer held.unpin()
	if step < 1 {
		fail(op, ErrArgument, "step %d, want at least 1", step)
	}
	m.inPlaceCheck(op)
	v.inPlaceCheck(op)
	fa, ok := ds.bd.(backend.FusedAdam)
	if !ok || !p.dtype.IsFloat() {
		return false
	}
	for _, t := range []*Tensor{g, m, v} {
		if t.dtype != p.dtype || !slices.Equal(t.shape, p.shape) {
			return false
		}
	}
	vs, ok := flatViews(p, g, m, v)
	if !ok {
		return false
	}
	err := fa.AdamStep(ds.stream(), vs[0], vs[1], vs[2], vs[3], backend.AdamStepConfig{
		LR: lr, Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: weightDecay, Step: step, Decoupled: decoupled,
	})
	if errors.Is(err, backend.ErrNotImplemented) {
		return false
	}
	check(op, err)
	p.wrote()
	m.wrote()
	v.wrote()
	return true
}

// FusedSGDStep does one SGD step of parameter p with gradient g in place,
// in one fused pass (one kernel launch on CUDA, the same arithmetic on the
// CPU and sim devices). It computes
// what package optim's SGD computes with up to six ops:
//
//	d = g + weightDecay·p
//	buf = d                                   (first: the first step)
//	buf = momentum·buf + (1 - dampening)·d    (later steps)
//	d = d + momentum·buf (nesterov), else d = buf
//	p = p - lr·d
//
// buf, the momentum buffer, is used only when momentum is not 0 (it may be
// nil otherwise); g is left unchanged. The arithmetic is float32 (float64
// for float64 tensors, float32 for float16 and bfloat16) with buf rounded
// to its dtype when stored. It returns false, doing nothing, when the
// fused step does not apply (no fused step on the device, tensors that do
// not share one dense layout, dtypes or shapes that differ); the
// caller then composes the step. It panics like [FusedAdamStep].
func FusedSGDStep(p, g, buf *Tensor, lr, momentum, dampening, weightDecay float64, nesterov, first bool) bool {
	const op = "sgd_step"
	notNil(op, p, g)
	if momentum != 0 && buf == nil {
		fail(op, ErrArgument, "nil *Tensor for the momentum buffer, which momentum %v needs", momentum)
	}
	ts := []*Tensor{p, g}
	if momentum != 0 {
		ts = append(ts, buf)
		buf.inPlaceCheck(op)
	}
	ds, held := sameDevice(op, ts...)
	defer held.unpin()
	fs, ok := ds.bd.(backend.FusedSGD)
	if !ok || !p.dtype.IsFloat() {
		return false
	}
	for _, t := range ts {
		if t.dtype != p.dtype || !slices.Equal(t.shape, p.shape) {
			return false
		}
	}
	vs, ok := flatViews(ts...)
	if !ok {
		return false
	}
	var bv backend.View
	if momentum != 0 {
		bv = vs[2]
	}
	err := fs.SGDStep(ds.stream(), vs[0], vs[1], bv, backend.SGDStepConfig{
		LR: lr, Momentum: momentum, Dampening: dampening, WeightDecay: weightDecay, Nesterov: nesterov, First: first,
	})
	if errors.Is(err, backend.ErrNotImplemented) {
		return false
	}
	check(op, err)
	p.wrote()
	if momentum != 0 {
		buf.wrote()
	}
	return true
}

// FusedSGDSteps is [FusedSGDStep] for many parameters at once: ps[i] with
// gradient gs[i], momentum buffer bufs[i] (bufs may be nil when momentum
// is 0) and first[i], all on one device. A device with such a step
// ([backend.FusedSGDMulti]) takes a few launches for a model's hundreds of
// parameters rather than one each. It returns false, doing
// nothing, when the device has no such step or the fused step does not
// apply to one of the parameters (see FusedSGDStep); the caller then
// steps them one by one. It panics like FusedSGDStep, and with an [*Error]
// of kind [ErrArgument] when the slices' lengths differ.
func FusedSGDSteps(ps, gs, bufs []*Tensor, first []bool, lr, momentum, dampening, weightDecay float64, nesterov bool) bool {
	const op = "sgd_steps"
	if len(gs) != len(ps) || len(first) != len(ps) || momentum != 0 && len(bufs) != len(ps) {
		fail(op, ErrArgument, "%d parameters with %d gradients, %d momentum buffers and %d first-step flags", len(ps), len(gs), len(bufs), len(first))
	}
	if len(ps) == 0 {
		return true
	}
	all := make([]*Tensor, 0, 3*len(ps))
	for i := range ps {
		notNil(op, ps[i], gs[i])
		all = append(all, ps[i], gs[i])
		if momentum != 0 {
			if bufs[i] == nil {
				fail(op, ErrArgument, "nil *Tensor for the momentum buffer of parameter %d, which momentum %v needs", i, momentum)
			}
			bufs[i].inPlaceCheck(op)
			all = append(all, bufs[i])
		}
	}
	ds, held := sameDevice(op, all...)
	defer held.unpin()
	fm, ok := ds.bd.(backend.FusedSGDMulti)
	if !ok {
		return false
	}
	per := 2
	if momentum != 0 {
		per = 3
	}
	pv, gv := make([]backend.View, len(ps)), make([]backend.View, len(ps))
	var bv []backend.View
	if momentum != 0 {
		bv = make([]backend.View, len(ps))
	}
	for i, p := range ps {
		ts := all[per*i : per*i+per]
		if !p.dtype.IsFloat() {
			return false
		}
		for _, t := range ts {
			if t.dtype != p.dtype || !slices.Equal(t.shape, p.shape) {
				return false
			}
		}
		vs, ok := flatViews(ts...)
		if !ok {
			return false
		}
		pv[i], gv[i] = vs[0], vs[1]
		if momentum != 0 {
			bv[i] = vs[2]
		}
	}
	err := fm.SGDSteps(ds.stream(), pv, gv, bv, first, backend.SGDStepConfig{
		LR: lr, Momentum: momentum, Dampening: dampening, WeightDecay: weightDecay, Nesterov: nesterov,
	})
	if errors.Is(err, backend.ErrNotImplemented) {
		return false
	}
	check(op, err)
	for i, p := range ps {
		p.wrote()
		if momentum != 0 {
			bufs[i].wrote()
		}
	}
	return true
}
