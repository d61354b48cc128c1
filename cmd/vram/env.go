package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/vramgo/vram/backend/sim"
	"github.com/vramgo/vram/internal/units"
	"github.com/vramgo/vram/memory"
)

// envSetting is one environment variable that configures vram's devices,
// as read: what its value means, or what is wrong with it.
type envSetting struct {
	Name   string
	Value  string
	Set    bool
	Detail string // what the value means, when it is valid
	Err    error  // why it is not; the message names the variable
}

// readEnvironment reads the settings of the devices that allocate: the
// allocator's (CUDA and sim) and the simulated devices'.
func readEnvironment() []envSetting {
	get := func(name string) envSetting {
		v, ok := os.LookupEnv(name)
		return envSetting{Name: name, Value: v, Set: ok}
	}

	conf := get("VRAM_ALLOC_CONF")
	if c, err := memory.ParseConfig(conf.Value); err != nil {
		conf.Err = err // a *memory.ConfigError: it names VRAM_ALLOC_CONF and the key
	} else if s := c.String(); s != "" {
		conf.Detail = "allocator settings " + s
	} else {
		conf.Detail = "the default allocator settings"
	}

	devs := get(sim.EnvDevices)
	if sizes, err := sim.ParseDevices(devs.Value); err != nil {
		devs.Err = &sim.EnvError{Var: sim.EnvDevices, Value: devs.Value, Err: err}
	} else {
		parts := make([]string, len(sizes))
		for i, b := range sizes {
			parts[i] = units.Bytes(b)
		}
		devs.Detail = fmt.Sprintf("%d sim %s", len(sizes), plural(len(sizes), "device", "devices"))
		switch {
		case len(sizes) == 1 || len(sizes) > 1 && slices.Min(sizes) == slices.Max(sizes):
			devs.Detail += " of " + parts[0]
			if len(sizes) > 1 {
				devs.Detail += " each"
			}
		case len(sizes) > 1:
			devs.Detail += " of " + strings.Join(parts, ", ")
		}
	}

	shape := get(sim.EnvShapeOnly)
	if on, err := sim.ParseShapeOnly(shape.Value); err != nil {
		shape.Err = &sim.EnvError{Var: sim.EnvShapeOnly, Value: shape.Value, Err: err}
	} else if on {
		shape.Detail = "sim devices keep no data (shape-only)"
	} else {
		shape.Detail = "sim devices keep data"
	}
	return []envSetting{conf, devs, shape}
}

// checkEnvironment returns the first invalid setting of readEnvironment.
// Commands that allocate on devices (demo) call it before they start, so
// that a typo is reported at once rather than at the first use of a device;
// the others do not read these settings and ignore them.
func checkEnvironment() error {
	for _, s := range readEnvironment() {
		if s.Err != nil {
			return s.Err
		}
	}
	return nil
}
