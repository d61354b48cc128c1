package analyze

import "testing"

// TestDistinctBytes checks that two different sizes never print alike in
// a fix's "peaks at X, under the Y allowed".
func TestDistinctBytes(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		a, b   int64
		sa, sb string
	}{
		{2 * 1024 * mib, 1800 * mib, "2.00 GiB", "1.76 GiB"},
		{1525 * mib, 1526 * mib, "1525.00 MiB", "1526.00 MiB"},
		{1525 * mib, 1525*mib + 1, "1599078400 bytes", "1599078401 bytes"},
		{1525 * mib, 1525 * mib, "1.49 GiB", "1.49 GiB"},
		{100, 200, "100 B", "200 B"},
	}
	for _, tc := range tests {
		sa, sb := distinctBytes(tc.a, tc.b)
		if sa != tc.sa || sb != tc.sb {
			t.Errorf("distinctBytes(%d, %d) = %q, %q; want %q, %q", tc.a, tc.b, sa, sb, tc.sa, tc.sb)
		}
	}
}
