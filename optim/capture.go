package optim

import (
	"fmt"

	"github.com/vramgo/vram"
)

// Why a step cannot be recorded into a graph (vram.CaptureGraph).
const (
	// firstStep: the state a parameter's first step makes (zeroed moments,
	// a momentum buffer that starts as the gradient) would be made again
	// by every replay.
	firstStep = "its state is made at a parameter's first step, which every replay would repeat; run a step before the capture (warm-up)"
	// hostCount: the step reads numbers kept on the host that change every
	// step (a step count for bias corrections or a decaying rate), which
	// every replay would repeat as they were during the capture.
	hostCount = "the step reads a step count kept on the host (bias corrections, decaying rates), which every replay would repeat as it was during the capture; " +
		"capture the step of an optimizer without one (SGD, RMSprop, Adadelta, Rprop, Adagrad without LRDecay) or run this one after each replay"
)

// refuseCapture panics with a *vram.Error wrapping vram.ErrCapturing, before
// the optimizer changes anything, when a parameter with a gradient is on a
// device whose current stream is being captured into a graph and why
// returns a reason the step of parameter i (in a group with
// hyper-parameters c) would not replay as it ran. PyTorch's optimizers
// refuse such a capture in the same way (capturable=False).
func (gs *groups[C]) refuseCapture(op string, why func(i int, c C) string) {
	// Asked once per device: the parameters of a model share one or few,
	// and this runs at every step.
	capturing := map[vram.Device]bool{}
	for k, c := range gs.cfgs {
		for i := gs.start[k]; i < gs.end(k); i++ {
			p := gs.params[i]
			if p.Grad() == nil {
				continue
			}
			d := p.Device()
			on, seen := capturing[d]
			if !seen {
				on = vram.IsCurrentStreamCapturing(d)
				capturing[d] = on
			}
			if !on {
				continue
			}
			if r := why(i, c); r != "" {
				panic(&vram.Error{Op: op + " step", Kind: vram.ErrCapturing,
					Detail: fmt.Sprintf("parameter %d: this step cannot be recorded in a graph: %s", i, r)})
			}
		}
	}
}

// checkGrads panics with a *vram.Error of kind vram.ErrDevice, before the
// optimizer changes anything, when a parameter's gradient is on another
// device than the parameter (the gradient moved on its own, with
// Grad().MoveTo): the step would fail at that parameter, after it had
// updated those before it.
func (gs *groups[C]) checkGrads(op string) {
	for i, p := range gs.params {
		if g := p.Grad(); g != nil && g.Device() != p.Device() {
			panic(&vram.Error{Op: op + " step", Kind: vram.ErrDevice, Detail: fmt.Sprintf(
				"parameter %d is on %v and its gradient on %v; move the gradient back, "+
					"or move the parameter itself with MoveTo, which takes its gradient along", i, p.Device(), g.Device())})
		}
	}
}
