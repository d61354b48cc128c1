package units

import (
	"math"
	"testing"
)

func TestFormats(t *testing.T) {
	tests := []struct {
		n             int64
		bytes, compac string
	}{
		{0, "0 B", "0 B"},
		{1023, "1023 B", "1023 B"},
		{-512, "-512 B", "-512 B"},
		{1536, "1.50 KiB", "1.50 KiB"},
		{15 << 20, "15.00 MiB", "15.0 MiB"},
		{140 << 30, "140.00 GiB", "140 GiB"},
		{-3 << 20, "-3.00 MiB", "-3.00 MiB"},
		{1 << 62, "4.00 EiB", "4.00 EiB"},
		{math.MinInt64, "-8.00 EiB", "-8.00 EiB"},
	}
	for _, tc := range tests {
		if got := Bytes(tc.n); got != tc.bytes {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.bytes)
		}
		if got := Compact(tc.n); got != tc.compac {
			t.Errorf("Compact(%d) = %q, want %q", tc.n, got, tc.compac)
		}
	}
}

// TestBytesRounded checks that BytesDown never reads as more than n and
// BytesUp never as less, where Bytes rounds to the nearest.
func TestBytesRounded(t *testing.T) {
	tests := []struct {
		n        int64
		down, up string
	}{
		{0, "0 B", "0 B"},
		{1023, "1023 B", "1023 B"},
		{1024, "1.00 KiB", "1.00 KiB"},
		{1536, "1.50 KiB", "1.50 KiB"},
		{1537, "1.50 KiB", "1.51 KiB"},
		{8<<30 - 2<<20, "7.99 GiB", "8.00 GiB"}, // Bytes: "8.00 GiB"
		{12 << 20, "12.00 MiB", "12.00 MiB"},
		{12<<20 + 1, "12.00 MiB", "12.01 MiB"},
		{1178599424, "1.09 GiB", "1.10 GiB"}, // 1.0976 GiB
		{-1537, "-1.50 KiB", "-1.51 KiB"},
		{math.MaxInt64, "7.99 EiB", "8.00 EiB"},
		{math.MinInt64, "-8.00 EiB", "-8.00 EiB"},
	}
	for _, tc := range tests {
		if got := BytesDown(tc.n); got != tc.down {
			t.Errorf("BytesDown(%d) = %q, want %q", tc.n, got, tc.down)
		}
		if got := BytesUp(tc.n); got != tc.up {
			t.Errorf("BytesUp(%d) = %q, want %q", tc.n, got, tc.up)
		}
	}
}
