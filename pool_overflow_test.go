package vram

import (
	"math"
	"math/big"
	"slices"
	"testing"
)

// bigPoolOutputSize is PyTorch's pooling_output_shape computed without
// overflow: (in + 2·padding - dilation·(kernel-1) - 1 + (ceil ? stride-1 :
// 0)) / stride + 1, rounded down, less the last window in ceil mode when
// it starts at or past in + padding.
func bigPoolOutputSize(in, kernel, stride, padding, dilation int, ceil bool) int64 {
	b := func(v int) *big.Int { return big.NewInt(int64(v)) }
	span := new(big.Int).Add(b(in), new(big.Int).Mul(b(2), b(padding)))
	span.Sub(span, new(big.Int).Mul(b(dilation), b(kernel-1)))
	span.Sub(span, b(1))
	if ceil {
		span.Add(span, b(stride-1))
	}
	out := new(big.Int).Div(span, b(stride)) // Euclidean: floor for stride > 0
	out.Add(out, b(1))
	if ceil {
		last := new(big.Int).Mul(new(big.Int).Sub(out, b(1)), b(stride))
		if last.Cmp(b(in+padding)) >= 0 {
			out.Sub(out, b(1))
		}
	}
	return out.Int64()
}

// TestPoolOutputSizeHugeStride checks the number of windows for strides
// and inputs near the largest int, where PyTorch's rounding up (adding
// stride-1) passes it: the size must be PyTorch's, not a wrapped one.
func TestPoolOutputSizeHugeStride(t *testing.T) {
	for _, tc := range []struct {
		name                                  string
		in, kernel, stride, padding, dilation int
	}{
		{"max stride", 5, 2, math.MaxInt, 0, 1},
		{"max stride padded", 5, 2, math.MaxInt, 1, 1},
		{"max stride less one", 5, 3, math.MaxInt - 1, 1, 1},
		{"stride 2^62", 7, 3, 1 << 62, 0, 1},
		{"stride 2^62 dilated", 9, 3, 1 << 62, 0, 2},
		{"large input and stride", 1<<61 - 1, 2, 1 << 61, 1, 1},
		{"small", 6, 3, 2, 1, 1},
	} {
		for _, ceil := range []bool{false, true} {
			want := bigPoolOutputSize(tc.in, tc.kernel, tc.stride, tc.padding, tc.dilation, ceil)
			if got := poolOutputSize(tc.in, tc.kernel, tc.stride, tc.padding, tc.dilation, ceil); int64(got) != want {
				t.Errorf("%s, ceil %v: %d windows, want %d", tc.name, ceil, got, want)
			}
		}
	}
}

// TestPoolHugeStride pools with a stride past the input, as large as an
// int allows: each axis has one window, at the start, in floor and ceil
// mode, as in PyTorch (ceil mode drops the window that would start past
// the input).
func TestPoolHugeStride(t *testing.T) {
	x := Arange(0, 25, 1).Reshape(1, 1, 5, 5)
	for _, tc := range []struct {
		name string
		p    Pool2dParams
		max  float64 // the first 2x2 window's maximum
		avg  float64 // and mean
	}{
		{"floor", Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{math.MaxInt, math.MaxInt}}, 6, 3},
		{"ceil", Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{math.MaxInt, math.MaxInt}, CeilMode: true}, 6, 3},
		{"ceil stride 2^62", Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{1 << 62, math.MaxInt - 1}, CeilMode: true}, 6, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, avg := range []bool{false, true} {
				pool, want := MaxPool2d, tc.max
				if avg {
					pool, want = AvgPool2d, tc.avg
				}
				var y *Tensor
				if err := Catch(func() { y = pool(x, tc.p) }); err != nil {
					t.Fatalf("avg %v: %v", avg, err)
				}
				if !slices.Equal(y.Shape(), Shape{1, 1, 1, 1}) || y.Float64s()[0] != want {
					t.Errorf("avg %v: %v %v, want [1, 1, 1, 1] [%v]", avg, y.Shape(), y.Float64s(), want)
				}
			}
		})
	}
}
