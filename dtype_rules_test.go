package vram_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/vramgo/vram"
)

// TestZeroDimPromotion pins torch.result_type for elementwise operations
// that mix a 0-dimensional tensor with one of more dimensions: the 0-d
// operand counts only when its category (bool, integer, float) is higher.
func TestZeroDimPromotion(t *testing.T) {
	cases := []struct {
		name     string
		dim, zdt vram.DType
		want     vram.DType
	}{
		{"float16 and float32", vram.Float16, vram.Float32, vram.Float16},
		{"bfloat16 and float64", vram.BFloat16, vram.Float64, vram.BFloat16},
		{"float32 and int64", vram.Float32, vram.Int64, vram.Float32},
		{"int32 and int64", vram.Int32, vram.Int64, vram.Int32},
		{"int64 and float32", vram.Int64, vram.Float32, vram.Float32},
		{"int32 and float64", vram.Int32, vram.Float64, vram.Float64},
		{"bool and int64", vram.Bool, vram.Int64, vram.Int64},
		{"int32 and bool", vram.Int32, vram.Bool, vram.Int32},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				a := vram.Ones(vram.Shape{3}, dev, c.dim)
				defer a.Release()
				s := vram.Scalar(1, c.zdt) // a 0-d CPU tensor, read as a scalar on dev
				defer s.Release()
				ops := map[string]func() *vram.Tensor{
					"a+s":   func() *vram.Tensor { return a.Add(s) },
					"s*a":   func() *vram.Tensor { return s.Mul(a) },
					"where": func() *vram.Tensor { return vram.Where(a.Cast(vram.Bool), a, s) },
				}
				for name, op := range ops {
					r := op()
					if r.DType() != c.want || !slices.Equal(r.Shape(), vram.Shape{3}) {
						t.Errorf("%s: %v %s, want [3] %s", name, r.Shape(), r.DType(), c.want)
					}
					r.Release()
				}
			})
		}
	}
	// Two 0-d tensors, or two of more dimensions, promote as before.
	a, b := vram.Scalar(1, vram.Float16), vram.Scalar(1, vram.Float32)
	if dt := a.Add(b).DType(); dt != vram.Float32 {
		t.Errorf("0-d float16 + 0-d float32: %s, want float32", dt)
	}
	c, d := vram.Ones(vram.Shape{2}, vram.Float16), vram.Ones(vram.Shape{1}, vram.Float32)
	if dt := c.Add(d).DType(); dt != vram.Float32 {
		t.Errorf("[2] float16 + [1] float32: %s, want float32", dt)
	}
}

// TestInPlaceResultType pins that an in-place operation computes in the
// dtype its out-of-place form gives, and refuses, as PyTorch does, a result
// that the tensor's dtype cannot hold rather than truncating it.
func TestInPlaceResultType(t *testing.T) {
	refused := []struct {
		name string
		dt   vram.DType
		op   func(x *vram.Tensor)
	}{
		{"int64 div_ int64", vram.Int64, func(x *vram.Tensor) { x.DivInPlace(vram.Full(vram.Shape{3}, 2, x.Device(), vram.Int64)) }},
		{"int64 add_ float32", vram.Int64, func(x *vram.Tensor) { x.AddInPlace(vram.Full(vram.Shape{3}, 0.5, x.Device())) }},
		{"int32 mul_ 0-d float32", vram.Int32, func(x *vram.Tensor) { x.MulInPlace(vram.Scalar(0.5)) }},
		{"int64 mul_ scalar 0.5", vram.Int64, func(x *vram.Tensor) { x.MulScalarInPlace(0.5) }},
		{"int64 add_ scalar 0.5", vram.Int64, func(x *vram.Tensor) { x.AddScalarInPlace(0.5) }},
		{"int64 add_ scaled 0.5", vram.Int64, func(x *vram.Tensor) { x.AddScaledInPlace(x.Clone(), 0.5) }},
		{"bool add_ int64", vram.Bool, func(x *vram.Tensor) { x.AddInPlace(vram.Ones(vram.Shape{3}, x.Device(), vram.Int64)) }},
		{"bool add_ scalar", vram.Bool, func(x *vram.Tensor) { x.AddScalarInPlace(1) }},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range refused {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				x := vram.FromSlice([]int64{7, 8, 9}, vram.Shape{3}, dev).Cast(c.dt)
				defer x.Release()
				before := x.Float64s()
				err := vram.Catch(func() { c.op(x) })
				var e *vram.Error
				if !errors.As(err, &e) || !errors.Is(err, vram.ErrDType) {
					t.Fatalf("got %v, want an ErrDType error", err)
				}
				if got := x.Float64s(); !slices.Equal(got, before) {
					t.Errorf("refused operation changed the tensor: %v, was %v", got, before)
				}
			})
		}
		allowed := []struct {
			name string
			x    *vram.Tensor
			op   func(x *vram.Tensor)
			want []float64
		}{
			{"int64 add_ int32", vram.FromSlice([]int64{7, 8}, vram.Shape{2}, dev),
				func(x *vram.Tensor) { x.AddInPlace(vram.FromSlice([]int32{1, 2}, vram.Shape{2}, dev)) }, []float64{8, 10}},
			{"int32 add_ int64 wider", vram.FromSlice([]int32{7, 8}, vram.Shape{2}, dev),
				func(x *vram.Tensor) { x.AddInPlace(vram.FromSlice([]int64{1, 2}, vram.Shape{2}, dev)) }, []float64{8, 10}},
			{"float32 add_ float64", vram.FromSlice([]float32{1, 2}, vram.Shape{2}, dev),
				func(x *vram.Tensor) { x.AddInPlace(vram.FromSlice([]float64{0.5, 0.25}, vram.Shape{2}, dev)) }, []float64{1.5, 2.25}},
			// 1024 + (0.5 + 2^-12) is 1025 in float16, rounded once; rounding
			// the operand first gives 0.5, and 1024.5 ties to 1024.
			{"float16 add_ float32 rounds once", vram.FromSlice([]float32{1024}, vram.Shape{1}, dev).Half(),
				func(x *vram.Tensor) { x.AddInPlace(vram.FromSlice([]float32{0.5 + 1.0/4096}, vram.Shape{1}, dev)) }, []float64{1025}},
			{"float16 mul_ broadcast float32", vram.FromSlice([]float32{1, 2}, vram.Shape{2}, dev).Half(),
				func(x *vram.Tensor) { x.MulInPlace(vram.FromSlice([]float32{3}, vram.Shape{1}, dev)) }, []float64{3, 6}},
			{"int64 add_ scalar 2", vram.FromSlice([]int64{7, 8}, vram.Shape{2}, dev),
				func(x *vram.Tensor) { x.AddScalarInPlace(2) }, []float64{9, 10}},
			{"float32 div_ int64", vram.FromSlice([]float32{7, 8}, vram.Shape{2}, dev),
				func(x *vram.Tensor) { x.DivInPlace(vram.FromSlice([]int64{2, 2}, vram.Shape{2}, dev)) }, []float64{3.5, 4}},
		}
		for _, c := range allowed {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				defer c.x.Release()
				dt := c.x.DType()
				if err := vram.Catch(func() { c.op(c.x) }); err != nil {
					t.Fatal(err)
				}
				if c.x.DType() != dt || !slices.Equal(c.x.Float64s(), c.want) {
					t.Errorf("got %v %s, want %v %s", c.x.Float64s(), c.x.DType(), c.want, dt)
				}
			})
		}
	}
	// A wider operand that does not broadcast to t's shape is still refused.
	x := vram.Ones(vram.Shape{1}, vram.Float16)
	defer x.Release()
	if err := vram.Catch(func() { x.AddInPlace(vram.Ones(vram.Shape{2})) }); !errors.Is(err, vram.ErrShape) {
		t.Errorf("float16 [1] add_ float32 [2]: %v, want ErrShape", err)
	}
}

// TestIntegerUnaryDTypes pins the dtype of unary operations on integer
// tensors: the roundings are exact and keep it (an int64 past 2^24 is not
// rounded through float32), a fractional power gives float32.
func TestIntegerUnaryDTypes(t *testing.T) {
	const big = 1<<60 + 1
	cases := []struct {
		name string
		op   func(x *vram.Tensor) *vram.Tensor
		dt   vram.DType
		want []int64
	}{
		{"floor", (*vram.Tensor).Floor, vram.Int64, []int64{big, -3}},
		{"ceil", (*vram.Tensor).Ceil, vram.Int64, []int64{big, -3}},
		{"round", (*vram.Tensor).Round, vram.Int64, []int64{big, -3}},
		{"pow 1", func(x *vram.Tensor) *vram.Tensor { return x.PowScalar(1) }, vram.Int64, []int64{big, -3}},
		{"abs", (*vram.Tensor).Abs, vram.Int64, []int64{big, 3}},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, c := range cases {
			t.Run(dev.String()+"/"+c.name, func(t *testing.T) {
				x := vram.FromSlice([]int64{big, -3}, vram.Shape{2}, dev)
				defer x.Release()
				r := c.op(x)
				defer r.Release()
				if r.DType() != c.dt || !slices.Equal(r.Int64s(), c.want) {
					t.Errorf("got %v %s, want %v %s", r.Int64s(), r.DType(), c.want, c.dt)
				}
			})
		}
		t.Run(dev.String()+"/pow 0.5", func(t *testing.T) {
			x := vram.FromSlice([]int64{4, 9}, vram.Shape{2}, dev)
			defer x.Release()
			var r *vram.Tensor
			if err := vram.Catch(func() { r = x.PowScalar(0.5) }); err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if r.DType() != vram.Float32 || !slices.Equal(r.Float64s(), []float64{2, 3}) {
				t.Errorf("got %v %s, want [2 3] float32", r.Float64s(), r.DType())
			}
		})
	}
}
