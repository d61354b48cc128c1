//go:build unix

package parallel

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// termSignal asks a rank to stop.
var termSignal os.Signal = syscall.SIGTERM

// setRankAttrs starts cmd in a process group of its own, so that signals
// reach the rank's own children too ("go run" starts one) and a terminal's
// Ctrl-C reaches the ranks only through the launcher; on Linux it also has
// the kernel kill the rank when the launcher dies (see dieWithLauncher).
func setRankAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithLauncher(cmd.SysProcAttr)
}

// signalGroup sends sig to cmd's process group.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process == nil {
		return
	}
	if s, ok := sig.(syscall.Signal); ok {
		syscall.Kill(-cmd.Process.Pid, s)
		return
	}
	cmd.Process.Signal(sig)
}

// killGroup kills cmd's process group.
func killGroup(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGKILL) }

// exitSignal returns the signal that ended a process, if one did.
func exitSignal(ps *os.ProcessState) (os.Signal, bool) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal(), true
	}
	return nil, false
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
}

// signalName returns a signal's C name ("SIGTERM").
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if n, ok := signalNames[s]; ok {
			return n
		}
		return fmt.Sprintf("signal %d", int(s))
	}
	return sig.String()
}
