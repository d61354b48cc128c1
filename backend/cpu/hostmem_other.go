//go:build !linux

package cpu

// hostMemory returns 0 (unknown) where sysinfo(2) does not exist.
func hostMemory() int64 { return 0 }

// physicalMemory returns 0 (unknown): without a limit by default.
func physicalMemory() int64 { return 0 }
