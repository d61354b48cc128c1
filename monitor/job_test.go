package monitor

import (
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"github.com/vramgo/vram/memory"
)

func TestProcessTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	// This process, a child, and the child's child.
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var tree map[int]bool
	for range 100 { // until sh has started sleep
		tree = ProcessTree([]int{os.Getpid()})
		if len(tree) >= 3 {
			break
		}
		exec.Command("sleep", "0.02").Run()
	}
	if !tree[os.Getpid()] || !tree[cmd.Process.Pid] || len(tree) < 3 {
		t.Errorf("tree of %d: %v, want it, sh %d and sleep", os.Getpid(), tree, cmd.Process.Pid)
	}
	if got := ProcessTree([]int{cmd.Process.Pid}); got[os.Getpid()] {
		t.Error("a child's tree holds its parent")
	}
}

// TestProcessTreeSkipsNonPIDs: numbers below 1 are no process ids; 0 is
// the parent of init, whose tree would be every process.
func TestProcessTreeSkipsNonPIDs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	me := os.Getpid()
	tests := []struct {
		name string
		pids []int
		want map[int]bool
	}{
		{"zero", []int{0}, map[int]bool{}},
		{"negative", []int{-1, -me}, map[int]bool{}},
		{"zero beside a process", []int{0, me}, map[int]bool{me: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.pids)
			got := ProcessTree(tc.pids)
			if !slices.Equal(in, tc.pids) {
				t.Errorf("ProcessTree changed its argument to %v", tc.pids)
			}
			allowed := maps.Clone(tc.want)
			if tc.want[me] {
				maps.Copy(allowed, ProcessTree([]int{me})) // and this process's children
			}
			for p := range got {
				if !allowed[p] {
					t.Fatalf("ProcessTree(%v) holds %d (%d processes), want %v", tc.pids, p, len(got), tc.want)
				}
			}
			for p := range tc.want {
				if !got[p] {
					t.Errorf("ProcessTree(%v) lacks %d", tc.pids, p)
				}
			}
		})
	}
}

func TestUsedBy(t *testing.T) {
	r := Reading{GPUs: []GPU{
		{Index: 0, ProcessesVisible: true, Processes: []memory.ProcessMemory{{PID: 10}, {PID: 11}}},
		{Index: 1, ProcessesVisible: true, Processes: []memory.ProcessMemory{{PID: 20}}},
		{Index: 2, ProcessesVisible: true},
		{Index: 3, ProcessesVisible: false},
	}}
	var got []int
	for _, g := range r.UsedBy(map[int]bool{11: true, 99: true}).GPUs {
		got = append(got, g.Index)
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 3 {
		t.Errorf("GPUs %v, want [0 3] (3: its processes are not visible)", got)
	}
	if len(r.GPUs) != 4 {
		t.Error("UsedBy changed its receiver")
	}
}
