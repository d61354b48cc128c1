package memory

import (
	"fmt"

	"github.com/vramgo/vram/internal/units"
)

// DeviceMemory is a device's memory as its driver reports it, what
// torch.cuda.mem_get_info and torch.cuda.list_gpu_processes tell together,
// and how it splits the way a person debugging an out-of-memory error
// needs it: this process's caching allocator (Reserved), the rest of this
// process (its context, kernels and libraries: PyTorch's "non-PyTorch
// memory"), other processes, and what is free. Values that are not known
// are -1 (nil for Others); the methods that derive a part return -1 when
// what they need is unknown.
//
// A [DeviceInfo] reports it, [OutOfMemoryError] carries it, vram.DeviceMemory
// returns it, and package monitor lists processes as [ProcessMemory].
type DeviceMemory struct {
	// Device names the device as vram does ("cuda:0", "sim:1"); "" when
	// the reporter does not know the name.
	Device string `json:"device,omitempty"`
	// Total is the device's memory in bytes.
	Total int64 `json:"total_bytes"`
	// Free is the memory free on the device, as the driver reports it
	// (cuMemGetInfo); -1 when unknown.
	Free int64 `json:"free_bytes"`
	// Reserved is what this process's caching allocator holds from the
	// device, in use or cached (torch.cuda.memory_reserved). A
	// DeviceInfo leaves it 0; vram.DeviceMemory and the OutOfMemoryError
	// fill it in.
	Reserved int64 `json:"reserved_bytes"`
	// ThisProcess is all that this process holds on the device as the
	// driver's process list counts it (context, libraries and allocations
	// together); -1 when the list does not show this process (some
	// containers have a PID namespace of their own).
	ThisProcess int64 `json:"this_process_bytes"`
	// Others lists the other processes on the device, largest first; nil
	// when the process list is not visible.
	Others []ProcessMemory `json:"others"`
}

// ProcessMemory is the device memory one process holds, as the driver's
// process list (NVML, nvidia-smi) shows it.
type ProcessMemory struct {
	// PID is the process id, in the host's PID namespace.
	PID int `json:"pid"`
	// Name is the process's name, "" when it cannot be seen from here.
	Name string `json:"name"`
	// Bytes is the device memory the process holds, -1 when the driver
	// does not account it.
	Bytes int64 `json:"used_bytes"`
}

// Used returns the memory in use on the device, Total minus Free; -1 when
// Free is unknown.
func (m DeviceMemory) Used() int64 {
	if m.Free < 0 {
		return -1
	}
	return max(m.Total-m.Free, 0)
}

// OutsideAllocator returns the used memory that this process's caching
// allocator does not hold: other processes, this process's context and
// libraries, and what nothing accounts for; -1 when Free is unknown.
func (m DeviceMemory) OutsideAllocator() int64 {
	used := m.Used()
	if used < 0 {
		return -1
	}
	return max(used-m.Reserved, 0)
}

// ProcessOther returns what this process holds on the device outside its
// caching allocator (CUDA context, kernels, libraries, memory allocated
// around the allocator); -1 when ThisProcess is unknown.
func (m DeviceMemory) ProcessOther() int64 {
	if m.ThisProcess < 0 {
		return -1
	}
	return max(m.ThisProcess-m.Reserved, 0)
}

// OtherProcesses returns the memory the other processes hold, the sum of
// Others (entries of unknown size count 0); -1 when Others is nil.
func (m DeviceMemory) OtherProcesses() int64 {
	if m.Others == nil {
		return -1
	}
	var sum int64
	for _, p := range m.Others {
		if p.Bytes > 0 {
			sum += p.Bytes
		}
	}
	return sum
}

// Unattributed returns the used memory that neither the allocator, nor the
// rest of this process, nor the listed other processes account for (all of
// [DeviceMemory.OutsideAllocator] when neither part is known); -1 when Free
// is unknown.
func (m DeviceMemory) Unattributed() int64 {
	rest := m.OutsideAllocator()
	if rest < 0 {
		return -1
	}
	rest -= max(m.ProcessOther(), 0)
	rest -= max(m.OtherProcesses(), 0)
	return max(rest, 0)
}

// String formats the breakdown on one line.
func (m DeviceMemory) String() string {
	known := func(n int64) string {
		if n < 0 {
			return "unknown"
		}
		return units.Bytes(n)
	}
	name := "device memory"
	if m.Device != "" {
		name = m.Device + " memory"
	}
	return fmt.Sprintf("%s %s: %s used (allocator reserve %s, rest of this process %s, other processes %s, unattributed %s), %s free",
		name, units.Bytes(m.Total), known(m.Used()), units.Bytes(m.Reserved), known(m.ProcessOther()), known(m.OtherProcesses()),
		known(m.Unattributed()), known(m.Free))
}
