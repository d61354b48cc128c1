package cuda

import (
	"testing"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
)

// TestNormGrid checks the launch geometry of the channels-last batch-norm
// kernels without a GPU: every channel is covered, the grid stays within
// the device's blocks, and the partial sums fit the workspace that
// NormWorkspaceRegion documents.
func TestNormGrid(t *testing.T) {
	d := &Device{sms: 132}
	for _, tc := range []struct {
		m    int64
		c, v int
	}{
		{64 * 112 * 112, 64, 2}, {64 * 56 * 56, 256, 2}, {64 * 7 * 7, 2048, 2}, {1, 1, 1},
		{3, 33, 1}, {1 << 40, 40, 2}, {16, 1 << 20, 2}, {2, 70, 1},
	} {
		gx, gy := d.normGrid(tc.m, tc.c, tc.v)
		if int(gx)*normTX*tc.v < tc.c || int(gx-1)*normTX*tc.v >= tc.c {
			t.Errorf("m %d c %d v %d: %d blocks across do not cover the channels exactly", tc.m, tc.c, tc.v, gx)
		}
		if gy < 1 || (gx <= uint32(d.sms*normBlocksPerSM) && gx*gy > uint32(d.sms*normBlocksPerSM)) {
			t.Errorf("m %d c %d v %d: grid %d x %d", tc.m, tc.c, tc.v, gx, gy)
		}
		if rows := int64(gy) * normTY; rows > max(tc.m, normTY) {
			t.Errorf("m %d c %d: %d block rows for %d rows", tc.m, tc.c, gy, tc.m)
		}
		if gx <= uint32(d.sms*normBlocksPerSM) {
			if floats := 2 * int64(gy) * int64(tc.c); floats > 2*int64(d.sms*normBlocksPerSM)*normTX*2 {
				t.Errorf("m %d c %d v %d: %d floats of partial sums, more than documented", tc.m, tc.c, tc.v, floats)
			}
		}
	}
}

// TestNormWidth checks when the kernels take two channels a thread: an
// even channel count and every address aligned to two elements.
func TestNormWidth(t *testing.T) {
	for _, tc := range []struct {
		dt   backend.DType
		c    int
		ptrs []cuda.DevicePtr
		want int
	}{
		{backend.BFloat16, 64, []cuda.DevicePtr{0x1000, 0x2000}, 2},
		{backend.BFloat16, 64, []cuda.DevicePtr{0x1000, 0x2002}, 1},
		{backend.Float32, 64, []cuda.DevicePtr{0x1004}, 1},
		{backend.Float32, 64, []cuda.DevicePtr{0x1008}, 2},
		{backend.Float16, 33, []cuda.DevicePtr{0x1000}, 1},
	} {
		if got := normWidth(tc.dt, tc.c, tc.ptrs...); got != tc.want {
			t.Errorf("%s, %d channels, %#x: width %d, want %d", tc.dt, tc.c, tc.ptrs, got, tc.want)
		}
	}
}

// TestTakesNHWC checks which batch norms the channels-last kernels take.
func TestTakesNHWC(t *testing.T) {
	buf := &Buffer{}
	view := func(dt backend.DType, shape, strides []int) backend.View {
		return backend.View{Buf: buf, DType: dt, Shape: shape, Strides: strides}
	}
	nhwc := view(backend.BFloat16, []int{2, 8, 3, 3}, []int{72, 1, 24, 8})
	nchw := view(backend.BFloat16, []int{2, 8, 3, 3}, []int{72, 9, 3, 1})
	both := view(backend.BFloat16, []int{2, 8, 1, 1}, []int{8, 1, 8, 8})
	ch := view(backend.Float32, []int{8}, []int{1})
	for _, tc := range []struct {
		name    string
		x       backend.View
		same    []backend.View
		channel []backend.View
		want    bool
	}{
		{"channels-last", nhwc, []backend.View{nhwc}, []backend.View{ch, ch, {}}, true},
		{"NCHW keeps cuDNN", nchw, []backend.View{nchw}, []backend.View{ch}, false},
		{"1x1 maps are NCHW too", both, []backend.View{both}, []backend.View{ch}, false},
		{"dy in another layout", nhwc, []backend.View{nchw}, []backend.View{ch}, false},
		{"float64", view(backend.Float64, []int{2, 8, 3, 3}, []int{72, 1, 24, 8}), nil, nil, false},
		{"bf16 scale", nhwc, []backend.View{nhwc}, []backend.View{view(backend.BFloat16, []int{8}, []int{1})}, false},
		{"strided scale", nhwc, []backend.View{nhwc}, []backend.View{view(backend.Float32, []int{8}, []int{2})}, false},
	} {
		if got := takesNHWC(tc.x, tc.same, tc.channel); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
