package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/vramgo/vram/backend"
	_ "github.com/vramgo/vram/backend/cpu" // the kernels
	"github.com/vramgo/vram/memory"

	"github.com/vramgo/vram/internal/units"
)

// Defaults of the zero [Options].
const (
	DefaultCount    = 2
	DefaultCapacity = 16 << 30 // bytes: 16 GiB
)

// Options configure a sim backend. The zero Options are the defaults:
// [DefaultCount] devices of [DefaultCapacity] bytes that keep their data,
// each with the allocator settings of the zero [memory.Config].
type Options struct {
	// Devices lists the capacities in bytes of sim:0, sim:1, ...: at most
	// [MaxDevices], each from 1 to [memory.MaxSimCapacity]. A nil slice
	// means the defaults; an empty non-nil one, no devices at all (as
	// exec.Cmd's Env tells nil from empty).
	Devices []int64

	// ShapeOnly makes every device shape-only: tensors take memory from
	// the allocator but keep no data (see [Device.SetShapeOnly]).
	ShapeOnly bool

	// Alloc holds the allocator settings of every device that DeviceAlloc
	// does not name.
	Alloc memory.Config

	// DeviceAlloc holds the allocator settings of the devices whose
	// indexes it names, in place of Alloc (not merged with it). Every
	// index must be one of Devices'.
	DeviceAlloc map[int]memory.Config
}

// sizes returns the capacities that o asks for.
func (o Options) sizes() []int64 {
	if o.Devices == nil {
		return slices.Repeat([]int64{DefaultCapacity}, DefaultCount)
	}
	return o.Devices
}

// allocFor returns the allocator settings of device i.
func (o Options) allocFor(i int) memory.Config {
	if c, ok := o.DeviceAlloc[i]; ok {
		return c
	}
	return o.Alloc
}

// Validate reports the first invalid field of o, in an error that names
// the field (Options.Devices[2], Options.DeviceAlloc[5]) and what is
// allowed; for the allocator settings it wraps the [*memory.ConfigError].
func (o Options) Validate() error {
	if len(o.Devices) > MaxDevices {
		return fmt.Errorf("sim: Options.Devices lists %d devices, more than %d (sim.MaxDevices)", len(o.Devices), MaxDevices)
	}
	for i, c := range o.Devices {
		if err := CheckCapacity(c); err != nil {
			return fmt.Errorf("sim: Options.Devices[%d]: %w", i, err)
		}
	}
	if err := o.Alloc.Validate(); err != nil {
		return fmt.Errorf("sim: Options.Alloc: %w", err)
	}
	n := len(o.sizes())
	for _, i := range slices.Sorted(maps.Keys(o.DeviceAlloc)) {
		if i < 0 || i >= n {
			have := fmt.Sprintf("there are %d devices, sim:0 to sim:%d", n, n-1)
			switch n {
			case 0:
				have = "there are none"
			case 1:
				have = "there is 1 device, sim:0"
			}
			return fmt.Errorf("sim: Options.DeviceAlloc[%d]: there is no sim:%d (%s)", i, i, have)
		}
		if err := o.DeviceAlloc[i].Validate(); err != nil {
			return fmt.Errorf("sim: Options.DeviceAlloc[%d]: %w", i, err)
		}
	}
	return nil
}

// CheckCapacity returns nil when bytes is a capacity a sim device may
// have, from 1 to [memory.MaxSimCapacity], else an error that says so.
func CheckCapacity(bytes int64) error {
	if bytes < 1 || bytes > memory.MaxSimCapacity {
		return fmt.Errorf("capacity %d bytes: a sim device holds from 1 byte to %s (memory.MaxSimCapacity)", bytes, units.Bytes(memory.MaxSimCapacity))
	}
	return nil
}

// equal reports whether o and p configure the same devices.
func (o Options) equal(p Options) bool {
	return slices.Equal(o.sizes(), p.sizes()) && o.ShapeOnly == p.ShapeOnly && o.Alloc == p.Alloc && maps.Equal(o.DeviceAlloc, p.DeviceAlloc)
}

// clone returns o with its own copies of the slice and the map.
func (o Options) clone() Options {
	if o.Devices != nil {
		o.Devices = slices.Clone(o.Devices)
	}
	o.DeviceAlloc = maps.Clone(o.DeviceAlloc)
	return o
}

// Backend is the "sim" device kind. The zero Backend has the default
// [Options]; [New] makes one with others. Its devices are made at its
// first use ([Backend.DeviceCount], [Backend.Device]) and its options are
// fixed from then on.
type Backend struct {
	mu      sync.Mutex
	opts    Options
	loaded  bool // the devices were made: opts is fixed
	once    sync.Once
	err     error
	devices []*Device
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Device  = (*Device)(nil)
)

// registered is the backend registered as "sim", which vram's devices
// sim:N name; [Configure] sets its options.
var registered = &Backend{}

func init() { backend.Register(registered) }

// New returns a sim backend with the given options, independent of the
// registered one (the devices of vram.Sim): tests and tools make their own
// devices with it. Invalid options are an error from [Options.Validate].
func New(opts Options) (*Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Backend{opts: opts.clone()}, nil
}

// Configure sets the options of the registered "sim" backend, the one
// behind vram.Sim(i); vram.Configure calls it. It must come before the
// first use of a sim device: afterwards it fails, unless opts equal the
// options in force, and the options stay as they were. Invalid options are
// an error from [Options.Validate] and change nothing either.
func Configure(opts Options) error { return registered.setOptions(opts) }

func (b *Backend) setOptions(opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.loaded {
		if opts.equal(b.opts) {
			return nil
		}
		return fmt.Errorf("sim: the sim devices are in use already: their options are fixed at their first use")
	}
	b.opts = opts.clone()
	return nil
}

// Options returns the backend's options.
func (b *Backend) Options() Options {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opts.clone()
}

// Name returns "sim".
func (b *Backend) Name() string { return "sim" }

func (b *Backend) load() {
	b.once.Do(func() {
		b.mu.Lock()
		b.loaded = true
		opts := b.opts
		b.mu.Unlock()
		cpu, ok := backend.Lookup("cpu")
		if !ok {
			b.err = fmt.Errorf("the cpu backend is not registered")
			return
		}
		host, err := cpu.Device(0)
		if err != nil {
			b.err = err
			return
		}
		var devices []*Device
		for i, size := range opts.sizes() {
			d, err := newDevice(host, i, size, opts.allocFor(i), opts.ShapeOnly)
			if err != nil {
				b.err = fmt.Errorf("sim:%d: %w", i, err)
				return
			}
			devices = append(devices, d)
		}
		b.devices = devices
		setPeers(b.devices)
	})
}

// DeviceCount returns the number of simulated devices.
func (b *Backend) DeviceCount() int {
	b.load()
	return len(b.devices)
}

// Device returns simulated device i.
func (b *Backend) Device(i int) (backend.Device, error) {
	b.load()
	if b.err != nil {
		return nil, fmt.Errorf("sim: %w", b.err)
	}
	if len(b.devices) == 0 {
		return nil, fmt.Errorf("sim: no device %d: the sim backend is configured with none", i)
	}
	if i < 0 || i >= len(b.devices) {
		return nil, fmt.Errorf("sim: no device %d (there are %d)", i, len(b.devices))
	}
	return b.devices[i], nil
}

// MaxDevices is the most simulated devices a backend may have, and so the
// most that VRAM_SIM_DEVICES may ask for, in all and in one "Nx" group.
const MaxDevices = 64

// devicesForm describes the syntax of VRAM_SIM_DEVICES, for messages.
const devicesForm = "sizes or NxSIZE groups separated by commas, as in 2x24GiB,80GiB, at most 64 devices, or 0 for none"

// ParseDevices parses a VRAM_SIM_DEVICES value (which vram.ConfigFromEnv
// reads into vram.Config.SimDevices) into device capacities in bytes: comma-separated sizes in the syntax of [ParseBytes], each
// optionally preceded by "Nx" for N devices of that size ("2x24GiB,80GiB"),
// or "0" for no devices. Blanks around the parts are ignored; the empty
// string gives the defaults ([DefaultCount] devices of [DefaultCapacity]).
// A bad size or count, an empty part or more than [MaxDevices] devices is
// an error that names the part and the whole value and wraps a
// [*ParseError].
func ParseDevices(s string) ([]int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		out := make([]int64, DefaultCount)
		for i := range out {
			out[i] = DefaultCapacity
		}
		return out, nil
	}
	if s == "0" {
		return nil, nil
	}
	// A part's error names the whole value when there is more to it.
	in := func(token string, err error) error {
		if strings.TrimSpace(token) == s {
			return err
		}
		return fmt.Errorf("%w (in %q)", err, s)
	}
	var out []int64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n := 1
		if c, size, ok := strings.Cut(part, "x"); ok {
			k, err := units.ParseCount("device count", strings.TrimSpace(c), 1, MaxDevices)
			if err != nil {
				return nil, in(c, err)
			}
			n, part = int(k), size
		}
		b, err := ParseBytes(part)
		if err != nil {
			return nil, in(part, err)
		}
		if b > memory.MaxSimCapacity {
			// A simulated device keeps records of what it maps: one larger
			// than any real card plans nothing real and could take all of
			// the host's memory.
			return nil, in(part, &ParseError{What: "device size", Input: strings.TrimSpace(part),
				Reason: fmt.Sprintf("larger than any real device (sim devices hold at most %s, memory.MaxSimCapacity)", units.Bytes(memory.MaxSimCapacity)),
				Want:   "a size up to 4TiB"})
		}
		if len(out)+n > MaxDevices {
			return nil, &ParseError{What: "device list", Input: s, Reason: fmt.Sprintf("more than %d devices in all", MaxDevices), Want: devicesForm}
		}
		for range n {
			out = append(out, b)
		}
	}
	return out, nil
}

// ParseError is the error of [ParseBytes], also wrapped by the errors of
// [ParseDevices]: it names the input and says what is wrong and what is
// accepted.
type ParseError = units.ParseError

// ParseBytes parses a size such as "24GiB", "512MiB", "1.5GiB", "80GB" or
// "1024": digits with an optional fraction, then an optional unit (B, KiB,
// MiB, GiB, TiB, PiB, EiB or KB, MB, GB, TB, PB, EB), blanks allowed around
// the number. The value, computed exactly, must be a whole number of bytes
// from 1 to math.MaxInt64. Anything else, including "0.5", NaN, Inf, a sign,
// an exponent or trailing text, is a [*ParseError].
func ParseBytes(s string) (int64, error) { return units.ParseBytes(s) }
