package vram

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vramgo/vram/backend/sim"
	"github.com/vramgo/vram/memory"

	"github.com/vramgo/vram/internal/units"
)

// This file is the one place where vram reads the environment.

// lookupEnv is os.LookupEnv: the only access to the environment outside
// the cmd and test code.
func lookupEnv(name string) (string, bool) { return os.LookupEnv(name) }

// EnvError reports an invalid value of one of the environment variables
// that [ConfigFromEnv] reads. Its message names the variable, the value and
// what is accepted. It matches [ErrArgument] under errors.Is, and for
// VRAM_ALLOC_CONF it wraps the [*memory.ConfigError], whose message is
// its own.
type EnvError struct {
	Var   string // the variable, as in EnvSimDevices
	Value string // as set
	Err   error  // what is wrong with it
}

// Error returns VAR="value": reason, or for VRAM_ALLOC_CONF the
// [*memory.ConfigError]'s message, which names the variable, the key and
// its value.
func (e *EnvError) Error() string {
	var ce *memory.ConfigError
	if errors.As(e.Err, &ce) {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s=%q: %v", e.Var, e.Value, e.Err)
}

// Unwrap returns the parse error.
func (e *EnvError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrArgument]: the value is invalid.
func (e *EnvError) Is(target error) bool { return target == ErrArgument }

// ConfigFromEnv reads a [Config] from the process's environment: each of
// the variables EnvAllocConf, EnvSimDevices, ... (VRAM_ALLOC_CONF,
// VRAM_SIM_DEVICES, VRAM_SIM_SHAPE_ONLY, VRAM_KERNEL_CACHE, VRAM_CUDA_LIBS,
// VRAM_DEBUG_LEAKS, VRAM_CUDNN, VRAM_CPU_MEMORY_LIMIT) sets the field of Config that its doc comment names;
// one that is unset or empty leaves the field at its default. It is the
// only function of the library that reads the environment, and what vram
// applies by itself at the first use of a device when [Configure] was
// never called. See [ConfigFromLookup] for the errors.
func ConfigFromEnv() (Config, error) { return ConfigFromLookup(lookupEnv) }

// ConfigFromLookup is [ConfigFromEnv] with the variables given by lookup,
// which returns a variable's value and whether it is set, as os.LookupEnv
// does: tests and tools pass their own. An invalid value is an [*EnvError]
// that names the variable and the value, matches [ErrArgument] under
// errors.Is and, for VRAM_ALLOC_CONF, wraps the [*memory.ConfigError] that
// names the key. With several invalid,
// the error is the first one's in the order of the list above, and the
// Config returned holds the settings of the valid variables (the defaults
// for the others), so that a tool can still explain them. A nil lookup is
// an [*Error] of kind [ErrArgument].
func ConfigFromLookup(lookup func(name string) (string, bool)) (Config, error) {
	if lookup == nil {
		return Config{}, &Error{Op: "config from lookup", Kind: ErrArgument, Detail: "nil lookup function (pass os.LookupEnv, or a function of your own)"}
	}
	cfg, errs := readEnv(lookup)
	if len(errs) > 0 {
		return cfg, errs[0].err
	}
	return cfg, nil
}

// envVar is one environment variable of the configuration.
type envVar struct {
	name string
	// kinds are the device kinds whose devices the variable configures:
	// when vram reads the environment by itself, an invalid value makes
	// those devices unavailable, with its error. A variable without kinds
	// configures the process; an invalid one is a warning.
	kinds []string
	// parse sets cfg's field from a value that is not empty.
	parse func(value string, cfg *Config) error
}

// envVars lists the variables in the order ConfigFromLookup reads them.
var envVars = []envVar{
	{EnvAllocConf, []string{"sim", "cuda"}, func(v string, c *Config) error {
		a, err := memory.ParseConfig(v)
		c.Alloc = a
		return err
	}},
	{EnvSimDevices, []string{"sim"}, func(v string, c *Config) error {
		if strings.TrimSpace(v) == "" {
			return nil // blanks: the defaults
		}
		sizes, err := sim.ParseDevices(v)
		if err == nil && sizes == nil {
			sizes = []int64{} // "0": none, not the defaults
		}
		c.SimDevices = sizes
		return err
	}},
	{EnvSimShapeOnly, []string{"sim"}, func(v string, c *Config) (err error) {
		c.SimShapeOnly, err = parseEnvBool(v, "for sim devices that keep no data", "for devices that do")
		return err
	}},
	{EnvKernelCache, []string{"cuda"}, func(v string, c *Config) error {
		c.KernelCache = v
		return nil
	}},
	{EnvCUDALibs, []string{"cuda"}, func(v string, c *Config) error {
		for _, d := range filepath.SplitList(v) {
			if d != "" {
				c.CUDALibs = append(c.CUDALibs, d)
			}
		}
		return nil
	}},
	{EnvDebugLeaks, nil, func(v string, c *Config) (err error) {
		c.DebugLeaks, err = parseEnvBool(v, "to record where each tensor is made and name it when one leaks", "not to")
		return err
	}},
	{EnvCuDNN, []string{"cuda"}, func(v string, c *Config) (err error) {
		c.CuDNN, err = parseCuDNN(v)
		return err
	}},
	{EnvCPUMemory, nil, func(v string, c *Config) error {
		n, err := units.ParseBytes(v)
		c.CPUMemoryLimit = n
		return err
	}},
}

// envErr is the error of one variable.
type envErr struct {
	v   *envVar
	err error
}

// readEnv reads every variable with lookup. It returns the Config of the
// valid ones and the error of each invalid one, in the order of envVars.
func readEnv(lookup func(string) (string, bool)) (Config, []envErr) {
	var cfg Config
	var errs []envErr
	for i := range envVars {
		v := &envVars[i]
		value, ok := lookup(v.name)
		if !ok || value == "" {
			continue
		}
		c := cfg
		if err := v.parse(value, &c); err != nil {
			errs = append(errs, envErr{v, &EnvError{Var: v.name, Value: value, Err: err}})
			continue
		}
		cfg = c
	}
	return cfg, errs
}

// parseEnvBool parses a boolean variable, in any case and with blanks
// around: 1, true, yes and on are true; 0, false, no and off are false.
// on and off say what each means, for the error.
func parseEnvBool(s, on, off string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, fmt.Errorf("not a boolean (want 1, true, yes or on %s; 0, false, no, off or unset %s)", on, off)
}
