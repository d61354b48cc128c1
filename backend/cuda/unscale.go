package cuda

import (
	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

var _ backend.FusedUnscale = (*Device)(nil)

// unscaleMax is the most gradients one launch of the unscale kernel takes
// (kernels/optim.cu's UNSCALE_MAX): their addresses and element counts are
// kernel parameters, so that nothing is copied to the device per step.
const unscaleMax = 28

// UnscaleCheck unscales every gradient in grads and checks them for inf
// and NaN with one kernel launch (kernels/optim.cu's unscale_step) per
// dtype and group of up to 28 gradients, all queued on the stream without
// a synchronisation in between; found is set on the device, for the caller
// to read once. It implements [backend.FusedUnscale]. Gradients that are
// not contiguous or not floating-point return an error wrapping
// [backend.ErrNotImplemented] before anything is launched.
func (dev *Device) UnscaleCheck(s backend.Stream, grads []backend.View, invScale float64, found backend.View) error {
	const what = "unscale check"
	d, err := dev.begin(s, what, backend.CheckUnscaleCheck(grads, invScale, found))
	if err != nil {
		return err
	}
	fp, err := d.ptrOf(what, found)
	if err != nil {
		return err
	}
	type grad struct {
		ptr cuda.DevicePtr
		n   int64
	}
	byDType := map[backend.DType][]grad{}
	for _, g := range grads {
		n := int64(g.NumElements())
		if n == 0 {
			continue
		}
		p, err := d.ptrOf(what, g)
		if err != nil {
			return err
		}
		byDType[g.DType] = append(byDType[g.DType], grad{p, n})
	}
	return d.run(func() error {
		for _, dt := range backend.DTypes {
			gs := byDType[dt]
			if len(gs) == 0 {
				continue
			}
			f, err := d.function(modKey{fam: famOptim, dt: dt, op: "unscale"}, "unscale_step")
			if err != nil {
				return err
			}
			for len(gs) > 0 {
				chunk := gs[:min(len(gs), unscaleMax)]
				gs = gs[len(chunk):]
				a := d.getArgs()
				a.Ptr(fp).Float64(invScale).Int32(int32(len(chunk)))
				var total int64
				for i := range unscaleMax {
					if i < len(chunk) {
						a.Ptr(chunk[i].ptr)
						total += chunk[i].n
					} else {
						a.Ptr(0)
					}
				}
				for i := range unscaleMax {
					if i < len(chunk) {
						a.Int64(chunk[i].n)
					} else {
						a.Int64(0)
					}
				}
				err := d.launch(f, d.grid(total), a)
				d.putArgs(a)
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}
