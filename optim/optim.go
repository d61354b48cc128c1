package optim

import (
	"fmt"
	"math"
	"reflect"

	"github.com/vramgo/vram"
)

// Optimizer updates parameters from their gradients (torch.optim.Optimizer).
type Optimizer interface {
	// Step updates every parameter that has a gradient, in place.
	Step()
	// ZeroGrad clears the gradients of the parameters (PyTorch's zero_grad
	// with set_to_none=True), releasing them.
	ZeroGrad()
	// LR returns the learning rate (of the first parameter group of a
	// GroupedOptimizer).
	LR() float64
	// SetLR changes the learning rate (of every parameter group of a
	// GroupedOptimizer).
	SetLR(lr float64)
}

// Release frees the state that opt keeps (momentum buffers, moment
// estimates, step counts), as calling opt's own Release method does: every
// optimizer of this package has one, and stays usable after it, its state
// starting over at the next Step. It serves code that holds an optimizer as
// an [Optimizer], which does not list Release. For a nil opt (a nil
// pointer too), or one without a Release method, it does nothing.
func Release(opt Optimizer) {
	if r, ok := opt.(interface{ Release() }); ok && !isNil(opt) {
		r.Release()
	}
}

// isNil reports whether opt is nil or holds a nil pointer (a "var opt
// *SGD" left unset), which the functions that take an optimizer treat
// alike.
func isNil(opt Optimizer) bool {
	if opt == nil {
		return true
	}
	v := reflect.ValueOf(opt)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// GroupedOptimizer is an Optimizer whose parameters are in groups, each
// with a learning rate of its own (PyTorch's param_groups). The
// Optimizer's LR is the first group's rate and SetLR sets every group's;
// [Schedule] drives each group's rate from the group's own base rate.
type GroupedOptimizer interface {
	Optimizer
	// NumGroups returns the number of parameter groups, at least 1.
	NumGroups() int
	// GroupLR returns the learning rate of group i.
	GroupLR(i int) float64
	// SetGroupLR sets the learning rate of group i.
	SetGroupLR(i int, lr float64)
}

// checkLR panics with an *vram.Error of kind vram.ErrArgument for a negative
// or NaN learning rate given to SetLR.
func checkLR(lr float64) {
	if !(lr >= 0) || math.IsInf(lr, 1) {
		panic(&vram.Error{Op: "set_lr", Kind: vram.ErrArgument, Detail: fmt.Sprintf("learning rate must be finite and non-negative, got %v", lr)})
	}
}

// follow moves state tensors to p's device when p moved since they were
// made, and lays them out in p's memory format when p changed it (a model
// converted with nn.ToMemoryFormat after some steps), so that the fused
// steps keep taking them.
func follow(p *vram.Tensor, state ...*vram.Tensor) {
	d := p.Device()
	f := stateFormat(p)
	for _, s := range state {
		if s == nil {
			continue
		}
		if s.Device() != d {
			s.MoveTo(d)
		}
		if !s.IsContiguous(f) || f == vram.ChannelsLast && s.SuggestMemoryFormat() != f {
			s.ConvertMemoryFormat(f)
		}
	}
}

// stateFormat returns the memory format of p's optimizer state: p's
// format when p is dense in it (channels-last for a channels-last
// convolution weight), else row-major.
func stateFormat(p *vram.Tensor) vram.MemoryFormat {
	if f := p.SuggestMemoryFormat(); p.IsContiguous(f) {
		return f
	}
	return vram.ContiguousFormat
}

// newState returns a tensor shaped as p, in p's dtype, device and memory
// format (stateFormat), filled with zeros when zero is set, else
// uninitialized: an optimizer state that the fused steps take together
// with p and its gradient as flat arrays.
func newState(p *vram.Tensor, zero bool) *vram.Tensor {
	var s *vram.Tensor
	if zero {
		s = p.NewZeros(p.Shape())
	} else {
		s = p.NewEmpty(p.Shape())
	}
	if f := stateFormat(p); f != vram.ContiguousFormat {
		s.ConvertMemoryFormat(f)
	}
	return s
}

// zeroGrad releases the gradients of params.
func zeroGrad(params []*vram.Tensor) {
	for _, p := range params {
		p.ZeroGrad()
	}
}

// ClipGradNorm scales the gradients of params in place so that their
// combined L2 norm (the norm of all gradient elements taken together) is at
// most maxNorm, and returns that norm as it was before clipping
// (torch.nn.utils.clip_grad_norm_). As in PyTorch, every gradient is
// multiplied by maxNorm/(norm+1e-6) whenever that factor is below 1, so a
// norm equal to maxNorm is scaled by a hair. Parameters without a gradient
// are skipped, and gradients may live on different devices. A non-finite
// norm is returned as is and scales the gradients as PyTorch's does: an
// infinite norm by 0 (infinite elements become NaN), a NaN norm by NaN, so
// that every gradient becomes NaN; [ClipGradNormWith] can refuse such a
// norm instead. It panics with an *vram.Error of kind vram.ErrArgument for
// a negative or NaN maxNorm.
//
// PyTorch has this function in torch.nn.utils; it lives in package optim
// because it belongs to the optimisation step, between Backward and Step.
// [GetTotalNorm] and [ClipGradsWithNorm] are its two halves.
func ClipGradNorm(params []*vram.Tensor, maxNorm float64) float64 {
	if !(maxNorm >= 0) {
		panic(&vram.Error{Op: "clip_grad_norm", Kind: vram.ErrArgument, Detail: fmt.Sprintf("max norm must be non-negative, got %v", maxNorm)})
	}
	norm, _ := ClipGradNormWith(params, maxNorm, ClipOptions{})
	return norm
}

// ClipOptions holds the options of [ClipGradNormWith] and [GetTotalNorm],
// those of torch.nn.utils.clip_grad_norm_. The zero value is ClipGradNorm's.
type ClipOptions struct {
	// NormType is the p of the p-norm, any number but NaN, as
	// torch.linalg.vector_norm takes it: math.Inf(1) for the largest
	// absolute value, math.Inf(-1) for the smallest, a negative p for
	// (Σ|g|ᵖ)^(1/p), which is 0 when an element is; 0 means 2 (see
	// ZeroNormType).
	NormType float64
	// ZeroNormType makes the norm type 0 (norm_type=0), which NormType's
	// zero value cannot say: as in PyTorch, the norm of each tensor is its
	// number of non-zero elements, and the total norm the number of
	// tensors with one or more (NaN counting as non-zero). NormType must
	// then be 0.
	ZeroNormType bool
	// ErrorIfNonfinite makes a NaN or infinite total norm an error,
	// the gradients left as they are (error_if_nonfinite=True).
	ErrorIfNonfinite bool
}

// ClipGradNormWith is [ClipGradNorm] with the options o: it scales the
// gradients of params in place so that their combined p-norm is at most
// maxNorm and returns the norm before clipping. It returns an error of
// kind vram.ErrArgument, scaling nothing, for a negative or NaN maxNorm,
// a NaN NormType, a NormType other than 0 with ZeroNormType, and, with
// o.ErrorIfNonfinite, a total
// norm that is NaN or infinite (the norm is returned too).
func ClipGradNormWith(params []*vram.Tensor, maxNorm float64, o ClipOptions) (float64, error) {
	if !(maxNorm >= 0) {
		return 0, errorf(vram.ErrArgument, "optim: clip grad norm: max norm must be non-negative, got %v", maxNorm)
	}
	norm, err := GetTotalNorm(grads(params), o)
	if err != nil {
		return norm, err
	}
	return norm, ClipGradsWithNorm(params, maxNorm, norm)
}

// grads returns the gradients of params, skipping nil parameters and
// those without a gradient.
func grads(params []*vram.Tensor) []*vram.Tensor {
	var out []*vram.Tensor
	for _, t := range params {
		if t == nil {
			continue
		}
		if g := t.Grad(); g != nil {
			out = append(out, g)
		}
	}
	return out
}

// GetTotalNorm returns the p-norm of all elements of tensors taken together
// (torch.nn.utils.get_total_norm, PyTorch 2.6), p being o.NormType: the
// p-norm of the tensors' own p-norms. Pass the gradients themselves, not
// the parameters. Nil tensors are skipped, the tensors may live on
// different devices, and no tensors give 0. 16-bit tensors are summed in
// float32. It returns an error of kind vram.ErrArgument for a NormType that
// is NaN, or other than 0 with ZeroNormType, and, with o.ErrorIfNonfinite,
// for a NaN or infinite
// norm (which is returned too), of kind vram.ErrDType for a tensor that
// is not floating-point, as torch.linalg.vector_norm refuses it, and of
// kind vram.ErrReleased for a released tensor.
func GetTotalNorm(tensors []*vram.Tensor, o ClipOptions) (float64, error) {
	p := o.NormType
	switch {
	case o.ZeroNormType && p != 0:
		return 0, errorf(vram.ErrArgument, "optim: total norm: norm type %v given with ZeroNormType", p)
	case math.IsNaN(p):
		return 0, errorf(vram.ErrArgument, "optim: total norm: norm type is NaN; it must be a number or an infinity")
	case p == 0 && !o.ZeroNormType:
		p = 2
	}
	for i, g := range tensors {
		switch {
		case g == nil:
		case g.Released():
			return 0, errorf(vram.ErrReleased, "optim: total norm: tensor %d was released", i)
		case !g.DType().IsFloat():
			return 0, errorf(vram.ErrDType, "optim: total norm: tensor %d is %s; norms are taken of floating-point tensors", i, g.DType())
		}
	}
	// Each tensor's share (the sum of its p-th powers, or its largest |g|
	// for +Inf) stays on its device; the shares of a device are stacked
	// and reduced there, so the host waits once a device, not once a
	// tensor, and adds the devices' results in float64.
	var acc float64
	inf, negInf := math.IsInf(p, 1), math.IsInf(p, -1)
	if negInf {
		acc = math.Inf(1) // the smallest |g| of none; 0 is returned then
	}
	found := false
	vram.NoGrad(func() {
		vram.Tidy(func() {
			var devices []vram.Device
			shares := map[vram.Device][]*vram.Tensor{}
			wide := map[vram.Device]bool{} // a float64 tensor: reduce in float64
			for _, g := range tensors {
				if g == nil || g.NumElements() == 0 {
					continue
				}
				x := opMath(g).Abs() // 16-bit powers overflow
				var r *vram.Tensor
				found = true
				switch {
				case inf:
					r = x.Max() // NaN wins
				case negInf:
					r = x.Min()
				case p == 0:
					// Not 0 when the tensor has a non-zero element (NaN
					// wins): PyTorch's total norm of order 0 counts the
					// tensors whose count of non-zeros is not 0.
					r = x.Max()
				case p == 2:
					r = x.Square().Sum()
				case p == 1:
					r = x.Sum()
				default:
					r = x.PowScalar(p).Sum()
				}
				d := g.Device()
				if _, ok := shares[d]; !ok {
					devices = append(devices, d)
				}
				shares[d] = append(shares[d], r)
				wide[d] = wide[d] || r.DType() == vram.Float64
			}
			for _, d := range devices {
				rs := shares[d]
				if wide[d] {
					for i, r := range rs {
						rs[i] = r.Cast(vram.Float64)
					}
				}
				s := vram.Stack(rs, 0)
				switch {
				case inf:
					acc = max(acc, s.Max().Item())
				case negInf:
					acc = min(acc, s.Min().Item())
				case p == 0:
					for _, v := range s.Float64s() {
						if v != 0 {
							acc++
						}
					}
				default:
					acc += s.Sum().Item()
				}
			}
		})
	})
	norm := acc
	switch {
	case !found:
		norm = 0
	case math.IsNaN(acc) || math.IsInf(p, 0) || p == 0:
	case p == 2:
		norm = math.Sqrt(acc)
	case p != 1:
		norm = math.Pow(acc, 1/p)
	}
	if o.ErrorIfNonfinite && (math.IsNaN(norm) || math.IsInf(norm, 0)) {
		return norm, errorf(vram.ErrArgument, "optim: total norm: the total norm of order %v of the gradients is %v; "+
			"set ErrorIfNonfinite to false to clip anyway", p, norm)
	}
	return norm, nil
}

// ClipGradsWithNorm scales the gradients of params in place by
// maxNorm/(totalNorm+1e-6) when that factor is below 1 or NaN
// (torch.nn.utils.clip_grads_with_norm_, PyTorch 2.6): the second half of
// [ClipGradNorm], with a total norm from [GetTotalNorm], perhaps taken over
// more tensors than params. Parameters without a gradient are skipped. It
// returns an error of kind vram.ErrArgument, scaling nothing, for a
// negative or NaN maxNorm or a negative totalNorm.
func ClipGradsWithNorm(params []*vram.Tensor, maxNorm, totalNorm float64) error {
	switch {
	case !(maxNorm >= 0):
		return errorf(vram.ErrArgument, "optim: clip grads with norm: max norm must be non-negative, got %v", maxNorm)
	case totalNorm < 0:
		return errorf(vram.ErrArgument, "optim: clip grads with norm: total norm must be non-negative, got %v", totalNorm)
	}
	coef := maxNorm / (totalNorm + 1e-6)
	if coef >= 1 {
		return nil
	}
	vram.NoGrad(func() {
		for _, g := range grads(params) {
			g.MulScalarInPlace(coef)
		}
	})
	return nil
}

// ClipGradValue clamps every element of the gradients of params to
// [-clipValue, clipValue] in place (torch.nn.utils.clip_grad_value_).
// Parameters without a gradient are skipped; NaN elements stay NaN. It
// panics with an *vram.Error of kind vram.ErrArgument for a negative or
// NaN clipValue.
func ClipGradValue(params []*vram.Tensor, clipValue float64) {
	if !(clipValue >= 0) {
		panic(&vram.Error{Op: "clip_grad_value", Kind: vram.ErrArgument, Detail: fmt.Sprintf("clip value must be non-negative, got %v", clipValue)})
	}
	vram.NoGrad(func() {
		for _, t := range params {
			if t == nil {
				continue
			}
			if g := t.Grad(); g != nil {
				vram.Tidy(func() { g.CopyFrom(g.Clamp(-clipValue, clipValue)) })
			}
		}
	})
}

// opMath returns t itself, or a float32 copy of a float16 or bfloat16 t:
// the tensor a composed step computes in, as the fused kernels compute
// 16-bit values in float32.
func opMath(t *vram.Tensor) *vram.Tensor {
	if dt := t.DType(); dt == vram.Float16 || dt == vram.BFloat16 {
		return t.Cast(vram.Float32)
	}
	return t
}

// storeBack stores w, computed by opMath from dst, into dst and returns
// what a later operation should read: dst itself when w is dst, else w
// holding dst's values after rounding (as the kernels read back what they
// stored).
func storeBack(dst, w *vram.Tensor) *vram.Tensor {
	if w == dst {
		return dst
	}
	dst.CopyFrom(w)
	return w.CopyFrom(dst)
}
