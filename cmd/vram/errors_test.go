package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vramgo/vram/backend/selftest"
)

// doubledPrefix reports whether a message repeats one of its one-word
// prefixes: "analyze: analyze: ..." or "VRAM_ALLOC_CONF: memory:
// VRAM_ALLOC_CONF: ...".
func doubledPrefix(msg string) bool {
	seen := map[string]bool{}
	for _, part := range strings.Split(msg, ": ") {
		if strings.ContainsAny(part, " \t") {
			continue
		}
		if seen[part] {
			return true
		}
		seen[part] = true
	}
	return false
}

// checkErrorLine checks that stderr is one line "vram: ..." holding want,
// with no doubled prefix.
func checkErrorLine(t *testing.T, stderr, want string) {
	t.Helper()
	line := strings.TrimSuffix(stderr, "\n")
	switch {
	case !strings.HasPrefix(stderr, "vram: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n"):
		t.Errorf("stderr %q, want one line starting with \"vram: \"", stderr)
	case !strings.Contains(line, want):
		t.Errorf("stderr %q lacks %q", line, want)
	case doubledPrefix(line):
		t.Errorf("stderr %q repeats a prefix", line)
	}
}

// useEnv makes the command see the variables of env, and no other, for
// one test: its environment is read through lookupEnv.
func useEnv(t *testing.T, env map[string]string) {
	old := lookupEnv
	lookupEnv = func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	t.Cleanup(func() { lookupEnv = old })
}

// TestExitCodes runs every command with a bad command line (exit status 2)
// and with input that fails (1): the error is one line naming the command.
func TestExitCodes(t *testing.T) {
	withMonitor(t, noNVML)
	noDriver(t)
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.json")
	os.WriteFile(notes, []byte(`{"hello": "world"}`), 0o644)
	missing := filepath.Join(dir, "missing.json")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String() // a port in use
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"analyze"}, exitUsage, "analyze: takes 1 argument, got 0 (usage: vram analyze FILE [flags]"},
		{[]string{"analyze", "a", "b"}, exitUsage, "analyze: takes 1 argument, got 2"},
		{[]string{"analyze", "--top", "0", notes}, exitUsage, "analyze: --top must be at least 1"},
		{[]string{"analyze", "--bogus", notes}, exitUsage, "analyze: unknown flag: --bogus (see 'vram analyze --help')"},
		{[]string{"analyze", "--max-input", "0", notes}, exitUsage, `analyze: --max-input "0": a size must be at least 1 byte; want a positive size`},
		{[]string{"analyze", missing}, exitFailure, "analyze: "},
		{[]string{"analyze", notes}, exitFailure, "analyze: "},

		{[]string{"demo", "extra"}, exitUsage, `demo: unknown command "extra" for "vram demo" (usage: vram demo [flags]`},
		{[]string{"demo", "--steps", "0"}, exitUsage, "demo: --steps must be positive, got 0"},
		{[]string{"demo", "--batch", "x"}, exitUsage, `demo: --batch "x": want a whole number`},
		{[]string{"demo", "--seed", "-1"}, exitUsage, `demo: --seed "-1": want a whole number, 0 or more`},
		{[]string{"demo", "--device", "tpu"}, exitUsage, `demo: --device: bad device "tpu"`},
		{[]string{"demo", "--device", "sim:99"}, exitUsage, "demo: --device sim:99: device not available"},

		{[]string{"doctor", "extra"}, exitUsage, "doctor: unknown command"},
		{[]string{"doctor", "--bogus"}, exitUsage, "doctor: unknown flag: --bogus"},
		{[]string{"doctor"}, exitFailure, "doctor: no NVIDIA driver found"},

		{[]string{"exporter", "extra"}, exitUsage, "exporter: unknown command"},
		{[]string{"exporter", "--listen", "bad::addr", "--source", readingsFile}, exitUsage, `exporter: --listen "bad::addr": address bad::addr: too many colons`},
		{[]string{"exporter", "--listen", "127.0.0.1:99999", "--source", readingsFile}, exitUsage, `exporter: --listen "127.0.0.1:99999": port "99999" is not a number`},
		{[]string{"exporter", "--listen", busy, "--source", readingsFile}, exitFailure, "exporter: --listen " + busy + ":"},
		{[]string{"exporter", "--source", missing}, exitFailure, "exporter: --source " + missing + ": no such file or directory"},
		{[]string{"exporter"}, exitFailure, "exporter: no NVIDIA driver found"},

		{[]string{"replay"}, exitUsage, "replay: needs at least 1 argument, got 0 (usage: vram replay FILE... [flags]"},
		{[]string{"replay", "--conf", "bogus", notes}, exitUsage, `replay: --conf "bogus": bogus: expected ':'`},
		{[]string{"replay", "--capacity", "lots", notes}, exitUsage, "replay: --capacity: bad size"},
		{[]string{"replay", "--max-input", "0", notes}, exitUsage, `replay: --max-input "0": a size must be at least 1 byte; want a positive size`},
		{[]string{"replay", "--max-capacity", "0", notes}, exitUsage, `replay: --max-capacity "0": a size must be at least 1 byte; want a positive size`},
		{[]string{"replay", "--fit=lots", notes}, exitUsage, "replay: --fit: "},
		{[]string{"replay", "--compare", "--conf", "policy:vram", notes}, exitUsage, "replay: --compare sets policy"},
		{[]string{"replay", "--device", "sim:0", notes}, exitUsage, `replay: --device "sim:0": want cuda:N`},
		{[]string{"replay", "--device", "cuda:0", notes}, exitFailure, "replay: --device cuda:0: no CUDA GPU here"},

		{[]string{"smi", "extra"}, exitUsage, "smi: unknown command"},
		{[]string{"smi", "--source", missing}, exitFailure, "smi: --source " + missing + ": no such file or directory"},
		{[]string{"smi", "--source", ""}, exitUsage, "smi: --source needs a FILE of recorded readings"},
		{[]string{"watch", "--source", "", "--count", "1"}, exitUsage, "watch: --source needs a FILE of recorded readings"},
		{[]string{"exporter", "--source", ""}, exitUsage, "exporter: --source needs a FILE of recorded readings"},
		{[]string{"smi"}, exitFailure, "smi: no NVIDIA driver found"},

		{[]string{"version", "extra"}, exitUsage, "version: unknown command"},
		{[]string{"version", "--bogus"}, exitUsage, "version: unknown flag: --bogus (see 'vram version --help')"},

		{[]string{"watch", "extra"}, exitUsage, "watch: unknown command"},
		{[]string{"watch", "--interval", "1ms"}, exitUsage, "watch: --interval must be at least 10ms"},
		{[]string{"watch", "--count", "-1"}, exitUsage, "watch: --count must not be negative"},
		{[]string{"watch", "--source", missing, "--count", "1"}, exitFailure, "watch: --source " + missing + ": no such file or directory"},
		{[]string{"watch", "--count", "1"}, exitFailure, "watch: no NVIDIA driver found"},

		{[]string{"help", "bogus"}, exitUsage, `help: unknown help topic "bogus"`},
		{[]string{"help", "demo", "extra"}, exitUsage, `help: unknown help topic "demo extra"`},
		{[]string{"completion", "bogus"}, exitUsage, `completion: unknown shell "bogus" (want bash, fish, powershell, zsh)`},
		{[]string{"dmeo"}, exitUsage, "did you mean demo?"},
		{[]string{"--bogus"}, exitUsage, "unknown flag: --bogus (see 'vram --help')"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			// replay reports each input it could read, and doctor every
			// check it ran before the one that failed.
			if tc.args[0] != "replay" && !(tc.args[0] == "doctor" && tc.code == exitFailure) && stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			if tc.args[0] == "replay" && tc.code == exitFailure && strings.Count(stderr, "\n") > 1 {
				return // one line per input, then the summary
			}
			checkErrorLine(t, stderr, tc.want)
			// Every error of a subcommand names it first, its flags'
			// and the packages' it calls included.
			if name := tc.args[0]; !strings.HasPrefix(name, "-") && name != "dmeo" {
				if !strings.HasPrefix(stderr, "vram: "+name+": ") {
					t.Errorf("stderr %q does not start with %q", stderr, "vram: "+name+": ")
				}
			}
		})
	}
}

// TestArgErrorsNameTheCommand gives every command arguments its argument
// check rejects: each is a usage error that names the command and its
// usage line.
func TestArgErrorsNameTheCommand(t *testing.T) {
	root := newRootCmd()
	var walk func(c *cobra.Command)
	tried := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Args == nil || c == root {
			return
		}
		args := []string(nil)
		if c.Args(c, args) == nil {
			args = []string{"x", "y", "z"}
			if c.Args(c, args) == nil {
				return // takes any arguments
			}
		}
		tried++
		path := strings.Fields(c.CommandPath())[1:]
		code, _, stderr := runCLI(t, append(path, args...)...)
		if code != exitUsage {
			t.Errorf("%s %v: exit %d, want %d", c.CommandPath(), args, code, exitUsage)
		}
		// A command below another is named by its path once:
		// "completion bash: ...", not "completion bash: bash: ...".
		name := strings.Join(path, " ")
		checkErrorLine(t, stderr, name+": ")
		if !strings.HasPrefix(stderr, "vram: "+name+": ") || strings.Contains(stderr, name+": "+c.Name()+": ") {
			t.Errorf("%s %v: %q does not name the command once as %q", c.CommandPath(), args, stderr, name)
		}
		if !strings.Contains(stderr, "usage: "+c.UseLine()) {
			t.Errorf("%s %v: %q lacks the usage line %q", c.CommandPath(), args, stderr, c.UseLine())
		}
	}
	walk(root)
	if tried < 8 {
		t.Errorf("only %d commands tried", tried)
	}
}

func TestHelp(t *testing.T) {
	code, stdout, stderr := runCLI(t, "help", "demo")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "Demo trains a multilayer perceptron") {
		t.Errorf("help demo: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runCLI(t, "help")
	if code != 0 || !strings.Contains(stdout, "Available Commands") {
		t.Errorf("help: exit %d, stdout:\n%s", code, stdout)
	}
}

func TestCmdError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"analyze", errors.New("analyze: x.json: unknown format"), "analyze: x.json: unknown format"},
		{"analyze", errors.New("trace: x.json: line 3: bad"), "analyze: trace: x.json: line 3: bad"},
		{"smi", errors.New("smiley: no"), "smi: smiley: no"},
	}
	for _, tc := range tests {
		if got := cmdError(tc.name, tc.err).Error(); got != tc.want {
			t.Errorf("cmdError(%q, %q) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
	if cmdError("smi", nil) != nil {
		t.Error("cmdError of nil is not nil")
	}
}

// badEnvironments are settings that configure the devices vram allocates
// on, each invalid.
var badEnvironments = []struct{ name, value, want string }{
	{"VRAM_ALLOC_CONF", "bogus", "VRAM_ALLOC_CONF: bogus: expected ':' and a value after the key"},
	{"VRAM_ALLOC_CONF", "max_split_size_mb:lots", "VRAM_ALLOC_CONF: max_split_size_mb:lots: "},
	{"VRAM_ALLOC_CONF", "no_such_key:1", "VRAM_ALLOC_CONF: no_such_key: unknown key"},
	{"VRAM_SIM_DEVICES", "lots", `VRAM_SIM_DEVICES="lots": `},
	{"VRAM_SIM_DEVICES", "2xmany", `VRAM_SIM_DEVICES="2xmany": `},
	{"VRAM_SIM_SHAPE_ONLY", "maybe", `VRAM_SIM_SHAPE_ONLY="maybe": not a boolean (want 1, true, yes or on`},
	{"VRAM_CUDNN", "fastest", `VRAM_CUDNN="fastest": "fastest" is not one of off, benchmark, deterministic, notf32, nograph, benchmark_limit=N and default`},
	{"VRAM_CPU_MEMORY_LIMIT", "lots", `VRAM_CPU_MEMORY_LIMIT="lots": `},
}

// TestBadEnvironmentStopsOnlyCommandsThatAllocate sets each device
// setting to an invalid value: demo fails on it at once, doctor reports it
// as a failed check, and the commands that do not allocate run.
func TestBadEnvironmentStopsOnlyCommandsThatAllocate(t *testing.T) {
	noDriver(t)
	for _, env := range badEnvironments {
		t.Run(env.name+"="+env.value, func(t *testing.T) {
			useEnv(t, map[string]string{env.name: env.value})
			for _, args := range [][]string{
				{"version"}, {"version", "--json"},
				{"smi", "--source", readingsFile}, {"smi", "-L", "--source", readingsFile},
				{"watch", "--source", readingsFile, "--count", "1", "--interval", "10ms"},
				{"analyze", snapshotFile}, {"replay", resnetTrace}, {"help", "demo"},
			} {
				if code, _, stderr := runCLI(t, args...); code != 0 {
					t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
				}
			}

			code, stdout, stderr := runCLI(t, "demo", "--device", "cpu", "--steps", "1")
			if code != exitFailure || stdout != "" {
				t.Errorf("demo: exit %d, want %d; stdout %q", code, exitFailure, stdout)
			}
			checkErrorLine(t, stderr, "demo: ")
			checkErrorLine(t, stderr, env.want)
			// The command line is checked first: a malformed flag is a
			// usage error whatever the environment.
			for _, args := range [][]string{{"demo", "--steps", "0"}, {"demo", "--device", "tpu:0"}, {"demo", "--device", "sim:-1"}} {
				if code, _, stderr := runCLI(t, args...); code != exitUsage || !strings.Contains(stderr, "demo: --") {
					t.Errorf("%v: exit %d, stderr %q; want %d and the flag's error", args, code, stderr, exitUsage)
				}
			}

			code, stdout, _ = runCLI(t, "doctor", "--json")
			var rep doctorReport
			decodeOne(t, stdout, &rep)
			failedEnv := 0
			for _, c := range rep.Environment {
				if c.Status != selftest.Pass {
					failedEnv++
					if c.Name != env.name || !strings.Contains(c.Detail, env.want) {
						t.Errorf("doctor: check %s failed: %s", c.Name, c.Detail)
					}
				}
			}
			if code != exitFailure || failedEnv != 1 || rep.Failed != 2 { // the setting and the missing driver
				t.Errorf("doctor --json: exit %d, %d environment checks failed, failed %d; want 1, 1, 2", code, failedEnv, rep.Failed)
			}
			code, stdout, _ = runCLI(t, "doctor")
			if code != exitFailure || !strings.Contains(stdout, env.name) || !strings.Contains(stdout, "FAILED") {
				t.Errorf("doctor: exit %d, stdout:\n%s", code, stdout)
			}
		})
	}
}

// TestDoctorFailedAgreesWithExitStatus checks that "failed" in doctor's
// JSON is 0 exactly when the exit status is.
func TestDoctorFailedAgreesWithExitStatus(t *testing.T) {
	noDriver(t)
	useEnv(t, map[string]string{"VRAM_ALLOC_CONF": "", "VRAM_SIM_DEVICES": "", "VRAM_SIM_SHAPE_ONLY": "", "VRAM_CUDNN": "", "VRAM_CPU_MEMORY_LIMIT": ""})
	code, stdout, stderr := runCLI(t, "doctor", "--json")
	var rep doctorReport
	decodeOne(t, stdout, &rep)
	if code != exitFailure || rep.Failed != 1 || rep.CUDA.Driver.Usable {
		t.Errorf("no driver: exit %d, failed %d; want %d and 1", code, rep.Failed, exitFailure)
	}
	if len(rep.Environment) != len(deviceSettings) {
		t.Errorf("environment checks %+v", rep.Environment)
	}
	for _, c := range rep.Environment {
		if c.Status != selftest.Pass || !strings.HasPrefix(c.Detail, "unset: ") && c.Detail == "" {
			t.Errorf("check %+v", c)
		}
	}
	checkErrorLine(t, stderr, "doctor: no NVIDIA driver found")
}

func TestDemoBatchLargerThanTrainingSet(t *testing.T) {
	r := runDemoJSON(t, "--device", "cpu", "--steps", "2", "--batch", "100000000")
	if r.Batch != r.TrainExamples || r.BatchRequested != 100000000 || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "--batch 100000000") {
		t.Errorf("batch %d, requested %d, notes %q; want the %d training examples and a note", r.Batch, r.BatchRequested, r.Notes, r.TrainExamples)
	}
	code, stdout, _ := runCLI(t, "demo", "--device", "cpu", "--steps", "2", "--batch", "5000")
	if code != 0 || !strings.Contains(stdout, "2 steps of 1440 examples") || !strings.Contains(stdout, "note:") ||
		!strings.Contains(stdout, "--batch 5000 is more than the 1440 training examples") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	r = runDemoJSON(t, "--device", "cpu", "--steps", "2", "--batch", "1440")
	if r.Batch != 1440 || r.BatchRequested != 0 || len(r.Notes) != 0 {
		t.Errorf("batch %d, requested %d, notes %q", r.Batch, r.BatchRequested, r.Notes)
	}
}

// runCLIProcess runs the command line in a new process with extra
// environment, for settings that the sim backend reads once per process.
func runCLIProcess(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), helperEnv+"=1", "VRAM_TEST_ARGS="+strings.Join(args, " ")), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func TestDemoShapeOnly(t *testing.T) {
	env := []string{"VRAM_SIM_DEVICES=1x1GiB", "VRAM_SIM_SHAPE_ONLY=yes"}
	code, stdout, stderr := runCLIProcess(t, env, "demo", "--device", "sim:0", "--steps", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var m map[string]any
	decodeOne(t, stdout, &m)
	for _, k := range []string{"final_loss", "accuracy", "train_accuracy"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", k, v, ok)
		}
	}
	if m["shape_only"] != true || m["peak_bytes"].(float64) <= 0 {
		t.Errorf("shape_only %v, peak %v", m["shape_only"], m["peak_bytes"])
	}
	if notes, _ := json.Marshal(m["notes"]); !strings.Contains(string(notes), "shape-only") {
		t.Errorf("notes %s", notes)
	}
	code, stdout, _ = runCLIProcess(t, env, "demo", "--device", "sim:0", "--steps", "3")
	if code != 0 || !strings.Contains(stdout, "accuracy:    not computed") || strings.Contains(stdout, "0.00%") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}

// TestDemoListsOnlyUsableDevices checks that the devices demo offers are
// the ones --device accepts.
func TestDemoListsOnlyUsableDevices(t *testing.T) {
	code, _, stderr := runCLIProcess(t, []string{"VRAM_SIM_DEVICES=1x256MiB"}, "demo", "--device", "sim:1")
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	checkErrorLine(t, stderr, "there is 1 sim device, sim:0; vram.Config.SimDevices or VRAM_SIM_DEVICES sets their number (available here: cpu, sim:0)")
	for _, env := range badEnvironments {
		code, _, stderr := runCLIProcess(t, []string{env.name + "=" + env.value}, "demo", "--device", "sim:0")
		if code != exitFailure {
			t.Errorf("%s=%s: exit %d, want %d", env.name, env.value, code, exitFailure)
		}
		checkErrorLine(t, stderr, env.want)
	}
	code, stdout, stderr := runCLIProcess(t, []string{"VRAM_SIM_DEVICES=1x256MiB", "VRAM_SIM_SHAPE_ONLY=on"}, "demo", "--device", "sim:0", "--steps", "1")
	if code != 0 || !strings.Contains(stdout, "sim:0 is shape-only") {
		t.Errorf("VRAM_SIM_SHAPE_ONLY=on: exit %d, stderr %q\n%s", code, stderr, stdout)
	}
}

// hostileFile copies a test file with strings replaced, JSON-escaped.
func hostileFile(t *testing.T, src string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i < len(replace); i += 2 {
		if !strings.Contains(s, replace[i]) {
			t.Fatalf("%s holds no %q", src, replace[i])
		}
		s = strings.ReplaceAll(s, replace[i], replace[i+1])
	}
	path := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkPrintable checks that out holds no control character but newlines
// and no bidirectional override, and that it shows the escapes.
func checkPrintable(t *testing.T, what, out string, escapes ...string) {
	t.Helper()
	for _, r := range out {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u202e' {
			t.Errorf("%s: output holds %U:\n%q", what, r, out)
			return
		}
	}
	for _, e := range escapes {
		if !strings.Contains(out, e) {
			t.Errorf("%s: output lacks %q:\n%s", what, e, out)
		}
	}
}

func TestHostileNamesAreEscaped(t *testing.T) {
	readings := hostileFile(t, readingsFile,
		`"NVIDIA H200"`, `"NVIDIA\u001b[2J\u001b[H H200\r"`,
		`"python3"`, `"py\u001b]0;pwned\u0007thon\u202e3\n"`)
	for _, args := range [][]string{
		{"smi", "--source", readings},
		{"smi", "-L", "--source", readings},
		{"watch", "--source", readings, "--count", "5", "--interval", "10ms"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
		want := []string{`NVIDIA\x1b[2J\x1b[H H200\r`}
		if args[0] == "watch" { // the first reading, which smi shows, has no process
			want = append(want, `py\x1b]0;pwn`)
		}
		checkPrintable(t, strings.Join(args[:2], " "), stdout, want...)
	}

	snapshot := hostileFile(t, snapshotFile,
		`"region": "weights"`, `"region": "w\u001b[31m\u202e"`,
		`analyze.simRun.loadWeights"`, `analyze.simRun.loadWeights\u001b[2J\r"`)
	code, stdout, stderr := runCLI(t, "analyze", "--top", "50", snapshot)
	if code != 0 || stderr != "" {
		t.Fatalf("analyze: exit %d, stderr %q", code, stderr)
	}
	checkPrintable(t, "analyze", stdout, `w\x1b[31m\u202e`, `loadWeights\x1b[2J\r`)

	// A file name is printed in the error escaped too.
	evil := filepath.Join(t.TempDir(), "x\x1b]0;pwned\x07.json")
	code, _, stderr = runCLI(t, "analyze", evil)
	if code != exitFailure {
		t.Errorf("analyze of a missing file: exit %d", code)
	}
	checkPrintable(t, "analyze error", stderr, `x\x1b]0;pwned\x07.json`)
}

// TestSmiAndWatchAgreeOnUsed reads the same recording with both: each
// GPU's memory in use must read the same.
func TestSmiAndWatchAgreeOnUsed(t *testing.T) {
	_, smi, _ := runCLI(t, "smi", "--source", readingsFile)
	_, watch, _ := runCLI(t, "watch", "--source", readingsFile, "--count", "1", "--interval", "10ms")
	smiUsed := regexp.MustCompile(`(?m)^(\d+)\s+NVIDIA H200\s+(\S+ MiB / \S+ MiB) \((\d+)%\)`).FindAllStringSubmatch(smi, -1)
	watchUsed := regexp.MustCompile(`(?m)^GPU (\d+)  NVIDIA H200  (\S+ MiB / \S+ MiB)  `).FindAllStringSubmatch(watch, -1)
	watchPct := regexp.MustCompile(`(?m)^   memory .* +(\d+)%$`).FindAllStringSubmatch(watch, -1)
	if len(smiUsed) != 2 || len(watchUsed) != 2 || len(watchPct) != 2 {
		t.Fatalf("smi %q, watch %q %q:\n%s\n%s", smiUsed, watchUsed, watchPct, smi, watch)
	}
	for i := range smiUsed {
		if smiUsed[i][1] != watchUsed[i][1] || smiUsed[i][2] != watchUsed[i][2] || smiUsed[i][3] != watchPct[i][1] {
			t.Errorf("GPU %s: smi %s (%s%%), watch %s (%s%%)", smiUsed[i][1], smiUsed[i][2], smiUsed[i][3], watchUsed[i][2], watchPct[i][1])
		}
	}
}

// TestReadErrorsNameFileOnce checks that an input that fails while it is
// read (a text trace is read as it is replayed or analyzed) names the file
// once, whatever the command.
func TestReadErrorsNameFileOnce(t *testing.T) {
	whole, err := os.ReadFile(resnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	truncated := filepath.Join(dir, "cut.trace.gz")
	if err := os.WriteFile(truncated, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.trace")
	if err := os.WriteFile(bad, []byte("alloc 4096 512 0\nalloc x 1 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		path string
		want string
	}{
		{[]string{"analyze", truncated}, truncated, "truncated gzip stream"},
		{[]string{"replay", truncated}, truncated, "truncated gzip stream"},
		{[]string{"replay", "--compare", truncated}, truncated, "truncated gzip stream"},
		{[]string{"replay", "--fit", truncated}, truncated, "truncated gzip stream"},
		{[]string{"analyze", bad}, bad, "line 2"},
		{[]string{"replay", bad}, bad, "line 2"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code == 0 {
				t.Fatal("exit 0")
			}
			if n := strings.Count(stderr, tc.path); n != 1 && !(tc.args[0] == "replay" && n == 2 && strings.Contains(stderr, "could not be replayed: "+tc.path)) {
				t.Errorf("stderr names %s %d times:\n%s", tc.path, n, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", stderr, tc.want)
			}
		})
	}
}

// TestFileNamesPrintable runs the commands on a file whose name holds a
// newline, an escape sequence and a bidirectional override: every line they
// print shows the name with those characters escaped, never raw.
func TestFileNamesPrintable(t *testing.T) {
	dir := t.TempDir()
	const odd = "we\nird\x1b[31m\u202e"
	good := filepath.Join(dir, odd+".trace")
	if err := os.WriteFile(good, []byte("alloc 4096 100 0\nfree_completed 4096 100 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, odd+"bad.trace")
	if err := os.WriteFile(bad, []byte("alloc 4096 100 0\nalloc x 1 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := [][]string{
		{"replay", good},
		{"replay", "--compare", good},
		{"replay", "--fit", good},
		{"replay", bad},
		{"replay", "--json", bad},
		{"analyze", good},
		{"analyze", bad},
		{"analyze", "--html", filepath.Join(dir, odd+".html"), good},
	}
	for _, args := range tests {
		t.Run(strings.Join(args[:len(args)-1], " "), func(t *testing.T) {
			_, stdout, stderr := runCLI(t, args...)
			for _, out := range []string{stdout, stderr} {
				if strings.ContainsAny(out, "\x1b\u202e") || strings.Contains(out, "we\nird") {
					t.Errorf("output holds the raw name:\n%q", out)
				}
			}
			if !strings.Contains(stdout+stderr, `ird\x1b[31m`) {
				t.Errorf("output does not show the name escaped:\n%q\n%q", stdout, stderr)
			}
		})
	}
}

// TestProcessSettingWarns sets VRAM_DEBUG_LEAKS, which configures no
// device: an invalid value is one warning line on stderr, and the command
// runs; a valid one says nothing.
func TestProcessSettingWarns(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"perhaps", `vram: warning: VRAM_DEBUG_LEAKS="perhaps": not a boolean (want 1, true, yes or on`},
		{"2", `vram: warning: VRAM_DEBUG_LEAKS="2": not a boolean`},
		{"1", ""},
		{"off", ""},
		{"", ""},
	} {
		t.Run(tc.value, func(t *testing.T) {
			useEnv(t, map[string]string{"VRAM_DEBUG_LEAKS": tc.value})
			code, stdout, stderr := runCLI(t, "version")
			if code != 0 || !strings.HasPrefix(stdout, "vram ") {
				t.Errorf("exit %d, stdout %q; want 0 and the version", code, stdout)
			}
			switch {
			case tc.want == "" && stderr != "":
				t.Errorf("stderr %q, want nothing", stderr)
			case tc.want != "" && (!strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "the setting stays at its default\n")):
				t.Errorf("stderr %q, want one line starting %q and ending with the default", stderr, tc.want)
			}
		})
	}
}

// TestReportOutputErrors runs every command that reports on a failing
// standard output: each must exit 1 and say so, never 0 with its report
// lost.
func TestReportOutputErrors(t *testing.T) {
	noDriver(t)
	for _, args := range [][]string{
		{"version"}, {"version", "--json"},
		{"analyze", snapshotFile}, {"analyze", "--json", snapshotFile},
		{"replay", resnetTrace}, {"replay", "--json", resnetTrace},
		{"replay", "--compare", resnetTrace}, {"replay", "--fit", resnetTrace},
		{"replay", "--fit=24GB", resnetTrace}, {"replay", snapshotFile, resnetTrace},
		{"demo", "--device", "cpu", "--steps", "1"}, {"demo", "--device", "cpu", "--steps", "1", "--json"},
		// Help is output too.
		{}, {"--help"}, {"-h"}, {"help"}, {"help", "demo"}, {"demo", "--help"}, {"replay", "-h"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var errOut bytes.Buffer
			code := run(context.Background(), args, nil, failingWriter{}, &errOut)
			var want string
			switch {
			case len(args) == 0 || strings.HasPrefix(args[0], "-") || args[0] == "help":
				want = "vram: help: " + errDiskFull.Error() + "\n"
			case slices.Contains(args, "--help") || slices.Contains(args, "-h"):
				want = "vram: " + args[0] + ": help: " + errDiskFull.Error() + "\n"
			default:
				want = "vram: " + args[0] + ": " + errDiskFull.Error() + "\n"
			}
			if code != exitFailure || errOut.String() != want {
				t.Errorf("exit %d, stderr %q; want exit %d, %q", code, errOut.String(), exitFailure, want)
			}
		})
	}
}
