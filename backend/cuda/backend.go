package cuda

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
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

// Options configure the cuda backend. The zero Options are the defaults:
// the allocator settings of the zero [memory.Config] on every GPU, the
// kernel cache in os.UserCacheDir()/vram/kernels, and the libraries
// searched for in the system's places only.
type Options struct {
	// Alloc holds the allocator settings of every GPU that DeviceAlloc
	// does not name.
	Alloc memory.Config

	// DeviceAlloc holds the allocator settings of the GPUs whose indexes
	// it names, in place of Alloc (not merged with it). An index that the
	// machine does not have is never used: the GPUs are not counted before
	// the options are set, since counting them loads the driver.
	DeviceAlloc map[int]memory.Config

	// KernelCache is the directory of the compiled kernels (CUBINs); ""
	// means os.UserCacheDir()/vram/kernels, and "off" keeps no disk cache.
	KernelCache string

	// Libs lists directories searched first for the NVIDIA libraries
	// (libcuda, NVRTC, cuBLASLt, cuBLAS, NVML, cuDNN), before the loader's own
	// search: see package native/load, whose [load.SetDirs] they go to.
	Libs []string

	// CuDNN holds the switches of the cuDNN path (off, benchmark mode,
	// deterministic algorithms, TF32): see [CuDNNSettings]. Unlike the
	// other options they may change at any time, with [SetCuDNN]; Configure
	// applies them even once the other options are fixed.
	CuDNN CuDNNSettings
}

// Validate reports the first invalid field of o, in an error that names
// it (Options.DeviceAlloc[1], Options.Libs[0]); for the allocator settings
// it wraps the [*memory.ConfigError].
func (o Options) Validate() error {
	if err := o.Alloc.Validate(); err != nil {
		return fmt.Errorf("cuda: Options.Alloc: %w", err)
	}
	for _, i := range slices.Sorted(maps.Keys(o.DeviceAlloc)) {
		if i < 0 {
			return fmt.Errorf("cuda: Options.DeviceAlloc[%d]: a negative device index", i)
		}
		if err := o.DeviceAlloc[i].Validate(); err != nil {
			return fmt.Errorf("cuda: Options.DeviceAlloc[%d]: %w", i, err)
		}
	}
	if strings.ContainsRune(o.KernelCache, 0) {
		return fmt.Errorf("cuda: Options.KernelCache %q holds a NUL byte, which no path can", o.KernelCache)
	}
	for i, d := range o.Libs {
		if d == "" || strings.ContainsRune(d, 0) {
			return fmt.Errorf("cuda: Options.Libs[%d] = %q is not a directory name (empty or holding a NUL byte)", i, d)
		}
	}
	return nil
}

func (o Options) equal(p Options) bool {
	return o.Alloc == p.Alloc && maps.Equal(o.DeviceAlloc, p.DeviceAlloc) && o.KernelCache == p.KernelCache && slices.Equal(o.Libs, p.Libs)
}

func (o Options) clone() Options {
	o.DeviceAlloc = maps.Clone(o.DeviceAlloc)
	o.Libs = slices.Clone(o.Libs)
	return o
}

// allocFor returns the allocator settings of GPU i.
func (o Options) allocFor(i int) memory.Config {
	if c, ok := o.DeviceAlloc[i]; ok {
		return c
	}
	return o.Alloc
}

// options are the backend's options; they are fixed once the driver has
// been probed, since the libraries are then loaded and devices may be open.
var options struct {
	mu    sync.Mutex
	opts  Options
	fixed bool // Probe has run
}

// Configure sets the options of the cuda backend, which is process-wide as
// the GPUs are (each has one primary context), so its options are too:
// there is no constructor per caller. vram.Configure calls it. It must come
// before the driver is probed ([Probe], [Backend.DeviceCount], [Open]):
// afterwards it fails, unless opts equal the options in force, and the
// options stay as they were. Invalid options are an error from
// [Options.Validate] and change nothing either.
func Configure(opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	options.mu.Lock()
	defer options.mu.Unlock()
	if options.fixed {
		if opts.equal(options.opts) {
			options.opts.CuDNN = opts.CuDNN
			SetCuDNN(opts.CuDNN)
			return nil
		}
		return fmt.Errorf("cuda: the driver was probed already: the cuda backend's options are fixed from then on")
	}
	options.opts = opts.clone()
	load.SetDirs(opts.Libs)
	SetCuDNN(opts.CuDNN)
	return nil
}

// Configured returns the options set by [Configure].
func Configured() Options {
	options.mu.Lock()
	defer options.mu.Unlock()
	return options.opts.clone()
}

// probe is the result of looking for the driver and GPUs, done once.
var probe struct {
	once  sync.Once
	count int
	err   error
}

// Probe loads the driver and counts the GPUs, once per process. It returns
// the count and, when it is 0, why: no libcuda, cuInit failed (no GPU, a
// driver mismatch), or no device. The backend's options are fixed from its
// first call on.
func Probe() (int, error) {
	probe.once.Do(func() {
		options.mu.Lock()
		options.fixed = true
		options.mu.Unlock()
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
// allocator (with the settings of [Options]; one that the GPU cannot
// honour, such as expandable segments without virtual memory, is an error
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
	d, err := openDevice(index, Configured().allocFor(index))
	if err == nil {
		if devs.open == nil {
			devs.open = map[int]*Device{}
		}
		devs.open[index] = d
		return d, nil
	}
	if devs.errs == nil {
		devs.errs = map[int]error{}
	}
	devs.errs[index] = err
	return nil, err
}
