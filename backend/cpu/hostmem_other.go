//go:build !linux

package cpu

// hostMemory returns 0 (unknown) where sysinfo(2) does not exist.
func hostMemory() int64 { return 0 }
