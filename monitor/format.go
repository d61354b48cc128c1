package monitor

import "fmt"

// formatBytes returns n in binary units with three significant digits:
// "512 B", "1.50 KiB", "139.8 GiB"... -1 reads "?".
func formatBytes(n int64) string {
	if n < 0 {
		return "?"
	}
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n) / 1024
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %ciB", v, units[u])
	case v >= 10:
		return fmt.Sprintf("%.1f %ciB", v, units[u])
	}
	return fmt.Sprintf("%.2f %ciB", v, units[u])
}
