package parallel

// Launch is the library side of "vram run", torchrun's counterpart: it
// starts the ranks of one node as child processes with torchrun's
// variables, serves the rendezvous store on node 0 (torchrun's agent
// store: the ranks then only dial it, and it outlives any one rank),
// prefixes every line the ranks print with their rank, forwards signals,
// and stops every rank when one fails.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vramgo/vram"
)

// Bounds of a job, so that a mistyped count is an error rather than a
// machine full of processes: no node has more than a few dozen GPUs, and
// the largest jobs have some tens of thousands of nodes.
const (
	MaxProcPerNode = 1024
	MaxNodes       = 1 << 20
)

// DefaultMasterPort is the store's port for a job of several nodes when
// none is given: torchrun's default.
const DefaultMasterPort = 29500

// DefaultStopTimeout is how long the ranks have to exit after a signal
// before they are killed, when LaunchOptions.StopTimeout is zero.
const DefaultStopTimeout = 10 * time.Second

// maxLineBytes is the longest line of a rank's output passed on as one
// line; longer ones are split, each part prefixed.
const maxLineBytes = 64 << 10

// LaunchOptions describes the ranks that [Launch] starts on this node.
type LaunchOptions struct {
	// NProcPerNode is the number of ranks on this node (at least 1).
	NProcPerNode int
	// NNodes is the number of nodes of the job; 0 means 1.
	NNodes int
	// NodeRank is this node's number, 0 to NNodes-1. Node 0 serves the
	// rendezvous store.
	NodeRank int
	// MasterAddr is the host of node 0, where the store listens; ""
	// means 127.0.0.1.
	MasterAddr string
	// MasterPort is the store's port. 0 means a free port chosen by node
	// 0 when there is one node, DefaultMasterPort when there are more.
	MasterPort int
	// Program and Args are the command each rank runs.
	Program string
	Args    []string
	// Env is the ranks' environment before Launch adds its variables
	// (usually os.Environ()); variables of the launch protocol in it are
	// replaced.
	Env []string
	// Dir is the ranks' working directory; "" means the launcher's.
	Dir string
	// Stdout and Stderr receive the ranks' output, each line prefixed with
	// "[rank N] "; nil discards it.
	Stdout, Stderr io.Writer
	// Stdin, when not nil, is the standard input of this node's local
	// rank 0; the other ranks, and every rank when it is nil, read an
	// empty input (/dev/null). Give no terminal: each rank runs in a
	// process group of its own, which the terminal stops (SIGTTIN) when
	// it reads.
	Stdin io.Reader
	// Signals are forwarded to every rank (and its children) as they
	// arrive; the ranks still running StopTimeout after the first are
	// killed.
	Signals <-chan os.Signal
	// StopTimeout is how long the ranks have to exit once one failed, a
	// signal came or ctx ended, before they are killed; 0 means
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// Started, when not nil, is called with each rank's process id once
	// all ranks have started (for "vram watch --pids").
	Started func(rank, localRank, pid int)
}

// LaunchError is the error of [Launch] when a rank failed: the first
// rank that exited with a nonzero status or was killed by a signal
// (after it, the launcher stopped the others).
type LaunchError struct {
	Rank, LocalRank int
	// ExitCode is the rank's status, 128+N when signal N killed it, as
	// shells report it.
	ExitCode int
	// Signal names the signal that killed the rank, or "".
	Signal string
	// Forwarded names the signal the launcher had forwarded to the ranks
	// before, or "".
	Forwarded string
}

// Error names the rank and how it ended.
func (e *LaunchError) Error() string {
	what := fmt.Sprintf("exited with status %d", e.ExitCode)
	if e.Signal != "" {
		what = fmt.Sprintf("was killed by signal %s (status %d)", e.Signal, e.ExitCode)
	}
	s := fmt.Sprintf("parallel: rank %d (local rank %d) %s", e.Rank, e.LocalRank, what)
	if e.Forwarded != "" {
		s += " after the launcher forwarded " + e.Forwarded
	}
	return s
}

// launchVars are the variables Launch sets, replaced in the given
// environment.
var launchVars = []string{EnvRank, EnvLocalRank, EnvWorldSize, EnvLocalWorldSize, EnvGroupRank,
	EnvMasterAddr, EnvMasterPort, EnvAgentStore, "GROUP_WORLD_SIZE"}

// rankProc is one started rank.
type rankProc struct {
	info           LaunchInfo
	cmd            *exec.Cmd
	stdout, stderr *rankWriter
	exited         bool // its exit was seen
}

type exited struct {
	p   *rankProc
	err error
}

// Launch runs a job's ranks on this node and waits for them. It returns
// nil when every rank exits with status 0, a [*LaunchError] naming the
// first rank that failed (the others are then stopped: SIGTERM, and
// SIGKILL after StopTimeout), or an error for options that cannot work
// or a program that cannot start. When ctx ends the ranks are stopped the
// same way.
//
// Every rank gets torchrun's variables ([LaunchInfo.Environ]): RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
// MASTER_PORT, and VRAM_AGENT_STORE=1, since node 0's launcher serves the
// store for the whole job.
//
// On Linux a rank dies with the launcher (the kernel sends it SIGKILL when
// the launcher's process ends, even by SIGKILL); processes the rank
// started itself, such as the program "go run" builds, are not reached.
func Launch(ctx context.Context, o LaunchOptions) error {
	nodes := max(o.NNodes, 1)
	switch {
	case o.NProcPerNode < 1 || o.NProcPerNode > MaxProcPerNode:
		return errorf("parallel: launch: %d processes per node; want 1 to %d: %w", o.NProcPerNode, MaxProcPerNode, vram.ErrArgument)
	case o.NNodes < 0 || o.NNodes > MaxNodes:
		return errorf("parallel: launch: %d nodes; want 1 to %d: %w", o.NNodes, MaxNodes, vram.ErrArgument)
	case o.NodeRank < 0 || o.NodeRank >= nodes:
		return errorf("parallel: launch: node rank %d out of range for %d nodes: %w", o.NodeRank, nodes, vram.ErrArgument)
	case o.MasterPort < 0 || o.MasterPort > 65535:
		return errorf("parallel: launch: master port %d out of range (0 to 65535): %w", o.MasterPort, vram.ErrArgument)
	case o.Program == "":
		return errorf("parallel: launch: no program to run: %w", vram.ErrArgument)
	}
	if o.MasterAddr != "" {
		if err := checkMasterAddr(o.MasterAddr); err != nil {
			return errorf("parallel: launch: %w", err)
		}
	}
	addr := o.MasterAddr
	if addr == "" {
		addr = "127.0.0.1"
	}
	port := o.MasterPort
	if port == 0 && nodes > 1 {
		port = DefaultMasterPort
	}
	stopTimeout := o.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = DefaultStopTimeout
	}
	program, err := exec.LookPath(o.Program)
	if err != nil {
		return errorf("parallel: launch: %w", err)
	}

	if o.NodeRank == 0 {
		srv, err := ListenStore(storeListenAddr(addr, port))
		if err != nil {
			return errorf("parallel: launch: serving the rendezvous store at %s: %w", joinHostPort(addr, port), err)
		}
		defer srv.Close()
		if port == 0 {
			port = srv.Addr().(*net.TCPAddr).Port
		}
	}

	base := slices.DeleteFunc(slices.Clone(o.Env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(launchVars, name)
	})
	stdout, stderr := &lineWriter{w: o.Stdout}, &lineWriter{w: o.Stderr}
	world := nodes * o.NProcPerNode
	exits := make(chan exited, o.NProcPerNode)
	var procs []*rankProc
	for local := range o.NProcPerNode {
		info := LaunchInfo{
			Rank: o.NodeRank*o.NProcPerNode + local, WorldSize: world,
			LocalRank: local, LocalWorldSize: o.NProcPerNode, GroupRank: o.NodeRank,
			MasterAddr: addr, MasterPort: port, AgentStore: true, Launched: true,
		}
		p := &rankProc{info: info, cmd: exec.Command(program, o.Args...)}
		p.cmd.Dir = o.Dir
		if local == 0 {
			p.cmd.Stdin = o.Stdin
		}
		p.cmd.Env = append(append(slices.Clone(base), info.Environ()...), fmt.Sprintf("GROUP_WORLD_SIZE=%d", nodes))
		setRankAttrs(p.cmd)
		// Children of the rank that keep its output open do not hold up
		// the launcher for long after the rank exits.
		p.cmd.WaitDelay = stopTimeout
		if err := p.startLocked(stdout, stderr, exits); err != nil {
			stopAll(procs, stopTimeout, exits)
			return errorf("parallel: launch: starting rank %d: %w", info.Rank, err)
		}
		procs = append(procs, p)
	}
	if o.Started != nil {
		for _, p := range procs {
			o.Started(p.info.Rank, p.info.LocalRank, p.cmd.Process.Pid)
		}
	}

	var (
		first     *LaunchError
		forwarded string
		running   = len(procs)
		kill      <-chan time.Time // when stopping, the moment to kill
		stopping  bool
	)
	stop := func(sig os.Signal) {
		for _, p := range procs {
			if !p.exited {
				signalGroup(p.cmd, sig)
			}
		}
		if !stopping {
			stopping = true
			kill = time.After(stopTimeout)
		}
	}
	done := ctx.Done()
	for running > 0 {
		select {
		case e := <-exits:
			running--
			e.p.exited = true
			e.p.stdout.flush()
			e.p.stderr.flush()
			if le := exitError(e.p, e.err, forwarded); le != nil && first == nil && !stopping {
				first = le
				stop(termSignal)
			} else if le != nil && first == nil && forwarded != "" {
				first = le // a rank that a forwarded signal ended
			}
		case sig := <-o.Signals:
			forwarded = signalName(sig)
			stop(sig)
		case <-done:
			done = nil
			stop(termSignal)
		case <-kill:
			for _, p := range procs {
				if !p.exited {
					killGroup(p.cmd)
				}
			}
			kill = nil
		}
	}
	if first != nil {
		return first
	}
	if ctx.Err() != nil {
		return errorf("parallel: launch: stopped the ranks: %w", ctx.Err())
	}
	return nil
}

// startLocked starts p with its output going to the line writers, and
// sends its exit on exits once it ends. It returns the error of starting.
//
// The rank is started and waited for by one goroutine locked to its OS
// thread: Linux kills the rank when the thread that started it exits
// (dieWithLauncher), and the thread of an unlocked goroutine may later run
// another goroutine that locks it and returns without unlocking, which
// ends the thread. The thread is only given back once the rank has been
// waited for.
func (p *rankProc) startLocked(stdout, stderr *lineWriter, exits chan<- exited) error {
	prefix := fmt.Sprintf("[rank %d] ", p.info.Rank)
	p.stdout = &rankWriter{lw: stdout, prefix: prefix}
	p.stderr = &rankWriter{lw: stderr, prefix: prefix}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // only after Wait: see above
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exits <- exited{p, p.cmd.Wait()}
	}()
	return <-started
}

// stopAll stops the ranks already started, when a later one cannot start.
func stopAll(procs []*rankProc, timeout time.Duration, exits <-chan exited) {
	for _, p := range procs {
		signalGroup(p.cmd, termSignal)
	}
	kill := time.After(timeout)
	for range procs {
		select {
		case <-exits:
		case <-kill:
			for _, p := range procs {
				killGroup(p.cmd)
			}
			<-exits
		}
	}
}

// exitError describes how p ended, or returns nil for status 0. The
// status is the process's own: err may also be exec.ErrWaitDelay, when a
// child of a rank that exited with status 0 kept its output open.
func exitError(p *rankProc, err error, forwarded string) *LaunchError {
	if err == nil || p.cmd.ProcessState != nil && p.cmd.ProcessState.Success() {
		return nil
	}
	le := &LaunchError{Rank: p.info.Rank, LocalRank: p.info.LocalRank, ExitCode: 1, Forwarded: forwarded}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		le.ExitCode = ee.ExitCode()
		if sig, ok := exitSignal(ee.ProcessState); ok {
			le.Signal = signalName(sig)
			le.ExitCode = 128 + signalNumber(sig)
		}
	}
	return le
}

// lineWriter writes whole lines from several ranks to one writer.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// rankWriter is one rank's stdout or stderr: it passes whole lines on to
// its lineWriter, each prefixed, and splits lines longer than
// maxLineBytes.
type rankWriter struct {
	lw     *lineWriter
	prefix string
	buf    []byte // the start of a line not yet passed on
}

func (w *rankWriter) Write(p []byte) (int, error) {
	if w.lw.w == nil {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		switch {
		case i >= 0 && i < maxLineBytes:
			w.emit(w.buf[:i+1])
			w.buf = w.buf[i+1:]
		case len(w.buf) >= maxLineBytes:
			w.emit(w.buf[:maxLineBytes])
			w.buf = w.buf[maxLineBytes:]
		default:
			w.buf = append([]byte(nil), w.buf...) // let the consumed part go
			return len(p), nil
		}
	}
}

// flush passes on a last line that had no newline.
func (w *rankWriter) flush() {
	if len(w.buf) > 0 && w.lw.w != nil {
		w.emit(w.buf)
	}
	w.buf = nil
}

// emit writes one line, adding the prefix and, when missing, the newline.
func (w *rankWriter) emit(line []byte) {
	w.lw.mu.Lock()
	defer w.lw.mu.Unlock()
	io.WriteString(w.lw.w, w.prefix)
	w.lw.w.Write(line)
	if line[len(line)-1] != '\n' {
		io.WriteString(w.lw.w, "\n")
	}
}
