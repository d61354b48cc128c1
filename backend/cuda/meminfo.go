package cuda

import (
	"os"
	"sort"
	"sync"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/nvml"
)

var _ backend.MemoryInfoer = (*Device)(nil)

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
// two may number GPUs differently. When NVML is missing or does not list
// this process (a container with its own PID namespace), ThisProcess is -1
// and Others nil: callers report that memory as unattributed.
func (d *Device) MemoryInfo() (backend.DeviceMemory, error) {
	m := backend.DeviceMemory{ThisProcess: -1}
	if err := d.enter(); err != nil {
		return m, err
	}
	f, t, err := cuda.MemGetInfo()
	var uuid cuda.UUID
	if err == nil {
		uuid, err = cuda.DeviceGetUUID(d.dev)
	}
	d.exit()
	if err != nil {
		return m, err
	}
	m.Total, m.Free = int64(t), int64(f)
	if nvmlReady() != nil {
		return m, nil
	}
	procs, ok := nvmlProcesses(uuid.String())
	if !ok {
		return m, nil
	}
	me := os.Getpid()
	var others []backend.ProcessMemory
	for _, p := range procs {
		if p.PID == me {
			m.ThisProcess = p.Bytes
		} else {
			others = append(others, p)
		}
	}
	if m.ThisProcess < 0 {
		return m, nil // this process is not in the list: nothing can be attributed
	}
	sort.Slice(others, func(i, j int) bool { return others[i].Bytes > others[j].Bytes })
	m.Others = others
	if m.Others == nil {
		m.Others = []backend.ProcessMemory{}
	}
	return m, nil
}

// nvmlProcesses lists the compute processes on the GPU with the given UUID.
func nvmlProcesses(uuid string) ([]backend.ProcessMemory, bool) {
	n, err := nvml.DeviceGetCount()
	if err != nil {
		return nil, false
	}
	for i := range n {
		h, err := nvml.DeviceGetHandleByIndex(i)
		if err != nil {
			continue
		}
		if u, err := nvml.DeviceGetUUID(h); err != nil || u != uuid {
			continue
		}
		infos := make([]nvml.ProcessInfo, 64)
		k, err := nvml.DeviceGetComputeRunningProcesses(h, infos)
		if err != nil {
			return nil, false
		}
		out := make([]backend.ProcessMemory, 0, k)
		for _, p := range infos[:k] {
			pm := backend.ProcessMemory{PID: int(p.PID), Bytes: -1}
			if p.UsedGPUMemory != nvml.ValueNotAvailable {
				pm.Bytes = int64(p.UsedGPUMemory)
			}
			pm.Name, _ = nvml.SystemGetProcessName(p.PID)
			out = append(out, pm)
		}
		return out, true
	}
	return nil, false
}
