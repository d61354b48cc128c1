package cpu

import "syscall"

// hostMemory returns the machine's RAM and swap in bytes (sysinfo(2)), 0
// when unknown.
func hostMemory() int64 {
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return 0
	}
	unit := max(int64(info.Unit), 1)
	return (int64(info.Totalram) + int64(info.Totalswap)) * unit
}

// physicalMemory returns the machine's RAM in bytes without swap
// (sysinfo(2)), 0 when unknown.
func physicalMemory() int64 {
	var info syscall.Sysinfo_t
	if err := syscall.Sysinfo(&info); err != nil {
		return 0
	}
	return int64(info.Totalram) * max(int64(info.Unit), 1)
}
