package monitor

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// ProcessTree returns pids and every process below them (their children,
// the children's children, ...), read from /proc: for "vram watch --pids"
// with the pid of "vram run", whose ranks are its children (and, under
// "go run", its grandchildren). Where /proc cannot be read it returns pids
// alone. The pids are those of this PID namespace; NVML lists the host's,
// which differ inside a container with its own PID namespace. Numbers
// below 1 are not process ids and are left out: 0, the kernel's, is the
// parent of init, so its tree would be every process on the machine.
func ProcessTree(pids []int) map[int]bool {
	tree := map[int]bool{}
	pids = slices.DeleteFunc(slices.Clone(pids), func(p int) bool { return p < 1 })
	for _, p := range pids {
		tree[p] = true
	}
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		if ppid, ok := parentPID(f); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	queue := append([]int(nil), pids...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !tree[c] {
				tree[c] = true
				queue = append(queue, c)
			}
		}
	}
	return tree
}

// parentPID reads the parent's pid from a /proc/PID/stat file: the second
// field after the command name, which is in parentheses and may itself
// hold spaces and parentheses.
func parentPID(statFile string) (int, bool) {
	b, err := os.ReadFile(statFile)
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// UsedBy returns r with only the GPUs on which one of pids holds memory,
// and those whose processes are not visible (ProcessesVisible false),
// where that cannot be told. The GPUs keep all their processes.
func (r Reading) UsedBy(pids map[int]bool) Reading {
	out := r
	out.GPUs = nil
	for _, g := range r.GPUs {
		keep := !g.ProcessesVisible
		for _, p := range g.Processes {
			if pids[p.PID] {
				keep = true
				break
			}
		}
		if keep {
			out.GPUs = append(out.GPUs, g)
		}
	}
	return out
}
