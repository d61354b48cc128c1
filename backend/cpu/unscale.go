package cpu

import (
	"math"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
)

var _ backend.FusedUnscale = (*Device)(nil)

// UnscaleCheck multiplies every element of every gradient by invScale in
// place and stores 1 into found when any element was inf or NaN before or
// after the multiplication. It implements [backend.FusedUnscale] with the
// arithmetic of the CUDA kernel (backend/cuda/kernels/optim.cu): the
// product in float32 (float64 for float64), invScale rounded to that type
// first, each product rounded to the gradient's dtype. Gradients that are
// not contiguous or not floating-point return an error wrapping
// [backend.ErrNotImplemented], before any gradient is touched.
func (dev *Device) UnscaleCheck(st backend.Stream, grads []backend.View, invScale float64, found backend.View) (err error) {
	const what = "unscale check"
	if err := begin(st, what, backend.CheckUnscaleCheck(grads, invScale, found)); err != nil {
		return err
	}
	defer recoverTo(&err, what)
	fo, err := resolve(what, found)
	if err != nil {
		return err
	}
	ops, err := resolveAll(what, grads...)
	if err != nil {
		return err
	}
	bad := false
	for _, o := range ops {
		var b bool
		if o.dt == backend.Float64 {
			b, err = unscaleCheck[float64](o, invScale)
		} else {
			b, err = unscaleCheck[float32](o, invScale)
		}
		if err != nil {
			return err
		}
		bad = bad || b
	}
	if bad {
		storeOne(fo, fo.off, float32(1))
	}
	return nil
}

// unscaleCheck is UnscaleCheck of one contiguous gradient in compute type
// F. It reports whether an element was not finite.
func unscaleCheck[F floating](o *operand, invScale float64) (bool, error) {
	n := o.size()
	inv := F(invScale)
	var bad atomic.Bool
	err := parallel(n, 2*n, func(lo, hi int) error {
		buf := make([]F, min(block, hi-lo))
		for i := lo; i < hi; i += block {
			xs := buf[:min(block, hi-i)]
			load(o, o.off+i, 1, xs)
			found := false
			for k, x := range xs {
				found = found || !finite(x)
				xs[k] = F(x * inv)
			}
			roundTrip(o.dt, xs)
			for _, y := range xs {
				found = found || !finite(y)
			}
			store(o, o.off+i, 1, xs)
			if found {
				bad.Store(true)
			}
		}
		return nil
	})
	return bad.Load(), err
}

// finite reports whether x is neither infinite nor NaN.
func finite[F floating](x F) bool {
	f := float64(x)
	return !math.IsInf(f, 0) && !math.IsNaN(f)
}
