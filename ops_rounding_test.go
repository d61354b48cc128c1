package vram

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestRoundingBoolAndInt checks that Floor, Ceil, Round and Trunc refuse a
// bool tensor with ErrDType naming the op, as torch.floor and its siblings
// raise, and copy an integer tensor unchanged in its dtype.
func TestRoundingBoolAndInt(t *testing.T) {
	ops := []struct {
		name string
		fn   func(*Tensor) *Tensor
	}{
		{"floor", (*Tensor).Floor},
		{"ceil", (*Tensor).Ceil},
		{"round", (*Tensor).Round},
		{"trunc", (*Tensor).Trunc},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, o := range ops {
			t.Run(d.String()+"/"+o.name+"/bool", func(t *testing.T) {
				b := FromSlice([]bool{true, false}, Shape{2}, d)
				defer b.Release()
				err := Catch(func() { Tidy(func() { o.fn(b) }) })
				if !errors.Is(err, ErrDType) || !strings.Contains(err.Error(), o.name) {
					t.Errorf("got %v, want an ErrDType naming %s", err, o.name)
				}
				if got := b.Int64s(); !slices.Equal(got, []int64{1, 0}) {
					t.Errorf("input changed to %v", got)
				}
			})
			t.Run(d.String()+"/"+o.name+"/int32", func(t *testing.T) {
				x := FromSlice([]int32{-3, 0, 7}, Shape{3}, d)
				defer x.Release()
				y := o.fn(x)
				defer y.Release()
				if y.DType() != Int32 || !slices.Equal(y.Int64s(), []int64{-3, 0, 7}) {
					t.Errorf("got %v %v, want int32 [-3 0 7]", y.DType(), y.Int64s())
				}
			})
		}
	}
}

// TestRoundDecimals checks RoundDecimals against torch.round with
// decimals, on values whose scaled forms are exact, so that the ties round
// to even; float16 scales in float32, where 60000·10 does not overflow.
func TestRoundDecimals(t *testing.T) {
	cases := []struct {
		name     string
		dt       DType
		in       []float64
		decimals int
		want     []float64
	}{
		{"two places", Float64, []float64{0.125, 0.375, -0.125, 2.5}, 2, []float64{0.12, 0.38, -0.12, 2.5}},
		{"tens", Float64, []float64{25, 35, -15, 4}, -1, []float64{20, 40, -20, 0}},
		{"hundreds float32", Float32, []float64{1250, 1350, 49}, -2, []float64{1200, 1400, 0}},
		{"zero is Round", Float32, []float64{0.5, 1.5, -2.5}, 0, []float64{0, 2, -2}},
		{"float16 no overflow", Float16, []float64{60000, 0.5}, 1, []float64{60000, 0.5}},
		{"bfloat16", BFloat16, []float64{2.5, -3.5}, 0, []float64{2, -4}},
		{"int32 decimals 0", Int32, []float64{-3, 7}, 0, []float64{-3, 7}},
		{"NaN and Inf", Float64, []float64{math.NaN(), math.Inf(-1)}, 3, []float64{math.NaN(), math.Inf(-1)}},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				Tidy(func() {
					x := FromSlice(tc.in, Shape{len(tc.in)}, d, tc.dt)
					got := x.RoundDecimals(tc.decimals)
					if got.DType() != tc.dt || got.Device() != d || !sameFloats(got.Float64s(), tc.want, 1e-12) {
						t.Errorf("got %v %v, want %v %v", got.DType(), got.Float64s(), tc.dt, tc.want)
					}
				})
			})
		}
	}
	t.Run("gradient", func(t *testing.T) {
		x := FromSlice([]float64{0.125, 3.14159}, Shape{2}, WithGrad())
		defer x.Release()
		y := x.RoundDecimals(2)
		defer y.Release()
		y.Sum().Backward()
		if g := x.Grad().Float64s(); !slices.Equal(g, []float64{0, 0}) {
			t.Errorf("grad %v, want zeros", g)
		}
	})
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"bool", func() { FromSlice([]bool{true}, nil).RoundDecimals(1) }},
		{"bool decimals 0", func() { FromSlice([]bool{true}, nil).RoundDecimals(0) }},
		{"int64 decimals", func() { FromSlice([]int64{15}, nil).RoundDecimals(-1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Catch(func() { Tidy(tc.fn) }); !errors.Is(err, ErrDType) || !strings.Contains(err.Error(), "round") {
				t.Errorf("got %v, want an ErrDType naming round", err)
			}
		})
	}
}

// TestSignOfNaNAndZeros checks Sign against torch.sign on the values its
// comparisons cannot order: NaN gives 0 (not NaN), and a zero of either
// sign gives +0, in every floating-point dtype; Abs's gradient, g·sign(x),
// is then 0 at NaN, as PyTorch's is.
func TestSignOfNaNAndZeros(t *testing.T) {
	nz := math.Copysign(0, -1)
	in := []float64{math.NaN(), -math.NaN(), nz, 0, -2.5, 3, math.Inf(-1), math.Inf(1)}
	want := []float64{0, 0, 0, 0, -1, 1, -1, 1}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, dt := range []DType{Float32, Float64, Float16, BFloat16} {
			t.Run(d.String()+"/"+dt.String(), func(t *testing.T) {
				Tidy(func() {
					got := FromSlice(in, Shape{len(in)}, d).Cast(dt).Sign().Float64s()
					if !slices.Equal(got, want) {
						t.Errorf("got %v, want %v", got, want)
					}
					for i, v := range got {
						if v == 0 && math.Signbit(v) {
							t.Errorf("sign(%v) is -0, want +0", in[i])
						}
					}
				})
			})
		}
		t.Run(d.String()+"/abs gradient", func(t *testing.T) {
			x := FromSlice([]float64{math.NaN(), -2, 0}, Shape{3}, d)
			defer x.Release()
			x.SetRequiresGrad(true)
			Tidy(func() { x.Abs().Sum().Backward() })
			if got := x.Grad().Float64s(); !slices.Equal(got, []float64{0, -1, 0}) {
				t.Errorf("gradient %v, want [0 -1 0]", got)
			}
		})
	}
}
