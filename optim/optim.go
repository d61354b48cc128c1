package optim

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// Optimizer updates parameters from their gradients (torch.optim.Optimizer).
type Optimizer interface {
	// Step updates every parameter that has a gradient, in place.
	Step()
	// ZeroGrad clears the gradients of the parameters (PyTorch's zero_grad
	// with set_to_none=True), releasing them.
	ZeroGrad()
	// LR returns the learning rate.
	LR() float64
	// SetLR changes the learning rate, for schedules.
	SetLR(lr float64)
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
// (torch.nn.utils.clip_grad_norm_). When the norm exceeds maxNorm, every
// gradient is multiplied by maxNorm/(norm+1e-6). Parameters without a
// gradient are skipped. A NaN or infinite norm is returned as is; the
// gradients are then scaled by 0 (infinite) or left alone (NaN). It panics
// with an *vram.Error of kind vram.ErrArgument for a negative or NaN
// maxNorm.
//
// PyTorch has this function in torch.nn.utils; it lives in package optim
// because it belongs to the optimisation step, between Backward and Step.
func ClipGradNorm(params []*vram.Tensor, maxNorm float64) float64 {
	if !(maxNorm >= 0) {
		panic(&vram.Error{Op: "clip_grad_norm", Kind: vram.ErrArgument, Detail: fmt.Sprintf("max norm must be non-negative, got %v", maxNorm)})
	}
	var grads []*vram.Tensor
	for _, p := range params {
		if p == nil {
			continue
		}
		if g := p.Grad(); g != nil {
			grads = append(grads, g)
		}
	}
	var sq float64
	vram.NoGrad(func() {
		for _, g := range grads {
			vram.Tidy(func() {
				x := g
				if g.DType() == vram.Float16 || g.DType() == vram.BFloat16 {
					x = g.Cast(vram.Float32) // squares of half values overflow
				}
				sq += x.Square().Sum().Item()
			})
		}
	})
	norm := math.Sqrt(sq)
	if norm > maxNorm {
		coef := maxNorm / (norm + 1e-6)
		vram.NoGrad(func() {
			for _, g := range grads {
				g.MulScalarInPlace(coef)
			}
		})
	}
	return norm
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
