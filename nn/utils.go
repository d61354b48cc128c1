package nn

import (
	"fmt"
	"reflect"

	"github.com/vramgo/vram"
)

// Apply calls fn on every sub-module of m, recursively, and then on m
// itself (PyTorch's module.apply): each module's children come before
// it, in registration order, so that fn sees a model from the leaves up,
// as it does in PyTorch. The usual use is initialisation:
//
//	nn.Apply(model, func(m nn.Module) {
//		if l, ok := m.(*nn.Linear); ok {
//			nn.XavierUniform(l.Weight, 1, nil)
//			nn.Zeros(l.Bias)
//		}
//	})
//
// A [Wrapper] comes after the module it wraps, as a parent after its
// children. A module registered more than once (shared) is visited once.
// A nil m does nothing; a nil fn panics with an *vram.Error of kind
// vram.ErrArgument.
func Apply(m Module, fn func(Module)) {
	if fn == nil {
		panic(&vram.Error{Op: "apply", Kind: vram.ErrArgument, Detail: "nil function"})
	}
	if isNil(m) {
		return
	}
	seen := map[Module]bool{}
	var walk func(m Module)
	walk = func(m Module) {
		if reflect.TypeOf(m).Comparable() {
			if seen[m] {
				return
			}
			seen[m] = true
		}
		if w, ok := m.(Wrapper); ok && !isNil(w.Unwrap()) {
			walk(w.Unwrap())
		} else {
			for _, c := range m.NamedChildren() {
				walk(c.Module)
			}
		}
		fn(m)
	}
	walk(m)
}

// SetRequiresGrad turns gradient recording of every parameter of m on or
// off (PyTorch's module.requires_grad_): off freezes the module, so that
// backward passes give its parameters no gradient and optimizers leave
// them alone. Buffers are not touched. It panics with an *vram.Error,
// before changing any parameter, of kind vram.ErrDType when on is set and
// a parameter is not floating-point, of kind vram.ErrAutograd when a
// parameter is not a leaf, and of kind vram.ErrReleased when one was
// released.
func SetRequiresGrad(m Module, on bool) {
	if isNil(m) {
		return
	}
	ps := m.NamedParameters()
	checkLive("requires_grad", "parameter", ps)
	for _, p := range ps {
		switch {
		case !p.Tensor.IsLeaf():
			panic(&vram.Error{Op: "requires_grad", Kind: vram.ErrAutograd,
				Detail: fmt.Sprintf("parameter %q was computed from other tensors, so its requires_grad cannot change", p.Name)})
		case on && !p.Tensor.DType().IsFloat():
			panic(&vram.Error{Op: "requires_grad", Kind: vram.ErrDType,
				Detail: fmt.Sprintf("parameter %q is %s; only floating-point tensors can require grad", p.Name, p.Tensor.DType())})
		}
	}
	for _, p := range ps {
		p.Tensor.SetRequiresGrad(on)
	}
}

// ZeroGrad releases the gradient of every parameter of m (PyTorch's
// module.zero_grad() with its default set_to_none=True), as
// optim.Optimizer's ZeroGrad does for the optimizer's parameters: the next
// backward pass makes fresh gradients, and until then Grad returns nil and
// optimizers skip the parameters. To keep the gradient tensors and zero
// them instead (set_to_none=False), fill each with
// p.Grad().FillInPlace(0) under [vram.NoGrad].
func ZeroGrad(m Module) {
	if isNil(m) {
		return
	}
	for _, p := range m.Parameters() {
		p.ZeroGrad()
	}
}

// NumParameters returns the number of elements of m's parameters, a
// tensor shared between layers counted once, and how many of them require
// grad: PyTorch's sum(p.numel() for p in model.parameters()) and the same
// sum over the parameters with requires_grad. Buffers are not counted.
func NumParameters(m Module) (total, trainable int) {
	if isNil(m) {
		return 0, 0
	}
	for _, p := range m.Parameters() {
		n := p.NumElements()
		total += n
		if p.RequiresGrad() {
			trainable += n
		}
	}
	return total, trainable
}

// checkParams panics with an *vram.Error of kind vram.ErrArgument for an
// empty list or a nil tensor, of kind vram.ErrReleased for a released
// one, and of kind vram.ErrDevice when the tensors do not all live on one
// device.
func checkParams(op string, params []*vram.Tensor) {
	if len(params) == 0 {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "no parameters"})
	}
	for i, p := range params {
		if p == nil {
			panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: fmt.Sprintf("parameter %d is nil", i)})
		}
		if p.Released() {
			panic(&vram.Error{Op: op, Kind: vram.ErrReleased, Detail: fmt.Sprintf("parameter %d was released", i)})
		}
		if p.Device() != params[0].Device() {
			panic(&vram.Error{Op: op, Kind: vram.ErrDevice,
				Detail: fmt.Sprintf("parameters 0 and %d live on different devices (%s and %s); move them to one device first", i, params[0].Device(), p.Device())})
		}
	}
}

// ParametersToVector returns the elements of params flattened and
// concatenated into one new 1-D tensor, in order
// (torch.nn.utils.parameters_to_vector). Mixed dtypes are promoted. The
// result is recorded for autograd like any concatenation, so gradients
// flow back to the parameters. It panics with an *vram.Error of kind
// vram.ErrArgument for no parameters or a nil one, of kind
// vram.ErrReleased for a released one, and of kind vram.ErrDevice for
// parameters on different devices.
func ParametersToVector(params []*vram.Tensor) *vram.Tensor {
	const op = "parameters_to_vector"
	checkParams(op, params)
	flat := make([]*vram.Tensor, len(params))
	for i, p := range params {
		flat[i] = p.Reshape(-1)
	}
	defer func() {
		for _, f := range flat {
			f.Release()
		}
	}()
	return vram.Cat(flat, 0)
}

// VectorToParameters copies the elements of the 1-D tensor vec into
// params in place, in order, each taking as many elements as it has
// (torch.nn.utils.vector_to_parameters): the inverse of
// [ParametersToVector]. The parameters keep their identity, dtype and
// device (vec may live elsewhere; its values are converted), and the copy
// is not recorded for autograd. Unlike PyTorch, which ignores elements
// left over, vec must hold exactly as many elements as params. It panics
// with an *vram.Error, before copying anything, of kind vram.ErrArgument
// for a nil vec, no parameters or a nil one, of kind vram.ErrReleased for
// a released vec or parameter, of kind vram.ErrShape for a vec that is
// not 1-D or does not have the parameters' number of elements, and of
// kind vram.ErrDevice for parameters on different devices.
func VectorToParameters(vec *vram.Tensor, params []*vram.Tensor) {
	const op = "vector_to_parameters"
	if vec == nil {
		panic(&vram.Error{Op: op, Kind: vram.ErrArgument, Detail: "nil vector"})
	}
	if vec.Released() {
		panic(&vram.Error{Op: op, Kind: vram.ErrReleased, Detail: "the vector was released"})
	}
	checkParams(op, params)
	if vec.Dim() != 1 {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape, Detail: fmt.Sprintf("vec must be 1-D, got shape %v", vec.Shape())})
	}
	n := 0
	for _, p := range params {
		n += p.NumElements()
	}
	if vec.NumElements() != n {
		panic(&vram.Error{Op: op, Kind: vram.ErrShape,
			Detail: fmt.Sprintf("vec has %d elements, the parameters %d", vec.NumElements(), n)})
	}
	vram.NoGrad(func() {
		off := 0
		for _, p := range params {
			k := p.NumElements()
			part := vec.Narrow(0, off, k)
			src := part.Reshape(p.Shape()...)
			p.CopyFrom(src)
			src.Release()
			part.Release()
			off += k
		}
	})
}
