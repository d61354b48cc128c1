package main

import (
	"strings"
	"testing"
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
