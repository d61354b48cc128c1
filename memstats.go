package vram

import "fmt"

// MemoryAllocated returns the bytes of tensor storage currently live on
// device d, by vram's own accounting (torch.cuda.memory_allocated). Storage
// shared by views is counted once.
func MemoryAllocated(d Device) int64 {
	if s, ok := devices.Load(d); ok {
		return s.(*devState).live.Load()
	}
	return 0
}

// MaxMemoryAllocated returns the highest value of [MemoryAllocated] on d
// since the program started or since [ResetPeakMemoryStats].
func MaxMemoryAllocated(d Device) int64 {
	if s, ok := devices.Load(d); ok {
		return s.(*devState).peak.Load()
	}
	return 0
}

// ResetPeakMemoryStats makes the peak of d equal to its current use.
func ResetPeakMemoryStats(d Device) {
	if s, ok := devices.Load(d); ok {
		st := s.(*devState)
		st.peak.Store(st.live.Load())
	}
}

// StorageStats counts the storages (tensor buffers) vram created on one
// device.
type StorageStats struct {
	LiveBytes int64 // bytes of live storage
	PeakBytes int64 // peak of LiveBytes since start or reset
	Allocs    int64 // storages created
	Frees     int64 // storages freed
	Leaked    int64 // storages freed by the garbage collector because no Release reached them
}

// Storage returns the storage counters of d.
func Storage(d Device) StorageStats {
	s, ok := devices.Load(d)
	if !ok {
		return StorageStats{}
	}
	st := s.(*devState)
	return StorageStats{
		LiveBytes: st.live.Load(), PeakBytes: st.peak.Load(),
		Allocs: st.allocs.Load(), Frees: st.frees.Load(), Leaked: st.leaked.Load(),
	}
}

// formatBytes prints n in binary units ("1.50 MiB").
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
