package half

import (
	"math"
	"testing"
)

func TestRoundTrips(t *testing.T) {
	tests := []struct {
		in        float32
		f16, bf16 float32
	}{
		{0, 0, 0},
		{1, 1, 1},
		{-2.5, -2.5, -2.5},
		{65504, 65504, 65536},
		{1e6, float32(math.Inf(1)), 999424},
		{1.0009765625, 1.0009765625, 1}, // 1 + 2^-10: exact in f16, rounds to 1 in bf16
		{3.14159, 3.140625, 3.140625},
	}
	for _, tc := range tests {
		if got := F16To32(F16(tc.in)); got != tc.f16 {
			t.Errorf("f16(%v) = %v, want %v", tc.in, got, tc.f16)
		}
		if got := BF16To32(BF16(tc.in)); got != tc.bf16 {
			t.Errorf("bf16(%v) = %v, want %v", tc.in, got, tc.bf16)
		}
	}
	nan := float32(math.NaN())
	if v := BF16To32(BF16(nan)); v == v {
		t.Error("bf16 NaN lost")
	}
	if v := F16To32(F16(nan)); v == v {
		t.Error("f16 NaN lost")
	}
	// Round half to even in bf16: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
	if got := BF16To32(BF16(1 + 1.0/256)); got != 1 {
		t.Errorf("bf16 tie rounded to %v, want 1", got)
	}
}
