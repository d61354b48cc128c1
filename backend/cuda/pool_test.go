package cuda

import (
	"testing"

	"github.com/vramgo/vram/backend"
)

// TestTakesPoolNHWC checks which poolings pool.cu's kernels take.
func TestTakesPoolNHWC(t *testing.T) {
	buf := &Buffer{}
	view := func(dt backend.DType, shape, strides []int) backend.View {
		return backend.View{Buf: buf, DType: dt, Shape: shape, Strides: strides}
	}
	x := view(backend.BFloat16, []int{2, 8, 9, 9}, []int{648, 1, 72, 8})
	y := view(backend.BFloat16, []int{2, 8, 5, 5}, []int{200, 1, 40, 8})
	yNCHW := view(backend.BFloat16, []int{2, 8, 5, 5}, []int{200, 25, 5, 1})
	xNCHW := view(backend.BFloat16, []int{2, 8, 9, 9}, []int{648, 81, 9, 1})
	x1 := view(backend.Float32, []int{2, 8, 1, 1}, []int{8, 1, 8, 8})
	g := view(backend.Float32, []int{2, 8, 1, 1}, []int{8, 1, 8, 8})
	head := view(backend.Float32, []int{2, 8, 7, 7}, []int{392, 1, 56, 8})
	max3 := backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}}
	avg7 := backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{7, 7}, Stride: [2]int{7, 7}}
	for _, tc := range []struct {
		name string
		x, y backend.View
		p    backend.Pool2DParams
		same []backend.View
		want bool
	}{
		{"ResNet's stem", x, y, max3, nil, true},
		{"its backward pass", x, y, max3, []backend.View{x, y}, true},
		{"ResNet's head", head, g, avg7, []backend.View{head, g}, true},
		{"NCHW keeps cuDNN", xNCHW, yNCHW, max3, nil, false},
		{"NCHW output", x, yNCHW, max3, nil, false},
		{"gradient in another layout", x, y, max3, []backend.View{xNCHW}, false},
		{"gradient of another dtype", x, y, max3, []backend.View{view(backend.Float32, []int{2, 8, 9, 9}, []int{648, 1, 72, 8})}, false},
		{"1x1 maps are NCHW too", x1, x1, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{1, 1}, Stride: [2]int{1, 1}}, nil, false},
		{"float64", view(backend.Float64, []int{2, 8, 9, 9}, []int{648, 1, 72, 8}), y, max3, nil, false},
		{"padding above half the window", x, y, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}, Padding: [2]int{2, 0}}, nil, false},
		{"256 taps of max", x, y, backend.Pool2DParams{Mode: backend.MaxPool, Kernel: [2]int{16, 16}, Stride: [2]int{1, 1}}, nil, false},
		{"256 taps of average", x, y, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{16, 16}, Stride: [2]int{1, 1}}, nil, true},
		{"a stride past 32 bits", x, y, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{3, 3}, Stride: [2]int{1 << 32, 1}}, nil, false},
		{"zero stride", x, y, backend.Pool2DParams{Mode: backend.AvgPool, Kernel: [2]int{3, 3}}, nil, false},
	} {
		if got := takesPoolNHWC(tc.x, tc.y, tc.p, tc.same...); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
