package vram

import (
	"errors"
	"slices"
	"testing"
)

// TestArangeIntegerDTypes checks Arange of integer dtypes against
// PyTorch's arange_out, which computes them in int64: start, end and step
// are truncated toward zero first, an int64 result counts its elements in
// int64 arithmetic (other dtypes in float64 from the arguments given), and
// the values are start + i*step exactly, so an int64 range beyond 2^53
// holds every integer of it; float64 arithmetic gave 2^53, 2^53, 2^53+2,
// 2^53+4 for torch.arange(2**53, 2**53+4, dtype=torch.int64)'s
// 2^53, 2^53+1, 2^53+2, 2^53+3.
func TestArangeIntegerDTypes(t *testing.T) {
	const p53 = 1 << 53
	for _, tc := range []struct {
		name             string
		start, end, step float64
		dtype            DType
		want             []int64
	}{
		{"int64 past 2^53", p53, p53 + 4, 1, Int64, []int64{p53, p53 + 1, p53 + 2, p53 + 3}},
		{"int64 down past 2^53", -p53, -p53 - 2, -1, Int64, []int64{-p53, -p53 - 1}},
		{"int64 near the top", 1<<63 - 4096, 1<<63 - 1024, 1024, Int64,
			[]int64{1<<63 - 4096, 1<<63 - 3072, 1<<63 - 2048}},
		// torch.arange(0, 4.5, 1, dtype=torch.int64) counts to the truncated end 4.
		{"int64 fractional end", 0, 4.5, 1, Int64, []int64{0, 1, 2, 3}},
		// torch.arange(0.9, 3, 1, dtype=torch.int64) starts at 0.
		{"int64 fractional start", 0.9, 3, 1, Int64, []int64{0, 1, 2}},
		{"int64 fractional step", 0, 7, 2.9, Int64, []int64{0, 2, 4, 6}},
		// An int32 result counts as float64 does: ceil(4.5) = 5 elements.
		{"int32 fractional end", 0, 4.5, 1, Int32, []int64{0, 1, 2, 3, 4}},
		{"int32", -3, 4, 3, Int32, []int64{-3, 0, 3}},
		{"int8", 5, -4, -4, Int8, []int64{5, 1, -3}},
		{"int64 empty", 3, 3, 1, Int64, []int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, d := range []Device{CPU, Sim(0)} {
				var got []int64
				if err := Catch(func() {
					x := Arange(tc.start, tc.end, tc.step, tc.dtype, d)
					defer x.Release()
					if x.DType() != tc.dtype {
						t.Errorf("%s: dtype %s, want %s", d, x.DType(), tc.dtype)
					}
					c := x.Cast(Int64)
					defer c.Release()
					got = c.Int64s()
				}); err != nil {
					t.Fatalf("%s: %v", d, err)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s: got %v, want %v", d, got, tc.want)
				}
			}
		})
	}
}

// TestArangeRefusals checks the arguments PyTorch's arange refuses: a
// step that truncates to 0 for an integer dtype ("step must be nonzero"),
// a step whose sign points away from end ("upper bound and larger bound
// inconsistent with step sign"; an empty range, end equal to start, is
// fine), and values that overflow the dtype.
func TestArangeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name             string
		start, end, step float64
		dtype            DType
		kind             error
	}{
		{"int64 step truncated to 0", 0, 2.5, 0.5, Int64, ErrArgument},
		{"int32 step truncated to 0", 0, 2, -0.9, Int32, ErrArgument},
		{"float step pointing away", 0, 5, -1, Float32, ErrArgument},
		{"float step pointing away, down", 5, 0, 1, Float64, ErrArgument},
		{"int64 step pointing away", 0, 5, -1, Int64, ErrArgument},
		{"int64 truncated end before start", 0, -0.5, -1, Int64, nil},
		{"int32 overflow", 0, 5e9, 1e9, Int32, ErrArgument},
		{"int8 overflow", 0, 201, 100, Int8, ErrArgument},
		{"int8 start overflows", 200, 0, -100, Int8, ErrArgument},
		{"int64 start beyond int64", -1e19, 0, 1e18, Int64, ErrArgument},
		{"int64 end beyond int64", 0, 1 << 63, 1 << 62, Int64, ErrArgument},
		{"int64 step beyond int64", 0, 1, 1 << 63, Int64, ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(func() { Arange(tc.start, tc.end, tc.step, tc.dtype).Release() })
			if tc.kind == nil {
				if err != nil {
					t.Errorf("got %v, want no error", err)
				}
				return
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("got %v, want %v", err, tc.kind)
			}
		})
	}
}
