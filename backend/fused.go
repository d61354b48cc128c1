package backend

import (
	"fmt"
	"math"
)

// FusedAdam is an optional interface of a [Device] whose kernels can do a
// whole Adam or AdamW step of one parameter in a single pass (one kernel
// launch on a GPU) instead of the dozen elementwise ops it takes through
// [Kernels]. Callers find it with a type assertion and fall back to the
// composed ops when a device lacks it or AdamStep returns an error wrapping
// [ErrNotImplemented].
type FusedAdam interface {
	// AdamStep updates the parameter p, the first moment m and the second
	// moment v in place from the gradient g, elementwise, exactly as
	// PyTorch's Adam and AdamW (without amsgrad) do, with cfg's
	// hyper-parameters:
	//
	//	bc1 = 1 - Beta1^Step, bc2 = 1 - Beta2^Step
	//	g = g + WeightDecay·p                    (Adam: Decoupled false)
	//	p = p·(1 - LR·WeightDecay)               (AdamW: Decoupled true, instead)
	//	m = Beta1·m + (1 - Beta1)·g
	//	v = Beta2·v + (1 - Beta2)·g·g
	//	p = p - LR/bc1 · m / (sqrt(v)/sqrt(bc2) + Eps)
	//
	// The gradient g itself is not written. All four views are contiguous,
	// have the same shape and the same floating-point dtype (float32,
	// float64, float16 or bfloat16); the math runs in float32 (float64
	// for float64), with m and v rounded to their dtype at each step, and
	// p, m, v must not overlap g or each other.
	AdamStep(s Stream, p, g, m, v View, cfg AdamStepConfig) error
}

// AdamStepConfig holds the hyper-parameters of one [FusedAdam.AdamStep].
type AdamStepConfig struct {
	LR          float64 // learning rate
	Beta1       float64 // decay rate of the first moment
	Beta2       float64 // decay rate of the second moment
	Eps         float64 // added to the denominator
	WeightDecay float64 // L2 penalty (Decoupled false) or decoupled decay (true)
	Step        int     // the step number, from 1, for the bias corrections
	Decoupled   bool    // AdamW's decoupled weight decay
}

// FusedMatMul is an optional interface of a [Device] whose matrix products
// can do a linear layer's elementwise work in the same kernel: add a bias
// and apply a ReLU to the product on its way out (the forward pass), or sum
// the rows of an operand while reading it (the bias gradient of the
// backward pass). Callers find it with a type assertion and fall back to
// [Kernels.MatMul] and separate ops when a device lacks it or a method
// returns an error wrapping [ErrNotImplemented], as it may for any dtype,
// shape, stride or alignment it has no fused kernel for.
type FusedMatMul interface {
	// MatMulBias computes dst = a·b + bias, then max(dst, 0) when relu is
	// set, for 2-D views a [M,K], b [K,N] (any strides) and dst [M,N]
	// (contiguous), with bias [N] (contiguous) added to every row. All
	// four views have the same floating-point dtype; arithmetic is that of
	// [Kernels.MatMul].
	MatMulBias(s Stream, dst, a, b, bias View, relu bool) error
	// MatMulRowSum computes dst = a·b as MatMulBias does without the bias,
	// and sets rowSum[i] to the sum of row i of a, for rowSum [M]
	// (contiguous, same dtype). With a the transpose of a layer's output
	// gradient, that sum is the bias gradient.
	MatMulRowSum(s Stream, dst, a, b, rowSum View) error
}

// FusedSGD is an optional interface of a [Device] that does a whole SGD step
// of one parameter in a single pass, found and used like [FusedAdam].
type FusedSGD interface {
	// SGDStep updates the parameter p in place from the gradient g, and the
	// momentum buffer buf when cfg.Momentum is not 0 (buf is then ignored
	// otherwise and may be a zero View), as PyTorch's SGD does:
	//
	//	d = g + WeightDecay·p
	//	buf = d                                   (First: the first step)
	//	buf = Momentum·buf + (1 - Dampening)·d    (later steps)
	//	d = d + Momentum·buf (Nesterov), else d = buf
	//	p = p - LR·d
	//
	// The views are contiguous, of one shape and one floating-point dtype,
	// and do not overlap; the math runs in float32 (float64 for float64),
	// buf rounded to its dtype when stored.
	SGDStep(s Stream, p, g, buf View, cfg SGDStepConfig) error
}

// FusedSGDMulti is an optional interface of a [Device] that does the SGD
// steps of many parameters in a few launches, as PyTorch's foreach and
// fused SGD do: a model's hundreds of parameters, most of them small,
// then cost the host a few launches rather than one each.
type FusedSGDMulti interface {
	// SGDSteps does [FusedSGD.SGDStep] with cfg for each parameter ps[i],
	// its gradient gs[i] and, when cfg.Momentum is not 0, its momentum
	// buffer bufs[i] (bufs is ignored otherwise); first[i] stands for
	// cfg.First, which is ignored. The views follow SGDStep's rules, and
	// no parameter's views overlap another's. Nothing is queued when an
	// argument is wrong.
	SGDSteps(s Stream, ps, gs, bufs []View, first []bool, cfg SGDStepConfig) error
}

// SGDStepConfig holds the hyper-parameters of one [FusedSGD.SGDStep].
type SGDStepConfig struct {
	LR          float64 // learning rate
	Momentum    float64 // 0: no momentum buffer
	Dampening   float64 // dampening of the momentum
	WeightDecay float64 // L2 penalty
	Nesterov    bool    // Nesterov momentum
	First       bool    // the first step: buf starts as d
}

// FusedUnscale is an optional interface of a [Device] that unscales a set of
// gradients and checks them for inf and NaN in one pass over their elements
// (a GradScaler's unscale step, PyTorch's
// _amp_foreach_non_finite_check_and_unscale_), leaving the verdict on the
// device so that the host reads it once for the whole set. Callers find it
// with a type assertion and compose the step from [Kernels] when a device
// lacks it or UnscaleCheck returns an error wrapping [ErrNotImplemented].
type FusedUnscale interface {
	// UnscaleCheck multiplies every element of every view in grads by
	// invScale, in place, rounding each product to the view's dtype, and
	// stores 1 into found when any element was inf or NaN before or after
	// the multiplication (a finite gradient that overflows when unscaled
	// counts); found is left as it was otherwise, so that one flag
	// collects several calls. The grads are contiguous views of
	// floating-point dtypes, which may differ from view to view, and do
	// not overlap each other or found; found is a one-element float32
	// view. The products are computed in float32 (float64 for float64
	// views), with invScale rounded to that type first.
	UnscaleCheck(s Stream, grads []View, invScale float64, found View) error
}

// CheckUnscaleCheck checks the arguments of [FusedUnscale.UnscaleCheck]:
// every view is well-formed, found is one float32 element and invScale is
// positive and finite. Errors wrapping [ErrNotImplemented] (the caller then
// composes the step from [Kernels]): a gradient whose dtype is not
// floating-point or that is not contiguous. Overlaps are not checked.
func CheckUnscaleCheck(grads []View, invScale float64, found View) error {
	if err := checkViews(found); err != nil {
		return fmt.Errorf("found flag: %w", err)
	}
	if found.DType != Float32 || found.NumElements() != 1 {
		return fmt.Errorf("found flag is %s with %d elements, want one float32 element", found.DType, found.NumElements())
	}
	if !(invScale > 0) || math.IsInf(invScale, 1) {
		return fmt.Errorf("inverse scale %v, want a positive finite number", invScale)
	}
	for i, g := range grads {
		if err := checkViews(g); err != nil {
			return fmt.Errorf("gradient %d: %w", i, err)
		}
		if !g.DType.IsFloat() {
			return fmt.Errorf("gradient %d: %w", i, notDefined(g.DType))
		}
		if !g.IsContiguous() {
			return fmt.Errorf("gradient %d: view is not contiguous (shape %v, strides %v): %w", i, g.Shape, g.Strides, ErrNotImplemented)
		}
	}
	return nil
}

// MultiCopier is an optional interface of a [Device] that converts many
// views to another dtype in a few launches: a model's float32 weights to
// bfloat16 under autocast, or their bfloat16 gradients back, each pair
// otherwise one [Kernels.Copy] and one launch. Callers find it with a type
// assertion and copy one pair at a time when a device lacks it or CopyMany
// returns an error wrapping [ErrNotImplemented].
type MultiCopier interface {
	// CopyMany copies srcs[i] into dsts[i] for every i, converting as
	// Copy does. Each pair has one shape; every view is contiguous; the
	// sources share one dtype and the destinations another; no
	// destination overlaps another view. Nothing is queued when an
	// argument is wrong.
	CopyMany(s Stream, dsts, srcs []View) error
}
