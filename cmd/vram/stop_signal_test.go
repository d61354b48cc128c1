//go:build unix

package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopSignals sends watch and exporter, which run until they are
// stopped, each signal that stops a job (Ctrl-C, systemd's and
// Kubernetes's SIGTERM, a closed terminal's SIGHUP) once they are running:
// they end as on Ctrl-C, the exporter's server shut down, with status 0,
// where SIGTERM and SIGHUP killed them with 128 + the signal's number.
func TestStopSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	tests := []struct {
		name  string
		args  string
		ready string // printed once it runs
	}{
		{"exporter", "exporter --listen 127.0.0.1:0 --source " + readingsFile, "/metrics (Ctrl-C"},
		{"watch", "watch --interval 10ms --source " + readingsFile, "NVIDIA H200"},
	}
	for _, tc := range tests {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
			t.Run(tc.name+"/"+sig.String(), func(t *testing.T) {
				if sig == syscall.SIGHUP && hupIgnoredByChildren() {
					t.Skip("SIGHUP is ignored (nohup), and so in the command, which leaves it so")
				}
				t.Parallel()
				runUntilStopped(t, tc.args, tc.ready, sig)
			})
		}
	}
}

// runUntilStopped starts vram with args, waits for ready in its output,
// sends it sig and checks that it exits with status 0 soon after.
func runUntilStopped(t *testing.T, args, ready string, sig syscall.Signal) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1", "VRAM_TEST_ARGS="+args)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			if !seen && strings.Contains(sc.Text(), ready) {
				seen = true
				started <- true
			}
		}
		io.Copy(io.Discard, pr)
		if !seen {
			started <- false
		}
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatalf("vram %s ended before printing %q: %v", args, ready, <-done)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("vram %s did not print %q in 20 s", args, ready)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Errorf("vram %s ended on %v with %v, want status 0", args, sig, ee)
		} else if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("vram %s still runs 20 s after %v", args, sig)
	}
}

// hupIgnoredByChildren reports whether a process this test starts begins
// with SIGHUP ignored (started under nohup): on Linux from the kernel's
// mask of ignored signals, which children inherit. signal.Ignored can say
// false while the mask says ignored: after another test of this process
// has called signal.Notify and then signal.Stop for SIGHUP, the runtime
// puts back the ignored disposition without marking it ignored again.
func hupIgnoredByChildren() bool {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return signal.Ignored(syscall.SIGHUP)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				break
			}
			return mask&(1<<(uint(syscall.SIGHUP)-1)) != 0
		}
	}
	return signal.Ignored(syscall.SIGHUP)
}
