package vram

import (
	"math"
	"testing"
)

// TestInterpolateHalfRoundsOnce checks that the interpolating modes of
// Interpolate on float16 and bfloat16 inputs compute in float32 and round
// once, as PyTorch's upsampling kernels accumulate in float: every entry
// lies within one unit in the last place of the float64 result of the
// same input. Weights, products and partial sums rounded to 16 bits were
// off by up to four units (bfloat16) or seven (float16) with bicubic
// interpolation.
func TestInterpolateHalfRoundsOnce(t *testing.T) {
	modes := []struct {
		name  string
		shape Shape
		o     InterpolateOptions
	}{
		{"linear", Shape{1, 4, 9}, InterpolateOptions{Size: []int{13}, Mode: InterpLinear}},
		{"linear down by factor", Shape{1, 4, 9}, InterpolateOptions{ScaleFactor: []float64{0.7}, Mode: InterpLinear}},
		{"bilinear aligned", Shape{1, 2, 5, 6}, InterpolateOptions{Size: []int{7, 11}, Mode: InterpBilinear, AlignCorners: true}},
		{"bicubic", Shape{1, 4, 7, 9}, InterpolateOptions{Size: []int{11, 13}, Mode: InterpBicubic}},
		{"trilinear", Shape{1, 2, 3, 4, 5}, InterpolateOptions{ScaleFactor: []float64{1.7}, Mode: InterpTrilinear}},
	}
	for _, dt := range []DType{Float16, BFloat16} {
		bits := 10 // the dtype's stored fraction bits
		if dt == BFloat16 {
			bits = 7
		}
		// ulp is the spacing of the dtype's values around v.
		ulp := func(v float64) float64 {
			_, e := math.Frexp(v)
			return math.Ldexp(1, e-1-bits)
		}
		for _, m := range modes {
			t.Run(dt.String()+"/"+m.name, func(t *testing.T) {
				Tidy(func() {
					x := Randn(m.shape, Float64, WithGenerator(NewGenerator(3))).MulScalar(100).AddScalar(300).Cast(dt)
					y := Interpolate(x, m.o)
					if y.DType() != dt {
						t.Fatalf("result is %v, want %v", y.DType(), dt)
					}
					got := y.Float64s()
					want := Interpolate(x.Cast(Float64), m.o).Float64s()
					for i := range got {
						if d := math.Abs(got[i] - want[i]); d > ulp(want[i]) {
							t.Fatalf("entry %d is %v, %.2g units from %v", i, got[i], d/ulp(want[i]), want[i])
						}
					}
				})
			})
		}
	}
}
