package units

import "testing"

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
