package vram

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// sameCases are convolutions with padding "same": odd and even kernels,
// non-square and dilated ones, groups.
var sameCases = []convCase{
	{"3x3", []int{2, 2, 5, 4}, []int{3, 2, 3, 3}, Conv2dParams{Same: true}, false},
	{"2x2 even", []int{1, 2, 4, 5}, []int{2, 2, 2, 2}, Conv2dParams{Same: true}, false},
	{"1x4", []int{1, 1, 3, 6}, []int{2, 1, 1, 4}, Conv2dParams{Same: true}, true},
	{"3x2 dilated", []int{1, 2, 7, 6}, []int{2, 2, 3, 2}, Conv2dParams{Same: true, Dilation: [2]int{2, 3}}, false},
	{"groups", []int{1, 4, 4, 4}, []int{4, 2, 2, 3}, Conv2dParams{Same: true, Groups: 2}, false},
}

// refConvSame is the convolution with padding "same" computed directly:
// the input padded by hand, Dilation·(K-1) zeros along each axis with the
// odd one at the bottom or right, then convolved without padding.
func refConvSame(x []float64, xs []int, w []float64, ws []int, bias []float64, p Conv2dParams) ([]float64, []int) {
	p.Same = false
	d := [2]int{max(p.Dilation[0], 1), max(p.Dilation[1], 1)}
	lo := [2]int{d[0] * (ws[2] - 1) / 2, d[1] * (ws[3] - 1) / 2}
	ps := []int{xs[0], xs[1], xs[2] + d[0]*(ws[2]-1), xs[3] + d[1]*(ws[3]-1)}
	xp := make([]float64, ps[0]*ps[1]*ps[2]*ps[3])
	for nc := range xs[0] * xs[1] {
		for i := range xs[2] {
			for j := range xs[3] {
				xp[(nc*ps[2]+i+lo[0])*ps[3]+j+lo[1]] = x[(nc*xs[2]+i)*xs[3]+j]
			}
		}
	}
	return refConv2d(xp, ps, w, ws, bias, p)
}

// TestConv2dSamePadding checks padding "same" against the direct
// computation, in both memory formats and unbatched, its gradients
// against finite differences, and a device with native convolutions
// against the CPU.
func TestConv2dSamePadding(t *testing.T) {
	for _, tc := range sameCases {
		t.Run(tc.name, func(t *testing.T) {
			x, w, b := convInputs(tc, false)
			want, ws := refConvSame(x.Float64s(), tc.x, w.Float64s(), tc.w, floats(b), tc.p)
			if ws[2] != tc.x[2] || ws[3] != tc.x[3] {
				t.Fatalf("reference shape %v does not keep the input's size %v", ws, tc.x)
			}
			for _, cl := range []bool{false, true} {
				in := x
				if cl {
					in = x.Contiguous(ChannelsLast)
				}
				y := Conv2d(in, w, b, tc.p)
				if !slices.Equal(y.Shape(), Shape(ws)) {
					t.Fatalf("shape %v, want %v", y.Shape(), ws)
				}
				if cl && y.SuggestMemoryFormat() != ChannelsLast {
					t.Errorf("channels-last input gave strides %v", y.Strides())
				}
				closeTo(t, fmt.Sprintf("channels-last=%v", cl), y.Float64s(), want, 1e-12)
			}
			xu := x.Select(0, 0)
			yu := Conv2d(xu, w, b, tc.p)
			closeTo(t, "unbatched", yu.Float64s(), want[:len(yu.Float64s())], 1e-12)
			if b == nil {
				gradCheck(t, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], nil, tc.p) }, x, w)
				onNativeTest(t, false, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], nil, tc.p) }, rnd(15, tc.x...), rnd(16, tc.w...))
				return
			}
			gradCheck(t, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], xs[2], tc.p) }, x, w, b)
			onNativeTest(t, false, func(xs []*Tensor) *Tensor { return Conv2d(xs[0], xs[1], xs[2], tc.p) }, rnd(15, tc.x...), rnd(16, tc.w...), rnd(17, tc.w[0]))
		})
	}
}

func TestConv2dSamePaddingErrors(t *testing.T) {
	x, w := rnd(18, 1, 2, 5, 5), rnd(19, 3, 2, 3, 3)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"strided", func() { Conv2d(x, w, nil, Conv2dParams{Same: true, Stride: [2]int{2, 1}}) }},
		{"with padding", func() { Conv2d(x, w, nil, Conv2dParams{Same: true, Padding: [2]int{1, 1}}) }},
		{"transposed", func() { ConvTranspose2d(x, rnd(20, 2, 3, 3, 3), nil, Conv2dParams{Same: true}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Catch(tc.f); !errors.Is(err, ErrArgument) {
				t.Errorf("error %v, want %v", err, ErrArgument)
			}
		})
	}
}

// TestConv2dSamePaddingBadKernel checks the kernels padding "same" cannot
// pad for, which PyTorch refuses too: an empty one (its total padding
// Dilation·(K-1) is negative; PyTorch ends with "negative padding is not
// supported"), and a dilation whose padding overflows an int, which must
// be named as such rather than as the wrapped, negative padding.
func TestConv2dSamePaddingBadKernel(t *testing.T) {
	x := rnd(21, 1, 2, 5, 5)
	for _, tc := range []struct {
		name string
		f    func()
		msg  string // in the error
	}{
		{"empty kernel height", func() { Conv2d(x, Ones(Shape{3, 2, 0, 3}, Float64), nil, Conv2dParams{Same: true}) }, "kernel"},
		{"empty kernel width", func() { Conv2d(x, Ones(Shape{3, 2, 3, 0}, Float64), nil, Conv2dParams{Same: true}) }, "kernel"},
		{"empty 1-D kernel", func() { Conv1d(rnd(22, 1, 2, 5), Ones(Shape{3, 2, 0}, Float64), nil, Conv1dParams{Same: true}) }, "kernel"},
		{"dilation wraps", func() {
			Conv2d(x, Ones(Shape{3, 2, 3, 3}, Float64), nil, Conv2dParams{Same: true, Dilation: [2]int{math.MaxInt, 1}})
		}, "overflow"},
		{"dilation wraps on width", func() {
			Conv2d(x, Ones(Shape{3, 2, 3, 5}, Float64), nil, Conv2dParams{Same: true, Dilation: [2]int{1, math.MaxInt / 3}})
		}, "overflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(tc.f)
			if !errors.Is(err, ErrShape) || !strings.Contains(fmt.Sprint(err), tc.msg) || strings.Contains(fmt.Sprint(err), "padding -") {
				t.Errorf("error %v, want %v naming the %s", err, ErrShape, tc.msg)
			}
		})
	}
}
