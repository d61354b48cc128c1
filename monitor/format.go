package monitor

import "github.com/vramgo/vram/internal/units"

// formatBytes returns n in binary units with three significant digits:
// "512 B", "1.50 KiB", "139.8 GiB"... -1 reads "?".
func formatBytes(n int64) string {
	if n < 0 {
		return "?"
	}
	return units.Compact(n)
}
