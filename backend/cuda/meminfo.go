package cuda

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/nvml"
)

var _ memory.DeviceInfo = (*Device)(nil)

// nvmlState is NVML, loaded and initialised once for the process.
var nvmlState struct {
	once sync.Once
	err  error
}

func nvmlReady() error {
	nvmlState.once.Do(func() {
		if _, err := nvml.Load(); err != nil {
			nvmlState.err = err
			return
		}
		nvmlState.err = nvml.Init()
	})
	return nvmlState.err
}

// MemoryInfo reports the device's total and free memory (cuMemGetInfo) and,
// through NVML when it is there, what this process and the others hold on
// the GPU. NVML's device is matched to the CUDA device by UUID, since the
// two may number GPUs differently (by PCI address when the UUIDs differ,
// as under MIG). When NVML is missing or does not list this process (a
// container with its own PID namespace), ThisProcess is -1 and Others
// nil: callers report that memory as unattributed. Reserved is 0 (see
// [memory.DeviceInfo]). The device's allocator uses it for its
// out-of-memory errors.
func (d *Device) MemoryInfo() (memory.DeviceMemory, error) {
	m := memory.DeviceMemory{Device: fmt.Sprintf("cuda:%d", d.index), Free: -1, ThisProcess: -1}
	if err := d.enter(); err != nil {
		return m, err
	}
	f, t, err := cuda.MemGetInfo()
	d.exit()
	if err != nil {
		return m, d.check(err)
	}
	m.Total, m.Free = int64(t), int64(f)
	m.ThisProcess, m.Others = d.processes()
	return m, nil
}

// processes returns what this process holds on the device, as NVML counts
// it (context, libraries and allocations together; -1 when NVML does not
// account it), and the other processes there, largest first. Without NVML,
// or when NVML does not list this process (its PIDs are then another
// namespace's, and one of them may be this process), it returns -1 and
// nil.
func (d *Device) processes() (self int64, others []memory.ProcessMemory) {
	h, ok := nvmlDeviceOf(d.index)
	if !ok {
		return -1, nil
	}
	procs, ok := nvmlProcesses(h)
	if !ok {
		return -1, nil
	}
	me := os.Getpid()
	self, listed := -1, false
	others = []memory.ProcessMemory{}
	for _, p := range procs {
		if p.PID == me {
			self, listed = p.Bytes, true // -1 when NVML does not account it
		} else {
			others = append(others, p)
		}
	}
	if !listed {
		return -1, nil
	}
	sort.SliceStable(others, func(i, j int) bool {
		if others[i].Bytes != others[j].Bytes {
			return others[i].Bytes > others[j].Bytes
		}
		return others[i].PID < others[j].PID
	})
	return self, others
}

// nvmlDevices maps CUDA ordinals to NVML devices, found once.
var nvmlDevices struct {
	once sync.Once
	h    []nvml.Device
	ok   []bool
}

// nvmlDeviceOf returns the NVML device of CUDA device ordinal i: the one
// with the same UUID, else the one at the same PCI address. It reports
// false without NVML or when none matches.
func nvmlDeviceOf(i int) (nvml.Device, bool) {
	nvmlDevices.once.Do(func() {
		if nvmlReady() != nil {
			return
		}
		n, err := cuda.DeviceGetCount()
		if err != nil {
			return
		}
		nvmlDevices.h, nvmlDevices.ok = make([]nvml.Device, n), make([]bool, n)
		for j := range n {
			nvmlDevices.h[j], nvmlDevices.ok[j] = matchNVML(j)
		}
	})
	if i < 0 || i >= len(nvmlDevices.ok) {
		return 0, false
	}
	return nvmlDevices.h[i], nvmlDevices.ok[i]
}

// matchNVML finds the NVML device of CUDA ordinal i, by UUID, else by PCI
// domain, bus and device.
func matchNVML(i int) (nvml.Device, bool) {
	cd, err := cuda.DeviceGet(i)
	if err != nil {
		return 0, false
	}
	uuid, uerr := cuda.DeviceGetUUID(cd)
	dom, e1 := cuda.DeviceGetAttribute(cuda.AttrPCIDomainID, cd)
	bus, e2 := cuda.DeviceGetAttribute(cuda.AttrPCIBusID, cd)
	dev, e3 := cuda.DeviceGetAttribute(cuda.AttrPCIDeviceID, cd)
	pciOK := e1 == nil && e2 == nil && e3 == nil
	n, err := nvml.DeviceGetCount()
	if err != nil {
		return 0, false
	}
	var byPCI nvml.Device
	foundPCI := false
	for k := range n {
		h, err := nvml.DeviceGetHandleByIndex(k)
		if err != nil {
			continue
		}
		if uerr == nil {
			if u, err := nvml.DeviceGetUUID(h); err == nil && u == uuid.String() {
				return h, true
			}
		}
		if pciOK && !foundPCI {
			if p, err := nvml.DeviceGetPciInfo(h); err == nil && int(p.Domain) == dom && int(p.Bus) == bus && int(p.Device) == dev {
				byPCI, foundPCI = h, true
			}
		}
	}
	return byPCI, foundPCI
}

// nvmlProcesses lists the compute processes on the NVML device h; false
// when NVML cannot list them (no permission, not supported).
func nvmlProcesses(h nvml.Device) ([]memory.ProcessMemory, bool) {
	infos := make([]nvml.ProcessInfo, 16)
	var n int
	var err error
	for try := 0; try < 4; try++ {
		n, err = nvml.DeviceGetComputeRunningProcesses(h, infos)
		if !errors.Is(err, nvml.ErrInsufficientSize) {
			break
		}
		infos = make([]nvml.ProcessInfo, n+16) // the list may grow between calls
	}
	if err != nil {
		return nil, false
	}
	out := make([]memory.ProcessMemory, 0, n)
	for _, p := range infos[:n] {
		pm := memory.ProcessMemory{PID: int(p.PID), Bytes: -1}
		if p.UsedGPUMemory != nvml.ValueNotAvailable {
			pm.Bytes = int64(p.UsedGPUMemory)
		}
		pm.Name, _ = nvml.SystemGetProcessName(p.PID)
		out = append(out, pm)
	}
	return out, true
}

// peerMemory returns the machine's other GPUs that this process sees (in CUDA's
// numbering, so CUDA_VISIBLE_DEVICES applies) with the memory NVML reports
// for them; nil without NVML. It creates no context on them.
func (d *Device) peerMemory() []memory.DeviceMemory {
	n, _ := Probe()
	var out []memory.DeviceMemory
	for j := range n {
		if j == d.index {
			continue
		}
		h, ok := nvmlDeviceOf(j)
		if !ok {
			continue
		}
		m, err := nvml.DeviceGetMemoryInfo(h)
		if err != nil {
			continue
		}
		out = append(out, memory.DeviceMemory{Device: fmt.Sprintf("cuda:%d", j), Total: int64(m.Total), Free: int64(m.Free), ThisProcess: -1})
	}
	return out
}
