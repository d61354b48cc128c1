package quant

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
)

// The range of int8 quantized values (PyTorch's torch.qint8).
const (
	QMin = -128 // the smallest int8 value
	QMax = 127  // the largest int8 value
)

// eps is the smallest scale [Params] returns: float32's machine epsilon,
// as in PyTorch's observers.
const eps = 0x1p-23

// Params returns the scale and zero point that map the range [lo, hi] of
// observed values onto the int8 values [QMin, QMax], as PyTorch's
// MinMaxObserver computes them for torch.qint8 (without reduce_range), in
// float32 as it does: lo and hi are rounded to float32 (the observed
// minimum and maximum of a float32 tensor), and the range is widened to
// hold 0, so that 0 quantizes exactly; symmetric gives scale =
// max(-lo, hi)/127.5 and zero point 0 (torch.per_tensor_symmetric),
// otherwise scale = (hi-lo)/255 and zero point QMin - round(lo/scale),
// rounded half to even and clamped to [QMin, QMax]
// (torch.per_tensor_affine), each operation rounded to float32; the scale
// is at least float32's epsilon, so that a range of zeros gives a usable
// one. The scale returned is a float32 value, PyTorch's q_scale().
//
// It returns an error matching vram.ErrArgument when lo or hi is NaN or
// infinite in float32, lo > hi, or the scale overflows float32 (a range
// wider than float32's largest value).
func Params(lo, hi float64, symmetric bool) (scale float64, zeroPoint int, err error) {
	l, h := float32(lo), float32(hi)
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(float64(l), 0) || math.IsInf(float64(h), 0) || lo > hi {
		return 0, 0, quantErr(vram.ErrArgument, "range [%v, %v] is not a finite float32 range with min <= max", lo, hi)
	}
	l, h = min(l, 0), max(h, 0)
	if symmetric {
		return float64(max(max(-l, h)/(float32(QMax-QMin)/2), eps)), 0, nil
	}
	s := max((h-l)/float32(QMax-QMin), eps)
	if math.IsInf(float64(s), 1) {
		return 0, 0, quantErr(vram.ErrArgument, "range [%v, %v] is wider than float32 holds, so its scale overflows", lo, hi)
	}
	zp := QMin - math.RoundToEven(float64(l/s))
	return float64(s), int(min(max(zp, QMin), QMax)), nil
}

// PerTensor quantizes the floating-point tensor x to int8 with one scale
// and zero point for all its elements, as torch.quantize_per_tensor with
// torch.qint8 (ATen's quantize_val): q = clamp(round(x·(1/scale)) +
// zeroPoint, QMin, QMax), rounding half to even, with the product
// computed in float32 (float64 for a float64 x) from the reciprocal of the
// scale rounded to that type; PyTorch multiplies by the reciprocal rather
// than divide, which rounds otherwise where the quotient is close to a
// tie. Infinite values clamp to QMin or QMax. The result is a new int8
// tensor of x's shape and device, which the caller owns;
// [DequantizePerTensor] maps it back.
//
// It returns an error matching vram.ErrArgument, creating nothing, for a
// scale that is not positive and finite (at that type) or whose
// reciprocal is not finite there, a zero point outside [QMin, QMax], or
// an x holding NaN; vram.ErrDType for an x that is not floating-point;
// vram.ErrReleased for a released x.
func PerTensor(x *vram.Tensor, scale float64, zeroPoint int) (*vram.Tensor, error) {
	if err := checkInput(x, "x"); err != nil {
		return nil, err
	}
	ct := computeType(x.DType())
	inv, err := reciprocal(scale, ct, "")
	if err != nil {
		return nil, err
	}
	if err := checkZeroPoint(zeroPoint); err != nil {
		return nil, err
	}
	return quantize(x, ct,
		func(t *vram.Tensor) *vram.Tensor { return t.MulScalar(inv) },
		(*vram.Tensor).Round,
		func(t *vram.Tensor) *vram.Tensor { return t.AddScalar(float64(zeroPoint)) })
}

// PerChannel quantizes the floating-point tensor x to int8 with one scale
// and zero point per index of dimension axis (negative counts from the
// end), as torch.quantize_per_channel with torch.qint8: scales and
// zeroPoints are vectors of x.Shape()[axis] elements on x's device,
// scales floating-point and zeroPoints of any dtype holding whole numbers
// in [QMin, QMax]; each element is quantized as [PerTensor] does with the
// scale and zero point of its channel. The caller owns the result;
// [DequantizePerChannel] maps it back.
//
// It returns the errors of PerTensor (a scale that is not positive and
// finite or whose reciprocal is not, a zero point that is not a whole
// number in range), and one matching vram.ErrShape for vectors of the
// wrong shape, vram.ErrIndex for an axis out of range, vram.ErrDevice for
// vectors on another device.
func PerChannel(x, scales, zeroPoints *vram.Tensor, axis int) (*vram.Tensor, error) {
	if err := checkInput(x, "x"); err != nil {
		return nil, err
	}
	ct := computeType(x.DType())
	ib, zb, err := channelParams(x, scales, zeroPoints, axis, ct, true)
	if err != nil {
		return nil, err
	}
	defer ib.Release()
	defer zb.Release()
	return quantize(x, ct,
		func(t *vram.Tensor) *vram.Tensor { return t.Mul(ib) },
		(*vram.Tensor).Round,
		func(t *vram.Tensor) *vram.Tensor { return t.Add(zb) })
}

// DequantizePerTensor returns (q - zeroPoint)·scale as a new float32
// tensor (torch.dequantize of a per-tensor quantized tensor), for an
// int8 q from [PerTensor]: the product is computed in float32 with the
// scale rounded to float32, as PyTorch's is. It returns an error matching
// vram.ErrArgument for a scale that is not positive and finite in float32
// or a zero point outside [QMin, QMax], vram.ErrDType for a q that is not
// int8.
func DequantizePerTensor(q *vram.Tensor, scale float64, zeroPoint int) (*vram.Tensor, error) {
	if err := checkCodes(q); err != nil {
		return nil, err
	}
	if s := roundTo(scale, vram.Float32); !(s > 0) || math.IsInf(s, 1) {
		return nil, quantErr(vram.ErrArgument, "scale %v is not positive and finite in float32", scale)
	}
	if err := checkZeroPoint(zeroPoint); err != nil {
		return nil, err
	}
	return dequantize(q, vram.Float32,
		func(t *vram.Tensor) *vram.Tensor { return t.SubScalar(float64(zeroPoint)) },
		func(t *vram.Tensor) *vram.Tensor { return t.MulScalar(roundTo(scale, vram.Float32)) })
}

// DequantizePerChannel returns (q - zeroPoints)·scales along axis as a
// new float32 tensor (torch.dequantize of a per-channel quantized tensor),
// for an int8 q from [PerChannel] with the same scales, zero points and
// axis: the product is computed in float64, as PyTorch's per-channel
// kernel computes it with its float64 scales, and rounded to float32. Its
// errors are those of PerChannel, and vram.ErrDType for a q that is not
// int8.
func DequantizePerChannel(q, scales, zeroPoints *vram.Tensor, axis int) (*vram.Tensor, error) {
	if err := checkCodes(q); err != nil {
		return nil, err
	}
	sb, zb, err := channelParams(q, scales, zeroPoints, axis, vram.Float64, false)
	if err != nil {
		return nil, err
	}
	defer sb.Release()
	defer zb.Release()
	return dequantize(q, vram.Float64,
		func(t *vram.Tensor) *vram.Tensor { return t.Sub(zb) },
		func(t *vram.Tensor) *vram.Tensor { return t.Mul(sb) })
}

// reciprocal returns 1/scale as quantize_val computes it in dtype ct
// (float32 or float64): the reciprocal of the scale rounded to ct, rounded
// to ct. It returns an error matching vram.ErrArgument, naming the scale
// with the suffix of (" of channel 2" or ""), for a scale that is not
// positive and finite in ct or whose reciprocal is not finite there.
func reciprocal(scale float64, ct vram.DType, of string) (float64, error) {
	s := roundTo(scale, ct)
	if !(s > 0) || math.IsInf(s, 1) {
		return 0, quantErr(vram.ErrArgument, "scale %v%s is not positive and finite in %s", scale, of, ct)
	}
	inv := roundTo(1/s, ct)
	if math.IsInf(inv, 1) {
		return 0, quantErr(vram.ErrArgument, "scale %v%s is too small: its reciprocal, which quantizing multiplies by, overflows %s", scale, of, ct)
	}
	return inv, nil
}

// checkInput checks a tensor to quantize.
func checkInput(x *vram.Tensor, name string) error {
	switch {
	case x == nil:
		return quantErr(vram.ErrArgument, "nil %s", name)
	case x.Released():
		return quantErr(vram.ErrReleased, "%s was released", name)
	case !x.DType().IsFloat():
		return quantErr(vram.ErrDType, "%s is %s; quantize a floating-point tensor", name, x.DType())
	}
	return nil
}

// checkCodes checks a tensor to dequantize.
func checkCodes(q *vram.Tensor) error {
	switch {
	case q == nil:
		return quantErr(vram.ErrArgument, "nil tensor")
	case q.Released():
		return quantErr(vram.ErrReleased, "the tensor was released")
	case q.DType() != vram.Int8:
		return quantErr(vram.ErrDType, "the tensor is %s; dequantize the int8 values of PerTensor or PerChannel", q.DType())
	}
	return nil
}

func checkZeroPoint(zp int) error {
	if zp < QMin || zp > QMax {
		return quantErr(vram.ErrArgument, "zero point %d is out of the int8 range [%d, %d]", zp, QMin, QMax)
	}
	return nil
}

// computeType is the dtype x/scale is computed in.
func computeType(dt vram.DType) vram.DType {
	if dt == vram.Float64 {
		return vram.Float64
	}
	return vram.Float32
}

// roundTo returns v rounded to dt, float32 or float64.
func roundTo(v float64, dt vram.DType) float64 {
	if dt == vram.Float32 {
		return float64(float32(v))
	}
	return v
}

// channelParams checks the per-channel scales and zero points of x along
// axis and returns them as tensors of dtype ct shaped to broadcast against
// x (the channel count at axis, 1 elsewhere), which the caller releases;
// with recip, sb holds the reciprocals of the scales that [reciprocal]
// computes instead of the scales.
func channelParams(x, scales, zeroPoints *vram.Tensor, axis int, ct vram.DType, recip bool) (sb, zb *vram.Tensor, err error) {
	for _, v := range []struct {
		t    *vram.Tensor
		name string
	}{{scales, "scales"}, {zeroPoints, "zero points"}} {
		switch {
		case v.t == nil:
			return nil, nil, quantErr(vram.ErrArgument, "nil %s", v.name)
		case v.t.Released():
			return nil, nil, quantErr(vram.ErrReleased, "the %s were released", v.name)
		case v.t.Device() != x.Device():
			return nil, nil, quantErr(vram.ErrDevice, "the %s are on %s and the tensor on %s", v.name, v.t.Device(), x.Device())
		}
	}
	if !scales.DType().IsFloat() {
		return nil, nil, quantErr(vram.ErrDType, "scales are %s, want floating-point", scales.DType())
	}
	shape := x.Shape()
	given := axis
	if axis < 0 {
		axis += len(shape)
	}
	if axis < 0 || axis >= len(shape) {
		return nil, nil, quantErr(vram.ErrIndex, "axis %d is out of range for shape %v", given, shape)
	}
	n := shape[axis]
	for _, v := range []*vram.Tensor{scales, zeroPoints} {
		if s := v.Shape(); len(s) != 1 || s[0] != n {
			return nil, nil, quantErr(vram.ErrShape, "scales and zero points must be [%d] for axis %d of %v, got %v and %v", n, axis, shape, scales.Shape(), zeroPoints.Shape())
		}
	}
	sv := scales.Float64s()
	for i, s := range sv {
		inv, err := reciprocal(s, ct, fmt.Sprintf(" of channel %d", i))
		if err != nil {
			return nil, nil, err
		}
		if recip {
			sv[i] = inv
		}
	}
	for i, z := range zeroPoints.Float64s() {
		if z != math.Trunc(z) || z < QMin || z > QMax {
			return nil, nil, quantErr(vram.ErrArgument, "zero point %v of channel %d is not a whole number in [%d, %d]", z, i, QMin, QMax)
		}
	}
	bshape := make(vram.Shape, len(shape))
	for i := range bshape {
		bshape[i] = 1
	}
	bshape[axis] = n
	err = vram.Catch(func() {
		vram.NoGrad(func() {
			vram.Tidy(func() {
				if recip {
					sb = vram.Keep(vram.FromSlice(sv, bshape, x.Device(), ct))
				} else {
					sb = vram.Keep(scales.Cast(ct).Reshape(bshape...))
				}
				zb = vram.Keep(zeroPoints.Cast(ct).Reshape(bshape...))
			})
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return sb, zb, nil
}

// quantize checks x for NaN and returns the steps applied in turn to x in
// dtype ct, clamped to the int8 range, as a new int8 tensor.
func quantize(x *vram.Tensor, ct vram.DType, steps ...func(*vram.Tensor) *vram.Tensor) (q *vram.Tensor, err error) {
	var bad error
	err = vram.Catch(func() {
		vram.NoGrad(func() {
			xf := x.Cast(ct)
			defer xf.Release()
			if x.Shape().NumElements() > 0 {
				nans := chain(xf, (*vram.Tensor).IsNaN, func(t *vram.Tensor) *vram.Tensor { return t.Cast(vram.Int64) },
					func(t *vram.Tensor) *vram.Tensor { return t.Sum() })
				defer nans.Release()
				if nans.Item() != 0 {
					bad = quantErr(vram.ErrArgument, "tensor %v holds NaN values, which have no int8 value", x.Shape())
					return
				}
			}
			q = chain(xf, append(steps,
				func(t *vram.Tensor) *vram.Tensor { return t.Clamp(QMin, QMax) },
				func(t *vram.Tensor) *vram.Tensor { return t.Cast(vram.Int8) })...)
		})
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		if q != nil {
			q.Release()
		}
		return nil, err
	}
	return q, nil
}

// dequantize returns the steps applied in turn to q in dtype ct, as a new
// float32 tensor.
func dequantize(q *vram.Tensor, ct vram.DType, steps ...func(*vram.Tensor) *vram.Tensor) (out *vram.Tensor, err error) {
	err = vram.Catch(func() {
		vram.NoGrad(func() {
			out = chain(q, append([]func(*vram.Tensor) *vram.Tensor{func(t *vram.Tensor) *vram.Tensor { return t.Cast(ct) }},
				append(steps, func(t *vram.Tensor) *vram.Tensor { return t.Cast(vram.Float32) })...)...)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// chain applies steps in turn to x and returns the last result, releasing
// every intermediate one (also when a step panics) but not x. Unlike a
// vram.Tidy with vram.Keep, it leaves the result in the caller's own
// Tidy, if any.
func chain(x *vram.Tensor, steps ...func(*vram.Tensor) *vram.Tensor) *vram.Tensor {
	cur := x
	defer func() {
		if cur != x {
			cur.Release() // reached only by a panic: the result is returned below
		}
	}()
	for _, step := range steps {
		next := step(cur)
		if cur != x {
			cur.Release()
		}
		cur = next
	}
	out := cur
	cur = x
	return out
}
