package cuda

import (
	"fmt"
	"os"
	"sync"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
)

func init() { backend.Register(&Backend{}) }

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Device  = (*Device)(nil)
	_ backend.Buffer  = (*Buffer)(nil)
	_ PeerCopier      = (*Device)(nil)
	_ HostAllocator   = (*Device)(nil)
)

// Backend is the "cuda" device kind: the NVIDIA GPUs the driver sees. The
// package registers one in init; every Backend shares the same devices.
type Backend struct{}

// Name returns "cuda".
func (*Backend) Name() string { return "cuda" }

// probe is the result of looking for the driver and GPUs, done once.
var probe struct {
	once  sync.Once
	count int
	err   error
}

// Probe loads the driver and counts the GPUs, once per process. It returns
// the count and, when it is 0, why: no libcuda, cuInit failed (no GPU, a
// driver mismatch), or no device.
func Probe() (int, error) {
	probe.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				probe.count, probe.err = 0, fmt.Errorf("cuda: probing the driver panicked: %v", r)
			}
		}()
		if _, err := cuda.Load(); err != nil {
			probe.err = fmt.Errorf("cuda: no driver: %w", err)
			return
		}
		if err := cuda.Init(0); err != nil {
			probe.err = fmt.Errorf("cuda: cuInit: %w", err)
			return
		}
		n, err := cuda.DeviceGetCount()
		if err != nil {
			probe.err = err
			return
		}
		probe.count = n
		if n == 0 {
			probe.err = fmt.Errorf("cuda: the driver reports no GPU")
		}
	})
	return probe.count, probe.err
}

// DeviceCount returns the number of GPUs, 0 when there is no driver or no
// GPU. It never panics; the probe runs once per process.
func (*Backend) DeviceCount() int {
	n, _ := Probe()
	return n
}

var devs struct {
	mu   sync.Mutex
	open map[int]*Device
	errs map[int]error
}

// Device opens GPU index on first use and returns it. Opening retains the
// device's primary context, creates its compute stream and its caching
// allocator (configured by VRAM_ALLOC_CONF; an invalid value is an error
// here). NVRTC and cuBLASLt load later, at the first op that needs them. A
// device that failed to open fails the same way on every later call.
func (*Backend) Device(index int) (backend.Device, error) {
	return Open(index)
}

// Open returns GPU index as a *Device, opening it on first use (see
// [Backend.Device]).
func Open(index int) (*Device, error) {
	n, err := Probe()
	if n == 0 {
		return nil, err
	}
	if index < 0 || index >= n {
		return nil, fmt.Errorf("cuda: no device %d (there are %d)", index, n)
	}
	devs.mu.Lock()
	defer devs.mu.Unlock()
	if d, ok := devs.open[index]; ok {
		return d, nil
	}
	if err, ok := devs.errs[index]; ok {
		return nil, err
	}
	cfg, err := memory.ParseConfig(os.Getenv("VRAM_ALLOC_CONF"))
	if err != nil {
		err = fmt.Errorf("cuda: cuda:%d: %w", index, err) // a *memory.ConfigError, which names VRAM_ALLOC_CONF
	} else {
		var d *Device
		d, err = openDevice(index, cfg)
		if err == nil {
			if devs.open == nil {
				devs.open = map[int]*Device{}
			}
			devs.open[index] = d
			return d, nil
		}
	}
	if devs.errs == nil {
		devs.errs = map[int]error{}
	}
	devs.errs[index] = err
	return nil, err
}
