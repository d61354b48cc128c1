package vram

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// int8Ref returns the float layer that LinearInt8(x, wq, scale, bias)
// stands for: Linear with w = wq·scale in x's dtype.
func int8Ref(x, wq, scale, bias *Tensor) *Tensor {
	w := wq.Cast(x.DType())
	defer w.Release()
	s := scale.Cast(x.DType()).Reshape(scale.Shape()[0], 1)
	defer s.Release()
	wd := w.Mul(s)
	defer wd.Release()
	if bias != nil && bias.DType() != x.DType() {
		bias = bias.Cast(x.DType())
		defer bias.Release()
	}
	return Linear(x, wd, bias)
}

func int8Operands(d Device, dt DType, out, in int, seed uint64) (wq, scale, bias *Tensor) {
	g := NewGenerator(seed)
	r := Randn(Shape{out, in}, WithGenerator(g), d)
	defer r.Release()
	c := r.MulScalar(60).Clamp(-128, 127)
	defer c.Release()
	wq = c.Cast(Int8)
	u := Rand(Shape{out}, WithGenerator(g), d)
	defer u.Release()
	s := u.MulScalar(0.02).AddScalar(0.001)
	defer s.Release()
	scale = s.Cast(dt)
	b := Randn(Shape{out}, WithGenerator(g), d)
	defer b.Release()
	bias = b.Cast(dt)
	return wq, scale, bias
}

func maxAbsDiff(a, b *Tensor) float64 {
	x, y := a.Float64s(), b.Float64s()
	m := 0.0
	for i := range x {
		m = math.Max(m, math.Abs(x[i]-y[i]))
	}
	return m
}

// TestLinearInt8Paths checks LinearInt8 against the float layer it stands
// for on the CPU and a sim device, for every float dtype, through each of
// its three paths (the fused int8 product, the dequantization kernel and
// the composed fallback), with and without bias and for 3-d inputs.
func TestLinearInt8Paths(t *testing.T) {
	defer int8Path.Store(0)
	tols := map[DType]float64{Float64: 1e-9, Float32: 1e-4, Float16: 3e-2, BFloat16: 2e-1}
	for _, d := range []Device{CPU, needSim(t, 0)} {
		for _, dt := range []DType{Float32, Float64, Float16, BFloat16} {
			for path := range int32(3) {
				for _, withBias := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/path%d/bias=%v", d, dt, path, withBias), func(t *testing.T) {
						int8Path.Store(path)
						Tidy(func() {
							wq, scale, bias := int8Operands(d, dt, 130, 40, 1)
							if !withBias {
								bias = nil
							}
							x := Randn(Shape{2, 3, 40}, WithGenerator(NewGenerator(2)), d).Cast(dt)
							got := LinearInt8(x, wq, scale, bias)
							want := int8Ref(x, wq, scale, bias)
							if got.Shape().String() != (Shape{2, 3, 130}).String() || got.DType() != dt {
								t.Fatalf("result %v %s, want [2 3 130] %s", got.Shape(), got.DType(), dt)
							}
							if e := maxAbsDiff(got, want); e > tols[dt] {
								t.Errorf("max difference from the float layer %g > %g", e, tols[dt])
							}
						})
					})
				}
			}
		}
	}
}

// TestLinearInt8ScaleDType checks that a float32 scale and bias serve a
// bfloat16 input (cast to it) and that the result has the input's dtype.
func TestLinearInt8ScaleDType(t *testing.T) {
	Tidy(func() {
		wq, scale, bias := int8Operands(CPU, Float32, 8, 16, 3)
		x := Randn(Shape{4, 16}, WithGenerator(NewGenerator(4))).BFloat16()
		y := LinearInt8(x, wq, scale, bias)
		if y.DType() != BFloat16 {
			t.Fatalf("dtype %s, want bfloat16", y.DType())
		}
		want := int8Ref(x, wq, scale.BFloat16(), bias.BFloat16())
		if e := maxAbsDiff(y, want); e > 0.1 {
			t.Errorf("max difference %g", e)
		}
	})
}

// TestLinearInt8Grad checks that the gradient reaches x, equal to that of
// the float layer, and that a scale or bias requiring grad is refused.
func TestLinearInt8Grad(t *testing.T) {
	defer int8Path.Store(0)
	for path := range int32(3) {
		int8Path.Store(path)
		Tidy(func() {
			wq, scale, bias := int8Operands(CPU, Float64, 6, 5, 5)
			x := Randn(Shape{3, 5}, WithGenerator(NewGenerator(6)), Float64).SetRequiresGrad(true)
			LinearInt8(x, wq, scale, bias).Square().Sum().Backward()
			g1 := x.Grad().Clone()
			x.ZeroGrad()
			int8Ref(x, wq, scale, bias).Square().Sum().Backward()
			if e := maxAbsDiff(g1, x.Grad()); e > 1e-9 {
				t.Errorf("path %d: input gradient differs from the float layer's by %g", path, e)
			}
		})
	}
	Tidy(func() {
		wq, scale, bias := int8Operands(CPU, Float32, 6, 5, 5)
		x := Randn(Shape{3, 5})
		scale.SetRequiresGrad(true)
		err := Catch(func() { LinearInt8(x, wq, scale, bias) })
		if !errors.Is(err, ErrAutograd) {
			t.Errorf("scale requiring grad: %v, want ErrAutograd", err)
		}
		NoGrad(func() { LinearInt8(x, wq, scale, bias).Release() }) // fine without grad mode
	})
}

// TestLinearInt8Errors checks the argument errors.
func TestLinearInt8Errors(t *testing.T) {
	Tidy(func() {
		wq, scale, bias := int8Operands(CPU, Float32, 6, 5, 7)
		x := Randn(Shape{3, 5})
		wf := wq.Float()
		cases := []struct {
			name string
			fn   func()
			kind error
		}{
			{"float weight", func() { LinearInt8(x, wf, scale, bias) }, ErrDType},
			{"int input", func() { LinearInt8(x.Long(), wq, scale, bias) }, ErrDType},
			{"int scale", func() { LinearInt8(x, wq, scale.Long(), bias) }, ErrDType},
			{"input width", func() { LinearInt8(Randn(Shape{3, 4}), wq, scale, bias) }, ErrShape},
			{"scale length", func() { LinearInt8(x, wq, Randn(Shape{5}), bias) }, ErrShape},
			{"bias length", func() { LinearInt8(x, wq, scale, Randn(Shape{7})) }, ErrShape},
			{"1-d weight", func() { LinearInt8(x, wq.Reshape(30), scale, bias) }, ErrShape},
			{"nil weight", func() { LinearInt8(x, nil, scale, bias) }, ErrArgument},
		}
		for _, c := range cases {
			if err := Catch(c.fn); !errors.Is(err, c.kind) {
				t.Errorf("%s: %v, want %v", c.name, err, c.kind)
			}
		}
	})
}

// TestLinearInt8TransientFreed checks on a sim device that no float copy
// of the weight outlives the call, on the paths that make one: after the
// call only the output is allocated beyond the operands.
func TestLinearInt8TransientFreed(t *testing.T) {
	defer int8Path.Store(0)
	d := needSim(t, 1)
	for path := range int32(3) {
		int8Path.Store(path)
		wq, scale, bias := int8Operands(d, Float32, 256, 512, 8)
		x := Zeros(Shape{4, 512}, d)
		// The counts are exact, so a finalizer freeing another test's
		// garbage during the call spoils them: measure again when the
		// device's leak count moved.
		var y *Tensor
		var got, peak int64
		for attempt := 0; ; attempt++ {
			settle(d)
			leaked := Storage(d).Leaked
			base := MemoryAllocated(d)
			ResetPeakMemoryStats(d)
			y = LinearInt8(x, wq, scale, bias)
			got, peak = MemoryAllocated(d)-base, MaxMemoryAllocated(d)-base
			if Storage(d).Leaked == leaked || attempt == 4 {
				break
			}
			y.Release()
		}
		if got != y.Bytes() {
			t.Errorf("path %d: %d bytes allocated after the call, want the output's %d", path, got, y.Bytes())
		}
		if path == 0 && peak > 2*y.Bytes() {
			t.Errorf("fused path: peak %d bytes above the operands; it should need no float weight", peak)
		}
		if path != 0 && peak < 256*512*4 {
			t.Errorf("path %d: peak %d bytes, expected the transient float weight", path, peak)
		}
		for _, v := range []*Tensor{y, x, wq, scale, bias} {
			v.Release()
		}
	}
}

// TestLinearInt8Autocast checks that inside Autocast a float32 input runs
// in the autocast dtype.
func TestLinearInt8Autocast(t *testing.T) {
	Tidy(func() {
		wq, scale, bias := int8Operands(CPU, Float32, 8, 16, 9)
		x := Randn(Shape{4, 16})
		var y *Tensor
		Autocast(BFloat16, func() { y = LinearInt8(x, wq, scale, bias) })
		if y.DType() != BFloat16 {
			t.Errorf("dtype %s under bf16 autocast, want bfloat16", y.DType())
		}
		want := int8Ref(x.BFloat16(), wq, scale, bias)
		if e := maxAbsDiff(y, want); e > 0.1 {
			t.Errorf("max difference %g", e)
		}
	})
}
