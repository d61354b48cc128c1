package monitor

import (
	"github.com/vramgo/vram/internal/units"
	"github.com/vramgo/vram/memory"
)

// UnknownProcess is the name vram's tools and metrics give a process whose
// name the driver could not read (typically one in another PID namespace):
// the process label of the Prometheus metrics, the NAME column of
// "vram smi" and "vram watch".
const UnknownProcess = "unknown"

// ProcessName returns p's name, or [UnknownProcess] when it has none.
func ProcessName(p memory.ProcessMemory) string {
	if p.Name == "" {
		return UnknownProcess
	}
	return p.Name
}

// formatBytes returns n in binary units with three significant digits:
// "512 B", "1.50 KiB", "139.8 GiB"... -1 reads "?".
func formatBytes(n int64) string {
	if n < 0 {
		return "?"
	}
	return units.Compact(n)
}
