package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunKilledStopsRanks kills "vram run" with SIGKILL, which it cannot
// catch or forward: its ranks must end with it rather than live on, on
// their GPUs, with no launcher. Each case starts a different number of
// ranks, so that several of them are started from different threads.
func TestRunKilledStopsRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, n := range []int{1, 3} {
		t.Run(strconv.Itoa(n)+" ranks", func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), helperEnv+"=1", "VRAM_TEST_ARGS=run --nproc-per-node "+strconv.Itoa(n)+" sleep 30")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			t.Cleanup(func() {
				cmd.Process.Kill()
				for _, pid := range pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				if _, list, ok := strings.Cut(sc.Text(), "process id"); ok {
					list = strings.TrimPrefix(list, "s") // "process id 7", "process ids 7 8"
					list, _, _ = strings.Cut(list, " (")
					for _, f := range strings.Fields(list) {
						pid, _ := strconv.Atoi(f)
						pids = append(pids, pid)
					}
					break
				}
			}
			if len(pids) != n {
				t.Fatalf("no process ids of %d ranks: %v %v", n, pids, sc.Err())
			}
			go func() {
				for sc.Scan() {
				}
			}()
			// Let the launcher's goroutines move between threads before it
			// is killed: the ranks must outlive neither.
			time.Sleep(100 * time.Millisecond)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			deadline := time.Now().Add(5 * time.Second)
			for _, pid := range pids {
				for {
					// A rank that died is a zombie until init reaps it:
					// count that as ended.
					if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("rank process %d still runs 5 s after vram run was killed", pid)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

// zombie reports whether process pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] == "Z"
}
