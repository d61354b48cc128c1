package sim

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/vramgo/vram/backend"
	_ "github.com/vramgo/vram/backend/cpu" // the kernels
	"github.com/vramgo/vram/memory"
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

// ParseDevices parses a VRAM_SIM_DEVICES value into device capacities in
// bytes. The empty string gives the defaults.
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
	var out []int64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n := 1
		if c, size, ok := strings.Cut(part, "x"); ok {
			k, err := strconv.Atoi(c)
			if err != nil || k < 1 || k > 64 {
				return nil, fmt.Errorf("bad device count %q in %q (want 1 to 64)", c, s)
			}
			n, part = k, size
		}
		b, err := ParseBytes(part)
		if err != nil {
			return nil, fmt.Errorf("%w in %q", err, s)
		}
		for range n {
			out = append(out, b)
		}
	}
	return out, nil
}

// ParseBytes parses a size such as "24GiB", "512MiB", "80GB" or "1024".
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	mult := int64(1)
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			mult, num = u.mult, strings.TrimSpace(strings.TrimSuffix(s, u.suffix))
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("bad size %q (want a positive number with B, KiB, MiB, GiB or TiB)", s)
	}
	return int64(v * float64(mult)), nil
}
