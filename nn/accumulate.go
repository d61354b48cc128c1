package nn

import (
	"fmt"
	"reflect"

	"github.com/vramgo/vram"
)

// Syncer is a data-parallel wrapper whose backward reduces gradients
// across ranks and can skip that reduction:
// parallel.DistributedDataParallel is one.
type Syncer interface {
	// NoSync runs fn with the reduction off: backwards inside it only
	// accumulate locally.
	NoSync(fn func())
	// Backward backpropagates loss and reduces the gradients.
	Backward(loss *vram.Tensor, opts ...vram.BackwardOption) error
}

// Accumulate runs the backward passes of one optimizer step split into
// steps micro-batches (gradient accumulation): for micro = 0, ..., steps-1
// it calls loss(micro), which computes the loss of micro-batch micro, and
// backpropagates that loss divided by steps, so that the gradients add up
// to those of the mean loss over the whole batch (when loss is a mean over
// micro-batches of one size; weigh the losses of uneven ones by their sizes
// yourself, as in PyTorch) while only one micro-batch's activations are
// alive at a time. It returns the mean of the
// micro-batch losses. Then step the optimizer and zero the gradients, once:
//
//	for batch, err := range loader.All() { // a data.Loader with DropLast
//		if err != nil {
//			return err
//		}
//		x, y := batch.Tensors[0], batch.Tensors[1]
//		n := x.Size(0) / 4 // the micro-batch size
//		loss, err := nn.Accumulate(4, nil, func(micro int) *vram.Tensor {
//			return nn.MSELoss(model.Forward(x.Narrow(0, micro*n, n)), y.Narrow(0, micro*n, n))
//		})
//		...
//		opt.Step()
//		opt.ZeroGrad()
//	}
//
// Each micro-step runs inside vram.Tidy: what loss creates and does not
// Keep is released when its backward is done. With a non-nil ddp (a
// parallel.DistributedDataParallel), backward goes through ddp.Backward and
// every micro-step but the last runs inside ddp.NoSync, so the gradients
// are reduced across ranks once, summed over all micro-steps. The error is
// ddp.Backward's, which ends the accumulation. A nil pointer given as ddp
// is no ddp, as nil is.
//
// It panics with an *vram.Error of kind vram.ErrArgument when steps < 1 or
// loss is nil or returns nil, and of kind vram.ErrShape when loss returns a
// tensor that has not exactly one element.
func Accumulate(steps int, ddp Syncer, loss func(micro int) *vram.Tensor) (float64, error) {
	if steps < 1 {
		panic(&vram.Error{Op: "accumulate", Kind: vram.ErrArgument, Detail: fmt.Sprintf("steps is %d; it must be at least 1", steps)})
	}
	if loss == nil {
		panic(&vram.Error{Op: "accumulate", Kind: vram.ErrArgument, Detail: "the loss function is nil"})
	}
	if v := reflect.ValueOf(ddp); v.Kind() == reflect.Pointer && v.IsNil() {
		ddp = nil // a nil *DistributedDataParallel, say: no ddp
	}
	var total float64
	var err error
	micro := func(i int) {
		vram.Tidy(func() {
			l := loss(i)
			if l == nil {
				panic(&vram.Error{Op: "accumulate", Kind: vram.ErrArgument, Detail: fmt.Sprintf("the loss function returned nil for micro-step %d", i)})
			}
			if n := l.NumElements(); n != 1 {
				panic(&vram.Error{Op: "accumulate", Kind: vram.ErrShape,
					Detail: fmt.Sprintf("the loss function returned a tensor of shape %v for micro-step %d; a loss has one element: reduce it (Mean, Sum)", l.Shape(), i)})
			}
			total += l.Item()
			scaled := l.DivScalar(float64(steps))
			if ddp == nil {
				scaled.Backward()
			} else {
				err = ddp.Backward(scaled)
			}
		})
	}
	for i := range steps - 1 {
		if ddp == nil {
			micro(i)
		} else {
			ddp.NoSync(func() { micro(i) })
		}
		if err != nil {
			return 0, err
		}
	}
	micro(steps - 1)
	if err != nil {
		return 0, err
	}
	return total / float64(steps), nil
}
