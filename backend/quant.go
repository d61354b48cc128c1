package backend

import "fmt"

// Int8 weight-only quantization. A linear layer's weight W [N,K] is stored
// as int8 values wq [N,K] and one scale per output channel, scale [N], so
// that W ≈ wq[n,k]·scale[n]; activations stay floating-point. Two optional
// interfaces of a [Device] compute with such weights; callers find them
// with a type assertion, try [Int8Linear] first, then [Int8Dequantizer]
// with a transient buffer and [FusedMatMul] or [Kernels.MatMul], and fall
// back to [Kernels.Copy] (int8 to the float dtype) and a [Kernels.Binary]
// Mul by the broadcast scale when a device has neither or a method returns
// an error wrapping [ErrNotImplemented].

// Int8Linear is an optional interface of a [Device] that computes a linear
// layer with int8 weights in one call, without materializing a float copy
// of the whole weight.
type Int8Linear interface {
	// MatMulInt8Weight computes, for x [M,K], wq [N,K] (int8), scale [N]
	// and dst [M,N],
	//
	//	dst[m,n] = Σ_k x[m,k]·w[n,k] + bias[n],  w[n,k] = wq[n,k]·scale[n]
	//
	// with w rounded to x's dtype as [Int8Dequantizer.DequantizeInt8]
	// rounds it and the sum accumulated as [Kernels.MatMul] accumulates.
	// A bias with DType Invalid (the zero View) means no bias. Views are
	// as [CheckMatMulInt8Weight] documents.
	MatMulInt8Weight(s Stream, dst, x, wq, scale, bias View) error
}

// Int8Dequantizer is an optional interface of a [Device] that expands int8
// weights into a floating-point buffer in one pass (one kernel on a GPU),
// for a product that follows it and the buffer's release right after.
type Int8Dequantizer interface {
	// DequantizeInt8 sets dst[n,k] = wq[n,k]·scale[n], computed in
	// float32 (float64 for float64) and rounded once to dst's dtype, for
	// wq [N,K] (int8), scale [N] and dst [N,K] of one floating-point
	// dtype, as [CheckDequantizeInt8] documents.
	DequantizeInt8(s Stream, dst, wq, scale View) error
}

// checkInt8Weight checks an int8 weight wq [N,K] and its scale [N] of
// floating-point dtype dt, both contiguous.
func checkInt8Weight(wq, scale View, dt DType) error {
	if len(wq.Shape) != 2 || len(scale.Shape) != 1 || scale.Shape[0] != wq.Shape[0] {
		return fmt.Errorf("weight %v and scale %v do not fit: want [N,K] and [N]", wq.Shape, scale.Shape)
	}
	if wq.DType != Int8 {
		return fmt.Errorf("weight has dtype %s, want int8", wq.DType)
	}
	if scale.DType != dt {
		return fmt.Errorf("scale has dtype %s, want %s", scale.DType, dt)
	}
	if !wq.IsContiguous() || !scale.IsContiguous() {
		return fmt.Errorf("weight and scale must be contiguous: %w", ErrNotImplemented)
	}
	return nil
}

// CheckDequantizeInt8 checks the arguments of
// [Int8Dequantizer.DequantizeInt8]: well-formed views wq [N,K] of dtype
// int8, scale [N] and dst [N,K], scale and dst of one floating-point
// dtype. A dtype of dst that is not floating-point, and views that are not
// contiguous, are errors wrapping [ErrNotImplemented].
func CheckDequantizeInt8(dst, wq, scale View) error {
	if err := checkViews(dst, wq, scale); err != nil {
		return err
	}
	if !dst.DType.IsFloat() {
		return notDefined(dst.DType)
	}
	if err := checkInt8Weight(wq, scale, dst.DType); err != nil {
		return err
	}
	if len(dst.Shape) != 2 || dst.Shape[0] != wq.Shape[0] || dst.Shape[1] != wq.Shape[1] {
		return fmt.Errorf("destination %v does not match weight %v", dst.Shape, wq.Shape)
	}
	if !dst.IsContiguous() {
		return fmt.Errorf("destination must be contiguous: %w", ErrNotImplemented)
	}
	return nil
}

// CheckMatMulInt8Weight checks the arguments of
// [Int8Linear.MatMulInt8Weight]: well-formed views x [M,K], wq [N,K] of
// dtype int8, scale [N], dst [M,N] and bias [N] or a bias of DType Invalid
// (none); x, scale, bias and dst of one floating-point dtype. A dtype of
// dst that is not floating-point, and views that are not contiguous, are
// errors wrapping [ErrNotImplemented].
func CheckMatMulInt8Weight(dst, x, wq, scale, bias View) error {
	vs := []View{dst, x, wq, scale}
	if bias.DType != Invalid {
		vs = append(vs, bias)
	}
	if err := checkViews(vs...); err != nil {
		return err
	}
	dt := dst.DType
	if !dt.IsFloat() {
		return notDefined(dt)
	}
	if err := checkInt8Weight(wq, scale, dt); err != nil {
		return err
	}
	n, k := wq.Shape[0], wq.Shape[1]
	if len(x.Shape) != 2 || x.Shape[1] != k || len(dst.Shape) != 2 || dst.Shape[0] != x.Shape[0] || dst.Shape[1] != n {
		return fmt.Errorf("input %v and weight %v do not give %v", x.Shape, wq.Shape, dst.Shape)
	}
	if x.DType != dt {
		return fmt.Errorf("input has dtype %s, destination %s", x.DType, dt)
	}
	if bias.DType != Invalid {
		if len(bias.Shape) != 1 || bias.Shape[0] != n {
			return fmt.Errorf("bias %v does not fit %d output features", bias.Shape, n)
		}
		if bias.DType != dt {
			return fmt.Errorf("bias has dtype %s, want %s", bias.DType, dt)
		}
		if !bias.IsContiguous() {
			return fmt.Errorf("bias must be contiguous: %w", ErrNotImplemented)
		}
	}
	if !x.IsContiguous() || !dst.IsContiguous() {
		return fmt.Errorf("input and destination must be contiguous: %w", ErrNotImplemented)
	}
	return nil
}
