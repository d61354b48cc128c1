package nn

import "github.com/vramgo/vram"

// Checkpointed is a module whose forward keeps no activations for
// backward: see [Checkpoint]. Every method but Forward is the wrapped
// module's, so parameter names, state dicts and training mode are
// unchanged by the wrapping.
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
// pruning, quantization and dtype conversion).
func (c *Checkpointed) Unwrap() Module { return c.Module }

// Forward returns the wrapped module's output for x, computed without
// keeping its activations when it records for backward. It panics with an
// *vram.Error of kind vram.ErrArgument when the wrapped module is nil (a
// Checkpointed made without [Checkpoint], or whose Module was set to nil).
func (c *Checkpointed) Forward(x *vram.Tensor) *vram.Tensor {
	if isNil(c.Module) {
		panic(&vram.Error{Op: "checkpoint", Kind: vram.ErrArgument, Detail: "the checkpointed module is nil; wrap a module with nn.Checkpoint"})
	}
	notNil("checkpoint", x)
	return vram.Checkpoint(c.Module.Forward, x, c.Module.Parameters()...)
}
