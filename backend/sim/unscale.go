package sim

import (
	"fmt"

	"github.com/vramgo/vram/backend"
)

var _ backend.FusedUnscale = (*Device)(nil)

// UnscaleCheck runs the CPU's fused unscale and inf/NaN check, which
// computes what the CUDA kernel computes, as one kernel on stream s. It
// implements [backend.FusedUnscale].
func (d *Device) UnscaleCheck(s backend.Stream, grads []backend.View, invScale float64, found backend.View) error {
	f, ok := d.host.(backend.FusedUnscale)
	if !ok {
		return fmt.Errorf("sim: unscale check: %w", backend.ErrNotImplemented)
	}
	vs := append(append(make([]backend.View, 0, len(grads)+1), grads...), found)
	return d.run("unscale check", s, backend.CheckUnscaleCheck(grads, invScale, found), func(r []backend.View) error {
		return f.UnscaleCheck(d.hostStream(), r[:len(grads)], invScale, r[len(grads)])
	}, vs...)
}
