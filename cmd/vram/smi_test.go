package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rivo/uniseg"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/monitor"
	"github.com/vramgo/vram/native/load"
)

const readingsFile = "testdata/readings_h200x2.json"

// withMonitor replaces the NVML opener for one test.
func withMonitor(t *testing.T, fn func() (monitor.Source, error)) {
	t.Helper()
	old := openMonitor
	openMonitor = fn
	t.Cleanup(func() { openMonitor = old })
}

// noNVML is what OpenNVML returns on a machine without a driver.
func noNVML() (monitor.Source, error) {
	return nil, &monitor.NoDriverError{Err: &load.NotFoundError{Name: "libnvidia-ml", Sonames: []string{"libnvidia-ml.so.1"},
		Tried: []load.Attempt{{Where: "loader", Path: "libnvidia-ml.so.1", Err: "libnvidia-ml.so.1: cannot open shared object file: No such file or directory"}}}}
}

// TestMonitorCommandsWithoutDriver runs the commands that read the GPUs on
// a machine without a driver: one line that says so, why, and what to do
// (vram doctor says what is missing; --source plays recorded readings).
func TestMonitorCommandsWithoutDriver(t *testing.T) {
	withMonitor(t, noNVML)
	for _, args := range [][]string{{"smi"}, {"smi", "--json"}, {"smi", "-L"}, {"watch", "--count", "1"}, {"exporter", "--listen", "127.0.0.1:0"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			want := "vram: " + args[0] + ": no NVIDIA driver found (libnvidia-ml.so.1 not loadable): libnvidia-ml.so.1: cannot open shared object file: No such file or directory" +
				"; vram doctor says what is missing, and --source FILE shows readings recorded elsewhere\n"
			if code != exitFailure || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, want)
			}
		})
	}
}

func TestSmi(t *testing.T) {
	withMonitor(t, func() (monitor.Source, error) { return monitor.OpenRecorded(readingsFile) })
	code, stdout, stderr := runCLI(t, "smi")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"driver 580.95.05", "CUDA 13.0",
		"GPU  NAME         MEMORY USED / TOTAL", "0    NVIDIA H200  0 MiB / 143771 MiB (0%)", "571 MiB",
		"1    NVIDIA H200  18000 MiB / 143771 MiB (13%)", "45%", "51°C", "390 / 700 W", "1980 / 1980 MHz",
		"PROCESSES", "GPU 0: no process is using it", "GPU 1: processes not visible: NVML lists no process, yet 17.6 GiB",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing blanks: %q", line)
		}
	}
}

func TestSmiJSONAndList(t *testing.T) {
	code, stdout, stderr := runCLI(t, "smi", "--json", "--source", readingsFile)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var r monitor.Reading
	decodeOne(t, stdout, &r)
	if len(r.GPUs) != 2 || r.GPUs[1].ProcessesVisible || r.GPUs[0].Memory.TotalBytes != 150754820096 || r.GPUs[0].Processes == nil {
		t.Errorf("reading %+v", r)
	}
	code, stdout, _ = runCLI(t, "smi", "-L", "--source", readingsFile)
	want := "GPU 0: NVIDIA H200 (UUID: GPU-6f3c9a52-1d2e-4b7a-9c01-5e8f2a3b4c5d)\nGPU 1: NVIDIA H200 (UUID: GPU-a1b2c3d4-e5f6-4789-8abc-def012345678)\n"
	if code != 0 || stdout != want {
		t.Errorf("smi -L: exit %d\n%s", code, stdout)
	}
	code, _, stderr = runCLI(t, "smi", "--source", "testdata/missing.json")
	if code != exitFailure || !strings.Contains(stderr, "testdata/missing.json") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("missing source: exit %d, %q", code, stderr)
	}
}

func TestWatchFrames(t *testing.T) {
	code, stdout, stderr := runCLI(t, "watch", "--source", readingsFile, "--count", "5", "--interval", "10ms")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(stdout, "\x1b") {
		t.Error("control sequences in output that is not a terminal")
	}
	frames := strings.Split(strings.TrimSpace(stdout), "\n\nvram watch")
	if len(frames) != 5 {
		t.Fatalf("%d frames, want 5:\n%s", len(frames), stdout)
	}
	last := frames[4]
	for _, want := range []string{"GPU 0  NVIDIA H200  61000 MiB / 143771 MiB  kernels ran 99%", "   memory  ", "   kernels ", "▁", "█",
		"GPU 0  41234    python3", "GPU 1  processes not visible"} {
		if !strings.Contains(last, want) {
			t.Errorf("last frame lacks %q:\n%s", want, last)
		}
	}
	for _, line := range strings.Split(stdout, "\n") {
		if n := len([]rune(line)); n > watchDefaultWidth {
			t.Errorf("line of %d columns, wider than %d: %q", n, watchDefaultWidth, line)
		}
	}
	// q is read only from a terminal: output that is not one says so.
	if !strings.Contains(frames[0], "every 10ms  Ctrl-C quits") || strings.Contains(stdout, "q quits") {
		t.Errorf("the header does not say that Ctrl-C quits:\n%s", frames[0])
	}
	if code, _, _ := runCLI(t, "watch", "--interval", "1ms", "--source", readingsFile); code != exitUsage {
		t.Errorf("--interval 1ms: exit %d, want %d", code, exitUsage)
	}
}

func TestSparkline(t *testing.T) {
	tests := []struct {
		in    []float64
		width int
		want  string
	}{
		{[]float64{0, 0.5, 1}, 5, "  ▁▅█"},
		{[]float64{-1, 1}, 2, "·█"},
		{[]float64{0, 0.25, 0.5, 0.75, 1}, 3, "▅▆█"},
		{nil, 3, "   "},
	}
	for _, tc := range tests {
		if got := sparkline(tc.in, tc.width); got != tc.want {
			t.Errorf("sparkline(%v, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
	}
	if got := clip("abcdef", 4); got != "abc…" {
		t.Errorf("clip: %q", got)
	}
}

// writeReadings writes readings as a recording in a temporary file and
// returns its path.
func writeReadings(t *testing.T, rs ...monitor.Reading) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "readings.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := monitor.WriteRecording(f, rs); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUnknownProcessName checks that smi and watch name a process whose
// name the driver cannot read the same way the exporter's process label
// does.
func TestUnknownProcessName(t *testing.T) {
	g := monitor.GPU{Index: 0, Name: "NVIDIA H200", UUID: "GPU-0", ProcessesVisible: true,
		Memory:    monitor.Memory{TotalBytes: 8 << 30, UsedBytes: 3 << 30, FreeBytes: 5 << 30, ReservedBytes: monitor.Unknown},
		Processes: []memory.ProcessMemory{{PID: 4242, Bytes: 2 << 30}, {PID: 77, Name: "python3", Bytes: 1 << 30}}}
	src := writeReadings(t, monitor.Reading{GPUs: []monitor.GPU{g}})
	tests := []struct {
		args []string
		want *regexp.Regexp
	}{
		{[]string{"smi"}, regexp.MustCompile(`(?m)^0\s+4242\s+unknown\s`)},
		{[]string{"watch", "--count", "1"}, regexp.MustCompile(`(?m)^\s+GPU 0\s+4242\s+unknown\s`)},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(tc.args, "--source", src)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !tc.want.MatchString(stdout) {
				t.Errorf("output does not match %s:\n%s", tc.want, stdout)
			}
		})
	}
}

// TestMemoryInMiB checks that smi and watch show every amount of device
// memory in whole MiB, as nvidia-smi does, whatever its size: used and
// total, the driver's reserve and each process's memory, and that --json
// keeps exact bytes.
func TestMemoryInMiB(t *testing.T) {
	const mb = 1 << 20
	g := monitor.GPU{Index: 0, Name: "NVIDIA H200", UUID: "GPU-0", ProcessesVisible: true,
		Memory: monitor.Memory{TotalBytes: 150754820096, UsedBytes: 2*mb*1024 + 512*mb + 123, FreeBytes: 150754820096 - (2*mb*1024 + 512*mb + 123), ReservedBytes: 598736896},
		Processes: []memory.ProcessMemory{
			{PID: 1, Name: "big", Bytes: 2*mb*1024 + 3*mb + 5},
			{PID: 2, Name: "small", Bytes: 300 * mb},
			{PID: 3, Name: "tiny", Bytes: 1000},
			{PID: 4, Name: "unaccounted", Bytes: monitor.Unknown},
		}}
	src := writeReadings(t, monitor.Reading{GPUs: []monitor.GPU{g}})
	tests := []struct {
		args []string
		want []*regexp.Regexp
	}{
		{[]string{"smi"}, []*regexp.Regexp{
			regexp.MustCompile(`2560 MiB / 143771 MiB \(2%\)\s+571 MiB\s`),
			regexp.MustCompile(`(?m)^0\s+1\s+big\s+2051 MiB$`),
			regexp.MustCompile(`(?m)^0\s+2\s+small\s+300 MiB$`),
			regexp.MustCompile(`(?m)^0\s+3\s+tiny\s+0 MiB$`),
			regexp.MustCompile(`(?m)^0\s+4\s+unaccounted\s+\?$`),
		}},
		{[]string{"watch", "--count", "1"}, []*regexp.Regexp{
			regexp.MustCompile(`GPU 0  NVIDIA H200  2560 MiB / 143771 MiB  `),
			regexp.MustCompile(`(?m)^\s+GPU 0\s+1\s+big\s+2051 MiB\s`),
			regexp.MustCompile(`(?m)^\s+GPU 0\s+2\s+small\s+300 MiB\s`),
		}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(tc.args, "--source", src)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, re := range tc.want {
				if !re.MatchString(stdout) {
					t.Errorf("output does not match %s:\n%s", re, stdout)
				}
			}
			if strings.Contains(stdout, "GiB") {
				t.Errorf("GiB in the output:\n%s", stdout)
			}
		})
	}
	code, stdout, _ := runCLI(t, "smi", "--json", "--source", src)
	var r monitor.Reading
	decodeOne(t, stdout, &r)
	if code != 0 || r.GPUs[0].Memory.UsedBytes != g.Memory.UsedBytes || r.GPUs[0].Processes[0].Bytes != g.Processes[0].Bytes {
		t.Errorf("--json: exit %d, %+v", code, r.GPUs[0])
	}
}

// failingWriter fails every write, as a full disk does.
type failingWriter struct{}

var errDiskFull = errors.New("no space left on device")

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// TestMonitorOutputErrors checks that smi and watch report output they
// could not write instead of exiting 0 (smi) or drawing frames into the
// void for ever (watch without --count).
func TestMonitorOutputErrors(t *testing.T) {
	for _, args := range [][]string{
		{"smi"}, {"smi", "-L"}, {"smi", "--json"},
		{"watch", "--count", "3", "--interval", "10ms"},
		{"watch", "--interval", "10ms"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var errOut bytes.Buffer
			code := run(ctx, append(args, "--source", readingsFile), nil, failingWriter{}, &errOut)
			if ctx.Err() != nil {
				t.Fatal("still running 5 s after its first write failed")
			}
			want := "vram: " + args[0] + ": " + errDiskFull.Error() + "\n"
			if code != exitFailure || errOut.String() != want {
				t.Errorf("exit %d, stderr %q; want exit %d, %q", code, errOut.String(), exitFailure, want)
			}
		})
	}
}

// TestWatchWideCharacters renders frames whose GPU and process names hold
// characters a terminal draws two columns wide (CJK, emoji): every line
// must still fit the width in columns, not in characters, or the terminal
// wraps it and the frame scrolls; the memory column stays aligned.
func TestWatchWideCharacters(t *testing.T) {
	g := monitor.GPU{Index: 0, Name: "显卡显卡显卡显卡显卡显卡显卡显卡显卡显卡显卡显卡", UUID: "GPU-0", ProcessesVisible: true,
		Memory: monitor.Memory{TotalBytes: 8 << 30, UsedBytes: 3 << 30, FreeBytes: 5 << 30, ReservedBytes: monitor.Unknown},
		Processes: []memory.ProcessMemory{
			{PID: 10, Name: "训练脚本训练脚本训练脚本训练脚本", Bytes: 1 << 30},
			{PID: 11, Name: "🔥🔥🔥🔥🔥🔥🔥🔥🔥🔥🔥🔥", Bytes: 1 << 30},
			{PID: 12, Name: "python3", Bytes: 1 << 30},
		}}
	r := monitor.Reading{GPUs: []monitor.GPU{g}}
	for _, width := range []int{40, 60, 100} {
		t.Run(strconv.Itoa(width), func(t *testing.T) {
			h := newWatchHistory(10)
			h.add(r)
			var memCols []int
			for _, l := range h.render(r, width, time.Second, "q quits") {
				if w := uniseg.StringWidth(l); w > width {
					t.Errorf("a line %d columns wide on %d: %q", w, width, l)
				}
				if i := strings.Index(l, "1024 MiB"); i >= 0 {
					memCols = append(memCols, uniseg.StringWidth(l[:i]))
				}
			}
			if width >= 60 && (len(memCols) != 3 || memCols[0] != memCols[1] || memCols[1] != memCols[2]) {
				t.Errorf("process memory at columns %v, want three equal", memCols)
			}
		})
	}
}

// TestMonitorCommandsWithoutGPUs checks that a reading of no GPU says so
// rather than print empty tables: watch in its frame, which it goes on
// drawing, and smi, in each of its forms, as the one-line error with exit
// status 1 that it gives on a machine whose driver reports no GPU, where
// smi -L printed nothing and exited 0.
func TestMonitorCommandsWithoutGPUs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "none.json")
	if err := os.WriteFile(file, []byte(`{"time": "2026-11-30T17:00:00Z", "gpus": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("watch", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "watch", "--count", "2", "--interval", "10ms", "--source", file)
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		if !strings.Contains(stdout, "0 GPUs") || !strings.Contains(stdout, noGPUs) || strings.Contains(stdout, "PROCESSES") {
			t.Errorf("frames do not say there is no GPU:\n%s", stdout)
		}
	})
	withMonitor(t, func() (monitor.Source, error) {
		return nil, fmt.Errorf("monitor: %w: the driver reports 0 devices", monitor.ErrNoGPU)
	})
	for _, form := range [][]string{{"smi"}, {"smi", "-L"}, {"smi", "--list"}, {"smi", "--json"}} {
		for _, src := range []struct {
			name string
			args []string
			want string
		}{
			{"recorded", []string{"--source", file}, "smi: " + noGPUs},
			{"driver", nil, "smi: no NVIDIA GPU found: the driver reports 0 devices; vram doctor says what is missing, and --source FILE shows readings recorded elsewhere"},
		} {
			args := append(slices.Clone(form), src.args...)
			t.Run(strings.Join(form, " ")+"/"+src.name, func(t *testing.T) {
				code, stdout, stderr := runCLI(t, args...)
				if code != exitFailure {
					t.Errorf("exit %d, want %d", code, exitFailure)
				}
				if stdout != "" {
					t.Errorf("stdout not empty:\n%s", stdout)
				}
				checkErrorLine(t, stderr, src.want)
			})
		}
	}
}

// TestSmiWideCharacters checks smi's tables with GPU and process names
// that a terminal draws wider or narrower than their characters (CJK and
// emoji two columns each, combining accents none) or that are escaped
// (a control character): every later column starts at the same terminal
// column on each row, as in TestWatchWideCharacters.
func TestSmiWideCharacters(t *testing.T) {
	names := []string{"显卡显卡", "NVIDIA H200", "e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301", "🔥🔥 GPU", "bad\x1bname"}
	var gpus []monitor.GPU
	for i, name := range names {
		gpus = append(gpus, monitor.GPU{Index: i, Name: name, UUID: "GPU-" + strconv.Itoa(i), ProcessesVisible: true,
			Memory:    monitor.Memory{TotalBytes: 8 << 30, UsedBytes: 3 << 30, FreeBytes: 5 << 30, ReservedBytes: monitor.Unknown},
			Processes: []memory.ProcessMemory{{PID: 10 + i, Name: name, Bytes: 1 << 30}}})
	}
	src := writeReadings(t, monitor.Reading{GPUs: gpus})
	code, stdout, stderr := runCLI(t, "smi", "--source", src)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The column where each marker starts, on every line holding it.
	for _, marker := range []string{"3072 MiB", "1024 MiB", "0%"} {
		cols := map[int]bool{}
		for _, l := range strings.Split(stdout, "\n") {
			if i := strings.Index(l, marker); i >= 0 {
				cols[uniseg.StringWidth(l[:i])] = true
			}
		}
		if len(cols) != 1 {
			t.Errorf("%q at columns %v, want one:\n%s", marker, cols, stdout)
		}
	}
	// Headers line up with their cells.
	lines := strings.Split(stdout, "\n")
	colOf := func(prefix, marker string) int {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				if i := strings.Index(l, marker); i >= 0 {
					return uniseg.StringWidth(l[:i])
				}
			}
		}
		return -1
	}
	if h, c := colOf("GPU  NAME", "MEMORY USED"), colOf("0 ", "3072 MiB"); h != c || h < 0 {
		t.Errorf("MEMORY USED at column %d, its cells at %d:\n%s", h, c, stdout)
	}
	if h, c := colOf("GPU  PID", "GPU MEMORY"), colOf("0    10", "1024 MiB"); h != c || h < 0 {
		t.Errorf("GPU MEMORY at column %d, its cells at %d:\n%s", h, c, stdout)
	}
}

// TestSmiNoTrailingBlanks checks that no line of smi ends in blanks, also
// for a reading without a driver version, CUDA version or time (one a
// program recorded, or a Source other than NVML's): its title line was
// "vram smi" and three blanks.
func TestSmiNoTrailingBlanks(t *testing.T) {
	g := monitor.GPU{Index: 0, Name: "NVIDIA H200", UUID: "GPU-0", ProcessesVisible: true,
		Memory: monitor.Memory{TotalBytes: 8 << 30, UsedBytes: 3 << 30, FreeBytes: 5 << 30, ReservedBytes: monitor.Unknown}}
	for _, tc := range []struct {
		name string
		r    monitor.Reading
	}{
		{"bare", monitor.Reading{GPUs: []monitor.GPU{g}}},
		{"driver only", monitor.Reading{DriverVersion: "580.95.05", GPUs: []monitor.GPU{g}}},
		{"time only", monitor.Reading{Time: time.Date(2026, 11, 30, 17, 0, 0, 0, time.UTC), GPUs: []monitor.GPU{g}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "smi", "--source", writeReadings(t, tc.r))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, line := range strings.Split(stdout, "\n") {
				if strings.HasSuffix(line, " ") {
					t.Errorf("trailing blanks: %q", line)
				}
			}
		})
	}
}

// TestWatchProcessColumnsManyGPUs checks that watch's process lines stay
// in columns on a machine of ten GPUs or more (a DGX-2 has sixteen): "GPU
// 10" is a column wider than "GPU 9", which shifted the PID, name and
// memory of every process on GPUs 10 and up.
func TestWatchProcessColumnsManyGPUs(t *testing.T) {
	var gpus []monitor.GPU
	for _, i := range []int{0, 9, 10, 15} {
		gpus = append(gpus, monitor.GPU{Index: i, Name: "NVIDIA H200", UUID: "GPU-" + strconv.Itoa(i), ProcessesVisible: true,
			Memory:    monitor.Memory{TotalBytes: 8 << 30, UsedBytes: 3 << 30, FreeBytes: 5 << 30, ReservedBytes: monitor.Unknown},
			Processes: []memory.ProcessMemory{{PID: 4242, Name: "python3", Bytes: 1 << 30}}})
	}
	r := monitor.Reading{GPUs: gpus}
	h := newWatchHistory(10)
	h.add(r)
	cols := map[string]map[int]bool{"4242": {}, "python3": {}, "1024 MiB": {}}
	for _, l := range h.render(r, 100, time.Second, "q quits") {
		if !strings.Contains(l, "4242") {
			continue
		}
		for marker := range cols {
			cols[marker][uniseg.StringWidth(l[:strings.Index(l, marker)])] = true
		}
	}
	for marker, at := range cols {
		if len(at) != 1 {
			t.Errorf("%q at columns %v, want one", marker, slices.Sorted(maps.Keys(at)))
		}
	}
}
