//go:build !unix

package parallel

import (
	"os"
	"os/exec"
)

// termSignal asks a rank to stop; without Unix signals it is a kill.
var termSignal = os.Kill

func setRankAttrs(*exec.Cmd) {}

func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process != nil {
		cmd.Process.Signal(sig)
	}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}

func exitSignal(*os.ProcessState) (os.Signal, bool) { return nil, false }

func signalNumber(os.Signal) int { return 0 }

func signalName(sig os.Signal) string { return sig.String() }
