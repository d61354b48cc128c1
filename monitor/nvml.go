package monitor

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/nvml"
)

// hiddenThresholdBytes is how much device memory, used but not accounted
// for by any listed process, makes a process list incomplete: contexts of
// processes NVML does not show. An idle H200 with no context uses a few
// MiB (observed 2026-11-30, driver 580); one CUDA context uses about 500
// MiB, so 256 MiB is well above noise and below one hidden context.
const hiddenThresholdBytes = 256 << 20

// NVML is the [Source] that reads the machine's GPUs through NVML. Names,
// UUIDs and PCI addresses are read once, when it is opened; everything else
// on every Read. It is safe for concurrent use.
type NVML struct {
	mu     sync.Mutex
	closed bool
	devs   []nvml.Device
	static []GPU // Index, Name, UUID, PCIBusID of each device
	base   Reading
}

var _ Source = (*NVML)(nil)

// OpenNVML loads NVML, initialises it and finds every GPU. Without a
// driver the error is a *[NoDriverError] (matching [ErrNoDriver]) that
// says why; with a driver but no GPU it wraps [ErrNoGPU]. Close the source
// when done.
func OpenNVML() (*NVML, error) {
	if _, err := nvml.Load(); err != nil {
		if nvml.IsNoDriver(err) {
			return nil, &NoDriverError{Err: err}
		}
		return nil, fmt.Errorf("monitor: %w", err)
	}
	if err := nvml.Init(); err != nil {
		if nvml.IsNoDriver(err) {
			return nil, &NoDriverError{Err: err}
		}
		return nil, fmt.Errorf("monitor: %w", err)
	}
	s, err := openDevices()
	if err != nil {
		nvml.Shutdown()
		return nil, err
	}
	return s, nil
}

func openDevices() (*NVML, error) {
	n, err := nvml.DeviceGetCount()
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("monitor: %w: the driver reports 0 devices", ErrNoGPU)
	}
	s := &NVML{devs: make([]nvml.Device, n), static: make([]GPU, n)}
	if v, err := nvml.SystemGetDriverVersion(); err == nil {
		s.base.DriverVersion = v
	}
	if v, err := nvml.SystemGetNVMLVersion(); err == nil {
		s.base.NVMLVersion = v
	}
	if v, err := nvml.SystemGetCudaDriverVersion(); err == nil {
		s.base.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	for i := range s.devs {
		d, err := nvml.DeviceGetHandleByIndex(i)
		if err != nil {
			return nil, fmt.Errorf("monitor: GPU %d: %w", i, err)
		}
		s.devs[i] = d
		g := GPU{Index: i}
		if g.Name, err = nvml.DeviceGetName(d); err != nil {
			g.Errors = append(g.Errors, "name: "+err.Error())
		}
		if g.UUID, err = nvml.DeviceGetUUID(d); err != nil {
			g.Errors = append(g.Errors, "uuid: "+err.Error())
		}
		if pci, err := nvml.DeviceGetPciInfo(d); err == nil {
			g.PCIBusID = pci.BusIDString()
		}
		s.static[i] = g
	}
	return s, nil
}

// NoDriverError reports that NVML could not be loaded or initialised. It
// matches [ErrNoDriver] with errors.Is, and unwraps to the reason: a
// *load.NotFoundError (no libnvidia-ml.so.1) or an *nvml.Error
// (NVML_ERROR_DRIVER_NOT_LOADED, ...).
type NoDriverError struct {
	Err error // the loader's or NVML's error
}

// Error returns "monitor: no NVIDIA driver: " and the reason.
func (e *NoDriverError) Error() string {
	return "monitor: " + ErrNoDriver.Error() + ": " + e.Err.Error()
}

// Is reports whether target is ErrNoDriver.
func (e *NoDriverError) Is(target error) bool { return target == ErrNoDriver }

// Unwrap returns the reason.
func (e *NoDriverError) Unwrap() error { return e.Err }

// Fields selects what [NVML.ReadFields] reads besides the name, UUID and
// PCI address, which are read once.
type Fields uint

// The parts of a reading.
const (
	FieldMemory      Fields = 1 << iota // GPU.Memory
	FieldUtilization                    // GPU.Utilization
	FieldTemperature                    // GPU.TemperatureC
	FieldPower                          // GPU.Power
	FieldClocks                         // GPU.Clocks
	FieldProcesses                      // GPU.Processes and ProcessesVisible

	// FieldsGPUtil is what GPUtil reads: memory, utilization and
	// temperature.
	FieldsGPUtil = FieldMemory | FieldUtilization | FieldTemperature
	// FieldsAll is everything: what Read reads.
	FieldsAll = FieldsGPUtil | FieldPower | FieldClocks | FieldProcesses
)

// Read reads everything of every GPU ([FieldsAll]). Values a device does
// not support are [Unknown]; other failed queries are listed in
// [GPU.Errors]. Read fails only when the source is closed or nil.
//
// Cost, measured on an H200 with driver 580 (2026-11-30): about 1.5 ms per
// GPU, most of it in the power, clock and process queries; the five calls
// GPUtil needs (memory, utilization, temperature, name, UUID) take 12 to
// 14 µs together. Use [NVML.ReadFields] to read less.
func (s *NVML) Read() (Reading, error) { return s.ReadFields(FieldsAll) }

// ReadFields reads the parts f of every GPU; the others keep [Unknown]
// values, no processes, and ProcessesVisible false with a note saying they
// were not read.
func (s *NVML) ReadFields(f Fields) (Reading, error) {
	if s == nil {
		return Reading{}, errNil("source")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Reading{}, ErrClosed
	}
	r := s.base
	r.Time = time.Now()
	r.GPUs = make([]GPU, len(s.devs))
	for i, d := range s.devs {
		r.GPUs[i] = readGPU(d, s.static[i], f)
	}
	return r, nil
}

// Close shuts NVML down (once for this source). Later Reads return
// [ErrClosed].
func (s *NVML) Close() error {
	if s == nil {
		return errNil("source")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return nvml.Shutdown()
}

// readGPU reads the changing state of one device on top of its static
// facts.
func readGPU(d nvml.Device, static GPU, f Fields) GPU {
	g := static
	g.Errors = append([]string(nil), static.Errors...)
	fail := func(what string, err error) bool {
		if err == nil {
			return false
		}
		if !errors.Is(err, nvml.ErrNotSupported) {
			g.Errors = append(g.Errors, what+": "+err.Error())
		}
		return true
	}

	g.Memory = Memory{TotalBytes: Unknown, UsedBytes: Unknown, FreeBytes: Unknown, ReservedBytes: Unknown}
	g.Utilization = Utilization{ComputePercent: Unknown, MemoryBandwidthPercent: Unknown}
	g.TemperatureC = Unknown
	g.Power = Power{DrawW: Unknown, LimitW: Unknown}
	g.Clocks = Clocks{GraphicsMHz: Unknown, SMMHz: Unknown, MemoryMHz: Unknown, MaxSMMHz: Unknown}
	g.Processes = []memory.ProcessMemory{}
	g.ProcessesNote = "processes were not read"
	if f&FieldMemory != 0 {
		if m, err := nvml.DeviceGetMemoryInfoV2(d); err == nil {
			g.Memory = Memory{TotalBytes: int64(m.Total), UsedBytes: int64(m.Used), FreeBytes: int64(m.Free), ReservedBytes: int64(m.Reserved)}
		} else if m, err := nvml.DeviceGetMemoryInfo(d); !fail("memory", err) {
			g.Memory = Memory{TotalBytes: int64(m.Total), UsedBytes: int64(m.Used), FreeBytes: int64(m.Free), ReservedBytes: Unknown}
		}
	}

	if f&FieldUtilization != 0 {
		if u, err := nvml.DeviceGetUtilizationRates(d); !fail("utilization", err) {
			g.Utilization = Utilization{ComputePercent: int(u.GPU), MemoryBandwidthPercent: int(u.Memory)}
		}
	}
	if f&FieldTemperature != 0 {
		if t, err := nvml.DeviceGetTemperature(d, nvml.TemperatureGPU); !fail("temperature", err) {
			g.TemperatureC = int(t)
		}
	}
	if f&FieldPower != 0 {
		if mw, err := nvml.DeviceGetPowerUsage(d); !fail("power", err) {
			g.Power.DrawW = float64(mw) / 1000
		}
		if mw, err := nvml.DeviceGetEnforcedPowerLimit(d); !fail("power limit", err) {
			g.Power.LimitW = float64(mw) / 1000
		}
	}
	clock := func(what string, c nvml.ClockType, max bool) int {
		get := nvml.DeviceGetClockInfo
		if max {
			get = nvml.DeviceGetMaxClockInfo
		}
		mhz, err := get(d, c)
		if fail(what, err) {
			return Unknown
		}
		return int(mhz)
	}
	if f&FieldClocks != 0 {
		g.Clocks = Clocks{
			GraphicsMHz: clock("graphics clock", nvml.ClockGraphics, false),
			SMMHz:       clock("sm clock", nvml.ClockSM, false),
			MemoryMHz:   clock("memory clock", nvml.ClockMem, false),
			MaxSMMHz:    clock("max sm clock", nvml.ClockSM, true),
		}
	}
	if f&FieldProcesses != 0 {
		g.ProcessesNote = ""
		readProcesses(d, &g)
	}
	return g
}

// readProcesses lists the compute processes of d and judges whether the
// list is complete.
func readProcesses(d nvml.Device, g *GPU) {
	g.Processes = []memory.ProcessMemory{}
	infos := make([]nvml.ProcessInfo, 16)
	var n int
	var err error
	for try := 0; try < 4; try++ {
		n, err = nvml.DeviceGetComputeRunningProcesses(d, infos)
		if !errors.Is(err, nvml.ErrInsufficientSize) {
			break
		}
		infos = make([]nvml.ProcessInfo, n+16) // the list may grow between calls
	}
	if err != nil {
		g.ProcessesVisible = false
		switch {
		case errors.Is(err, nvml.ErrNoPermission):
			g.ProcessesNote = "NVML refuses to list processes to this user (NVML_ERROR_NO_PERMISSION)"
		case errors.Is(err, nvml.ErrNotSupported):
			g.ProcessesNote = "this device does not list its processes (NVML_ERROR_NOT_SUPPORTED; a MIG or virtual GPU?)"
		default:
			g.ProcessesNote = "listing processes failed: " + err.Error()
		}
		return
	}
	var listed int64
	foreign, unknown := 0, 0
	for _, p := range infos[:n] {
		used := int64(Unknown)
		if p.UsedGPUMemory != nvml.ValueNotAvailable {
			used = int64(p.UsedGPUMemory)
			listed += used
		} else {
			unknown++
		}
		name, err := nvml.SystemGetProcessName(p.PID)
		if err != nil {
			name = ""
		}
		if !pidVisible(int(p.PID)) {
			foreign++
		}
		g.Processes = append(g.Processes, memory.ProcessMemory{PID: int(p.PID), Name: name, Bytes: used})
	}
	sortProcesses(g.Processes)
	g.ProcessesVisible, g.ProcessesNote = judgeProcesses(g.Memory, len(g.Processes), unknown, listed, foreign)
}

// judgeProcesses decides whether a process list of n entries holding
// listed bytes, unknown of them holding an amount the driver does not
// report (MIG devices to users other than root, some virtual GPUs) and
// foreign of them not in this PID namespace, accounts for the device's
// used memory.
func judgeProcesses(m Memory, n, unknown int, listed int64, foreign int) (bool, string) {
	if m.UsedBytes == Unknown {
		return true, ""
	}
	used := m.UsedBytes
	if m.ReservedBytes == Unknown {
		// Without the v2 query the driver's reserve is inside used: allow
		// for it, at the size seen on an idle card.
		used -= hiddenThresholdBytes
	}
	hidden := used - listed
	switch {
	case n == 0 && hidden > hiddenThresholdBytes:
		return false, fmt.Sprintf("NVML lists no process, yet %s of device memory is in use: the processes are probably in another PID namespace (a container); run on the host, or in a container started with --pid=host, to see them", formatBytes(m.UsedBytes))
	case unknown > 0 && hidden > hiddenThresholdBytes:
		// The listed processes may well hold it: nothing shows that
		// any is missing.
		return true, fmt.Sprintf("the driver does not report the memory of %d of the %d processes, which may hold the %s of device memory in use that the others do not account for", unknown, n, formatBytes(hidden))
	case hidden > hiddenThresholdBytes:
		return false, fmt.Sprintf("%s of device memory in use is held by processes NVML does not list (another PID namespace, or another container)", formatBytes(hidden))
	case foreign > 0:
		return true, fmt.Sprintf("%d process(es) are outside this PID namespace: their PIDs are the host's", foreign)
	}
	return true, ""
}

// pidVisible reports whether a process with this PID exists in our PID
// namespace. It answers true where /proc cannot tell.
func pidVisible(pid int) bool {
	if _, err := os.Stat("/proc/self"); err != nil {
		return true
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// sortProcesses orders processes by memory, largest first, then by PID.
func sortProcesses(ps []memory.ProcessMemory) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Bytes != ps[j].Bytes {
			return ps[i].Bytes > ps[j].Bytes
		}
		return ps[i].PID < ps[j].PID
	})
}
