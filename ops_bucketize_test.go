package vram

import (
	"slices"
	"testing"
)

// TestBucketizeWith checks the options of BucketizeWith: the side and the
// index dtype, on every device, with the same indices as Bucketize.
func TestBucketizeWith(t *testing.T) {
	cases := []struct {
		name string
		opts BucketizeOptions
		dt   DType
		want []int64
	}{
		{"default", BucketizeOptions{}, Int64, []int64{1, 3, 4, 0, 5, 0}},
		{"right", BucketizeOptions{Right: true}, Int64, []int64{2, 3, 5, 1, 5, 0}},
		{"int32", BucketizeOptions{OutInt32: true}, Int32, []int64{1, 3, 4, 0, 5, 0}},
		{"right int32", BucketizeOptions{Right: true, OutInt32: true}, Int32, []int64{2, 3, 5, 1, 5, 0}},
	}
	for _, d := range orderDevices {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				b := FromSlice([]float64{1, 3, 5, 7, 9}, nil, d)
				defer b.Release()
				x := FromSlice([]float64{3, 6, 9, 1, 10, 0}, Shape{2, 3}, d)
				defer x.Release()
				got := x.BucketizeWith(b, tc.opts)
				defer got.Release()
				if got.DType() != tc.dt || !slices.Equal(got.Shape(), Shape{2, 3}) || !slices.Equal(got.Int64s(), tc.want) {
					t.Errorf("got %v %v %v, want %v %v", got.DType(), got.Shape(), got.Int64s(), tc.dt, tc.want)
				}
				if got.Device() != d {
					t.Errorf("on %v, want %v", got.Device(), d)
				}
			})
		}
	}
}
