package vram

import "slices"

// Dropout returns t with each element zeroed with probability p and the
// others scaled by 1/(1-p) (inverted dropout), as
// torch.nn.functional.dropout does in training mode. The mask is drawn
// from the generator of a [WithGenerator] option in opts, or from vram's
// default generator, in float32 (float64 for a float64 t) on t's device;
// other options do not matter. A p of 0 returns a copy of t and a p of 1
// zeros.
//
// For its backward pass the graph keeps the mask as a bool tensor, one
// byte an element, as PyTorch's native_dropout does, not a mask of t's
// dtype. It panics with an *Error of kind [ErrArgument] unless 0 <= p <= 1,
// and of kind [ErrDType] for a t that is not floating-point.
func Dropout(t *Tensor, p float64, opts ...Option) *Tensor {
	return dropout("dropout", t, p, 0, opts)
}

// FeatureDropout is [Dropout] that zeroes whole feature maps rather than
// single elements (torch.nn.functional.dropout2d and dropout3d): the last
// spatialDims dimensions of t share one draw, so a [N, C, H, W] t with
// spatialDims 2 keeps or drops each of its N·C channels as a whole. The
// graph keeps a bool mask of the leading dimensions' shape ([N, C, 1, 1]).
// It panics as Dropout does, and with an *Error of kind [ErrArgument] for
// a spatialDims that is negative or above t's rank.
func FeatureDropout(t *Tensor, p float64, spatialDims int, opts ...Option) *Tensor {
	const op = "feature_dropout"
	t.live(op)
	if spatialDims < 0 || spatialDims > t.Dim() {
		fail(op, ErrArgument, "spatialDims must be in [0, %d] for a tensor of shape %v, got %d", t.Dim(), Shape(t.shape), spatialDims)
	}
	return dropout(op, t, p, spatialDims, opts)
}

// dropout is Dropout with one draw for each element of t's leading
// dimensions, shared by the last spatial ones.
func dropout(op string, t *Tensor, p float64, spatial int, opts []Option) *Tensor {
	defer pin(op, t).unpin()
	if !(p >= 0 && p <= 1) {
		fail(op, ErrArgument, "probability must be in [0, 1], got %v", p)
	}
	if !t.dtype.IsFloat() {
		fail(op, ErrDType, "%s needs a floating-point tensor, got %s; Cast it first", op, t.dtype)
	}
	defer asOp(op)
	switch {
	case p == 0, t.NumElements() == 0:
		// An empty t needs no mask: one of its leading dimensions' shape
		// ([1, 2^31, 1, 1] for a [1, 2^31, 0, 3] t) can be vast.
		return t.MulScalar(1)
	case p == 1:
		return t.MulScalar(0) // everything dropped, as PyTorch does for p = 1
	}
	maskShape := slices.Clone(t.shape)
	for i := len(maskShape) - spatial; i < len(maskShape); i++ {
		maskShape[i] = 1
	}
	// Draw in at least float32 so that the threshold is exact enough, on
	// t's device; later options override the caller's.
	dt := Float32
	if t.dtype == Float64 {
		dt = Float64
	}
	scale := 1 / (1 - p)
	var keep, out *Tensor
	NoGrad(func() {
		keep = func() *Tensor {
			r := Rand(maskShape, append(slices.Clone(opts), t.Device(), dt)...)
			defer r.Release()
			return r.GeScalar(p)
		}()
		done := false
		defer func() {
			if !done {
				keep.Release() // the product failed (out of memory)
			}
		}()
		z := t.NewZeros(nil)
		defer z.Release()
		out = Where(keep, t, z)
		out.MulScalarInPlace(scale)
		done = true
	})
	if !needsGrad(t) {
		keep.Release()
		return out
	}
	sv := save(keep)
	keep.Release()
	record(op, out, []*Tensor{t}, sv, func(g *Tensor) []*Tensor {
		z := g.NewZeros(nil)
		defer z.Release()
		kept := Where(sv[0], g, z)
		defer kept.Release()
		return []*Tensor{kept.MulScalar(scale)}
	})
	return out
}
