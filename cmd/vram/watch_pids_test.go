package main

import (
	"strings"
	"testing"

	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/monitor"
)

func TestWatchPIDs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pids       string
		want, lack []string
	}{
		// GPU 1's processes are not visible: it stays, since it may be used.
		{"the job's GPU", "41234", []string{"GPU 0  NVIDIA H200", "GPU 1  NVIDIA H200", "41234"}, nil},
		{"another job", "7,8", []string{"vram watch  1 GPU ", "GPU 1  NVIDIA H200"}, []string{"GPU 0  NVIDIA H200"}},
		// pgrep without -d prints one per line.
		{"lines", "7\n8\n", []string{"vram watch  1 GPU ", "GPU 1  NVIDIA H200"}, []string{"GPU 0  NVIDIA H200"}},
		{"blanks", " 7, 8\t", []string{"vram watch  1 GPU ", "GPU 1  NVIDIA H200"}, []string{"GPU 0  NVIDIA H200"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "watch", "--source", readingsFile, "--count", "2", "--interval", "10ms", "--pids", tc.pids)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			last := stdout[strings.LastIndex(stdout, "vram watch "):] // the second frame
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("frame lacks %q:\n%s", w, last)
				}
			}
			for _, w := range tc.lack {
				if strings.Contains(last, w) {
					t.Errorf("frame shows %q:\n%s", w, last)
				}
			}
		})
	}
	// An empty list is what pgrep gives when no job runs: an error, not
	// every GPU.
	for _, bad := range []string{"abc", "-3", "0", ",", "12x", "", " ", "\n"} {
		code, _, stderr := runCLI(t, "watch", "--source", readingsFile, "--count", "1", "--pids", bad)
		if code != exitUsage || !strings.Contains(stderr, "--pids") {
			t.Errorf("--pids %q: exit %d, %s", bad, code, stderr)
		}
	}
}

// TestWatchPIDsHistoryKeepsTime checks that with --pids the history of a
// GPU holds a sample for every frame, also for frames in which the GPU was
// left out because the job held no memory on it: samples of the GPU's
// later frames were drawn beside the earlier ones, the gap closed, so
// that the sparkline's time axis was wrong.
func TestWatchPIDsHistoryKeepsTime(t *testing.T) {
	reading := func(used int64, pids ...int) monitor.Reading {
		g := monitor.GPU{Index: 0, Name: "NVIDIA H200", UUID: "GPU-0", ProcessesVisible: true, Processes: []memory.ProcessMemory{},
			Memory: monitor.Memory{TotalBytes: 8 << 30, UsedBytes: used, FreeBytes: 8<<30 - used, ReservedBytes: monitor.Unknown}}
		for _, p := range pids {
			g.Processes = append(g.Processes, memory.ProcessMemory{PID: p, Name: "train", Bytes: used})
		}
		return monitor.Reading{GPUs: []monitor.GPU{g}}
	}
	src := writeReadings(t, reading(4<<30, 500), reading(0), reading(0), reading(8<<30, 500))
	code, stdout, stderr := runCLI(t, "watch", "--source", src, "--count", "4", "--interval", "10ms", "--pids", "500")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	last := stdout[strings.LastIndex(stdout, "vram watch "):]
	for _, l := range strings.Split(last, "\n") {
		if !strings.HasPrefix(l, "   memory ") {
			continue
		}
		spark := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l[len("   memory "):]), "100%"))
		if want := "▅▁▁█"; spark != want {
			t.Errorf("memory history %q, want %q (one sample a frame)", spark, want)
		}
		return
	}
	t.Errorf("no memory history in the last frame:\n%s", last)
}
