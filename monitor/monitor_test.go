package monitor

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rivo/uniseg"

	"github.com/vramgo/vram/memory"
)

// recorded opens a recording from testdata.
func recorded(t testing.TB, name string) *Recorded {
	t.Helper()
	src, err := OpenRecorded(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestRecordedPlayback(t *testing.T) {
	src := recorded(t, "h200x2.json")
	first, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(first.GPUs) != 2 || first.GPUs[0].Name != "NVIDIA H200" || first.DriverVersion != "580.95.05" {
		t.Fatalf("first reading %+v", first)
	}
	first.GPUs[0].Processes = append(first.GPUs[0].Processes, memory.ProcessMemory{PID: 1}) // must not leak into the source
	for i := 1; i < 10; i++ {
		r, err := src.Read()
		if err != nil || !r.Time.After(first.Time) {
			t.Fatalf("reading %d: %v at %v", i, err, r.Time)
		}
	}
	again, _ := src.Read() // wrapped around to the first
	if !again.Time.Equal(first.Time) || len(again.GPUs[0].Processes) != 0 {
		t.Errorf("after the last reading: %v, %d processes", again.Time, len(again.GPUs[0].Processes))
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Read(); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
	if _, err := NewRecorded(nil).Read(); !errors.Is(err, ErrNoGPU) {
		t.Errorf("empty recording: %v", err)
	}
}

func TestReadRecordingForms(t *testing.T) {
	src := recorded(t, "h200x2.json")
	r, _ := src.Read()
	var rec, single, list bytes.Buffer
	if err := WriteRecording(&rec, []Reading{r, r}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONForTest(&single, r); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONForTest(&list, []Reading{r}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
		n    int
		err  string
	}{
		{"recording", rec.String(), 2, ""},
		{"single reading (vram smi --json)", single.String(), 1, ""},
		{"array of readings", list.String(), 1, ""},
		{"empty", "  ", 0, "empty input"},
		{"other format", `{"format": "vram-memory-snapshot", "version": 1}`, 0, `format "vram-memory-snapshot"`},
		{"newer version", `{"format": "vram-monitor-recording", "version": 2, "readings": []}`, 0, "version 2"},
		{"not JSON", "GPU 0: NVIDIA H200", 0, "not JSON"},
		{"no gpus key", `{"time": "2026-11-30T17:00:00Z"}`, 0, "no \"format\" or \"gpus\" key"},
		{"trailing data", single.String() + "{}", 0, "after top-level value"},
		{"negative memory", `{"gpus": [{"memory": {"total_bytes": -5}}]}`, 0, "negative memory"},
		{"wrong type", `{"format": "vram-monitor-recording", "version": 1, "readings": [{"gpus": "x"}]}`, 0, "readings.gpus: a string, want a list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := ReadRecording(strings.NewReader(tc.in))
			if tc.err == "" && tc.n > 0 {
				if err != nil || len(rs) != tc.n {
					t.Fatalf("%d readings, %v", len(rs), err)
				}
				if !reflect.DeepEqual(rs[0], r) && rs[0].GPUs[0].UUID != r.GPUs[0].UUID {
					t.Errorf("round trip changed the reading")
				}
				return
			}
			if err == nil || tc.err != "" && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
			if !errors.Is(err, ErrInvalidRecording) || rs != nil {
				t.Errorf("error %v does not match ErrInvalidRecording, or readings %v returned with it", err, rs)
			}
		})
	}
}

// TestReadRecordingRejectsImpossibleValues checks that a recording holding
// values no device reports is refused with a clear error, rather than
// played back into tables with "-1 MiB", "-5%" or a Prometheus scrape
// that drops a GPU exported twice under one index.
func TestReadRecordingRejectsImpossibleValues(t *testing.T) {
	good := func() GPU {
		return GPU{Index: 0, Name: "NVIDIA H200", UUID: "GPU-0", ProcessesVisible: true,
			Memory:       Memory{TotalBytes: 8 << 30, UsedBytes: 2 << 30, FreeBytes: 6 << 30, ReservedBytes: Unknown},
			Utilization:  Utilization{ComputePercent: 100, MemoryBandwidthPercent: Unknown},
			TemperatureC: 40, Power: Power{DrawW: 70, LimitW: Unknown},
			Clocks:    Clocks{GraphicsMHz: Unknown, SMMHz: 1980, MemoryMHz: 0, MaxSMMHz: 1980},
			Processes: []memory.ProcessMemory{{PID: 1, Bytes: Unknown}, {PID: 2, Name: "python3", Bytes: 1 << 30}}}
	}
	second := func(g GPU) GPU { g.Index, g.UUID = 1, "GPU-1"; return g }
	tests := []struct {
		name   string
		change func(gs []GPU) []GPU
		err    string // "" when the reading is valid
	}{
		{"valid", func(gs []GPU) []GPU { return gs }, ""},
		{"valid, no UUIDs", func(gs []GPU) []GPU { gs[0].UUID, gs[1].UUID = "", ""; return gs }, ""},
		{"duplicate index", func(gs []GPU) []GPU { gs[1].Index = 0; return gs }, "two GPUs with index 0"},
		{"duplicate UUID", func(gs []GPU) []GPU { gs[1].UUID = "GPU-0"; return gs }, `two GPUs with UUID "GPU-0"`},
		{"negative index", func(gs []GPU) []GPU { gs[0].Index = -1; return gs }, "negative index"},
		{"reserve below unknown", func(gs []GPU) []GPU { gs[1].Memory.ReservedBytes = -7; return gs }, "GPU 1: negative memory"},
		{"used over total", func(gs []GPU) []GPU { gs[0].Memory.UsedBytes = 9 << 30; return gs }, "more memory used"},
		{"negative utilization", func(gs []GPU) []GPU { gs[0].Utilization.ComputePercent = -5; return gs }, "utilization -5%"},
		{"utilization over 100", func(gs []GPU) []GPU { gs[0].Utilization.MemoryBandwidthPercent = 900; return gs }, "900%"},
		{"temperature below unknown", func(gs []GPU) []GPU { gs[0].TemperatureC = -40; return gs }, "temperature -40"},
		{"negative power", func(gs []GPU) []GPU { gs[0].Power.DrawW = -3; return gs }, "negative power"},
		{"negative clock", func(gs []GPU) []GPU { gs[0].Clocks.SMMHz = -2; return gs }, "negative clock"},
		{"process id 0", func(gs []GPU) []GPU { gs[0].Processes[0].PID = 0; return gs }, "process id 0"},
		{"process memory below unknown", func(gs []GPU) []GPU { gs[0].Processes[1].Bytes = -9; return gs }, "negative memory -9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gs := tc.change([]GPU{good(), second(good())})
			var b bytes.Buffer
			if err := WriteRecording(&b, []Reading{{GPUs: gs}}); err != nil {
				t.Fatal(err)
			}
			rs, err := ReadRecording(&b)
			if tc.err == "" {
				if err != nil || len(rs) != 1 {
					t.Fatalf("valid reading refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRecording) || !strings.Contains(err.Error(), tc.err) || rs != nil {
				t.Errorf("got %d readings, error %v; want none and an ErrInvalidRecording containing %q", len(rs), err, tc.err)
			}
		})
	}
}

func TestOpenRecordedErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("not json"), 0o644)
	_, err := OpenRecorded(bad)
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("%v", err)
	}
	if _, err := OpenRecorded(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestJudgeProcesses(t *testing.T) {
	const gib = 1 << 30
	mem := func(used, reserved int64) Memory {
		return Memory{TotalBytes: 140 * gib, UsedBytes: used, FreeBytes: 140*gib - used, ReservedBytes: reserved}
	}
	tests := []struct {
		name    string
		m       Memory
		n       int
		unknown int
		listed  int64
		foreign int
		visible bool
		note    string
	}{
		{"idle card", mem(4<<20, 500<<20), 0, 0, 0, 0, true, ""},
		{"all listed", mem(20*gib, 500<<20), 2, 0, 20*gib - 1<<20, 0, true, ""},
		{"container hides everything", mem(20*gib, 500<<20), 0, 0, 0, 0, false, "NVML lists no process, yet 20.0 GiB"},
		{"some hidden", mem(30*gib, 500<<20), 1, 0, 10 * gib, 0, false, "20.0 GiB of device memory in use is held by processes NVML does not list"},
		{"foreign pids", mem(10*gib, 500<<20), 1, 0, 10 * gib, 1, true, "outside this PID namespace"},
		{"no v2: reserve inside used", mem(400<<20, Unknown), 0, 0, 0, 0, true, ""},
		{"no v2: container hides everything", mem(20*gib, Unknown), 0, 0, 0, 0, false, "NVML lists no process, yet 20.0 GiB"},
		{"no v2: some hidden", mem(30*gib, Unknown), 1, 0, 10 * gib, 0, false, "19.8 GiB of device memory in use is held by processes"},
		{"used unknown", Memory{UsedBytes: Unknown}, 0, 0, 0, 0, true, ""},
		{"memory of every process unknown", mem(20*gib, 500<<20), 2, 2, 0, 0, true, "does not report the memory of 2 of the 2 processes, which may hold the 20.0 GiB"},
		{"memory of one process unknown", mem(30*gib, 500<<20), 2, 1, 10 * gib, 0, true, "does not report the memory of 1 of the 2 processes, which may hold the 20.0 GiB"},
		{"one unknown, the rest accounted for", mem(10*gib, 500<<20), 2, 1, 10 * gib, 0, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vis, note := judgeProcesses(tc.m, tc.n, tc.unknown, tc.listed, tc.foreign)
			if vis != tc.visible || !strings.Contains(note, tc.note) || (tc.note == "") != (note == "") {
				t.Errorf("visible %v, note %q; want %v, %q", vis, note, tc.visible, tc.note)
			}
		})
	}
}

// fakeGPUs builds GPUs with (compute %, memory used fraction in %, free GiB).
func fakeGPUs(specs ...[3]int) []GPU {
	var gs []GPU
	for i, s := range specs {
		total := int64(100) << 30
		free := int64(s[2]) << 30
		gs = append(gs, GPU{Index: i, UUID: "GPU-" + string(rune('a'+i)),
			Utilization: Utilization{ComputePercent: s[0]},
			Memory:      Memory{TotalBytes: total, FreeBytes: free, UsedBytes: total - free}})
	}
	return gs
}

func TestAvailable(t *testing.T) {
	// (load %, -, free GiB of 100): memory used fraction = 1 - free/100.
	gpus := fakeGPUs([3]int{10, 0, 90}, [3]int{60, 0, 90}, [3]int{5, 0, 30}, [3]int{0, 0, 80}, [3]int{Unknown, 0, 95})
	tests := []struct {
		name string
		opts Options
		want []int
	}{
		{"defaults: first, limit 1", Options{}, []int{0}},
		{"no limit", Options{Limit: -1}, []int{0, 3}},
		{"last", Options{Order: OrderLast, Limit: -1}, []int{3, 0}},
		{"by load", Options{Order: OrderLoad, Limit: -1}, []int{3, 0}},
		{"by memory", Options{Order: OrderMemory, Limit: -1}, []int{0, 3}},
		{"include unknown load", Options{Limit: -1, IncludeUnknown: true, Order: OrderLoad}, []int{3, 0, 4}},
		{"max load 0.7", Options{Limit: -1, MaxLoad: 0.7}, []int{0, 1, 3}},
		{"max memory 0.8", Options{Limit: -1, MaxMemory: 0.8}, []int{0, 2, 3}},
		{"min free 85 GiB", Options{Limit: -1, MinFreeBytes: 85 << 30}, []int{0}},
		{"exclude id", Options{Limit: -1, ExcludeIDs: []int{0}}, []int{3}},
		{"exclude uuid", Options{Limit: -1, ExcludeUUIDs: []string{"GPU-d"}}, []int{0}},
		{"none", Options{MinFreeBytes: 99 << 30}, []int{}},
		// GPUtil's test is load < maxLoad: NaN admits no GPU, as a
		// negative limit does, rather than every GPU.
		{"max load NaN", Options{Limit: -1, MaxLoad: math.NaN()}, []int{}},
		{"max memory NaN", Options{Limit: -1, MaxMemory: math.NaN()}, []int{}},
		{"max load negative", Options{Limit: -1, MaxLoad: -1}, []int{}},
		{"max load +Inf", Options{Limit: -1, MaxLoad: math.Inf(1)}, []int{0, 1, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Available(gpus, tc.opts)
			if len(got) != len(tc.want) || len(got) > 0 && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
	got := Available(gpus, Options{Order: OrderRandom, Limit: -1})
	if len(got) != 2 || got[0]+got[1] != 3 {
		t.Errorf("random: %v", got)
	}

	// The memory in use is known from UsedBytes even where the driver
	// does not report the free memory: such a GPU is judged on it, not
	// taken for one whose memory is unknown.
	noFree := fakeGPUs([3]int{10, 0, 90}, [3]int{10, 0, 20})
	noFree[0].Memory.FreeBytes, noFree[1].Memory.FreeBytes = Unknown, Unknown
	for _, tc := range []struct {
		name string
		opts Options
		want []int
	}{
		{"first", Options{Limit: -1}, []int{0}},
		{"by memory", Options{Limit: -1, Order: OrderMemory, MaxMemory: 0.9}, []int{0, 1}},
	} {
		t.Run("free unknown/"+tc.name, func(t *testing.T) {
			if got := Available(noFree, tc.opts); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

// TestAvailableListsEachGPUOnce checks that a GPU a source lists twice
// (NewRecorded and a program's own Source do not refuse it) is returned
// once: with Limit 2, [0 0] would have a caller start two workers on one
// GPU, believing it had two.
func TestAvailableListsEachGPUOnce(t *testing.T) {
	gpus := fakeGPUs([3]int{10, 0, 90}, [3]int{20, 0, 90}, [3]int{30, 0, 90})
	dup := gpus[0]
	twice := []GPU{gpus[0], dup, gpus[1], gpus[2], gpus[1]}
	for _, tc := range []struct {
		name string
		opts Options
		want []int
	}{
		{"first", Options{Limit: 2}, []int{0, 1}},
		{"no limit", Options{Limit: -1}, []int{0, 1, 2}},
		{"last", Options{Order: OrderLast, Limit: -1}, []int{2, 1, 0}},
		{"by load", Options{Order: OrderLoad, Limit: 2}, []int{0, 1}},
		{"by memory", Options{Order: OrderMemory, Limit: -1}, []int{0, 1, 2}},
		{"random", Options{Order: OrderRandom, Limit: -1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Available(twice, tc.opts)
			if tc.want == nil {
				got = slices.Sorted(slices.Values(got))
				tc.want = []int{0, 1, 2}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

// TestAvailableMinFreeDerived checks MinFreeBytes on a GPU whose driver
// reports the memory in use but not the free memory: the free memory is
// the rest of the total, as Memory.Used derives the use the other way,
// and the GPU is judged on it rather than refused (or, with
// IncludeUnknown, refused though IncludeUnknown admits GPUs whose memory
// is not known). Where neither is known IncludeUnknown decides.
func TestAvailableMinFreeDerived(t *testing.T) {
	gpus := fakeGPUs([3]int{10, 0, 90}, [3]int{10, 0, 40}, [3]int{10, 0, 90})
	for i := range gpus {
		gpus[i].Memory.FreeBytes = Unknown
	}
	gpus[0].Memory.ReservedBytes = Unknown
	gpus[1].Memory.ReservedBytes = Unknown
	gpus[2].Memory.ReservedBytes = 50 << 30
	unknown := GPU{Index: 3, UUID: "GPU-d", Memory: Memory{TotalBytes: Unknown, UsedBytes: Unknown, FreeBytes: Unknown, ReservedBytes: Unknown}}
	all := append(gpus, unknown)
	for _, tc := range []struct {
		name string
		opts Options
		want []int
	}{
		{"min free 85 GiB", Options{Limit: -1, MinFreeBytes: 85 << 30, MaxMemory: 0.9}, []int{0}},
		{"min free 30 GiB", Options{Limit: -1, MinFreeBytes: 30 << 30, MaxMemory: 0.9}, []int{0, 1, 2}},
		{"min free 85 GiB, unknown included", Options{Limit: -1, MinFreeBytes: 85 << 30, MaxMemory: 0.9, IncludeUnknown: true}, []int{0, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Available(all, tc.opts); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

func TestWriteUtilization(t *testing.T) {
	r, _ := recorded(t, "h200x2.json").Read()
	var b bytes.Buffer
	if err := WriteUtilization(&b, r.GPUs, false); err != nil {
		t.Fatal(err)
	}
	want := "| ID | GPU | MEM |\n" +
		"------------------\n" +
		"|  0 |  0% |  0% |\n" +
		"|  1 | 45% | 13% |\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	mig, _ := recorded(t, "mig_unknown.json").Read()
	if err := WriteUtilization(&b, append(r.GPUs, mig.GPUs...), true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "| ID | Name") || !strings.Contains(lines[4], "|         ? |") {
		t.Errorf("long form:\n%s", b.String())
	}
	for _, l := range lines {
		if len(l) != len(lines[0]) {
			t.Errorf("ragged table:\n%s", b.String())
			break
		}
	}
}

// TestConcurrentReads runs under -race in CI.
func TestConcurrentReads(t *testing.T) {
	src := recorded(t, "h200x2.json")
	c := NewCollector(src)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				r, err := src.Read()
				if err != nil {
					t.Error(err)
					return
				}
				r.GPUs[0].Processes = nil // readers own their copy
				gatherFrom(t, c)
			}
		}()
	}
	wg.Wait()
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{-1: "?", 0: "0 B", 1023: "1023 B", 1536: "1.50 KiB", 150754820096: "140 GiB", 20 << 30: "20.0 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestRealReading reads what "vram smi --json" printed on an H200 (driver
// 580, 2026-11-30) and checks the numbers NVML gave hang together.
func TestRealReading(t *testing.T) {
	r, err := recorded(t, "h200_driver580.json").Read()
	if err != nil {
		t.Fatal(err)
	}
	g := r.GPUs[0]
	m := g.Memory
	if g.Name != "NVIDIA H200" || m.UsedBytes+m.FreeBytes+m.ReservedBytes != m.TotalBytes || !g.ProcessesVisible || g.Processes == nil {
		t.Errorf("%+v", g)
	}
	var b bytes.Buffer
	WriteUtilization(&b, r.GPUs, false)
	if b.String() != "| ID | GPU | MEM |\n------------------\n|  0 |  0% |  0% |\n" {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestMemoryUsed(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name string
		m    Memory
		want int64
		frac float64
	}{
		{"reported", Memory{TotalBytes: 100 * gib, UsedBytes: 20 * gib, FreeBytes: 79 * gib, ReservedBytes: gib}, 20 * gib, 0.2},
		{"reserve not apart", Memory{TotalBytes: 100 * gib, UsedBytes: 21 * gib, FreeBytes: 79 * gib, ReservedBytes: Unknown}, 21 * gib, 0.21},
		{"derived", Memory{TotalBytes: 100 * gib, UsedBytes: Unknown, FreeBytes: 79 * gib, ReservedBytes: gib}, 20 * gib, 0.2},
		{"derived without reserve", Memory{TotalBytes: 100 * gib, UsedBytes: Unknown, FreeBytes: 75 * gib, ReservedBytes: Unknown}, 25 * gib, 0.25},
		{"unknown", Memory{TotalBytes: 100 * gib, UsedBytes: Unknown, FreeBytes: Unknown, ReservedBytes: Unknown}, Unknown, 0},
		{"no total", Memory{TotalBytes: Unknown, UsedBytes: 5, FreeBytes: Unknown, ReservedBytes: Unknown}, Unknown, 0},
	}
	for _, tc := range tests {
		if got, frac := tc.m.Used(), tc.m.UsedFraction(); got != tc.want || frac != tc.frac {
			t.Errorf("%s: Used %d, UsedFraction %v; want %d, %v", tc.name, got, frac, tc.want, tc.frac)
		}
	}
}

// endless is an endless input of one byte, as /dev/zero is; it counts the
// bytes read.
type endless struct {
	b byte
	n int64
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.b
	}
	e.n += int64(len(p))
	return len(p), nil
}

// TestReadRecordingBoundsItsInput checks that input that is not JSON is
// refused at once, and input that does not end is refused at the size
// limit: reading everything first made "vram smi --source /dev/zero" eat
// memory until the machine ran out.
func TestReadRecordingBoundsItsInput(t *testing.T) {
	old := maxRecordingBytes
	maxRecordingBytes = 1 << 20
	t.Cleanup(func() { maxRecordingBytes = old })
	tests := []struct {
		name     string
		in       io.Reader
		err      string
		maxBytes int64 // the most it may read
	}{
		{"zeros", &endless{b: 0}, `starts with '\x00'`, 64 << 10},
		{"binary", strings.NewReader("\x7fELF\x02\x01"), `starts with '\x7f'`, 64 << 10},
		// A byte above ASCII is no character: %q would print 0xbf as '¿'.
		{"high byte", strings.NewReader("\xbf\x00\xff"), `starts with '\xbf'`, 64 << 10},
		{"endless list", io.MultiReader(strings.NewReader("["), &endless{b: ' '}), "larger than 1048576 bytes", 2 << 20},
		{"endless blanks", &endless{b: '\n'}, "larger than 1048576 bytes", 2 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := ReadRecording(tc.in)
			if !errors.Is(err, ErrInvalidRecording) || !strings.Contains(err.Error(), tc.err) || rs != nil {
				t.Errorf("got %d readings, error %v; want an ErrInvalidRecording containing %q", len(rs), err, tc.err)
			}
			var n int64
			switch in := tc.in.(type) {
			case *endless:
				n = in.n
			}
			if n > tc.maxBytes {
				t.Errorf("read %d bytes, want at most %d", n, tc.maxBytes)
			}
		})
	}
}

// TestWriteUtilizationCells checks the cells of GPUtil's table for values
// that are partly unknown and names that are not plain ASCII.
func TestWriteUtilizationCells(t *testing.T) {
	mem := func(used, free int64) Memory {
		return Memory{TotalBytes: 100 << 30, UsedBytes: used, FreeBytes: free, ReservedBytes: Unknown}
	}
	tests := []struct {
		name string
		gpu  GPU
		all  bool
		want []string // substrings of the GPU's row
		not  []string
	}{
		{"free unknown, used known", GPU{Memory: mem(10<<30, Unknown), Utilization: Utilization{ComputePercent: 5}}, false,
			[]string{"|  5% | 10% |"}, []string{"?"}},
		{"used unknown, free known", GPU{Memory: mem(Unknown, 75<<30), Utilization: Utilization{ComputePercent: 5}}, false,
			[]string{"| 25% |"}, nil},
		{"both unknown", GPU{Memory: mem(Unknown, Unknown), Utilization: Utilization{ComputePercent: Unknown}}, false,
			[]string{"|   ? |   ? |"}, nil},
		{"escape in name", GPU{Name: "GPU\x1b[2J", UUID: "GPU-\r1", Memory: mem(0, 100<<30)}, true,
			[]string{`GPU\x1b[2J`, `GPU-\r1`}, []string{"\x1b", "\r"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteUtilization(&b, []GPU{tc.gpu}, tc.all); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			row := lines[len(lines)-1]
			for _, w := range tc.want {
				if !strings.Contains(row, w) {
					t.Errorf("row %q lacks %q", row, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("table holds %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// TestWriteUtilizationAlignsWideNames checks that the long table's columns
// line up as a terminal draws them, with names of letters that take more
// than one byte, or two columns.
func TestWriteUtilizationAlignsWideNames(t *testing.T) {
	gpus := []GPU{
		{Index: 0, Name: "Ünïcødé", UUID: "GPU-a", Memory: Memory{TotalBytes: 1 << 30, UsedBytes: 0, FreeBytes: 1 << 30}},
		{Index: 1, Name: "显卡", UUID: "GPU-b", Memory: Memory{TotalBytes: 1 << 30, UsedBytes: 0, FreeBytes: 1 << 30}},
		{Index: 2, Name: "plain", UUID: "GPU-c", Memory: Memory{TotalBytes: 1 << 30, UsedBytes: 0, FreeBytes: 1 << 30}},
	}
	var b bytes.Buffer
	if err := WriteUtilization(&b, gpus, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for _, l := range lines {
		if uniseg.StringWidth(l) != uniseg.StringWidth(lines[0]) {
			t.Fatalf("ragged table:\n%s", b.String())
		}
	}
	// The second column ends at the same place on every row.
	col := func(l string) int { return uniseg.StringWidth(l[:strings.Index(l[2:], "|")+2]) }
	for _, l := range lines[2:] {
		if col(l) != col(lines[0]) {
			t.Errorf("name column of %q ends at %d, header's at %d", l, col(l), col(lines[0]))
		}
	}
}

// TestReadRecordingKeys checks that a value a recording leaves out is
// read as Unknown, not as a made-up 0, and that a key no reading has (a
// misspelt one) is refused rather than dropped.
func TestReadRecordingKeys(t *testing.T) {
	unknownMem := Memory{TotalBytes: Unknown, UsedBytes: Unknown, FreeBytes: Unknown, ReservedBytes: Unknown}
	tests := []struct {
		name  string
		in    string
		check func(g GPU) bool
		err   string
	}{
		{"no numbers", `{"gpus": [{"index": 0, "name": "X"}]}`, func(g GPU) bool {
			return g.Memory == unknownMem && g.Utilization == Utilization{Unknown, Unknown} && g.TemperatureC == Unknown &&
				g.Power == Power{Unknown, Unknown} && g.Clocks == Clocks{Unknown, Unknown, Unknown, Unknown}
		}, ""},
		{"part of memory", `{"gpus": [{"memory": {"total_bytes": 100, "used_bytes": 10}}]}`, func(g GPU) bool {
			return g.Memory == Memory{TotalBytes: 100, UsedBytes: 10, FreeBytes: Unknown, ReservedBytes: Unknown}
		}, ""},
		{"zeros kept", `{"gpus": [{"temperature_c": 0, "utilization": {"compute_percent": 0}}]}`, func(g GPU) bool {
			return g.TemperatureC == 0 && g.Utilization == Utilization{0, Unknown}
		}, ""},
		{"process memory left out", `{"gpus": [{"processes": [{"pid": 7, "name": "a"}, {"pid": 8, "used_bytes": 0}]}]}`, func(g GPU) bool {
			return len(g.Processes) == 2 && g.Processes[0] == memory.ProcessMemory{PID: 7, Name: "a", Bytes: Unknown} && g.Processes[1].Bytes == 0
		}, ""},
		{"misspelt process key", `{"gpus": [{"processes": [{"pid": 7, "bytes": 5}]}]}`, nil, `unknown field "bytes"`},
		{"misspelt GPU key", `{"gpus": [{"temperature": 50}]}`, nil, `unknown field "temperature"`},
		{"misspelt memory key", `{"gpus": [{"memory": {"total": 5}}]}`, nil, `unknown field "total"`},
		{"misspelt reading key", `{"gpus": [], "driver": "580"}`, nil, `unknown field "driver"`},
		{"misspelt key in a recording", `{"format": "vram-monitor-recording", "version": 1, "readings": [{"gpus": [{"tmp": 1}]}]}`, nil, `unknown field "tmp"`},
		{"misspelt key in a list", `[{"gpus": [{"tmp": 1}]}]`, nil, `unknown field "tmp"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := ReadRecording(strings.NewReader(tc.in))
			if tc.err != "" {
				if !errors.Is(err, ErrInvalidRecording) || !strings.Contains(err.Error(), tc.err) || rs != nil {
					t.Errorf("%v, %v; want an error containing %q", rs, err, tc.err)
				}
				return
			}
			if err != nil || len(rs) != 1 || len(rs[0].GPUs) != 1 || !tc.check(rs[0].GPUs[0]) {
				t.Errorf("%+v, %v", rs, err)
			}
		})
	}

	// What WriteRecording writes reads back unchanged.
	src := recorded(t, "h200x2.json")
	var want []Reading
	for range 3 {
		r, _ := src.Read()
		want = append(want, r)
	}
	var b bytes.Buffer
	if err := WriteRecording(&b, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRecording(&b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: %v\n%+v\nwant\n%+v", err, got, want)
	}
}

// TestReadRecordingWrongTypes gives keys values of the wrong kind: the
// error names the key by its path in the recording and says what it
// takes, rather than quoting the decoder's Go types ("Go struct field
// readingJSON.readings.gpus.plain.temperature_c of type int").
func TestReadRecordingWrongTypes(t *testing.T) {
	rec := func(reading string) string {
		return `{"format": "vram-monitor-recording", "version": 1, "readings": [` + reading + `]}`
	}
	tests := []struct {
		name, in, want string
	}{
		{"string for a number", `{"gpus": [{"temperature_c": "hot"}]}`, `gpus.temperature_c: a string, want a whole number`},
		{"fraction for a whole number", rec(`{"gpus": [{"utilization": {"memory_bandwidth_percent": 1.5}}]}`), `readings.gpus.utilization.memory_bandwidth_percent: number 1.5, want a whole number`},
		{"number too large", `[{"gpus": [{"memory": {"used_bytes": 99999999999999999999999}}]}]`, `gpus.memory.used_bytes: number 99999999999999999999999, want a whole number`},
		{"list for a number", `{"gpus": [{"index": []}]}`, `gpus.index: a list, want a whole number`},
		{"string for a pid", `{"gpus": [{"processes": [{"pid": "12"}]}]}`, `gpus.processes.pid: a string, want a whole number`},
		{"number for a name", `{"gpus": [{"name": 5}]}`, `gpus.name: a number, want a string`},
		{"object for the readings", `{"format": "vram-monitor-recording", "version": 1, "readings": {}}`, `readings: an object, want a list`},
		{"string for the GPUs", `{"gpus": "none"}`, `gpus: a string, want a list`},
		{"number for a power", `{"gpus": [{"power": {"draw_w": true}}]}`, `gpus.power.draw_w: true or false, want a number`},
		{"bad time", `{"time": "yesterday", "gpus": []}`, `time "yesterday": want a time as RFC 3339 writes it, such as 2026-11-30T17:00:00Z`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := ReadRecording(strings.NewReader(tc.in))
			if !errors.Is(err, ErrInvalidRecording) || rs != nil {
				t.Fatalf("%v, %v; want an invalid recording", rs, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q lacks %q", msg, tc.want)
			}
			for _, bad := range []string{"Go struct", "plain", "readingJSON", "of type", "2006"} {
				if strings.Contains(msg, bad) {
					t.Errorf("error %q holds %q", msg, bad)
				}
			}
		})
	}
}
