package parallel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
	"github.com/vramgo/vram/optim"
)

// The launcher's tests run this test binary as the ranks: with
// VRAM_TEST_HELPER set, TestHelperRank plays a rank and exits.
const helperEnv = "VRAM_TEST_HELPER"

// helperCmd returns the program and arguments of a helper rank.
func helperCmd() (string, []string) {
	return os.Args[0], []string{"-test.run=^TestHelperRank$", "-test.count=1"}
}

// TestHelperRank is a rank started by the tests below, not a test.
func TestHelperRank(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("run by the launcher's tests")
	}
	l, err := LaunchEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "launch env:", err)
		os.Exit(2)
	}
	switch mode {
	case "env":
		fmt.Printf("env RANK=%s LOCAL_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s GROUP_RANK=%s MASTER_ADDR=%s MASTER_PORT=%s VRAM_AGENT_STORE=%s\n",
			os.Getenv("RANK"), os.Getenv("LOCAL_RANK"), os.Getenv("WORLD_SIZE"), os.Getenv("LOCAL_WORLD_SIZE"),
			os.Getenv("GROUP_RANK"), os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"), os.Getenv("VRAM_AGENT_STORE"))
		fmt.Fprintf(os.Stderr, "to stderr\n")
		if l.Rank == 0 {
			fmt.Print(strings.Repeat("x", maxLineBytes+10) + "\nno newline at the end")
		}
		os.Exit(0)
	case "exit":
		if strconv.Itoa(l.Rank) == os.Getenv("VRAM_TEST_FAIL_RANK") {
			code, _ := strconv.Atoi(os.Getenv("VRAM_TEST_FAIL_CODE"))
			fmt.Println("failing")
			os.Exit(code)
		}
		if os.Getenv("VRAM_TEST_STUBBORN") != "" {
			signal.Ignore(syscall.SIGTERM)
		}
		fmt.Println("waiting")
		time.Sleep(time.Minute)
		os.Exit(0)
	case "signal":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		fmt.Println("ready")
		select {
		case <-ch:
			fmt.Println("got SIGINT")
			os.Exit(130)
		case <-time.After(time.Minute):
			os.Exit(0)
		}
	case "background":
		// Leave a child behind that keeps the rank's output open.
		prog, args := helperCmd()
		child := exec.Command(prog, args...)
		child.Env = append(os.Environ(), helperEnv+"=linger")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		if err := child.Start(); err != nil {
			fmt.Println("starting the child:", err)
			os.Exit(2)
		}
		code, _ := strconv.Atoi(os.Getenv("VRAM_TEST_FAIL_CODE"))
		os.Exit(code)
	case "linger":
		time.Sleep(3 * time.Second)
		os.Exit(0)
	case "train":
		os.Exit(helperTrain(l))
	}
	os.Exit(2)
}

// helperTrain trains the test MLP with DDP over TCP on this rank's share
// of the batch, printing "step N" after each step and then the sum of the
// parameters, or "rank-error ..." for a *RankError.
func helperTrain(l LaunchInfo) int {
	steps, _ := strconv.Atoi(os.Getenv("VRAM_TEST_STEPS"))
	timeout, _ := time.ParseDuration(os.Getenv("VRAM_TEST_TIMEOUT"))
	delay, _ := time.ParseDuration(os.Getenv("VRAM_TEST_DELAY"))
	comm, err := InitProcessGroup(ProcessGroupOptions{Backend: "tcp", Launch: l, Timeout: timeout})
	if err != nil {
		fmt.Println("init:", err)
		return 1
	}
	defer comm.Close()
	m := testMLP(uint64(l.Rank)+1, vram.CPU)
	ddp, err := NewDistributedDataParallel(m, comm, DDPOptions{BucketCapBytes: 64})
	if err != nil {
		fmt.Println("ddp:", err)
		return 1
	}
	defer ddp.Close()
	opt, _ := optim.NewSGD(ddp.Parameters(), optim.SGDConfig{LR: ddpLR})
	xs, ys := ddpData()
	share := ddpBatch / comm.Size()
	lo := comm.Rank() * share
	start := time.Now()
	for step := 1; step <= steps; step++ {
		var berr error
		vram.Tidy(func() {
			loss := nn.MSELoss(ddp.Forward(rows(xs, ddpIn, lo, lo+share, vram.CPU)), rows(ys, ddpOut, lo, lo+share, vram.CPU))
			if berr = ddp.Backward(loss); berr == nil {
				opt.Step()
				ddp.ZeroGrad()
			}
		})
		if berr != nil {
			var re *RankError
			if errors.As(berr, &re) {
				fmt.Printf("rank-error rank=%d aborted=%v after=%v: %v\n", re.Rank, errors.Is(berr, ErrAborted), time.Since(start).Round(time.Millisecond), berr)
			} else {
				fmt.Println("error:", berr)
			}
			return 1
		}
		fmt.Printf("step %d\n", step)
		time.Sleep(delay)
	}
	var sums []string
	for _, p := range params(m) {
		s := 0.0
		for _, v := range p {
			s += v
		}
		sums = append(sums, strconv.FormatFloat(s, 'g', -1, 64))
	}
	fmt.Printf("world=%d params %s\n", comm.Size(), strings.Join(sums, " "))
	return 0
}

// watchWriter collects output and reports each line that matches.
type watchWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	want *regexp.Regexp
	seen chan string
}

func newWatchWriter(want string) *watchWriter {
	w := &watchWriter{seen: make(chan string, 64)}
	if want != "" {
		w.want = regexp.MustCompile(want)
	}
	return w
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.want != nil {
		for _, l := range strings.Split(string(p), "\n") {
			if w.want.MatchString(l) {
				select {
				case w.seen <- l:
				default:
				}
			}
		}
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func helperOptions(mode string, n int, extra ...string) LaunchOptions {
	prog, args := helperCmd()
	return LaunchOptions{
		NProcPerNode: n, Program: prog, Args: args,
		Env:         append(append(os.Environ(), helperEnv+"="+mode, "RANK=99"), extra...),
		StopTimeout: 5 * time.Second,
	}
}

func TestLaunchVariables(t *testing.T) {
	out, errw := newWatchWriter(""), newWatchWriter("")
	o := helperOptions("env", 3)
	o.Stdout, o.Stderr = out, errw
	o.Started = func(rank, local, pid int) {
		if rank != local || pid <= 0 {
			t.Errorf("Started(%d, %d, %d)", rank, local, pid)
		}
	}
	if err := Launch(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s%s", err, out, errw)
	}
	lines := out.String()
	m := regexp.MustCompile(`MASTER_PORT=(\d+)`).FindStringSubmatch(lines)
	if m == nil {
		t.Fatalf("no MASTER_PORT in\n%s", lines)
	}
	port, _ := strconv.Atoi(m[1])
	for r := range 3 {
		want := fmt.Sprintf("[rank %d] env RANK=%d LOCAL_RANK=%d WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d VRAM_AGENT_STORE=1\n", r, r, r, port)
		if !strings.Contains(lines, want) {
			t.Errorf("output lacks %q:\n%.2000s", want, lines)
		}
		if !strings.Contains(errw.String(), fmt.Sprintf("[rank %d] to stderr\n", r)) {
			t.Errorf("stderr lacks rank %d's line:\n%s", r, errw)
		}
	}
	// The parts of a split line follow each other among the rank's own
	// lines; other ranks' lines may come between them in the output.
	var rank0 []string
	for _, l := range strings.SplitAfter(lines, "\n") {
		if strings.HasPrefix(l, "[rank 0] ") {
			rank0 = append(rank0, l)
		}
	}
	long := "[rank 0] " + strings.Repeat("x", maxLineBytes) + "\n[rank 0] xxxxxxxxxx\n"
	if !strings.Contains(strings.Join(rank0, ""), long) {
		t.Error("a line longer than the limit was not split into prefixed parts")
	}
	if !strings.Contains(lines, "[rank 0] no newline at the end\n") {
		t.Error("a last line without a newline was lost")
	}
}

func TestLaunchFailureStopsOthers(t *testing.T) {
	for _, stubborn := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoring SIGTERM %v", stubborn), func(t *testing.T) {
			extra := []string{"VRAM_TEST_FAIL_RANK=1", "VRAM_TEST_FAIL_CODE=3"}
			if stubborn {
				extra = append(extra, "VRAM_TEST_STUBBORN=1")
			}
			o := helperOptions("exit", 3, extra...)
			out := newWatchWriter("")
			o.Stdout = out
			o.StopTimeout = 500 * time.Millisecond
			start := time.Now()
			err := Launch(context.Background(), o)
			var le *LaunchError
			if !errors.As(err, &le) || le.Rank != 1 || le.ExitCode != 3 || le.Signal != "" {
				t.Fatalf("Launch: %v, want rank 1's status 3\n%s", err, out)
			}
			if el := time.Since(start); el > 20*time.Second {
				t.Errorf("the others were stopped after %v", el)
			}
			if !strings.Contains(err.Error(), "rank 1 (local rank 1) exited with status 3") {
				t.Errorf("message: %v", err)
			}
		})
	}
}

// TestLaunchOutputOutlivesRank: a rank whose child keeps its output open
// after the rank exits ends with the rank's own status, not as a failure
// of its output.
func TestLaunchOutputOutlivesRank(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
	}{
		{"status 0", 0},
		{"status 3", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := helperOptions("background", 2, "VRAM_TEST_FAIL_CODE="+strconv.Itoa(tc.code))
			o.StopTimeout = 200 * time.Millisecond
			err := Launch(context.Background(), o)
			var le *LaunchError
			switch {
			case tc.code == 0 && err != nil:
				t.Errorf("Launch: %v, want nil", err)
			case tc.code != 0 && (!errors.As(err, &le) || le.ExitCode != tc.code):
				t.Errorf("Launch: %v, want status %d", err, tc.code)
			}
		})
	}
}

func TestLaunchForwardsSignals(t *testing.T) {
	o := helperOptions("signal", 2)
	out := newWatchWriter(`ready`)
	o.Stdout = out
	sigs := make(chan os.Signal, 1)
	o.Signals = sigs
	go func() {
		for range 2 {
			select {
			case <-out.seen:
			case <-time.After(30 * time.Second):
				return
			}
		}
		sigs <- os.Interrupt
	}()
	err := Launch(context.Background(), o)
	var le *LaunchError
	if !errors.As(err, &le) || le.ExitCode != 130 || le.Forwarded != "SIGINT" {
		t.Fatalf("Launch: %v\n%s", err, out)
	}
	for r := range 2 {
		if !strings.Contains(out.String(), fmt.Sprintf("[rank %d] got SIGINT", r)) {
			t.Errorf("rank %d did not get the signal:\n%s", r, out)
		}
	}
}

func TestLaunchContextStops(t *testing.T) {
	o := helperOptions("exit", 2, "VRAM_TEST_FAIL_RANK=-1")
	out := newWatchWriter(`waiting`)
	o.Stdout = out
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-out.seen
		<-out.seen
		cancel()
	}()
	err := Launch(ctx, o)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Launch: %v", err)
	}
}

func TestLaunchBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    LaunchOptions
		want string
	}{
		{"no processes", LaunchOptions{Program: "true"}, "0 processes per node"},
		{"negative nodes", LaunchOptions{NProcPerNode: 1, NNodes: -1, Program: "true"}, "-1 nodes"},
		{"node rank", LaunchOptions{NProcPerNode: 1, NNodes: 2, NodeRank: 2, Program: "true"}, "node rank 2 out of range for 2 nodes"},
		{"port", LaunchOptions{NProcPerNode: 1, MasterPort: 70000, Program: "true"}, "master port 70000"},
		{"no program", LaunchOptions{NProcPerNode: 1}, "no program"},
		{"master addr with a port", LaunchOptions{NProcPerNode: 1, MasterAddr: "node0:29500", Program: "true"}, `MASTER_ADDR="node0:29500" has a port`},
		{"missing program", LaunchOptions{NProcPerNode: 1, Program: "vram-no-such-program"}, "vram-no-such-program"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Launch(context.Background(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if tc.name != "missing program" && !errors.Is(err, vram.ErrArgument) {
				t.Errorf("error %v does not wrap vram.ErrArgument", err)
			}
		})
	}
}

// TestLaunchTwoNodes runs two launchers of one rank each, as two nodes on
// this machine, training together.
func TestLaunchTwoNodes(t *testing.T) {
	const steps = 3
	want := reference(t, steps)
	port := freePort(t)
	outs := []*watchWriter{newWatchWriter(""), newWatchWriter("")}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for node := range 2 {
		wg.Go(func() {
			o := helperOptions("train", 1, "VRAM_TEST_STEPS="+strconv.Itoa(steps), "VRAM_TEST_TIMEOUT=30s")
			o.NNodes, o.NodeRank, o.MasterPort = 2, node, port
			o.Stdout, o.Stderr = outs[node], outs[node]
			errs[node] = Launch(context.Background(), o)
		})
	}
	wg.Wait()
	var sums [][]float64
	for node, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v\n%s", node, err, outs[node])
		}
		m := regexp.MustCompile(`\[rank (\d)\] world=2 params (.*)`).FindStringSubmatch(outs[node].String())
		if m == nil || m[1] != strconv.Itoa(node) {
			t.Fatalf("node %d printed no result for rank %d:\n%s", node, node, outs[node])
		}
		var s []float64
		for _, f := range strings.Fields(m[2]) {
			v, _ := strconv.ParseFloat(f, 64)
			s = append(s, v)
		}
		sums = append(sums, s)
	}
	var wantSums []float64
	for _, p := range want {
		s := 0.0
		for _, v := range p {
			s += v
		}
		wantSums = append(wantSums, s)
	}
	for node, s := range sums {
		if err := closeTo([][]float64{s}, [][]float64{wantSums}); err != nil {
			t.Errorf("node %d: %v", node, err)
		}
	}
}

// TestKilledRank kills one of three rank processes mid-training: the two
// others must fail with a *RankError naming it, long before the
// collectives' timeout.
func TestKilledRank(t *testing.T) {
	srv, err := ListenStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := srv.Addr().(*net.TCPAddr).Port
	const timeout = time.Minute
	prog, args := helperCmd()
	type rank struct {
		cmd  *exec.Cmd
		out  *watchWriter
		done chan struct{}
	}
	ranks := make([]*rank, 3)
	for r := range ranks {
		info := LaunchInfo{Rank: r, WorldSize: 3, LocalRank: r, LocalWorldSize: 3, MasterAddr: "127.0.0.1", MasterPort: port, AgentStore: true}
		cmd := exec.Command(prog, args...)
		cmd.Env = append(append(os.Environ(), info.Environ()...), helperEnv+"=train",
			"VRAM_TEST_STEPS=100000", "VRAM_TEST_TIMEOUT="+timeout.String(), "VRAM_TEST_DELAY=5ms")
		out := newWatchWriter(`^step 3$`)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		rk := &rank{cmd: cmd, out: out, done: make(chan struct{})}
		go func() { cmd.Wait(); close(rk.done) }()
		ranks[r] = rk
		t.Cleanup(func() { cmd.Process.Kill(); <-rk.done })
	}
	select {
	case <-ranks[2].out.seen:
	case <-time.After(60 * time.Second):
		t.Fatalf("rank 2 did not reach step 3:\n%s", ranks[2].out)
	}
	ranks[2].cmd.Process.Kill()
	killed := time.Now()
	for _, r := range []int{0, 1} {
		select {
		case <-ranks[r].done:
		case <-time.After(timeout / 2):
			t.Fatalf("rank %d still runs %v after rank 2 was killed:\n%s", r, time.Since(killed), ranks[r].out)
		}
		if el := time.Since(killed); el > 10*time.Second {
			t.Errorf("rank %d took %v to fail", r, el)
		}
		out := ranks[r].out.String()
		if !strings.Contains(out, "rank-error rank=2 aborted=true") || !strings.Contains(out, "rank 2: its connection closed without a goodbye") {
			t.Errorf("rank %d did not name rank 2:\n%s", r, tail(out))
		}
	}
}

func tail(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

// TestLaunchRefusesHugeCounts: a mistyped count is an error, not a machine
// full of processes.
func TestLaunchRefusesHugeCounts(t *testing.T) {
	for _, o := range []LaunchOptions{
		{NProcPerNode: MaxProcPerNode + 1, Program: "true"},
		{NProcPerNode: 1, NNodes: MaxNodes + 1, Program: "true"},
	} {
		if err := Launch(t.Context(), o); err == nil || !strings.Contains(err.Error(), "want 1 to") {
			t.Errorf("Launch(%+v) = %v, want a range error", o, err)
		}
	}
}
