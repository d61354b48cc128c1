package nn

import "github.com/vramgo/vram"

// Checkpointed is a module whose forward keeps no activations for
// backward: see [Checkpoint]. Every method but Forward is the wrapped
// module's, so parameter names, state dicts and training mode are
// unchanged by the wrapping.
//
// A nil *Checkpointed, or one that wraps no module (its zero value, or one
// whose Module was set to nil), answers as a module without parameters
// or sub-modules in training mode; its Forward, To, CUDA, CPU, Train and
// Eval panic with an *vram.Error of kind vram.ErrArgument.
type Checkpointed struct {
	Module
}

// Checkpoint wraps m in activation checkpointing
// (torch.utils.checkpoint.checkpoint around m's forward): Forward runs m
// under NoGrad and saves only its input, and Backward runs m again with
// recording on to get the gradients, which equal m's own, dropout masks
// included (see [vram.Checkpoint]); its normalization layers update their
// running statistics in the first forward only ([vram.Recomputing]), as
// without the wrapping. It trades a second forward for the memory of m's
// activations, so wrap the large blocks of a deep model:
//
//	for i := range blocks {
//		blocks[i] = nn.Checkpoint(blocks[i])
//	}
//
// It panics with an *vram.Error of kind vram.ErrArgument when m is nil.
func Checkpoint(m Module) *Checkpointed {
	if isNil(m) {
		panic(&vram.Error{Op: "checkpoint", Kind: vram.ErrArgument, Detail: "the module to checkpoint is nil"})
	}
	return &Checkpointed{Module: m}
}

var _ Wrapper = (*Checkpointed)(nil)

// Unwrap returns the wrapped module. It implements [Wrapper], so that
// [NamedModules] and [Modules] reach the wrapped layer itself (for
// pruning, quantization and dtype conversion). It returns nil when c is
// nil or wraps no module (a nil Module, or a nil pointer held as one).
func (c *Checkpointed) Unwrap() Module { return c.inner() }

// inner returns the wrapped module, or nil when c is nil or wraps none.
func (c *Checkpointed) inner() Module {
	if c == nil || isNil(c.Module) {
		return nil
	}
	return c.Module
}

// mustWrap returns the wrapped module, or panics with an *vram.Error of
// kind vram.ErrArgument when there is none, rather than dereference nil.
func (c *Checkpointed) mustWrap() Module {
	m := c.inner()
	if m == nil {
		panic(&vram.Error{Op: "checkpoint", Kind: vram.ErrArgument, Detail: "the checkpointed module is nil; wrap a module with nn.Checkpoint"})
	}
	return m
}

// NamedParameters returns the wrapped module's, nil when there is none.
func (c *Checkpointed) NamedParameters() []NamedParameter {
	if m := c.inner(); m != nil {
		return m.NamedParameters()
	}
	return nil
}

// Parameters returns the wrapped module's, nil when there is none.
func (c *Checkpointed) Parameters() []*vram.Tensor {
	if m := c.inner(); m != nil {
		return m.Parameters()
	}
	return nil
}

// NamedChildren returns the wrapped module's, nil when there is none.
func (c *Checkpointed) NamedChildren() []NamedModule {
	if m := c.inner(); m != nil {
		return m.NamedChildren()
	}
	return nil
}

// Training reports whether the wrapped module is in training mode; true
// when there is none, as for a new module.
func (c *Checkpointed) Training() bool {
	if m := c.inner(); m != nil {
		return m.Training()
	}
	return true
}

// To moves the wrapped module to device d.
func (c *Checkpointed) To(d vram.Device) { c.mustWrap().To(d) }

// CUDA moves the wrapped module to a CUDA device.
func (c *Checkpointed) CUDA(index ...int) { c.mustWrap().CUDA(index...) }

// CPU moves the wrapped module to the CPU.
func (c *Checkpointed) CPU() { c.mustWrap().CPU() }

// Train puts the wrapped module in training mode.
func (c *Checkpointed) Train() { c.mustWrap().Train() }

// Eval puts the wrapped module in evaluation mode.
func (c *Checkpointed) Eval() { c.mustWrap().Eval() }

// Forward returns the wrapped module's output for x, computed without
// keeping its activations when it records for backward. It panics with an
// *vram.Error of kind vram.ErrArgument when c is nil or the wrapped module
// is (a Checkpointed made without [Checkpoint], or whose Module was set
// to nil).
func (c *Checkpointed) Forward(x *vram.Tensor) *vram.Tensor {
	m := c.mustWrap()
	notNil("checkpoint", x)
	return vram.Checkpoint(m.Forward, x, m.Parameters()...)
}
