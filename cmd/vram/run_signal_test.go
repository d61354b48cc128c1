//go:build unix

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunForwardsSignals sends "vram run" each signal that ends a shell
// job: the ranks must end with it, not live on after the launcher, and
// the launcher ends with 128 + the signal's number, also when the ranks
// catch it and exit 0.
func TestRunForwardsSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	catcher := filepath.Join(t.TempDir(), "catch.sh")
	if err := os.WriteFile(catcher, []byte("#!/bin/sh\ntrap 'kill $! 2>/dev/null; exit 0' INT TERM HUP QUIT\nsleep 30 &\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []struct{ name, cmd string }{{"killed", "sleep 30"}, {"exits 0", catcher}} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
			t.Run(prog.name+"/"+sig.String(), func(t *testing.T) { runUntilSignal(t, prog.cmd, sig) })
		}
	}
}

// runUntilSignal starts "vram run" of two ranks of program, sends the
// launcher sig once both started, and checks how everything ends.
func runUntilSignal(t *testing.T, program string, sig syscall.Signal) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1", "VRAM_TEST_ARGS=run --nproc-per-node 2 --stop-timeout 5s "+program)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
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
	if len(pids) != 2 {
		t.Fatalf("no process ids of 2 ranks: %v %v", pids, sc.Err())
	}
	go func() {
		for sc.Scan() {
		}
		done <- cmd.Wait()
	}()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	select {
	case err := <-done:
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
			t.Errorf("vram run ended with %v, want status %d", err, 128+int(sig))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("vram run still runs 20 s after the signal")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("rank process %d still runs after vram run ended (%v)", pid, err)
		}
	}
}
