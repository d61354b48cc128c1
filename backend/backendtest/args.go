package backendtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vramgo/vram/backend"
)

// testArguments checks that the device refuses the arguments that package
// backend's checks refuse (one call of each kind of fault, for every
// kernel), at once or at the next Synchronize, and that a refused call
// leaves its destination as it was. Calls outside the op set must return
// an error wrapping backend.ErrNotImplemented, so that callers can fall
// back to other kernels; mistakes of the caller must not.
func (h *harness) testArguments(t *testing.T) {
	views := map[string]backend.View{}
	// v returns a contiguous view of dt and shape holding 1, 2, 3, 1, ...:
	// the same one for the same dtype and shape.
	v := func(dt backend.DType, shape ...int) backend.View {
		k := fmt.Sprint(dt, shape)
		if view, ok := views[k]; ok {
			return view
		}
		vals := make([]float64, backend.NumElements(shape))
		for i := range vals {
			vals[i] = Quantize(dt, float64(i%3+1))
		}
		views[k] = NewView(t, h.dev, dt, shape, vals)
		return views[k]
	}
	// transposed returns the transpose of a contiguous [rows, cols] view.
	transposed := func(dt backend.DType, rows, cols int) backend.View {
		x := v(dt, rows, cols)
		x.Shape, x.Strides = []int{cols, rows}, []int{1, cols}
		return x
	}
	f32, f64, i32, i64, bl := backend.Float32, backend.Float64, backend.Int32, backend.Int64, backend.Bool
	d := h.dev
	s := d.DefaultStream()

	type argCase struct {
		name    string
		dst     backend.View // must be unchanged after the call
		call    func() error
		notImpl bool // outside the op set rather than a mistake
	}
	cases := []argCase{
		{"Copy/shapes differ", v(f32, 2, 3), func() error { return d.Copy(s, v(f32, 2, 3), v(f32, 3, 2)) }, false},
		{"Unary/destination dtype differs", v(f64, 2, 3), func() error { return d.Unary(s, backend.Exp, v(f64, 2, 3), v(f32, 2, 3), 0) }, false},
		{"Unary/isnan into float", v(f32, 2, 3), func() error { return d.Unary(s, backend.IsNaN, v(f32, 2, 3), v(f32, 2, 3), 0) }, false},
		{"Unary/shapes differ", v(f32, 2, 3), func() error { return d.Unary(s, backend.Neg, v(f32, 2, 3), v(f32, 6), 0) }, false},
		{"Unary/exp of int32", v(i32, 2, 3), func() error { return d.Unary(s, backend.Exp, v(i32, 2, 3), v(i32, 2, 3), 0) }, true},
		{"Unary/neg of bool", v(bl, 2, 3), func() error { return d.Unary(s, backend.Neg, v(bl, 2, 3), v(bl, 2, 3), 0) }, true},
		{"Unary/fractional power of int64", v(i64, 2, 3), func() error { return d.Unary(s, backend.PowScalar, v(i64, 2, 3), v(i64, 2, 3), 0.5) }, true},
		{"Binary/input dtypes differ", v(f32, 2, 3), func() error { return d.Binary(s, backend.Add, v(f32, 2, 3), v(f32, 2, 3), v(f64, 2, 3)) }, false},
		{"Binary/comparison into float", v(f32, 2, 3), func() error { return d.Binary(s, backend.Lt, v(f32, 2, 3), v(f32, 2, 3), v(f32, 2, 3)) }, false},
		{"Binary/destination dtype differs", v(f64, 2, 3), func() error { return d.Binary(s, backend.Mul, v(f64, 2, 3), v(f32, 2, 3), v(f32, 2, 3)) }, false},
		{"Binary/shapes differ", v(f32, 2, 3), func() error { return d.Binary(s, backend.Add, v(f32, 2, 3), v(f32, 2, 3), v(f32, 3, 2)) }, false},
		{"Binary/sub of bool", v(bl, 2, 3), func() error { return d.Binary(s, backend.Sub, v(bl, 2, 3), v(bl, 2, 3), v(bl, 2, 3)) }, true},
		{"Binary/relu_backward of int64", v(i64, 2, 3), func() error { return d.Binary(s, backend.ReluBackward, v(i64, 2, 3), v(i64, 2, 3), v(i64, 2, 3)) }, true},
		{"Scalar/comparison into int", v(i64, 2, 3), func() error { return d.Scalar(s, backend.Eq, v(i64, 2, 3), v(i64, 2, 3), 1, false) }, false},
		{"Scalar/shapes differ", v(f32, 2, 3), func() error { return d.Scalar(s, backend.Add, v(f32, 2, 3), v(f32, 3, 2), 1, false) }, false},
		{"Scalar/pow of bool", v(bl, 2, 3), func() error { return d.Scalar(s, backend.Pow, v(bl, 2, 3), v(bl, 2, 3), 2, false) }, true},
		{"Where/condition not bool", v(f32, 2, 3), func() error { return d.Where(s, v(f32, 2, 3), v(i32, 2, 3), v(f32, 2, 3), v(f32, 2, 3)) }, false},
		{"Where/dtypes differ", v(f32, 2, 3), func() error { return d.Where(s, v(f32, 2, 3), v(bl, 2, 3), v(f64, 2, 3), v(f32, 2, 3)) }, false},
		{"Where/shapes differ", v(f32, 2, 3), func() error { return d.Where(s, v(f32, 2, 3), v(bl, 3, 2), v(f32, 2, 3), v(f32, 2, 3)) }, false},
		{"Reduce/ranks differ", v(f32, 2), func() error { return d.Reduce(s, backend.Sum, v(f32, 2), v(f32, 2, 3), []int{1}) }, false},
		{"Reduce/axes unsorted", v(f32, 1, 1), func() error { return d.Reduce(s, backend.Sum, v(f32, 1, 1), v(f32, 2, 3), []int{1, 0}) }, false},
		{"Reduce/axis past the rank", v(f32, 2, 3), func() error { return d.Reduce(s, backend.Max, v(f32, 2, 3), v(f32, 2, 3), []int{2}) }, false},
		{"Reduce/destination shape", v(f32, 3, 1), func() error { return d.Reduce(s, backend.Sum, v(f32, 3, 1), v(f32, 2, 3), []int{1}) }, false},
		{"Reduce/destination dtype", v(f64, 2, 1), func() error { return d.Reduce(s, backend.Sum, v(f64, 2, 1), v(f32, 2, 3), []int{1}) }, false},
		{"Reduce/argmax into int32", v(i32, 2, 1), func() error { return d.Reduce(s, backend.ArgMax, v(i32, 2, 1), v(f32, 2, 3), []int{1}) }, false},
		{"Reduce/argmin over two axes", v(i64, 1, 1), func() error { return d.Reduce(s, backend.ArgMin, v(i64, 1, 1), v(f32, 2, 3), []int{0, 1}) }, false},
		{"MatMul/2-d views", v(f32, 2, 2), func() error { return d.MatMul(s, v(f32, 2, 2), v(f32, 2, 3), v(f32, 3, 2)) }, false},
		{"MatMul/inner sizes differ", v(f32, 1, 2, 2), func() error { return d.MatMul(s, v(f32, 1, 2, 2), v(f32, 1, 2, 3), v(f32, 1, 2, 2)) }, false},
		{"MatMul/dtypes differ", v(f32, 1, 2, 2), func() error { return d.MatMul(s, v(f32, 1, 2, 2), v(f64, 1, 2, 3), v(f32, 1, 3, 2)) }, false},
		{"MatMul/int32", v(i32, 1, 2, 2), func() error { return d.MatMul(s, v(i32, 1, 2, 2), v(i32, 1, 2, 3), v(i32, 1, 3, 2)) }, true},
		{"Gather/index int32", v(f32, 2, 3), func() error { return d.Gather(s, v(f32, 2, 3), v(f32, 2, 3), v(i32, 2, 3), 1) }, false},
		{"Gather/bad axis", v(f32, 2, 3), func() error { return d.Gather(s, v(f32, 2, 3), v(f32, 2, 3), v(i64, 2, 3), 2) }, false},
		{"Gather/larger off axis", v(f32, 3, 2), func() error { return d.Gather(s, v(f32, 3, 2), v(f32, 2, 3), v(i64, 3, 2), 1) }, false},
		{"ScatterAdd/dtypes differ", v(f32, 2, 3), func() error { return d.ScatterAdd(s, v(f32, 2, 3), v(i64, 2, 3), v(f64, 2, 3), 1) }, false},
		{"ScatterAdd/index shape", v(f32, 2, 3), func() error { return d.ScatterAdd(s, v(f32, 2, 3), v(i64, 3, 2), v(f32, 2, 3), 0) }, false},
		{"CopyFromHost/transposed", v(f32, 2, 3), func() error { return d.CopyFromHost(s, transposed(f32, 2, 3), Encode(f32, filled(6, 9))) }, false},
	}
	if fm, ok := d.(backend.FusedMatMul); ok {
		cases = append(cases,
			argCase{"MatMulBias/bias length", v(f32, 2, 2), func() error { return fm.MatMulBias(s, v(f32, 2, 2), v(f32, 2, 3), v(f32, 3, 2), v(f32, 3), false) }, false},
			argCase{"MatMulRowSum/dtypes differ", v(f32, 2, 2), func() error { return fm.MatMulRowSum(s, v(f32, 2, 2), v(f32, 2, 3), v(f32, 3, 2), v(f64, 2)) }, false},
			argCase{"MatMulBias/int64", v(i64, 2, 2), func() error { return fm.MatMulBias(s, v(i64, 2, 2), v(i64, 2, 3), v(i64, 3, 2), v(i64, 2), true) }, true})
	}
	if fa, ok := d.(backend.FusedAdam); ok {
		cfg := backend.AdamStepConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
		cases = append(cases, argCase{"AdamStep/step 0", v(f32, 6), func() error { return fa.AdamStep(s, v(f32, 6), v(f32, 6), v(f32, 6), v(f32, 6), cfg) }, false})
	}
	if fs, ok := d.(backend.FusedSGD); ok {
		cfg := backend.SGDStepConfig{LR: 0.1}
		cases = append(cases, argCase{"SGDStep/shapes differ", v(f32, 6), func() error { return fs.SGDStep(s, v(f32, 6), v(f32, 2, 3), backend.View{}, cfg) }, false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := ReadView(t, d, c.dst)
			err := h.call(c.call)
			switch {
			case err == nil:
				t.Fatal("got no error, want one")
			case c.notImpl && !errors.Is(err, backend.ErrNotImplemented):
				t.Errorf("got %v, want an error wrapping ErrNotImplemented", err)
			case !c.notImpl && errors.Is(err, backend.ErrNotImplemented):
				t.Errorf("got %v, which wraps ErrNotImplemented: the arguments are a mistake, not an op the device lacks", err)
			}
			if after := ReadView(t, d, c.dst); !slices.Equal(after, before) {
				t.Errorf("the refused call changed its destination from %v to %v", before, after)
			}
		})
	}
}
