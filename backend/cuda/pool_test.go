package cuda

import (
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
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
	big := view(backend.BFloat16, []int{1 << 11, 64, 128, 128}, []int{1 << 20, 1, 1 << 13, 64})
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
		// 2³¹ elements: the kernels count items and offsets in 32 bits.
		{"an input of 2^31 elements", big, view(backend.BFloat16, []int{1 << 11, 64, 64, 64}, []int{1 << 18, 1, 1 << 12, 64}), max3, nil, false},
		{"an input just under", view(backend.BFloat16, []int{1<<11 - 1, 128, 64, 64}, []int{1 << 19, 1, 1 << 13, 128}), view(backend.BFloat16, []int{1<<11 - 1, 128, 32, 32}, []int{1 << 17, 1, 1 << 12, 128}), max3, nil, true},
	} {
		if got := takesPoolNHWC(tc.x, tc.y, tc.p, tc.same...); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPoolWidth checks the channels a thread of pool.cu takes: accesses of
// at most 16 bytes, dividing the channels, aligned at every pointer.
func TestPoolWidth(t *testing.T) {
	for _, tc := range []struct {
		name string
		dt   backend.DType
		c    int
		ptrs []cuda.DevicePtr
		want int
	}{
		{"bf16, 64 channels", backend.BFloat16, 64, []cuda.DevicePtr{0x1000, 0x2000}, 8},
		{"float32, 64 channels", backend.Float32, 64, []cuda.DevicePtr{0x1000}, 4},
		{"float16, 12 channels", backend.Float16, 12, []cuda.DevicePtr{0x1000}, 4},
		{"float32, 6 channels", backend.Float32, 6, []cuda.DevicePtr{0x1000}, 2},
		{"odd channels", backend.BFloat16, 33, []cuda.DevicePtr{0x1000}, 1},
		{"a pointer 8-byte aligned", backend.BFloat16, 64, []cuda.DevicePtr{0x1000, 0x2008}, 4},
		{"a pointer 2-byte aligned", backend.BFloat16, 64, []cuda.DevicePtr{0x1002}, 1},
	} {
		if got := poolWidth(tc.dt, tc.c, tc.ptrs...); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
