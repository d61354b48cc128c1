package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
	_ "github.com/vramgo/vram/backend/cpu" // the kernels
)

// Defaults when VRAM_SIM_DEVICES is unset.
const (
	DefaultCount    = 2
	DefaultCapacity = 16 << 30 // bytes: 16 GiB
)

// Backend is the "sim" device kind.
type Backend struct {
	once    sync.Once
	sizes   []int64
	err     error
	devices []*Device
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
		b.sizes, b.err = ParseDevices(os.Getenv("VRAM_SIM_DEVICES"))
		if b.err != nil {
			b.sizes = nil
		}
		cpu, ok := backend.Lookup("cpu")
		if !ok {
			b.err = fmt.Errorf("sim: the cpu backend is not registered")
			b.sizes = nil
			return
		}
		host, err := cpu.Device(0)
		if err != nil {
			b.err, b.sizes = err, nil
			return
		}
		for i, s := range b.sizes {
			b.devices = append(b.devices, &Device{Device: host, index: i, capacity: s})
		}
	})
}

// Config returns the device capacities in bytes and the error, if any, in
// VRAM_SIM_DEVICES.
func (b *Backend) Config() ([]int64, error) {
	b.load()
	return b.sizes, b.err
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
		return nil, fmt.Errorf("sim: VRAM_SIM_DEVICES: %w", b.err)
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

// Device is one simulated GPU. It runs the CPU kernels and enforces its
// capacity on allocation.
type Device struct {
	backend.Device // the CPU device: kernels and copies
	index          int
	capacity       int64
	used           atomic.Int64
}

// Capacity returns the device's memory size in bytes.
func (d *Device) Capacity() int64 { return d.capacity }

// Used returns the bytes currently allocated on the device.
func (d *Device) Used() int64 { return d.used.Load() }

type buffer struct {
	backend.Buffer
	bytes int64
}

func (b *buffer) Host() []byte { return b.Buffer.(backend.HostBuffer).Host() }

// OutOfMemoryError reports an allocation that did not fit.
type OutOfMemoryError struct {
	Device    int
	Requested int64
	Used      int64
	Capacity  int64
}

func (e *OutOfMemoryError) Error() string {
	return fmt.Sprintf("sim: out of memory on sim:%d: tried to allocate %d bytes with %d of %d in use",
		e.Device, e.Requested, e.Used, e.Capacity)
}

// Alloc allocates nbytes, failing with an *OutOfMemoryError beyond the
// device's capacity.
func (d *Device) Alloc(nbytes int64, s backend.Stream) (backend.Buffer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("sim: negative allocation size %d", nbytes)
	}
	if u := d.used.Add(nbytes); u > d.capacity {
		d.used.Add(-nbytes)
		return nil, &OutOfMemoryError{Device: d.index, Requested: nbytes, Used: u - nbytes, Capacity: d.capacity}
	}
	b, err := d.Device.Alloc(nbytes, s)
	if err != nil {
		d.used.Add(-nbytes)
		return nil, err
	}
	return &buffer{Buffer: b, bytes: nbytes}, nil
}

// Free returns a buffer's memory to the device.
func (d *Device) Free(b backend.Buffer, s backend.Stream) {
	sb := b.(*buffer)
	d.used.Add(-sb.bytes)
	d.Device.Free(sb.Buffer, s)
}
