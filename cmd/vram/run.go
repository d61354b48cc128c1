package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vramgo/vram/parallel"
)

// forwardedSignals are the signals "vram run" passes on to its ranks, as
// torchrun does. Each would otherwise end the launcher at once and leave
// the ranks running, in process groups of their own, on their GPUs: SIGHUP
// when the terminal or SSH session closes, SIGQUIT from Ctrl-\.
var forwardedSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// exitCodeError carries the exit status the command should end with: that
// of a failed rank for "vram run".
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

func newRunCmd() *cobra.Command {
	var o parallel.LaunchOptions
	cmd := &cobra.Command{
		Use:   "run --nproc-per-node N [flags] PROGRAM [ARGS...]",
		Short: "Start the ranks of a distributed job (torchrun's counterpart)",
		Long: `Run starts N copies of PROGRAM on this node, one per rank, with torchrun's variables
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT),
which parallel.LaunchEnv reads and parallel.InitProcessGroup uses to meet. The launcher
of node 0 serves the job's rendezvous store at MASTER_ADDR:MASTER_PORT (and tells the
ranks so with VRAM_AGENT_STORE=1); with one node and no --master-port it picks a free
port. Each line a rank prints is prefixed with "[rank N] ". SIGINT, SIGTERM, SIGHUP
and SIGQUIT are passed on to every rank; ranks still running --stop-timeout later are
killed, and run exits with 128+N for the signal N it got, even when the ranks exit 0
on it. Input piped or redirected to run is local rank 0's standard input; the other
ranks, and all of them when the input is a terminal, read none. When a rank fails,
the others are stopped the same way and run exits with that rank's status (128+N for
signal N), naming it; a PROGRAM that is not found exits 127, one that cannot be run
126, as a shell does. On Linux, when vram run itself is killed
(SIGKILL, the out-of-memory killer), the kernel kills each rank with it; processes a rank
started itself (the program that "go run" builds) are not reached, so run a built
binary where that matters. The ranks' process ids are printed to standard error
at start: "vram watch --pids" with them (or with run's own pid) shows their GPUs.

  vram run --nproc-per-node 2 go run ./examples/ddp
  vram run --nproc-per-node 8 ./train --epochs 3
  # two nodes: the same command on each, with its own --node-rank
  vram run --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 --nproc-per-node 8 ./train
  vram run --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --master-port 29500 --nproc-per-node 8 ./train`,
		Args: minimumArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case !cmd.Flags().Changed("nproc-per-node"):
				return usagef("run: --nproc-per-node N is required: the ranks to start on this node, 1 to %d", parallel.MaxProcPerNode)
			case o.NProcPerNode < 1 || o.NProcPerNode > parallel.MaxProcPerNode:
				return usagef("run: --nproc-per-node %d out of range: want 1 to %d (the ranks to start on this node)", o.NProcPerNode, parallel.MaxProcPerNode)
			case o.NNodes < 1 || o.NNodes > parallel.MaxNodes:
				return usagef("run: --nnodes %d out of range: want 1 to %d", o.NNodes, parallel.MaxNodes)
			case o.NodeRank < 0 || o.NodeRank >= o.NNodes:
				return usagef("run: --node-rank %d out of range for --nnodes %d (0 to %d)", o.NodeRank, o.NNodes, o.NNodes-1)
			case o.MasterPort < 0 || o.MasterPort > 65535:
				return usagef("run: --master-port %d out of range (1 to 65535, or 0 for a free port on one node)", o.MasterPort)
			case o.MasterAddr == "":
				return usagef("run: --master-addr must not be empty")
			case checkHost(o.MasterAddr) != nil:
				return usagef("run: --master-addr %q: %v", o.MasterAddr, checkHost(o.MasterAddr))
			case o.StopTimeout <= 0:
				return usagef("run: --stop-timeout must be positive")
			case args[0] == "":
				// An empty PROGRAM ("$TRAINER" unset) is a bad command
				// line, not a launch that failed.
				return usagef("run: PROGRAM %q is empty (usage: %s)", args[0], cmd.UseLine())
			}
			o.Program, o.Args = args[0], args[1:]
			o.Env = os.Environ()
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			// Input piped or redirected to vram run is local rank 0's, as
			// a program run alone reads it; a terminal is no rank's (see
			// LaunchOptions.Stdin).
			if in := cmd.InOrStdin(); !isTerminalReader(in) {
				o.Stdin = in
			}
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, forwardedSignals...)
			defer signal.Stop(sigs)
			// Relay the signals to Launch, remembering the first: a job
			// stopped by one ends with 128 + its number, as a shell
			// reports it, even when every rank exits 0 on it, so that a
			// script running vram run in a loop stops too.
			relay := make(chan os.Signal, 4)
			var first atomic.Value
			go func() {
				for sig := range sigs {
					first.CompareAndSwap(nil, sig)
					relay <- sig
				}
			}()
			o.Signals = relay
			var pids []string
			o.Started = func(rank, _, pid int) {
				pids = append(pids, strconv.Itoa(pid))
				if len(pids) == o.NProcPerNode {
					fmt.Fprintf(cmd.ErrOrStderr(), "vram run: started %s, %s %s (vram watch --pids %s)\n",
						count(len(pids), "rank", "ranks"), plural(len(pids), "process id", "process ids"), strings.Join(pids, " "), strings.Join(pids, ","))
				}
			}
			// The signals reach the ranks through Signals; the command's
			// own context ends with the first Ctrl-C, which must not stop
			// them a second way.
			err := parallel.Launch(context.WithoutCancel(cmd.Context()), o)
			var le *parallel.LaunchError
			if errors.As(err, &le) {
				msg := strings.TrimPrefix(le.Error(), "parallel: ")
				if o.NProcPerNode*o.NNodes > 1 {
					msg += "; stopped the other ranks"
				}
				return &exitCodeError{code: le.ExitCode, err: errors.New("run: " + msg)}
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				return masterPortInUse(o, cmd.Flags().Changed("master-port"))
			}
			// A program that cannot be started ends as a shell reports it:
			// 127 when it is not found, 126 when it cannot be run (no
			// permission, a directory, not a format the system runs).
			switch {
			case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
				return &exitCodeError{code: 127, err: fmt.Errorf("run: %s: program not found (%w)", o.Program, err)}
			case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOEXEC):
				return &exitCodeError{code: 126, err: fmt.Errorf("run: %s: not executable (%w)", o.Program, err)}
			}
			if sig, ok := first.Load().(syscall.Signal); ok && err == nil {
				return &exitCodeError{code: 128 + int(sig), err: fmt.Errorf("run: stopped by %v; the ranks exited", sig)}
			}
			return cmdError("run", err)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // flags after PROGRAM are PROGRAM's
	f.IntVar(&o.NProcPerNode, "nproc-per-node", 0, "start `N` ranks on this node (required)")
	f.IntVar(&o.NNodes, "nnodes", 1, "the job runs on `N` nodes")
	f.IntVar(&o.NodeRank, "node-rank", 0, "this node is number `N` of the job's, 0 to nnodes-1 (node 0 serves the store)")
	f.StringVar(&o.MasterAddr, "master-addr", "127.0.0.1", "the `HOST` of node 0, where the rendezvous store listens")
	f.IntVar(&o.MasterPort, "master-port", 0, fmt.Sprintf("the store's `PORT` (0: a free port on one node, %d on several)", parallel.DefaultMasterPort))
	f.DurationVar(&o.StopTimeout, "stop-timeout", parallel.DefaultStopTimeout, "how long (a `DURATION` such as 10s or 1m) the ranks have to exit after a signal or a failed rank, before they are killed")
	return cmd
}

// checkHost returns an error when host is neither an IP address nor a
// syntactically valid host name: the ranks dial MASTER_ADDR, and one
// holding a port ("10.0.0.1:29500"), brackets or blanks would make every
// rank fail to meet, on every node, rather than the launch.
func checkHost(host string) error {
	if net.ParseIP(host) != nil {
		return nil
	}
	if h, p, err := net.SplitHostPort(host); err == nil && h != "" && checkHost(h) == nil {
		if _, err := strconv.ParseUint(p, 10, 16); err == nil {
			return fmt.Errorf("a host, without the port: give --master-addr %s --master-port %s", h, p)
		}
	}
	if len(host) > 253 {
		return errors.New("not a host name: longer than 253 characters")
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("not an IP address or host name")
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("not an IP address or host name: %q is not allowed in one", c)
			}
		}
	}
	return nil
}

// masterPortInUse is the error of a launch whose rendezvous store could not
// listen on o.MasterPort, given or the default of several nodes, because
// another program holds it: it says what to do in the terms of vram run's
// flags, where the library's speaks of MASTER_PORT and of groups.
func masterPortInUse(o parallel.LaunchOptions, given bool) error {
	port, what := strconv.Itoa(o.MasterPort), ""
	if !given {
		port, what = strconv.Itoa(parallel.DefaultMasterPort), " (the default on several nodes)"
	}
	hint := "choose another, or leave --master-port out for a free one"
	if o.NNodes > 1 {
		hint = "choose another, the same on every node"
	}
	return fmt.Errorf("run: --master-port %s%s is in use on this node, by another job or program: %s", port, what, hint)
}
