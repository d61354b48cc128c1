package sim

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/vramgo/vram/backend"
	_ "github.com/vramgo/vram/backend/cpu" // the kernels
	"github.com/vramgo/vram/memory"

	"github.com/vramgo/vram/internal/units"
)

// Defaults when VRAM_SIM_DEVICES is unset.
const (
	DefaultCount    = 2
	DefaultCapacity = 16 << 30 // bytes: 16 GiB
)

// Backend is the "sim" device kind.
type Backend struct {
	once       sync.Once
	devicesEnv string // VRAM_SIM_DEVICES as read
	sizes      []int64
	err        error
	devices    []*Device
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Device  = (*Device)(nil)
)

func init() { backend.Register(&Backend{}) }

// Name returns "sim".
func (b *Backend) Name() string { return "sim" }

func (b *Backend) load() {
	b.once.Do(func() {
		// Each error names its variable: EnvError does, and so does
		// memory's ConfigError for VRAM_ALLOC_CONF.
		v := os.Getenv(EnvDevices)
		b.devicesEnv = v
		sizes, err := ParseDevices(v)
		if err != nil {
			b.err = &EnvError{Var: EnvDevices, Value: v, Err: err}
			return
		}
		cfg, err := memory.ParseConfig(os.Getenv("VRAM_ALLOC_CONF"))
		if err != nil {
			b.err = err
			return
		}
		v = os.Getenv(EnvShapeOnly)
		shapeOnly, err := ParseShapeOnly(v)
		if err != nil {
			b.err = &EnvError{Var: EnvShapeOnly, Value: v, Err: err}
			return
		}
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
		for i, size := range sizes {
			d, err := newDevice(host, i, size, cfg, shapeOnly)
			if err != nil {
				var ce *memory.ConfigError
				if !errors.As(err, &ce) {
					err = fmt.Errorf("VRAM_ALLOC_CONF: %w", err)
				}
				b.err = err
				return
			}
			devices = append(devices, d)
		}
		b.sizes, b.devices = sizes, devices
		setPeers(b.devices)
	})
}

// Config returns the device capacities in bytes and the error, if any, in
// the environment (VRAM_SIM_DEVICES, VRAM_ALLOC_CONF, VRAM_SIM_SHAPE_ONLY):
// an [*EnvError] or a [*memory.ConfigError], each naming its variable.
// With an error there are no devices.
func (b *Backend) Config() ([]int64, error) {
	b.load()
	return b.sizes, b.err
}

// DeviceCount returns the number of simulated devices that can be used: 0
// when the environment is invalid, in which case [Backend.Device] returns
// the error.
func (b *Backend) DeviceCount() int {
	b.load()
	return len(b.devices)
}

// Device returns simulated device i. When the environment is invalid, the
// error is the one [Backend.Config] returns, whatever i.
func (b *Backend) Device(i int) (backend.Device, error) {
	b.load()
	if b.err != nil {
		return nil, fmt.Errorf("sim: %w", b.err)
	}
	if len(b.devices) == 0 {
		return nil, fmt.Errorf("sim: no device %d: %s=%q configures none", i, EnvDevices, b.devicesEnv)
	}
	if i < 0 || i >= len(b.devices) {
		return nil, fmt.Errorf("sim: no device %d (there are %d)", i, len(b.devices))
	}
	return b.devices[i], nil
}

// MaxDevices is the most simulated devices VRAM_SIM_DEVICES may ask for,
// in all and in one "Nx" group.
const MaxDevices = 64

// devicesForm describes the syntax of VRAM_SIM_DEVICES, for messages.
const devicesForm = "sizes or NxSIZE groups separated by commas, as in 2x24GiB,80GiB, at most 64 devices, or 0 for none"

// ParseDevices parses a VRAM_SIM_DEVICES value into device capacities in
// bytes: comma-separated sizes in the syntax of [ParseBytes], each
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
