package parallel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vramgo/vram"
)

func lookupMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLaunchEnv(t *testing.T) {
	full := map[string]string{
		"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
		"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "VRAM_AGENT_STORE": "1",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range full {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want LaunchInfo
		err  string // a part of the error; "" for none
	}{
		{"not launched", map[string]string{}, LaunchInfo{WorldSize: 1, LocalWorldSize: 1}, ""},
		{"torchrun's variables", full, LaunchInfo{Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, GroupRank: 1,
			MasterAddr: "10.0.0.1", MasterPort: 29500, AgentStore: true, Launched: true}, ""},
		{"one node, defaults", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost", "MASTER_PORT": "1234"},
			LaunchInfo{Rank: 1, WorldSize: 2, LocalRank: 1, LocalWorldSize: 2, MasterAddr: "localhost", MasterPort: 1234, Launched: true}, ""},
		{"one rank without master", map[string]string{"RANK": "0", "WORLD_SIZE": "1"},
			LaunchInfo{WorldSize: 1, LocalWorldSize: 1, Launched: true}, ""},
		{"rank without world size", map[string]string{"RANK": "0"}, LaunchInfo{}, "RANK is set but WORLD_SIZE is not"},
		{"world size without rank", map[string]string{"WORLD_SIZE": "2"}, LaunchInfo{}, "WORLD_SIZE is set but RANK is not"},
		{"rank not a number", with("RANK", "one"), LaunchInfo{}, `RANK="one" is not a whole number`},
		{"rank out of range", with("RANK", "4"), LaunchInfo{}, "RANK=4 is out of range (0 to 3)"},
		{"negative rank", with("RANK", "-1"), LaunchInfo{}, "RANK=-1 is out of range"},
		{"zero world", with("WORLD_SIZE", "0"), LaunchInfo{}, "WORLD_SIZE=0 is out of range"},
		{"local rank out of range", with("LOCAL_RANK", "2"), LaunchInfo{}, "LOCAL_RANK=2 is out of range (0 to 1)"},
		{"local rank missing", with("LOCAL_RANK", ""), LaunchInfo{}, "LOCAL_RANK is not set"},
		{"local world too big", with("LOCAL_WORLD_SIZE", "5"), LaunchInfo{}, "LOCAL_WORLD_SIZE=5 is out of range"},
		{"no master addr", with("MASTER_ADDR", ""), LaunchInfo{}, "MASTER_ADDR is not set"},
		{"no master port", with("MASTER_PORT", ""), LaunchInfo{}, "MASTER_PORT is not set"},
		{"bad port", with("MASTER_PORT", "70000"), LaunchInfo{}, "MASTER_PORT=70000 is out of range (1 to 65535)"},
		{"port with spaces", with("MASTER_PORT", " 29500"), LaunchInfo{}, `MASTER_PORT=" 29500" is not a whole number`},
		{"bad agent store", with("VRAM_AGENT_STORE", "maybe"), LaunchInfo{}, `VRAM_AGENT_STORE="maybe" is not a boolean`},
		{"master addr with a port", with("MASTER_ADDR", "localhost:29500"), LaunchInfo{}, `MASTER_ADDR="localhost:29500" has a port`},
		{"master addr with a bracketed port", with("MASTER_ADDR", "[::1]:29500"), LaunchInfo{}, `MASTER_ADDR="[::1]:29500" has a port`},
		{"master addr as a URL", with("MASTER_ADDR", "tcp://10.0.0.1"), LaunchInfo{}, `MASTER_ADDR="tcp://10.0.0.1" is a URL`},
		{"master addr with a space", with("MASTER_ADDR", "node 1"), LaunchInfo{}, `MASTER_ADDR="node 1" is not a host`},
		{"IPv6 master addr", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "::1", "MASTER_PORT": "1234"},
			LaunchInfo{WorldSize: 2, LocalWorldSize: 2, MasterAddr: "::1", MasterPort: 1234, Launched: true}, ""},
		{"bracketed IPv6 master addr", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "[::1]", "MASTER_PORT": "1234"},
			LaunchInfo{WorldSize: 2, LocalWorldSize: 2, MasterAddr: "[::1]", MasterPort: 1234, Launched: true}, ""},
		{"huge number", with("WORLD_SIZE", "99999999999999999999"), LaunchInfo{}, "WORLD_SIZE="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LaunchEnvFromLookup(lookupMap(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, vram.ErrArgument) {
					t.Fatalf("error %v, want one containing %q that wraps vram.ErrArgument", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			// Environ gives back what was read.
			m := map[string]string{}
			for _, kv := range got.Environ() {
				k, v, _ := strings.Cut(kv, "=")
				m[k] = v
			}
			again, err := LaunchEnvFromLookup(lookupMap(m))
			if err != nil {
				t.Fatalf("reading Environ back: %v", err)
			}
			if got.Launched || tc.name == "not launched" {
				again.Launched = got.Launched
			}
			if again != got {
				t.Errorf("Environ read back as %+v, want %+v", again, got)
			}
		})
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// initGroup runs InitProcessGroup for the ranks given, each in a goroutine.
func initGroup(t *testing.T, size int, ranks []int, mod func(*ProcessGroupOptions)) ([]Communicator, []error) {
	t.Helper()
	port := freePort(t)
	comms := make([]Communicator, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Go(func() {
			o := ProcessGroupOptions{
				Backend: "tcp",
				Launch: LaunchInfo{Rank: r, WorldSize: size, LocalRank: r, LocalWorldSize: size,
					MasterAddr: "127.0.0.1", MasterPort: port, Launched: true},
				Timeout: 10 * time.Second,
			}
			if mod != nil {
				mod(&o)
			}
			comms[r], errs[r] = InitProcessGroup(o)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range comms {
			if c != nil {
				wg.Go(func() { c.Close() })
			}
		}
		wg.Wait()
	})
	return comms, errs
}

func TestInitProcessGroupTCP(t *testing.T) {
	// Rank 0 serves the store; the ranks start in any order.
	comms, errs := initGroup(t, 3, []int{2, 1, 0}, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, err := range onRanks(comms, func(r int, c Communicator) error {
		x := vram.Full(vram.Shape{3}, float64(r), vram.CPU)
		if err := c.AllReduce(x, Sum); err != nil {
			return err
		}
		if got := x.Float64s(); !slices.Equal(got, []float64{3, 3, 3}) {
			t.Errorf("rank %d: %v", r, got)
		}
		return nil
	}) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestInitProcessGroupAgentStore(t *testing.T) {
	srv, err := ListenStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := srv.Addr().(*net.TCPAddr).Port
	comms, errs := initGroup(t, 2, []int{0, 1}, func(o *ProcessGroupOptions) {
		o.Launch.AgentStore = true
		o.Launch.MasterPort = port
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, err := range onRanks(comms, func(_ int, c Communicator) error { return c.Barrier() }) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestInitProcessGroupMissingRank(t *testing.T) {
	start := time.Now()
	_, errs := initGroup(t, 3, []int{0, 2}, func(o *ProcessGroupOptions) { o.InitTimeout = 400 * time.Millisecond })
	for _, r := range []int{0, 2} {
		var re *RankError
		if !errors.As(errs[r], &re) || re.Rank != 1 || !errors.Is(errs[r], ErrTimeout) {
			t.Errorf("rank %d: %v, want an error naming rank 1", r, errs[r])
		}
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v for an init timeout of 400ms", el)
	}
}

func TestInitProcessGroupErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts ProcessGroupOptions
		want string
		kind error
	}{
		{"unknown backend", ProcessGroupOptions{Backend: "mpi", Device: vram.CPU}, `unknown backend "mpi"`, vram.ErrArgument},
		{"nccl on the CPU", ProcessGroupOptions{Backend: "nccl", Device: vram.CPU}, "needs a CUDA device", vram.ErrDevice},
		{"rank out of range", ProcessGroupOptions{Launch: LaunchInfo{Rank: 2, WorldSize: 2}}, "rank 2 out of range", vram.ErrArgument},
		{"no such device", ProcessGroupOptions{Device: vram.Sim(60)}, "sim:60", nil},
		{"no master port", ProcessGroupOptions{Backend: "tcp", Launch: LaunchInfo{Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1"}},
			"MasterPort 0", vram.ErrArgument},
		{"master port out of range", ProcessGroupOptions{Backend: "tcp", Launch: LaunchInfo{Rank: 1, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: 70000}},
			"MasterPort 70000", vram.ErrArgument},
		{"no master addr", ProcessGroupOptions{Backend: "tcp", Launch: LaunchInfo{Rank: 1, WorldSize: 2, MasterPort: 29500}},
			"no MasterAddr", vram.ErrArgument},
		{"master addr with a port", ProcessGroupOptions{Backend: "tcp", Launch: LaunchInfo{Rank: 1, WorldSize: 2, MasterAddr: "localhost:29500", MasterPort: 29500}},
			`MASTER_ADDR="localhost:29500" has a port`, vram.ErrArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, err := InitProcessGroup(tc.opts)
			if el := time.Since(start); el > time.Second {
				t.Errorf("took %v to refuse", el)
			}
			if err == nil {
				c.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// A job of one rank needs nothing else.
	c, err := InitProcessGroup(ProcessGroupOptions{Backend: "tcp"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Size() != 1 || c.Rank() != 0 || c.Device() != vram.CPU {
		t.Errorf("a job of one: rank %d of %d on %s", c.Rank(), c.Size(), c.Device())
	}
	x := vram.Ones(vram.Shape{2})
	if err := c.AllReduce(x, Avg); err != nil || !slices.Equal(x.Float64s(), []float64{1, 1}) {
		t.Errorf("all_reduce of one rank: %v %v", x.Float64s(), err)
	}
}

// TestInitProcessGroupAgain joins a group, closes it and joins it again
// through a store that outlives it, as "vram run" serves one for the whole
// job (torch.distributed's init_process_group after
// destroy_process_group): each join meets under keys of its own, whatever
// order the ranks come in, so that none finds the addresses of the group
// before.
func TestInitProcessGroupAgain(t *testing.T) {
	srv, err := ListenStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := srv.Addr().(*net.TCPAddr).Port
	for round := range 3 {
		late := round % 2 // the rank that arrives last
		comms, errs := initGroup(t, 2, []int{0, 1}, func(o *ProcessGroupOptions) {
			o.Launch.AgentStore = true
			o.Launch.MasterPort = port
			o.InitTimeout = 2 * time.Second
			if o.Launch.Rank == late {
				time.Sleep(100 * time.Millisecond)
			}
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("round %d: rank %d: %v", round, r, err)
			}
		}
		for r, err := range onRanks(comms, func(r int, c Communicator) error {
			x := vram.Full(vram.Shape{2}, float64(r+1), vram.CPU)
			if err := c.AllReduce(x, Sum); err != nil {
				return err
			}
			if got := x.Float64s(); !slices.Equal(got, []float64{3, 3}) {
				t.Errorf("round %d: rank %d: %v", round, r, got)
			}
			return c.Close()
		}) {
			if err != nil {
				t.Errorf("round %d: rank %d: %v", round, r, err)
			}
		}
	}
}

// TestInitProcessGroupWorldSizeDisagrees starts ranks with different world
// sizes: those that can tell fail at once with ErrMismatch, naming the
// sizes, rather than wait for ranks that will never come.
func TestInitProcessGroupWorldSizeDisagrees(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int // rank r's world size
		// want[r] is rank r's error: ErrMismatch naming rank other, or
		// ErrTimeout naming rank other.
		want  []error
		other []int
	}{
		{"rank 1 says more", []int{2, 3}, []error{ErrMismatch, ErrMismatch}, []int{1, 0}},
		// Rank 2 agrees with rank 0, which tells it about rank 1.
		{"rank 1 says fewer", []int{3, 2, 3}, []error{ErrMismatch, ErrMismatch, ErrMismatch}, []int{1, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			errs := make([]error, len(tc.sizes))
			var wg sync.WaitGroup
			start := time.Now()
			for r, size := range tc.sizes {
				wg.Go(func() {
					c, err := InitProcessGroup(ProcessGroupOptions{Backend: "tcp",
						Launch:      LaunchInfo{Rank: r, WorldSize: size, MasterAddr: "127.0.0.1", MasterPort: port, Launched: true},
						InitTimeout: 700 * time.Millisecond})
					if c != nil {
						c.Close()
					}
					errs[r] = err
				})
			}
			wg.Wait()
			if el := time.Since(start); el > 4*time.Second {
				t.Errorf("took %v for an init timeout of 700ms", el)
			}
			for r, err := range errs {
				var re *RankError
				if !errors.As(err, &re) || !errors.Is(err, tc.want[r]) || re.Rank != tc.other[r] {
					t.Errorf("rank %d: %v, want a *RankError naming rank %d that wraps %v", r, err, tc.other[r], tc.want[r])
					continue
				}
				if tc.want[r] == ErrMismatch && !strings.Contains(err.Error(), "world size") {
					t.Errorf("rank %d: %v does not say that the world sizes differ", r, err)
				}
			}
		})
	}
}

// TestInitProcessGroupTwice joins a group and, without closing it, joins
// again on rank 0, which serves the store (torch.distributed refuses an
// init_process_group while the default group exists): the second join
// fails at once with ErrArgument, saying that the port is taken and why
// it may be, and the first group still works.
func TestInitProcessGroupTwice(t *testing.T) {
	port := freePort(t)
	comms, errs := initGroup(t, 2, []int{0, 1}, func(o *ProcessGroupOptions) { o.Launch.MasterPort = port })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	start := time.Now()
	c, err := InitProcessGroup(ProcessGroupOptions{Backend: "tcp", InitTimeout: 5 * time.Second,
		Launch: LaunchInfo{Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port, Launched: true}})
	if err == nil {
		c.Close()
		t.Fatal("a second join of rank 0 on the port of the first succeeded")
	}
	if !errors.Is(err, vram.ErrArgument) || !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "not closed") {
		t.Errorf("error %v, want one wrapping vram.ErrArgument and EADDRINUSE that says why the port may be taken", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v", el)
	}
	for r, err := range onRanks(comms, func(_ int, c Communicator) error { return c.Barrier() }) {
		if err != nil {
			t.Errorf("rank %d: the first group: %v", r, err)
		}
	}
}

// TestWaitRanksBeyondOneWait waits for more ranks than one store Wait may
// name: the keys go in batches, and a timeout counts and names the ranks
// missing in every batch.
func TestWaitRanksBeyondOneWait(t *testing.T) {
	_, store := newTestStore(t, 5*time.Second)
	ctx := context.Background()
	n := MaxStoreWaitKeys + 10
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for r := w; r < n; r += 8 {
				if r == 5 {
					continue
				}
				if err := store.Set(ctx, "k/"+strconv.Itoa(r), nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	err := waitRanks(short(), store, "k/", 0, n+2, 300*time.Millisecond)
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 5 || !errors.Is(err, ErrTimeout) ||
		!strings.Contains(err.Error(), fmt.Sprintf("3 ranks of %d", n+2)) || !strings.Contains(err.Error(), fmt.Sprintf("5, %d, %d", n, n+1)) {
		t.Errorf("waiting with ranks 5, %d and %d missing: %v", n, n+1, err)
	}
	if err := store.Set(ctx, "k/5", nil); err != nil {
		t.Fatal(err)
	}
	if err := waitRanks(ctx, store, "k/", 0, n, time.Second); err != nil {
		t.Errorf("waiting for %d ranks, all there: %v", n, err)
	}
}

// TestInitProcessGroupStillOpen joins a group through a store that
// outlives it and then, without closing it, joins again as one of its
// ranks, as a second process of that rank or a program that forgot to
// close the group would: the join fails at once with ErrArgument, the
// first group still works, and once it is closed the group can be joined
// again.
func TestInitProcessGroupStillOpen(t *testing.T) {
	srv, err := ListenStore("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := srv.Addr().(*net.TCPAddr).Port
	agent := func(o *ProcessGroupOptions) {
		o.Launch.AgentStore = true
		o.Launch.MasterPort = port
		o.InitTimeout = 2 * time.Second
	}
	comms, errs := initGroup(t, 2, []int{0, 1}, agent)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	start := time.Now()
	c, err := InitProcessGroup(ProcessGroupOptions{Backend: "tcp", InitTimeout: 2 * time.Second,
		Launch: LaunchInfo{Rank: 1, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port, AgentStore: true, Launched: true}})
	if err == nil {
		c.Close()
		t.Fatal("a second join of rank 1 succeeded")
	}
	if !errors.Is(err, vram.ErrArgument) || !strings.Contains(err.Error(), "RANK=1") || !strings.Contains(err.Error(), "not closed") {
		t.Errorf("error %v, want one wrapping vram.ErrArgument that names RANK=1 and a group not closed", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v", el)
	}
	for r, err := range onRanks(comms, func(_ int, c Communicator) error {
		if err := c.Barrier(); err != nil {
			return err
		}
		return c.Close()
	}) {
		if err != nil {
			t.Errorf("rank %d: the first group: %v", r, err)
		}
	}
	comms, errs = initGroup(t, 2, []int{0, 1}, agent)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d, joining again after closing: %v", r, err)
		}
	}
	for r, err := range onRanks(comms, func(_ int, c Communicator) error { return c.Barrier() }) {
		if err != nil {
			t.Errorf("rank %d: the second group: %v", r, err)
		}
	}
}
