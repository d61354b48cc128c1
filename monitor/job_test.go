package monitor

import (
	"os"
	"os/exec"
	"runtime"
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
