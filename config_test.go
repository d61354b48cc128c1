package vram

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vramgo/vram/backend/cuda"
	"github.com/vramgo/vram/backend/sim"
	"github.com/vramgo/vram/memory"
	nativeload "github.com/vramgo/vram/native/load"
)

// childEnv names the test-control variable that marks a test's child
// process: its value is the test to run there, and TestMain then leaves the
// configuration alone.
const childEnv = "VRAM_TEST_CHILD"

// inChild reports whether this process is t's child, where the caller runs
// the test's body. Otherwise it runs t in a new, unconfigured process of
// the test binary, with the VRAM_* variables of the configuration removed
// from the environment and env added, fails t if the child fails, and
// returns false. The configuration is fixed once per process, so tests of
// what happens before the first use run there.
func inChild(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	if testing.Short() {
		t.Skip("starts a process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != childEnv && !slices.ContainsFunc(envVars, func(v envVar) bool { return v.name == name }) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, childEnv+"="+t.Name()), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	return false
}

// lookupMap returns a lookup function over m.
func lookupMap(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func TestConfigFromLookup(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Config
		err  string // in the error; "" for none
		as   any    // the error type errors.As must find
	}{
		{"nothing set", nil, Config{}, "", nil},
		{"all empty", map[string]string{EnvAllocConf: "", EnvSimDevices: "", EnvSimShapeOnly: "", EnvKernelCache: "", EnvCUDALibs: "", EnvDebugLeaks: ""}, Config{}, "", nil},
		{"other variables", map[string]string{"PATH": "/bin", "VRAM_SIM_DEVICE": "lots"}, Config{}, "", nil},

		{"alloc conf", map[string]string{EnvAllocConf: "policy:pytorch,max_split_size_mb:512"},
			Config{Alloc: memory.Config{Policy: memory.PolicyPyTorch, MaxSplitSizeMB: 512}}, "", nil},
		{"alloc conf bad", map[string]string{EnvAllocConf: "bogus"}, Config{}, "memory: VRAM_ALLOC_CONF: bogus: expected ':'", new(*memory.ConfigError)},
		{"alloc conf bad key", map[string]string{EnvAllocConf: "max_split_size_mb:lots"}, Config{}, "VRAM_ALLOC_CONF: max_split_size_mb:lots: ", new(*memory.ConfigError)},

		{"sim devices", map[string]string{EnvSimDevices: "2x24GiB,80GiB"}, Config{SimDevices: []int64{24 << 30, 24 << 30, 80 << 30}}, "", nil},
		{"sim devices none", map[string]string{EnvSimDevices: "0"}, Config{SimDevices: []int64{}}, "", nil},
		{"sim devices blanks", map[string]string{EnvSimDevices: "  "}, Config{}, "", nil},
		{"sim devices bad", map[string]string{EnvSimDevices: "lots"}, Config{}, `VRAM_SIM_DEVICES="lots": `, new(*EnvError)},
		{"sim devices count", map[string]string{EnvSimDevices: "2x"}, Config{}, `VRAM_SIM_DEVICES="2x": `, new(*EnvError)},
		{"sim devices too many", map[string]string{EnvSimDevices: "65x1GiB"}, Config{}, `VRAM_SIM_DEVICES="65x1GiB": `, new(*sim.ParseError)},
		{"sim devices too large", map[string]string{EnvSimDevices: "5TiB"}, Config{}, `VRAM_SIM_DEVICES="5TiB": `, new(*EnvError)},
		{"sim devices control", map[string]string{EnvSimDevices: "\x1b[31m"}, Config{}, `VRAM_SIM_DEVICES="\x1b[31m": `, new(*EnvError)},

		{"shape-only yes", map[string]string{EnvSimShapeOnly: "yes"}, Config{SimShapeOnly: true}, "", nil},
		{"shape-only ON", map[string]string{EnvSimShapeOnly: " ON "}, Config{SimShapeOnly: true}, "", nil},
		{"shape-only 0", map[string]string{EnvSimShapeOnly: "0"}, Config{}, "", nil},
		{"shape-only bad", map[string]string{EnvSimShapeOnly: "maybe"}, Config{}, `VRAM_SIM_SHAPE_ONLY="maybe": not a boolean (want 1, true, yes or on`, new(*EnvError)},

		{"kernel cache", map[string]string{EnvKernelCache: "/tmp/kernels"}, Config{KernelCache: "/tmp/kernels"}, "", nil},
		{"kernel cache off", map[string]string{EnvKernelCache: "off"}, Config{KernelCache: "off"}, "", nil},

		{"cuda libs", map[string]string{EnvCUDALibs: "/opt/a::/opt/b"}, Config{CUDALibs: []string{"/opt/a", "/opt/b"}}, "", nil},
		{"cuda libs separators only", map[string]string{EnvCUDALibs: ":"}, Config{}, "", nil},

		{"debug leaks 1", map[string]string{EnvDebugLeaks: "1"}, Config{DebugLeaks: true}, "", nil},
		{"debug leaks true", map[string]string{EnvDebugLeaks: "True"}, Config{DebugLeaks: true}, "", nil},
		{"debug leaks off", map[string]string{EnvDebugLeaks: "off"}, Config{}, "", nil},
		{"debug leaks bad", map[string]string{EnvDebugLeaks: "2"}, Config{}, `VRAM_DEBUG_LEAKS="2": not a boolean`, new(*EnvError)},

		{"cpu memory limit", map[string]string{EnvCPUMemory: "8GiB"}, Config{CPUMemoryLimit: 8 << 30}, "", nil},
		{"cpu memory limit in bytes", map[string]string{EnvCPUMemory: " 1048576 "}, Config{CPUMemoryLimit: 1 << 20}, "", nil},
		{"cpu memory limit zero", map[string]string{EnvCPUMemory: "0"}, Config{}, `VRAM_CPU_MEMORY_LIMIT="0": `, new(*EnvError)},
		{"cpu memory limit negative", map[string]string{EnvCPUMemory: "-1GiB"}, Config{}, `VRAM_CPU_MEMORY_LIMIT="-1GiB": `, new(*EnvError)},

		{"everything", map[string]string{EnvAllocConf: "garbage_collection_threshold:0.5", EnvSimDevices: "1GiB", EnvSimShapeOnly: "1",
			EnvKernelCache: "/k", EnvCUDALibs: "/l", EnvDebugLeaks: "yes"},
			Config{Alloc: memory.Config{GarbageCollectionThreshold: 0.5}, SimDevices: []int64{1 << 30}, SimShapeOnly: true,
				KernelCache: "/k", CUDALibs: []string{"/l"}, DebugLeaks: true}, "", nil},
		{"first error, valid kept", map[string]string{EnvDebugLeaks: "2", EnvSimDevices: "lots", EnvKernelCache: "/k", EnvSimShapeOnly: "1"},
			Config{KernelCache: "/k", SimShapeOnly: true}, `VRAM_SIM_DEVICES="lots": `, new(*EnvError)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFromLookup(lookupMap(tc.env))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("config %+v, want %+v", got, tc.want)
			}
			if tc.err == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if verr := got.validate(); verr != nil {
					t.Errorf("the config read is invalid: %v", verr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
			if !errors.As(err, tc.as) {
				t.Errorf("error %v (%T) is not a %T", err, err, tc.as)
			}
			msg := err.Error()
			if strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Errorf("error %q holds control characters", msg)
			}
			named := 0
			for _, v := range envVars {
				named += strings.Count(msg, v.name)
			}
			if named != 1 {
				t.Errorf("error %q names %d variables, want exactly one", msg, named)
			}
		})
	}
	if _, err := ConfigFromLookup(nil); !errors.Is(err, ErrArgument) {
		t.Errorf("nil lookup: %v, want ErrArgument", err)
	}
}

// TestEveryEnvVariableIsRead checks that every variable of the list sets
// its field, so that a variable added to the constants is not forgotten by
// the parser.
func TestEveryEnvVariableIsRead(t *testing.T) {
	values := map[string]string{EnvAllocConf: "policy:pytorch", EnvSimDevices: "1GiB", EnvSimShapeOnly: "1",
		EnvKernelCache: "/k", EnvCUDALibs: "/l", EnvDebugLeaks: "1", EnvCuDNN: "benchmark", EnvCPUMemory: "1GiB"}
	if len(values) != len(envVars) {
		t.Fatalf("%d variables read, %d tested", len(envVars), len(values))
	}
	for _, v := range envVars {
		cfg, err := ConfigFromLookup(lookupMap(map[string]string{v.name: values[v.name]}))
		if err != nil || cfg.equal(Config{}) {
			t.Errorf("%s=%s: %+v, %v; want a setting", v.name, values[v.name], cfg, err)
		}
	}
}

func TestParseEnvBool(t *testing.T) {
	tests := []struct {
		in   string
		want bool
		bad  bool
	}{
		{"", false, false}, {"0", false, false}, {"false", false, false}, {"No", false, false}, {"off", false, false},
		{"1", true, false}, {"true", true, false}, {"TRUE", true, false}, {"yes", true, false}, {" on ", true, false},
		{"2", false, true}, {"maybe", false, true}, {"y", false, true}, {"\x1b[31m", false, true},
	}
	for _, tc := range tests {
		got, err := parseEnvBool(tc.in, "for this", "for that")
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseEnvBool(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "want 1, true, yes or on for this; 0, false, no, off or unset for that") {
			t.Errorf("parseEnvBool(%q): %q does not list the accepted values", tc.in, err)
		}
	}
}

// recorder is a configState whose backends are a record of what was
// applied.
type recorder struct {
	mu      sync.Mutex
	applied []Config
	warned  []string
	refuse  error // what apply returns
}

func (r *recorder) state(env map[string]string) *configState {
	return &configState{
		apply: func(c Config) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.refuse != nil {
				return r.refuse
			}
			r.applied = append(r.applied, c)
			return nil
		},
		lookup: lookupMap(env),
		warn: func(f string, a ...any) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.warned = append(r.warned, fmt.Sprintf(f, a...))
		},
	}
}

func TestConfigureRefusesBadValues(t *testing.T) {
	huge := int64(memory.MaxSimCapacity + 1)
	tests := []struct {
		name string
		cfg  Config
		want string
		as   any
	}{
		{"alloc", Config{Alloc: memory.Config{MaxSplitSizeMB: 5}}, "vram: configure: Config.Alloc: memory: Config.MaxSplitSizeMB = 5 (key max_split_size_mb)", new(*memory.ConfigError)},
		{"alloc policy", Config{Alloc: memory.Config{Policy: 3}}, "Config.Alloc: memory: Config.Policy = Policy(3)", new(*memory.ConfigError)},
		{"negative capacity", Config{SimDevices: []int64{1 << 30, -1}}, "vram: configure: Config.SimDevices[1]: capacity -1 bytes", nil},
		{"zero capacity", Config{SimDevices: []int64{0}}, "Config.SimDevices[0]: capacity 0 bytes", nil},
		{"capacity too large", Config{SimDevices: []int64{huge}}, fmt.Sprintf("Config.SimDevices[0]: capacity %d bytes: a sim device holds from 1 byte to 4.00 TiB (memory.MaxSimCapacity)", huge), nil},
		{"too many sim devices", Config{SimDevices: slices.Repeat([]int64{1 << 20}, sim.MaxDevices+1)}, "Config.SimDevices: 65 devices, more than 64 (sim.MaxDevices)", nil},
		{"cpu entry", Config{Devices: map[Device]DeviceConfig{CPU: {}}}, "Config.Devices[cpu]: the CPU has no caching allocator", nil},
		{"unknown kind", Config{Devices: map[Device]DeviceConfig{{Kind: "tpu"}: {}}}, `Config.Devices["tpu":0]: not a sim or cuda device`, nil},
		{"empty kind", Config{Devices: map[Device]DeviceConfig{{}: {}}}, `Config.Devices["":0]: not a sim or cuda device`, nil},
		{"negative index", Config{Devices: map[Device]DeviceConfig{CUDA(-1): {}}}, "Config.Devices[cuda:-1]: a negative device index", nil},
		{"no such sim device", Config{Devices: map[Device]DeviceConfig{Sim(2): {}}}, "Config.Devices[sim:2]: there is no sim:2: Config.SimDevices gives 2 sim devices (sim:0 to sim:1)", nil},
		{"sim device of none", Config{SimDevices: []int64{}, Devices: map[Device]DeviceConfig{Sim(0): {}}}, "Config.Devices[sim:0]: there is no sim:0: Config.SimDevices gives 0 sim devices", nil},
		{"device alloc", Config{Devices: map[Device]DeviceConfig{CUDA(1): {Alloc: memory.Config{GarbageCollectionThreshold: 1.5}}}},
			"Config.Devices[cuda:1].Alloc: memory: Config.GarbageCollectionThreshold = 1.5", new(*memory.ConfigError)},
		{"kernel cache", Config{KernelCache: "a\x00b"}, `Config.KernelCache: "a\x00b" holds a NUL byte`, nil},
		{"cuda libs", Config{CUDALibs: []string{"/opt/cuda", ""}}, `Config.CUDALibs[1]: "" is not a directory name`, nil},
		{"cpu memory limit", Config{CPUMemoryLimit: -1}, "Config.CPUMemoryLimit: -1 bytes, a negative limit", nil},
	}
	good := Config{SimDevices: []int64{1 << 20}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			s := r.state(nil)
			if err := s.configure(good); err != nil {
				t.Fatal(err)
			}
			err := s.configure(tc.cfg)
			var e *Error
			if !errors.As(err, &e) || e.Kind != ErrArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want an ErrArgument *Error containing %q", err, tc.want)
			}
			if tc.as != nil && !errors.As(err, tc.as) {
				t.Errorf("error %v does not wrap a %T", err, tc.as)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line", err)
			}
			if len(r.applied) != 1 || !s.cfg.equal(good) {
				t.Errorf("a refused config reached the backends (%d applied) or replaced the old one (%+v)", len(r.applied), s.cfg)
			}
			if err := Configure(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("vram.Configure: %v, want the same error", err)
			}
		})
	}
}

// TestZeroConfigIsDefault checks that the zero Config gives the backends
// their zero options, whose devices are the defaults (two sim devices of
// 16 GiB, tested in backend/sim), and that an empty environment reads as
// the zero Config.
func TestZeroConfigIsDefault(t *testing.T) {
	co, so := backendOptions(Config{})
	if !reflect.DeepEqual(co, cuda.Options{}) || !reflect.DeepEqual(so, sim.Options{}) {
		t.Errorf("the zero Config gives %+v and %+v, want the zero options", co, so)
	}
	if cfg, err := ConfigFromLookup(lookupMap(nil)); err != nil || !reflect.DeepEqual(cfg, Config{}) {
		t.Errorf("an empty environment reads as %+v, %v", cfg, err)
	}
	if sizes := (Config{}).simSizes(); !slices.Equal(sizes, []int64{16 << 30, 16 << 30}) {
		t.Errorf("default sim devices %v, want two of 16 GiB", sizes)
	}
}

// TestZeroConfigDevices uses the devices of an unconfigured process
// without environment, and of one given the zero Config: the same
// defaults.
func TestZeroConfigDevices(t *testing.T) {
	if !inChild(t) {
		return
	}
	check := func() {
		if n := SimDeviceCount(); n != 2 {
			t.Fatalf("%d sim devices, want 2", n)
		}
		for i := range 2 {
			ds := mustDevice("test", Sim(i))
			d := ds.bd.(*sim.Device)
			if d.Capacity() != 16<<30 || d.ShapeOnly() || d.Allocator().Config() != (memory.Config{}) {
				t.Errorf("sim:%d: %d bytes, shape-only %v, allocator %+v", i, d.Capacity(), d.ShapeOnly(), d.Allocator().Config())
			}
		}
		if debugLeaks.Load() || !reflect.DeepEqual(cuda.Configured(), cuda.Options{}) || nativeload.Dirs() != nil {
			t.Errorf("leak debugging %v, cuda options %+v, library directories %q", debugLeaks.Load(), cuda.Configured(), nativeload.Dirs())
		}
	}
	check()
	if err := Configure(Config{}); err != nil {
		t.Errorf("the zero Config after the first use of the defaults: %v, want nil (the same configuration)", err)
	}
	if err := Configure(Config{SimDevices: []int64{16 << 30, 16 << 30}}); err != nil {
		t.Errorf("the defaults spelled out: %v, want nil", err)
	}
}

// TestConfigureFixedAfterFirstUse uses a device of this process, which
// fixes the configuration: a different one is refused with the first use
// named, the same one is accepted, and nothing changes.
func TestConfigureFixedAfterFirstUse(t *testing.T) {
	Zeros(Shape{1}, CPU).Release()
	if err := Configure(testConfig); err != nil {
		t.Errorf("the configuration in force again: %v", err)
	}
	err := Configure(Config{})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrConfigFixed) || e.Op != "configure" {
		t.Fatalf("Configure after the first use: %v, want an ErrConfigFixed *Error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "the configuration is fixed after first use, and "+conf.firstUse+" already") ||
		!strings.Contains(msg, "call vram.Configure before any device is used") {
		t.Errorf("message %q does not name the first use (%s) and the fix", msg, conf.firstUse)
	}
	if n := SimDeviceCount(); n != 4 || !conf.cfg.equal(testConfig) {
		t.Errorf("after the refusal: %d sim devices, config %+v", n, conf.cfg)
	}

	var r recorder
	s := r.state(nil)
	s.fix("sim:1 was used")
	if err := s.configure(Config{DebugLeaks: true}); err == nil || !strings.Contains(err.Error(), "and sim:1 was used already") {
		t.Errorf("fresh state: %v, want the first use named", err)
	}
	if err := s.configure(Config{}); err != nil {
		t.Errorf("fresh state, the configuration in force: %v", err)
	}
}

// TestConfigureApplied configures a new process with every field set: the
// sim devices, their mode and each one's allocator, the CUDA backend's
// options, the library search and leak debugging take them.
func TestConfigureApplied(t *testing.T) {
	if !inChild(t, EnvSimDevices+"=lots", EnvDebugLeaks+"=maybe") { // ignored: Configure replaces the environment
		return
	}
	var warned []Warning
	defer SetWarningHandler(SetWarningHandler(func(w Warning) { warned = append(warned, w) }))
	gc := memory.Config{GarbageCollectionThreshold: 0.5}
	pytorch := memory.Config{Policy: memory.PolicyPyTorch, MaxSplitSizeMB: 64}
	cfg := Config{
		Alloc:        gc,
		SimDevices:   []int64{64 << 20, 32 << 20, 16 << 20},
		SimShapeOnly: true,
		Devices: map[Device]DeviceConfig{
			Sim(1):  {Alloc: pytorch},
			CUDA(0): {Alloc: memory.Config{PerProcessMemoryFraction: 0.5}},
		},
		KernelCache: "/tmp/vram-kernels",
		CUDALibs:    []string{"/opt/cuda/lib"},
		DebugLeaks:  true,
	}
	if err := Configure(Config{SimDevices: []int64{1 << 20}}); err != nil {
		t.Fatal(err)
	}
	if err := Configure(cfg); err != nil { // the last one before the first use wins
		t.Fatal(err)
	}
	cfg.SimDevices[0] = 1 // the caller's slice is not kept
	if n := SimDeviceCount(); n != 3 {
		t.Fatalf("%d sim devices, want 3", n)
	}
	for i, want := range []memory.Config{gc, pytorch, gc} {
		d := mustDevice("test", Sim(i)).bd.(*sim.Device)
		if d.Capacity() != 64<<20>>i || !d.ShapeOnly() || d.Allocator().Config() != want {
			t.Errorf("sim:%d: %d bytes, shape-only %v, allocator %+v; want %d, true, %+v", i, d.Capacity(), d.ShapeOnly(), d.Allocator().Config(), 64<<20>>i, want)
		}
	}
	co := cuda.Configured()
	if co.Alloc != gc || co.DeviceAlloc[0] != (memory.Config{PerProcessMemoryFraction: 0.5}) || len(co.DeviceAlloc) != 1 ||
		co.KernelCache != "/tmp/vram-kernels" || !slices.Equal(co.Libs, []string{"/opt/cuda/lib"}) {
		t.Errorf("cuda options %+v", co)
	}
	if !slices.Equal(nativeload.Dirs(), []string{"/opt/cuda/lib"}) || !debugLeaks.Load() {
		t.Errorf("library directories %q, leak debugging %v", nativeload.Dirs(), debugLeaks.Load())
	}
	if len(warned) != 0 {
		t.Errorf("warnings %v: the environment must not be read", warned)
	}
	err := Configure(Config{})
	if !errors.Is(err, ErrConfigFixed) || !strings.Contains(err.Error(), "vram.SimDeviceCount counted the sim devices already") {
		t.Errorf("after the first use: %v", err)
	}
}

// TestEnvironmentAtFirstUse starts a process that never calls Configure:
// the environment is read at the first use of a device, and fixed then.
func TestEnvironmentAtFirstUse(t *testing.T) {
	if !inChild(t, EnvSimDevices+"=3x64MiB", EnvSimShapeOnly+"=1", EnvAllocConf+"=policy:pytorch",
		EnvDebugLeaks+"=1", EnvKernelCache+"=/tmp/k", EnvCUDALibs+"=/a:/b") {
		return
	}
	if d := mustDevice("test", Sim(2)).bd.(*sim.Device); d.Capacity() != 64<<20 || !d.ShapeOnly() || d.Allocator().Config().Policy != memory.PolicyPyTorch {
		t.Errorf("sim:2: %d bytes, shape-only %v, allocator %+v", d.Capacity(), d.ShapeOnly(), d.Allocator().Config())
	}
	if n := SimDeviceCount(); n != 3 || !debugLeaks.Load() {
		t.Errorf("%d sim devices, leak debugging %v", n, debugLeaks.Load())
	}
	if co := cuda.Configured(); co.KernelCache != "/tmp/k" || !slices.Equal(co.Libs, []string{"/a", "/b"}) || co.Alloc.Policy != memory.PolicyPyTorch {
		t.Errorf("cuda options %+v", co)
	}
	env, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := Configure(env); err != nil {
		t.Errorf("the environment's configuration again: %v", err)
	}
	if err := Configure(Config{}); !errors.Is(err, ErrConfigFixed) || !strings.Contains(err.Error(), "sim:2 was used already") {
		t.Errorf("another configuration: %v", err)
	}
}

// TestEnvironmentErrorsByKind reads an environment with invalid variables
// at the first use: each makes the devices it configures unavailable with
// its error, a process-wide one is a warning, and the valid ones apply.
func TestEnvironmentErrorsByKind(t *testing.T) {
	tests := []struct {
		env         map[string]string
		sim, cuda   string // in the kind's error; "" for none
		warn        string
		kernelCache string
	}{
		{map[string]string{EnvSimDevices: "lots", EnvKernelCache: "/k"}, `VRAM_SIM_DEVICES="lots"`, "", "", "/k"},
		{map[string]string{EnvSimShapeOnly: "maybe"}, `VRAM_SIM_SHAPE_ONLY="maybe"`, "", "", ""},
		{map[string]string{EnvAllocConf: "bogus", EnvKernelCache: "/k"}, "VRAM_ALLOC_CONF: bogus", "VRAM_ALLOC_CONF: bogus", "", "/k"},
		{map[string]string{EnvAllocConf: "bogus", EnvSimDevices: "lots"}, "VRAM_ALLOC_CONF: bogus", "VRAM_ALLOC_CONF: bogus", "", ""},
		{map[string]string{EnvDebugLeaks: "2", EnvKernelCache: "/k"}, "", "", `VRAM_DEBUG_LEAKS="2": not a boolean`, "/k"},
	}
	for _, tc := range tests {
		var r recorder
		s := r.state(tc.env)
		s.fix("cpu was used")
		for kind, want := range map[string]string{"sim": tc.sim, "cuda": tc.cuda, "cpu": ""} {
			err := s.kindError(kind)
			if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("%v: %s devices: %v, want %q", tc.env, kind, err, want)
			}
		}
		if len(r.applied) != 1 || r.applied[0].KernelCache != tc.kernelCache {
			t.Errorf("%v: applied %+v, want the valid settings once", tc.env, r.applied)
		}
		if tc.warn == "" && len(r.warned) != 0 || tc.warn != "" && (len(r.warned) != 1 || !strings.Contains(r.warned[0], tc.warn)) {
			t.Errorf("%v: warnings %q, want %q", tc.env, r.warned, tc.warn)
		}
		s.fix("again")
		if len(r.applied) != 1 || s.firstUse != "cpu was used" {
			t.Errorf("%v: a second first use read the environment again", tc.env)
		}
	}

	// A backend used directly with other options: a warning, not a panic.
	r := recorder{refuse: errors.New("sim: in use")}
	s := r.state(map[string]string{EnvSimDevices: "1GiB"})
	s.fix("sim:0 was used")
	if len(r.warned) != 1 || !strings.Contains(r.warned[0], "could not be applied: sim: in use") {
		t.Errorf("warnings %q", r.warned)
	}
	if err := s.configure(Config{}); !errors.Is(err, ErrConfigFixed) {
		t.Errorf("configure after: %v", err)
	}
	r2 := recorder{refuse: errors.New("cuda: probed")}
	if err := r2.state(nil).configure(Config{}); !errors.Is(err, ErrConfigFixed) || !strings.Contains(err.Error(), "a backend was used directly before vram.Configure: cuda: probed") {
		t.Errorf("configure with a backend in use: %v", err)
	}
}

// TestConfigureRace calls Configure from several goroutines while others
// use devices (run with -race): each call either succeeds before the first
// use or fails with ErrConfigFixed, and the configuration in force is the
// last that succeeded, the one the backends got.
func TestConfigureRace(t *testing.T) {
	for range 50 {
		var r recorder
		s := r.state(map[string]string{EnvKernelCache: "/env"})
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(2)
			go func() {
				defer wg.Done()
				errs[i] = s.configure(Config{SimDevices: []int64{int64(i+1) << 20}})
			}()
			go func() {
				defer wg.Done()
				s.fix(fmt.Sprintf("sim:%d was used", i))
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else if !errors.Is(err, ErrConfigFixed) {
				t.Fatalf("error %v, want ErrConfigFixed", err)
			}
		}
		last := r.applied[len(r.applied)-1]
		switch {
		case !s.fixed || !last.equal(s.cfg):
			t.Fatalf("fixed %v; applied last %+v, in force %+v", s.fixed, last, s.cfg)
		case ok == 0 && (len(r.applied) != 1 || last.KernelCache != "/env"):
			t.Fatalf("no Configure succeeded, yet the environment was not what applied: %+v", r.applied)
		case ok > 0 && (len(r.applied) != ok || !s.given):
			t.Fatalf("%d calls succeeded, %d configurations applied", ok, len(r.applied))
		}
	}
}

// TestConfigureRaceWithDevices is TestConfigureRace on the real backends,
// in a new process: the sim devices are those of a Configure that
// succeeded.
func TestConfigureRaceWithDevices(t *testing.T) {
	if !inChild(t) {
		return
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[i] = Configure(Config{SimDevices: []int64{int64(i+1) << 25}})
		}()
		go func() {
			defer wg.Done()
			Zeros(Shape{16}, Sim(0)).Release()
		}()
	}
	wg.Wait()
	c := mustDevice("test", Sim(0)).bd.(*sim.Device).Capacity()
	for i, err := range errs {
		if err != nil && !errors.Is(err, ErrConfigFixed) {
			t.Errorf("Configure %d: %v", i, err)
		}
		if c == int64(i+1)<<25 && err != nil {
			t.Errorf("sim:0 has the capacity of a Configure that failed: %v", err)
		}
	}
	inForce := Config{SimDevices: []int64{c}}
	if c == sim.DefaultCapacity { // the first use came first: the environment's defaults
		inForce = Config{}
	}
	if err := Configure(inForce); err != nil {
		t.Errorf("the configuration in force: %v", err)
	}
}
