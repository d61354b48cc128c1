package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend/sim"
	"github.com/vramgo/vram/internal/printable"
	"github.com/vramgo/vram/internal/units"
)

// lookupEnv reads the environment; tests replace it with their own
// variables. Everything the command reads of vram's settings goes through
// it, and through vram.ConfigFromLookup.
var lookupEnv = os.LookupEnv

// configure gives vram the configuration of the environment, once per
// command line, before any command runs. The settings of the valid
// variables apply even when one is invalid, so that a command that does not
// allocate (smi) still searches the libraries of VRAM_CUDA_LIBS; the
// commands that allocate (demo) refuse an invalid device setting themselves
// (see checkEnvironment), and doctor reports it. An invalid setting of the
// process (processSettings) is a warning on stderr, as it is to vram when
// it reads the environment itself. Configure fails only when the
// configuration was fixed by an earlier command line of the same process
// (tests) with other settings; the first one's stay.
func configure(stderr io.Writer) {
	cfg, _ := vram.ConfigFromLookup(lookupEnv)
	_ = vram.Configure(cfg)
	for _, name := range processSettings {
		if _, err := readVariable(name); err != nil {
			fmt.Fprintf(stderr, "vram: warning: %s; the setting stays at its default\n", printable.Text(err.Error()))
		}
	}
}

// processSettings are the variables that configure the process rather
// than a device (leak debugging): no command refuses an invalid one, and
// configure warns of it.
var processSettings = []string{vram.EnvDebugLeaks}

// readVariable reads the variable name alone with vram.ConfigFromLookup,
// the parse vram itself uses: its setting, or its error.
func readVariable(name string) (vram.Config, error) {
	v, ok := lookupEnv(name)
	return vram.ConfigFromLookup(func(n string) (string, bool) {
		if n != name {
			return "", false
		}
		return v, ok
	})
}

// envSetting is one environment variable that configures vram's devices,
// as read: what its value means, or what is wrong with it.
type envSetting struct {
	Name   string
	Value  string
	Set    bool
	Detail string // what the value means, when it is valid
	Err    error  // why it is not; the message names the variable
}

// deviceSettings are the variables that configure the devices that
// allocate: the allocator's (CUDA and sim), the simulated devices',
// cuDNN's switches and the CPU's memory limit.
var deviceSettings = []string{vram.EnvAllocConf, vram.EnvSimDevices, vram.EnvSimShapeOnly, vram.EnvCuDNN, vram.EnvCPUMemory}

// readEnvironment reads each of deviceSettings alone, with
// vram.ConfigFromLookup, the parse vram itself uses, and explains its
// setting.
func readEnvironment() []envSetting {
	var out []envSetting
	for _, name := range deviceSettings {
		v, ok := lookupEnv(name)
		s := envSetting{Name: name, Value: v, Set: ok}
		cfg, err := readVariable(name)
		if err != nil {
			s.Err = err // it names the variable
		} else {
			s.Detail = describeSetting(name, cfg)
		}
		out = append(out, s)
	}
	return out
}

// describeSetting says what cfg's field of the variable name means.
func describeSetting(name string, cfg vram.Config) string {
	switch name {
	case vram.EnvAllocConf:
		s := cfg.Alloc.String()
		if s == "" {
			return "the default allocator settings"
		}
		if nm := cfg.Alloc.NotModelled(); len(nm) > 0 {
			s += " (not modelled by vram, no effect: " + strings.Join(nm, ", ") + ")"
		}
		return "allocator settings " + s
	case vram.EnvSimDevices:
		sizes := cfg.SimDevices
		if sizes == nil {
			sizes = slices.Repeat([]int64{sim.DefaultCapacity}, sim.DefaultCount)
		}
		parts := make([]string, len(sizes))
		for i, b := range sizes {
			parts[i] = units.Bytes(b)
		}
		d := fmt.Sprintf("%d sim %s", len(sizes), plural(len(sizes), "device", "devices"))
		switch {
		case len(sizes) == 1 || len(sizes) > 1 && slices.Min(sizes) == slices.Max(sizes):
			d += " of " + parts[0]
			if len(sizes) > 1 {
				d += " each"
			}
		case len(sizes) > 1:
			d += " of " + strings.Join(parts, ", ")
		}
		return d
	case vram.EnvSimShapeOnly:
		if cfg.SimShapeOnly {
			return "sim devices keep no data (shape-only)"
		}
		return "sim devices keep data"
	case vram.EnvCuDNN:
		if cfg.CuDNN == (vram.CuDNNSettings{}) {
			return "cuDNN as PyTorch's default: on, heuristics, any algorithm, TF32"
		}
		return "cuDNN switches " + cfg.CuDNN.String()
	case vram.EnvCPUMemory:
		if cfg.CPUMemoryLimit > 0 {
			return "host buffers limited to " + units.Bytes(cfg.CPUMemoryLimit)
		}
		return "host buffers limited to the machine's physical memory"
	}
	return ""
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
