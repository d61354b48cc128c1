package vram

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/backend/sim"
	"github.com/vramgo/vram/memory"
)

// Config holds the process's settings of vram: the caching allocator's, the
// simulated devices', the CUDA kernel cache's, the library search's and leak
// debugging. Its zero value is the default behaviour. Give it with
// [Configure] before the first use of any device; [ConfigFromEnv] reads one
// from the VRAM_* environment variables, which is what vram does by itself
// when Configure is never called (see "Configuration" in the package
// documentation).
type Config struct {
	// Alloc holds the caching allocator's settings of every sim and CUDA
	// device that Devices does not name. The zero memory.Config is vram's
	// own policy with PyTorch's options off. Environment: VRAM_ALLOC_CONF,
	// in the syntax of [memory.ParseConfig] ("policy:pytorch,
	// max_split_size_mb:512").
	Alloc memory.Config

	// Devices holds settings of single devices, keyed by device (vram.Sim(1),
	// vram.CUDA(0)). An entry's Alloc replaces Config.Alloc for that device
	// (it is not merged with it). Only sim and CUDA devices have a caching
	// allocator; a sim device must be one that SimDevices gives, while a
	// CUDA index that the machine lacks is never used (the GPUs are not
	// counted while configuring, which would load the driver). No
	// environment variable sets it.
	Devices map[Device]DeviceConfig

	// SimDevices lists the capacities in bytes of the simulated devices
	// sim:0, sim:1, ...: at most 64 (sim.MaxDevices), each from 1 byte to
	// 4 TiB (memory.MaxSimCapacity). nil means the default, two devices of
	// 16 GiB; an empty non-nil slice means none (as exec.Cmd's Env tells
	// nil from empty). Environment: VRAM_SIM_DEVICES, as in "2x24GiB,80GiB"
	// or "0" for none (see [sim.ParseDevices]).
	SimDevices []int64

	// SimShapeOnly makes the sim devices shape-only: tensors on them take
	// memory from the allocator but keep no data, so that a model far larger
	// than the host's memory can be checked for fit. Their values read on
	// the host (Item, Float32s, a copy to the CPU, String) are zeros, not an
	// error, so that a training step runs there unchanged; what it prints
	// of losses or accuracies means nothing. Default false.
	// Environment: VRAM_SIM_SHAPE_ONLY=1 (or true, yes, on).
	SimShapeOnly bool

	// KernelCache is the directory where the CUDA backend keeps the kernels
	// it compiled. "" means os.UserCacheDir()/vram/kernels; "off" keeps no
	// disk cache. Environment: VRAM_KERNEL_CACHE.
	KernelCache string

	// CUDALibs lists directories searched first for the NVIDIA libraries
	// (libcuda, NVRTC, cuBLASLt, cuBLAS, NVML), before the system loader's
	// search; nil searches only the system's places (see package
	// native/load). It applies to the libraries not loaded yet.
	// Environment: VRAM_CUDA_LIBS, directories separated by ':'.
	CUDALibs []string

	// DebugLeaks makes every tensor record where it was created, so that
	// the warning for a tensor that the garbage collector frees without a
	// Release names that place (and, for a view, where its storage was
	// allocated). It costs a stack trace per tensor. Default false.
	// Environment: VRAM_DEBUG_LEAKS=1 (or true, yes, on).
	DebugLeaks bool

	// CPUMemoryLimit bounds the bytes of live host buffers of the CPU
	// device, the sim devices' data included: an allocation that would
	// take them past it fails with [ErrOutOfMemory], after the garbage
	// collector has had the chance to free tensors dropped without
	// Release. 0 means the machine's physical memory (RAM without swap;
	// no limit where it is unknown). It must not be negative.
	// Environment: VRAM_CPU_MEMORY_LIMIT, a size as in "8GiB" or "512MB".
	CPUMemoryLimit int64

	// CuDNN holds the switches of cuDNN's convolutions, pooling and batch
	// norm on CUDA devices: off, benchmark mode, deterministic algorithms,
	// no TF32, the legacy API only, the benchmark limit (see
	// [CuDNNSettings]). The zero value is PyTorch's default. [SetCuDNN]
	// changes them at any time. Environment: VRAM_CUDNN, words separated
	// by commas from off, benchmark, deterministic, notf32, nograph and
	// benchmark_limit=N ("benchmark,deterministic").
	CuDNN CuDNNSettings
}

// DeviceConfig holds the settings of one device, for [Config.Devices].
type DeviceConfig struct {
	// Alloc holds the device's caching allocator settings, in place of
	// Config.Alloc.
	Alloc memory.Config
}

// The environment variables that [ConfigFromEnv] reads, one per field of
// [Config] but Devices.
const (
	EnvAllocConf    = "VRAM_ALLOC_CONF"       // Config.Alloc
	EnvSimDevices   = "VRAM_SIM_DEVICES"      // Config.SimDevices
	EnvSimShapeOnly = "VRAM_SIM_SHAPE_ONLY"   // Config.SimShapeOnly
	EnvKernelCache  = "VRAM_KERNEL_CACHE"     // Config.KernelCache
	EnvCUDALibs     = "VRAM_CUDA_LIBS"        // Config.CUDALibs
	EnvDebugLeaks   = "VRAM_DEBUG_LEAKS"      // Config.DebugLeaks
	EnvCuDNN        = "VRAM_CUDNN"            // Config.CuDNN
	EnvCPUMemory    = "VRAM_CPU_MEMORY_LIMIT" // Config.CPUMemoryLimit
)

// Configure sets the process's configuration. Call it once, at the start of
// main (or in TestMain), before any device is used: the first use of a
// device (a factory, [Device.Check], [DeviceCount], [SimDeviceCount], ...)
// fixes the configuration for the life of the process. Called again before
// that, the last call wins. Afterwards it returns an [*Error] of kind
// [ErrConfigFixed] that names the first use, unless cfg equals the
// configuration in force, which is not an error. The configuration given
// replaces the environment: the VRAM_* variables are then not read at all
// (start from [ConfigFromEnv] to honour them).
//
// An invalid field is an [*Error] of kind [ErrArgument] that names it
// (Config.SimDevices[2], Config.Devices[sim:1].Alloc), wrapping the
// allocator's [*memory.ConfigError] for allocator settings; the
// configuration then stays as it was.
func Configure(cfg Config) error { return conf.configure(cfg) }

// configState is the process's configuration and whether it is fixed. The
// functions it calls are fields so that tests can watch it on its own.
type configState struct {
	mu       sync.Mutex
	cfg      Config // normalised; the zero Config until given or read
	given    bool   // Configure succeeded
	fixed    bool   // a device was used: cfg is in force for good
	firstUse string // what fixed it, as in "sim:0 was used"
	kindErr  map[string]error
	isFixed  atomic.Bool // fixed, for the fast path

	apply  func(Config) error               // hands cfg to the backends
	lookup func(string) (string, bool)      // the environment
	warn   func(format string, args ...any) // a problem with the environment
}

// conf is the process's configuration.
var conf = &configState{apply: applyConfig, lookup: lookupEnv, warn: func(f string, a ...any) { warnf(nil, f, a...) }}

func (s *configState) configure(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	cfg = cfg.normalize()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fixed {
		if cfg.equal(s.cfg) {
			return nil
		}
		return &Error{Op: "configure", Kind: ErrConfigFixed, Detail: fmt.Sprintf(
			"the configuration is fixed after first use, and %s already; call vram.Configure before any device is used (at the start of main, or in TestMain)", s.firstUse)}
	}
	if err := s.apply(cfg); err != nil {
		// A backend that was used directly, not through vram, refused:
		// what the others took is put back.
		_ = s.apply(s.cfg)
		return &Error{Op: "configure", Kind: ErrConfigFixed, Detail: "a backend was used directly before vram.Configure", Err: err}
	}
	s.cfg, s.given = cfg, true
	return nil
}

// fix makes the configuration final at the first use of a device, use
// saying what that was ("sim:0 was used"). When [Configure] was never
// called, it reads the environment first: an invalid variable makes the
// devices it configures unavailable, with its error (see kindError).
func (s *configState) fix(use string) {
	if s.isFixed.Load() {
		return
	}
	var warnings []string
	s.mu.Lock()
	if !s.fixed {
		if !s.given {
			cfg, errs := readEnv(s.lookup)
			if cudnnByCall.Load() {
				cfg.CuDNN = CuDNN() // SetCuDNN came first: VRAM_CUDNN does not undo it
			}
			s.cfg = cfg.normalize()
			for _, e := range errs {
				if len(e.v.kinds) == 0 {
					warnings = append(warnings, fmt.Sprintf("%v; the setting stays at its default", e.err))
				}
				for _, k := range e.v.kinds {
					if s.kindErr[k] == nil {
						if s.kindErr == nil {
							s.kindErr = map[string]error{}
						}
						s.kindErr[k] = e.err
					}
				}
			}
			if err := s.apply(s.cfg); err != nil {
				warnings = append(warnings, fmt.Sprintf("the environment's settings could not be applied: %v", err))
			}
		}
		s.fixed, s.firstUse = true, use
		s.isFixed.Store(true)
	}
	s.mu.Unlock()
	for _, w := range warnings { // after unlocking: a handler may use vram
		s.warn("%s", w)
	}
}

// kindError returns, once the configuration is fixed, the error of the
// environment variable that left devices of kind unconfigured, or nil.
func (s *configState) kindError(kind string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kindErr[kind]
}

// applyConfig hands cfg to the backends and to the leak reports.
func applyConfig(cfg Config) error {
	co, so := backendOptions(cfg)
	if err := cuda.Configure(co); err != nil {
		return err
	}
	if err := sim.Configure(so); err != nil {
		return err
	}
	if err := cpu.Configure(cpu.Options{MemoryLimit: cfg.CPUMemoryLimit}); err != nil {
		return err
	}
	debugLeaks.Store(cfg.DebugLeaks)
	return nil
}

// backendOptions returns the options of the cuda and sim backends that cfg
// gives.
func backendOptions(cfg Config) (cuda.Options, sim.Options) {
	co := cuda.Options{Alloc: cfg.Alloc, KernelCache: cfg.KernelCache, Libs: cfg.CUDALibs, CuDNN: cuda.CuDNNSettings(cfg.CuDNN)}
	so := sim.Options{Devices: cfg.SimDevices, ShapeOnly: cfg.SimShapeOnly, Alloc: cfg.Alloc}
	for d, dc := range cfg.Devices {
		switch d.Kind {
		case "cuda":
			if co.DeviceAlloc == nil {
				co.DeviceAlloc = map[int]memory.Config{}
			}
			co.DeviceAlloc[d.Index] = dc.Alloc
		case "sim":
			if so.DeviceAlloc == nil {
				so.DeviceAlloc = map[int]memory.Config{}
			}
			so.DeviceAlloc[d.Index] = dc.Alloc
		}
	}
	return co, so
}

// configErr is the error of an invalid field.
func configErr(field string, err error, format string, args ...any) error {
	detail := field
	if format != "" {
		detail += ": " + fmt.Sprintf(format, args...)
	}
	return &Error{Op: "configure", Kind: ErrArgument, Detail: detail, Err: err}
}

// validate returns the error of the first invalid field of c.
func (c Config) validate() error {
	if err := c.Alloc.Validate(); err != nil {
		return configErr("Config.Alloc", err, "")
	}
	if len(c.SimDevices) > sim.MaxDevices {
		return configErr("Config.SimDevices", nil, "%d devices, more than %d (sim.MaxDevices)", len(c.SimDevices), sim.MaxDevices)
	}
	for i, b := range c.SimDevices {
		if err := sim.CheckCapacity(b); err != nil {
			return configErr(fmt.Sprintf("Config.SimDevices[%d]", i), nil, "%v", err)
		}
	}
	nsim := len(c.simSizes())
	keys := slices.SortedFunc(maps.Keys(c.Devices), func(a, b Device) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), cmp.Compare(a.Index, b.Index))
	})
	for _, d := range keys {
		field := "Config.Devices[" + d.String() + "]"
		switch {
		case d.Kind == "cpu":
			return configErr(field, nil, "the CPU has no caching allocator; per-device settings are for sim and cuda devices")
		case d.Kind != "sim" && d.Kind != "cuda":
			return configErr(fmt.Sprintf("Config.Devices[%q:%d]", d.Kind, d.Index), nil, "not a sim or cuda device")
		case d.Index < 0:
			return configErr(fmt.Sprintf("Config.Devices[%s:%d]", d.Kind, d.Index), nil, "a negative device index")
		case d.Kind == "sim" && d.Index >= nsim:
			return configErr(field, nil, "there is no %s: Config.SimDevices gives %d sim %s%s", d, nsim,
				plural(nsim, "device", "devices"), simRange(nsim))
		}
		if err := c.Devices[d].Alloc.Validate(); err != nil {
			return configErr(field+".Alloc", err, "")
		}
	}
	if c.CPUMemoryLimit < 0 {
		return configErr("Config.CPUMemoryLimit", nil, "%d bytes, a negative limit (0 means the machine's physical memory)", c.CPUMemoryLimit)
	}
	if strings.ContainsRune(c.KernelCache, 0) {
		return configErr("Config.KernelCache", nil, "%q holds a NUL byte, which no path can", c.KernelCache)
	}
	for i, d := range c.CUDALibs {
		if d == "" || strings.ContainsRune(d, 0) {
			return configErr(fmt.Sprintf("Config.CUDALibs[%d]", i), nil, "%q is not a directory name (empty or holding a NUL byte)", d)
		}
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// simRange says which sim devices n devices are.
func simRange(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " (sim:0)"
	}
	return fmt.Sprintf(" (sim:0 to sim:%d)", n-1)
}

// simSizes returns the capacities of the sim devices c gives.
func (c Config) simSizes() []int64 {
	if c.SimDevices == nil {
		return slices.Repeat([]int64{sim.DefaultCapacity}, sim.DefaultCount)
	}
	return c.SimDevices
}

// normalize returns c with its own copies of the slices and the map, the
// empty ones that mean the same as nil made nil.
func (c Config) normalize() Config {
	if c.SimDevices != nil {
		c.SimDevices = slices.Clone(c.SimDevices)
	}
	c.CUDALibs = slices.Clip(slices.Clone(c.CUDALibs))
	if len(c.CUDALibs) == 0 {
		c.CUDALibs = nil
	}
	c.Devices = maps.Clone(c.Devices)
	if len(c.Devices) == 0 {
		c.Devices = nil
	}
	return c
}

// equal reports whether c and o configure the same.
func (c Config) equal(o Config) bool {
	return c.Alloc == o.Alloc && maps.Equal(c.Devices, o.Devices) &&
		slices.Equal(c.simSizes(), o.simSizes()) && c.SimShapeOnly == o.SimShapeOnly &&
		c.KernelCache == o.KernelCache && slices.Equal(c.CUDALibs, o.CUDALibs) && c.DebugLeaks == o.DebugLeaks &&
		c.CuDNN == o.CuDNN && c.CPUMemoryLimit == o.CPUMemoryLimit
}
