package vram

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
	_ "github.com/vramgo/vram/backend/cpu"  // the CPU backend is always present
	_ "github.com/vramgo/vram/backend/cuda" // NVIDIA GPUs, when a driver is there
	_ "github.com/vramgo/vram/backend/sim"  // simulated GPUs

	"github.com/vramgo/vram/internal/units"
)

// Device names where a tensor lives: a device kind ("cpu", "cuda", "sim")
// and an index. Device is a comparable value; the zero value is not a valid
// device. Devices are also [Option]s for the factory functions.
type Device struct {
	Kind  string
	Index int
}

// CPU is the host processor. There is one CPU device, with index 0.
var CPU = Device{Kind: "cpu"}

// CUDA returns the CUDA device with the given index, or the current CUDA
// device (see [SetDevice]) when called without one. It does not check that
// the device exists; the first operation on it does. More than one index
// panics with [ErrArgument], as the other optional arguments of vram do
// (t.CUDA(0, 1) would otherwise quietly mean cuda:0).
func CUDA(index ...int) Device {
	switch len(index) {
	case 0:
		return Device{Kind: "cuda", Index: int(currentCUDA.Load())}
	case 1:
		return Device{Kind: "cuda", Index: index[0]}
	}
	fail("cuda", ErrArgument, "one device index at most, got %d (%v)", len(index), index)
	return Device{}
}

// Sim returns the simulated GPU with the given index: a device that computes
// on the CPU but allocates like a GPU.
func Sim(index int) Device { return Device{Kind: "sim", Index: index} }

// String returns the device in the form ParseDevice reads: "cpu", "cuda:1".
func (d Device) String() string {
	if d.Kind == "" {
		return "invalid"
	}
	if d.Kind == "cpu" && d.Index == 0 {
		return "cpu"
	}
	return d.Kind + ":" + strconv.Itoa(d.Index)
}

// goExpr returns the Go expression for d that a user would write:
// vram.CPU, vram.CUDA(1), vram.Sim(0), or a MustParseDevice call for any
// other kind.
func (d Device) goExpr() string {
	switch {
	case d.Kind == "cpu" && d.Index == 0:
		return "vram.CPU"
	case d.Kind == "cuda":
		return fmt.Sprintf("vram.CUDA(%d)", d.Index)
	case d.Kind == "sim":
		return fmt.Sprintf("vram.Sim(%d)", d.Index)
	}
	return fmt.Sprintf("vram.MustParseDevice(%q)", d.String())
}

// IsCUDA reports whether d is a CUDA device.
func (d Device) IsCUDA() bool { return d.Kind == "cuda" }

func (d Device) applyOption(o *options) { o.device = d; o.deviceSet = true }

// ParseDevice parses "cpu" (also "cpu:0", as torch.device takes it), "cuda"
// (the current CUDA device), "cuda:N", "sim" (sim:0) and "sim:N". Spaces
// around the string are ignored; anything else is an [*Error] of kind
// [ErrArgument] that quotes the string and lists the accepted forms.
func ParseDevice(s string) (Device, error) {
	t := strings.TrimSpace(s)
	kind, idx, hasIdx := strings.Cut(t, ":")
	bad := func(why string) (Device, error) {
		return Device{}, &Error{Kind: ErrArgument, Detail: fmt.Sprintf("bad device %q: %s (want cpu, cuda, cuda:N or sim:N)", s, why)}
	}
	switch kind {
	case "cpu", "cuda", "sim":
	case "":
		return bad("empty device kind")
	default:
		why := "unknown device kind " + strconv.Quote(kind)
		low := strings.ToLower(kind)
		base := strings.TrimRight(low, "0123456789") // "cuda0" for "cuda:0"
		switch {
		case base == "gpu":
			why += `; GPUs are "cuda" or "cuda:N"`
		case low == "cpu" || low == "cuda" || low == "sim":
			why += "; device kinds are lower case"
		case (base == "cuda" || base == "sim") && low == kind && base != kind && !hasIdx:
			why += fmt.Sprintf("; write %q", base+":"+kind[len(base):])
		}
		return bad(why)
	}
	if !hasIdx {
		switch kind {
		case "cuda":
			return CUDA(), nil
		case "sim":
			return Sim(0), nil
		}
		return CPU, nil
	}
	if len(idx) > 1 && idx[0] == '-' && strings.Trim(idx[1:], "0123456789") == "" {
		return bad("device index must not be negative")
	}
	n, err := units.ParseCount("device index", idx, 0, math.MaxInt32)
	if err != nil {
		return bad("index " + strconv.Quote(idx) + " is not a whole number from 0 to 2147483647 in decimal digits")
	}
	if kind == "cpu" && n != 0 {
		return bad("the CPU has only index 0")
	}
	return Device{Kind: kind, Index: int(n)}, nil
}

// MustParseDevice is like [ParseDevice] but panics with its [*Error] on a
// bad string.
func MustParseDevice(s string) Device {
	d, err := ParseDevice(s)
	if err != nil {
		panic(err)
	}
	return d
}

// Process-wide settings. See "Process-wide state" in doc.go.
var (
	currentCUDA   atomic.Int32
	defaultDevice atomic.Pointer[Device]
)

// SetDevice sets the current CUDA device, the one [CUDA] returns when called
// without an index (torch.cuda.set_device). It is process-wide: code that
// drives several GPUs from several goroutines passes explicit devices
// instead. It returns an [*Error] of kind [ErrArgument] for a negative index
// and of kind [ErrUnavailable] when there is no CUDA device with that index
// (also on a machine without CUDA, where only vram.CPU and sim devices can
// be used), and then leaves the current device as it was.
func SetDevice(index int) error {
	const op = "set device"
	if index < 0 {
		return &Error{Op: op, Kind: ErrArgument, Detail: fmt.Sprintf("negative CUDA device index %d", index)}
	}
	if n := DeviceCount(); index >= n {
		detail := fmt.Sprintf("cuda:%d does not exist: the CUDA devices here are cuda:0 to cuda:%d", index, n-1)
		switch n {
		case 0:
			detail = fmt.Sprintf("cuda:%d does not exist: this machine has no CUDA devices; "+
				"check with vram.CUDAAvailable() and use vram.CPU when it is false", index)
		case 1:
			detail = fmt.Sprintf("cuda:%d does not exist: the only CUDA device here is cuda:0", index)
		}
		return &Error{Op: op, Kind: ErrUnavailable, Detail: detail}
	}
	currentCUDA.Store(int32(index))
	return nil
}

// CurrentDevice returns the index of the current CUDA device (0 unless
// changed by [SetDevice]).
func CurrentDevice() int { return int(currentCUDA.Load()) }

// SetDefaultDevice sets the device that factory functions use when no
// device option is given (CPU unless set). It is process-wide; set it once at
// start-up. It returns an error if the device's backend is not available.
func SetDefaultDevice(d Device) error {
	if _, err := deviceFor(d); err != nil {
		return err
	}
	defaultDevice.Store(&d)
	return nil
}

// DefaultDevice returns the device that factory functions use by default.
func DefaultDevice() Device {
	if d := defaultDevice.Load(); d != nil {
		return *d
	}
	return CPU
}

// CUDAAvailable reports whether the CUDA backend is present and sees at
// least one GPU (torch.cuda.is_available).
func CUDAAvailable() bool { return DeviceCount() > 0 }

// DeviceCount returns the number of CUDA GPUs (torch.cuda.device_count).
// Simulated devices are not counted; see [SimDeviceCount]. It is a use of
// the CUDA devices: the configuration is fixed from then on (see
// [Configure]).
func DeviceCount() int {
	conf.fix("vram.DeviceCount counted the CUDA devices")
	if b, ok := backend.Lookup("cuda"); ok {
		return b.DeviceCount()
	}
	return 0
}

// SimDeviceCount returns the number of simulated devices ([Config.SimDevices]),
// 0 when the sim backend is not registered or, without [Configure], the
// environment's setting of the sim devices (VRAM_SIM_DEVICES, ...) is
// invalid; using a sim device then reports the error. It fixes the
// configuration, as [DeviceCount] does.
func SimDeviceCount() int {
	conf.fix("vram.SimDeviceCount counted the sim devices")
	if conf.kindError("sim") != nil {
		return 0
	}
	if b, ok := backend.Lookup("sim"); ok {
		return b.DeviceCount()
	}
	return 0
}

// Available reports whether d can be used: its backend is registered and has
// a device with d's index, which opens without error. [Device.Check] says
// why not.
func (d Device) Available() bool { return d.Check() == nil }

// Check opens d if it is not open yet and returns nil when it can be used,
// else an [*Error] of kind [ErrUnavailable] saying why: no such backend, an
// index out of range, or the backend's own error (a missing driver, an
// allocator setting the GPU cannot honour, or, when vram read the
// environment by itself, an invalid VRAM_SIM_DEVICES or VRAM_ALLOC_CONF),
// which errors.As reaches.
func (d Device) Check() error {
	_, err := deviceFor(d)
	return err
}

// devState is the process's handle on one device: the backend device and
// vram's own accounting of live storage on it.
type devState struct {
	dev    Device
	bd     backend.Device
	live   atomic.Int64 // bytes of live storage
	peak   atomic.Int64 // highest live since start or reset
	allocs atomic.Int64 // storages created
	frees  atomic.Int64 // storages freed
	leaked atomic.Int64 // storages freed by the garbage collector, not by Release

	defStreamB backend.Stream         // bd's default stream
	defStream  atomic.Pointer[Stream] // the same, as a *Stream, made on first use

	capture   atomic.Pointer[captureState] // set while CaptureGraph runs (graph.go)
	capMu     sync.Mutex
	capStream *Stream // the stream captures record, made on first use
}

var devices sync.Map // Device -> *devState

// deviceFor returns the state of d, opening the device on first use; the
// first use of any device fixes the configuration.
func deviceFor(d Device) (*devState, error) {
	if s, ok := devices.Load(d); ok {
		return s.(*devState), nil
	}
	conf.fix(d.String() + " was used")
	if err := conf.kindError(d.Kind); err != nil {
		return nil, &Error{Op: "device", Kind: ErrUnavailable, Detail: fmt.Sprintf("%s: no %s devices: the environment's setting is invalid", d, d.Kind), Err: err}
	}
	b, ok := backend.Lookup(d.Kind)
	if !ok {
		return nil, &Error{Op: "device", Kind: ErrUnavailable,
			Detail: fmt.Sprintf("%s: no %q backend in this program (available: %s)", d, d.Kind, strings.Join(backend.Names(), ", "))}
	}
	if n := b.DeviceCount(); d.Index < 0 || d.Index >= n {
		hint := ""
		if d.Kind == "cuda" {
			hint = "; check with vram.CUDAAvailable() and use vram.CPU when it is false"
		}
		count := fmt.Sprintf("there are %d %s devices, %s:0 to %s:%d", n, d.Kind, d.Kind, d.Kind, n-1)
		if n == 1 {
			count = fmt.Sprintf("there is 1 %s device, %s:0", d.Kind, d.Kind)
		}
		if d.Kind == "sim" {
			hint = "; vram.Config.SimDevices or VRAM_SIM_DEVICES sets their number"
		}
		if d.Index < 0 {
			count = "device index must not be negative: " + count
		}
		e := &Error{Op: "device", Kind: ErrUnavailable, Detail: fmt.Sprintf("%s: %s%s", d, count, hint)}
		if n == 0 {
			// The backend says why it has none: no driver, or a
			// configuration with none (Config.SimDevices empty).
			if _, err := b.Device(max(d.Index, 0)); err != nil {
				e.Detail = fmt.Sprintf("%s: no %s devices%s", d, d.Kind, hint)
				e.Err = err
			}
		}
		return nil, e
	}
	bd, err := b.Device(d.Index)
	if err != nil {
		return nil, &Error{Op: "device", Kind: ErrUnavailable, Detail: d.String(), Err: err}
	}
	s, loaded := devices.LoadOrStore(d, &devState{dev: d, bd: bd, defStreamB: bd.DefaultStream()})
	ds := s.(*devState)
	if c, ok := bd.(cachingDevice); ok && !loaded {
		c.Allocator().OnOOM(func() { reclaim(ds) })
	}
	return ds, nil
}

// shapeOnly reports whether the device keeps no data (a sim device in
// shape-only mode): factories then skip producing values on the host, and
// reads skip the device. It reports false while the calling goroutine's
// stream of the device is captured into a graph: the copies between host
// and device that those shortcuts leave out are then made, and refused by
// the device as a GPU refuses them, so that a capture planned on a
// shape-only device fails where it would fail on the GPU.
func (s *devState) shapeOnly() bool {
	so, ok := s.bd.(interface{ ShapeOnly() bool })
	return ok && so.ShapeOnly() && s.capturing() == nil
}

// mustDevice is deviceFor for tensor ops: it panics with the error.
func mustDevice(op string, d Device) *devState {
	s, err := deviceFor(d)
	if err != nil {
		e := err.(*Error)
		e.Op = op
		panic(e)
	}
	return s
}
