package vram

// MemoryAllocated returns the bytes of tensor storage currently allocated
// on device d (torch.cuda.memory_allocated): the allocator's allocated
// bytes (sizes rounded as it allocates them) on a device with a caching
// allocator, else vram's own count of live storage bytes. Storage shared by
// views is counted once.
func MemoryAllocated(d Device) int64 {
	if a := allocatorOf(d); a != nil {
		return a.Stats().AllocatedBytes[0].Current
	}
	return Storage(d).LiveBytes
}

// MaxMemoryAllocated returns the highest value of [MemoryAllocated] on d
// since the program started or since [ResetPeakMemoryStats].
func MaxMemoryAllocated(d Device) int64 {
	if a := allocatorOf(d); a != nil {
		return a.MaxAllocated()
	}
	return Storage(d).PeakBytes
}

// ResetPeakMemoryStats makes the peaks of d (allocated, reserved, and
// vram's own storage count) equal to their current values.
func ResetPeakMemoryStats(d Device) {
	if a := allocatorOf(d); a != nil {
		a.ResetPeakStats()
	}
	if s, ok := devices.Load(d); ok {
		st := s.(*devState)
		st.peak.Store(st.live.Load())
		// Storage allocated since the Load above raised the peak before
		// the Store may have lowered it again.
		st.raisePeak(st.live.Load())
	}
}

// ResetAccumulatedMemoryStats zeroes the cumulative statistics of d
// (torch.cuda.reset_accumulated_memory_stats): in its allocator's
// [memory.Stats], the allocated and freed sums of every statistic, the
// num_* counters and the driver time; in [Storage], the Allocs, Frees and
// Leaked counts. Current values and peaks stay (see
// [ResetPeakMemoryStats] for those).
func ResetAccumulatedMemoryStats(d Device) {
	if a := allocatorOf(d); a != nil {
		a.ResetAccumulatedStats()
	}
	if s, ok := devices.Load(d); ok {
		st := s.(*devState)
		st.allocs.Store(0)
		st.frees.Store(0)
		st.leaked.Store(0)
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
