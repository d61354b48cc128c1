package backend

// DeviceMemory is what a device's driver says about its memory, for
// telling the allocator's reserve apart from the rest.
type DeviceMemory struct {
	Total int64 // bytes of device memory
	Free  int64 // bytes free, as the driver reports them
	// ThisProcess is what the driver's process list says this process holds
	// on the device (context, libraries and allocations together), or -1
	// when the list is not visible (inside some containers).
	ThisProcess int64
	// Others lists the other processes on the device, largest first; nil
	// when the list is not visible.
	Others []ProcessMemory
}

// ProcessMemory is the device memory one process holds.
type ProcessMemory struct {
	PID   int
	Name  string
	Bytes int64
}

// MemoryInfoer is implemented by devices that can report [DeviceMemory].
type MemoryInfoer interface {
	MemoryInfo() (DeviceMemory, error)
}
