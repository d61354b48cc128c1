package parallel

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/native/nccl"
)

// The CPU tests of the NCCL communicators: the mapping of dtypes and
// reductions, the checks of the constructors' arguments, the errors
// without libnccl, and the watchdog, the aborts and the teardown over a
// fake NCCL handle and fake events. nccl_gpu_test.go runs the real thing.

func TestNCCLDataTypes(t *testing.T) {
	tests := []struct {
		dt   vram.DType
		want nccl.DataType
	}{
		{vram.Float32, nccl.Float32}, {vram.Float64, nccl.Float64}, {vram.Float16, nccl.Float16},
		{vram.BFloat16, nccl.BFloat16}, {vram.Int32, nccl.Int32}, {vram.Int64, nccl.Int64}, {vram.Bool, nccl.Uint8}, {vram.Int8, nccl.Int8},
	}
	for _, tc := range tests {
		got, err := ncclDataType(tc.dt)
		if err != nil || got != tc.want {
			t.Errorf("%v: %v, %v; want %v", tc.dt, got, err, tc.want)
		}
		if got.Size() != tc.dt.Size() {
			t.Errorf("%v is %d bytes, NCCL's %v %d", tc.dt, tc.dt.Size(), got, got.Size())
		}
	}
	if len(tests) != len(backend.DTypes) {
		t.Errorf("%d dtypes mapped, vram has %d", len(tests), len(backend.DTypes))
	}
	if _, err := ncclDataType(vram.DType(0)); err == nil {
		t.Error("the invalid dtype mapped")
	}
}

func TestNCCLRedOps(t *testing.T) {
	tests := []struct {
		op      ReduceOp
		dt      vram.DType
		want    nccl.RedOp
		wantErr string
	}{
		{Sum, vram.Float32, nccl.Sum, ""},
		{Prod, vram.Float32, nccl.Prod, ""},
		{Max, vram.Int64, nccl.Max, ""},
		{Min, vram.BFloat16, nccl.Min, ""},
		{Avg, vram.Float16, nccl.Avg, ""},
		{Avg, vram.Int32, nccl.Avg, ""},
		{Sum, vram.Bool, nccl.Max, ""}, // logical or
		{Max, vram.Bool, nccl.Max, ""},
		{Prod, vram.Bool, nccl.Min, ""}, // logical and
		{Min, vram.Bool, nccl.Min, ""},
		{Avg, vram.Bool, 0, "average of bool"},
		{ReduceOp(9), vram.Float32, 0, "unknown reduction"},
		{ReduceOp(9), vram.Bool, 0, "unknown reduction"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v_%v", tc.op, tc.dt), func(t *testing.T) {
			got, err := ncclRedOpFor(tc.op, tc.dt)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%v, want an error about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestNCCLArguments checks the constructors' refusals, which come before
// NCCL is loaded or a device opened.
func TestNCCLArguments(t *testing.T) {
	id := [128]byte{1}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"no devices", func() error { _, err := NewNCCLGroup(nil); return err }, "at least one device"},
		{"cpu", func() error { _, err := NewNCCLGroup([]vram.Device{vram.CPU}); return err }, "not a CUDA device"},
		{"sim", func() error { _, err := NewNCCLGroup([]vram.Device{vram.CUDA(0), vram.Sim(0)}); return err }, "NewLocalGroup"},
		{"twice", func() error { _, err := NewNCCLGroup([]vram.Device{vram.CUDA(0), vram.CUDA(0)}); return err }, "both rank 0 and rank 1"},
		{"negative timeout", func() error {
			_, err := NewNCCLGroupOptions([]vram.Device{vram.CUDA(0)}, NCCLOptions{Timeout: -time.Second})
			return err
		}, "negative NCCL timeout"},
		{"rank past size", func() error { _, err := NewNCCLRank(2, 2, vram.CUDA(0), id); return err }, "0 <= rank < size"},
		{"negative rank", func() error { _, err := NewNCCLRank(-1, 2, vram.CUDA(0), id); return err }, "0 <= rank < size"},
		{"empty group", func() error { _, err := NewNCCLRank(0, 0, vram.CUDA(0), id); return err }, "0 <= rank < size"},
		{"rank on sim", func() error { _, err := NewNCCLRank(0, 1, vram.Sim(0), id); return err }, "not a CUDA device"},
		{"zero id", func() error { _, err := NewNCCLRank(0, 1, vram.CUDA(0), [128]byte{}); return err }, "NewNCCLID"},
		{"rank timeout", func() error {
			_, err := NewNCCLRankOptions(0, 1, vram.CUDA(0), id, NCCLOptions{Timeout: -1})
			return err
		}, "negative NCCL timeout"},
		{"nil group function", func() error { return NCCLGroupCalls(nil) }, "nil function"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error about %q", err, tc.want)
			}
		})
	}
}

// TestNCCLWithoutLibrary checks the errors on a machine without
// libnccl.so.2: every entry point says NCCL is missing (ErrNoNCCL).
func TestNCCLWithoutLibrary(t *testing.T) {
	if _, err := nccl.Load(); err == nil {
		t.Skip("libnccl.so.2 is here")
	}
	id := [128]byte{1}
	_, err1 := NewNCCLGroup([]vram.Device{vram.CUDA(0)})
	_, err2 := NewNCCLRank(0, 1, vram.CUDA(0), id)
	_, err3 := NewNCCLID()
	err4 := NCCLGroupCalls(func() error { return nil })
	_, err5 := NCCLVersion()
	for i, err := range []error{err1, err2, err3, err4, err5} {
		if !errors.Is(err, ErrNoNCCL) || !strings.Contains(err.Error(), "libnccl.so.2") {
			t.Errorf("call %d: %v, want ErrNoNCCL naming libnccl.so.2", i+1, err)
		}
	}
}

func TestNCCLPollInterval(t *testing.T) {
	for _, tc := range []struct{ timeout, want time.Duration }{
		{5 * time.Minute, maxPoll}, {time.Second, maxPoll}, {500 * time.Millisecond, 50 * time.Millisecond},
		{5 * time.Millisecond, time.Millisecond}, {time.Microsecond, time.Millisecond},
	} {
		if got := pollInterval(tc.timeout); got != tc.want {
			t.Errorf("pollInterval(%v) = %v, want %v", tc.timeout, got, tc.want)
		}
	}
}

// fakeHandle stands for an NCCL communicator.
type fakeHandle struct {
	mu        sync.Mutex
	async     error
	aborts    int
	destroys  int
	whenAbort func()
}

func (h *fakeHandle) asyncError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.async
}

func (h *fakeHandle) abort() error {
	h.mu.Lock()
	h.aborts++
	f := h.whenAbort
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return nil
}

func (h *fakeHandle) destroy() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.destroys++
	return nil
}

func (h *fakeHandle) counts() (aborts, destroys int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.aborts, h.destroys
}

// fakeEvent is an event that completes when the test says so.
type fakeEvent struct {
	done      atomic.Bool
	records   atomic.Int32
	destroyed atomic.Bool
	onQuery   func() // called once, inside the next Query
}

func (e *fakeEvent) Record(backend.Stream) error {
	e.records.Add(1)
	e.done.Store(false)
	return nil
}

func (e *fakeEvent) Query() (bool, error) {
	d := e.done.Load()
	if f := e.onQuery; f != nil {
		e.onQuery = nil
		f()
	}
	return d, nil
}

func (e *fakeEvent) Synchronize() error {
	for !e.done.Load() {
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

func (e *fakeEvent) Elapsed(backend.Event) (time.Duration, error) { return 0, nil }
func (e *fakeEvent) Destroy() error                               { e.destroyed.Store(true); return nil }

type fakeStream struct{ backend.Stream }

// fakes is a commState over a fake handle whose events the test controls.
type fakes struct {
	h      *fakeHandle
	st     *commState
	mu     sync.Mutex
	events []*fakeEvent
}

func newFakes(timeout time.Duration, where string) *fakes {
	f := &fakes{h: &fakeHandle{}}
	f.st = newCommState(f.h, func() (backend.Event, error) {
		e := &fakeEvent{}
		f.mu.Lock()
		f.events = append(f.events, e)
		f.mu.Unlock()
		return e, nil
	}, timeout, where)
	return f
}

func (f *fakes) event(i int) *fakeEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events[i]
}

func (f *fakes) numEvents() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// call runs one collective through the lease and the tracking, as
// ncclComm.enqueue does.
func (f *fakes) call(t *testing.T, s backend.Stream, op string) error {
	t.Helper()
	if err := f.st.begin(op); err != nil {
		return err
	}
	f.st.end()
	return f.st.track(s, op)
}

// waitFailed waits until the communicator has failed.
func waitFailed(t *testing.T, st *commState, within time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if err := st.failure("all_reduce"); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("not failed within %v", within)
	return nil
}

func setGrace(t *testing.T, d time.Duration) {
	old := abortGrace
	abortGrace = d
	t.Cleanup(func() { abortGrace = old })
}

// TestNCCLWatchdogTimeout: a collective that never completes aborts the
// communicator after the timeout; later calls, and Close, return a
// *RankError wrapping ErrTimeout and ErrAborted.
func TestNCCLWatchdogTimeout(t *testing.T) {
	f := newFakes(50*time.Millisecond, "rank 0 on cuda:0")
	cl := &clique{members: []*commState{f.st}}
	go f.st.watch(cl, time.Millisecond)
	s := fakeStream{}
	start := time.Now()
	if err := f.call(t, s, "all_reduce"); err != nil {
		t.Fatal(err)
	}
	err := waitFailed(t, f.st, 5*time.Second)
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("aborted after %v, before the timeout", el)
	}
	var re *RankError
	if !errors.As(err, &re) || re.Rank != -1 || re.Op != "all_reduce" || !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrAborted) {
		t.Fatalf("%#v", err)
	}
	if !strings.Contains(err.Error(), "all_reduce queued on rank 0 on cuda:0") {
		t.Errorf("message %q does not say what waited where", err)
	}
	if aborts, _ := f.h.counts(); aborts != 1 {
		t.Errorf("%d aborts", aborts)
	}
	if err := f.call(t, s, "broadcast"); !errors.Is(err, ErrAborted) || !errors.As(err, &re) || re.Op != "broadcast" {
		t.Errorf("a call after the abort: %v", err)
	}
	f.event(0).done.Store(true) // the aborted kernel ends
	if err := f.st.close(); !errors.Is(err, ErrTimeout) {
		t.Errorf("Close after a timeout: %v", err)
	}
	if aborts, destroys := f.h.counts(); aborts != 1 || destroys != 0 {
		t.Errorf("%d aborts, %d destroys", aborts, destroys)
	}
	if !f.event(0).destroyed.Load() {
		t.Error("the event was not destroyed")
	}
	if err := f.st.close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestNCCLWatchdogCompleted: completed collectives are dropped and their
// events reused; nothing is aborted, and Close destroys the handle once.
func TestNCCLWatchdogCompleted(t *testing.T) {
	f := newFakes(time.Minute, "rank 0 on cuda:0")
	s := fakeStream{}
	for i := range 3 {
		if err := f.call(t, s, "all_reduce"); err != nil {
			t.Fatal(err)
		}
		f.event(0).done.Store(true)
		if cause, stop := f.st.tick(time.Now()); cause != nil || stop {
			t.Fatalf("tick %d: %v, %v", i, cause, stop)
		}
		if n := len(f.st.pending); n != 0 {
			t.Fatalf("tick %d: %d pending after completion", i, n)
		}
		time.Sleep(coalesceWindow) // the next one gets its own entry
	}
	if n := f.numEvents(); n != 1 {
		t.Errorf("%d events made for 3 collectives one after the other", n)
	}
	if r := f.event(0).records.Load(); r != 3 {
		t.Errorf("the event was recorded %d times", r)
	}
	cl := &clique{members: []*commState{f.st}}
	go f.st.watch(cl, time.Millisecond)
	if err := f.st.close(); err != nil {
		t.Fatal(err)
	}
	if aborts, destroys := f.h.counts(); aborts != 0 || destroys != 1 {
		t.Errorf("%d aborts, %d destroys", aborts, destroys)
	}
	if err := f.call(t, s, "all_reduce"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a call after Close: %v", err)
	}
}

// TestNCCLCoalesce: collectives queued on one stream within the window
// share an event; another stream, or a later one, gets its own.
func TestNCCLCoalesce(t *testing.T) {
	f := newFakes(time.Minute, "rank 0 on cuda:0")
	s1, s2 := &fakeStream{}, &fakeStream{}
	for range 100 {
		if err := f.call(t, s1, "all_reduce"); err != nil {
			t.Fatal(err)
		}
	}
	// Each entry covers gen+1 collectives; a loaded machine may take more
	// than one window for the loop, hence more than one entry.
	covered := 0
	for _, p := range f.st.pending {
		if p.s != s1 || p.op != "all_reduce" {
			t.Fatalf("entry %+v", p)
		}
		covered += int(p.gen) + 1
	}
	if n := len(f.st.pending); n > 10 || covered != 100 || f.numEvents() != n {
		t.Fatalf("%d entries and %d events cover %d collectives, want few entries covering 100", n, f.numEvents(), covered)
	}
	n := len(f.st.pending)
	if err := f.call(t, s2, "broadcast"); err != nil {
		t.Fatal(err)
	}
	if len(f.st.pending) != n+1 || f.st.pending[n].s != s2 {
		t.Fatalf("another stream did not get its own entry")
	}
	time.Sleep(coalesceWindow)
	if err := f.call(t, s2, "reduce"); err != nil {
		t.Fatal(err)
	}
	if len(f.st.pending) != n+2 || f.st.pending[n+1].op != "reduce" {
		t.Errorf("a collective after the window did not get its own entry")
	}
}

// TestNCCLRecordDuringQuery: an event recorded again while the watchdog
// queries it is kept: the watchdog saw the old record complete, not the
// new one.
func TestNCCLRecordDuringQuery(t *testing.T) {
	f := newFakes(time.Minute, "rank 0 on cuda:0")
	s := fakeStream{}
	if err := f.call(t, s, "all_reduce"); err != nil {
		t.Fatal(err)
	}
	ev := f.event(0)
	ev.done.Store(true)
	ev.onQuery = func() {
		if err := f.call(t, s, "all_reduce"); err != nil {
			t.Error(err)
		}
	}
	if cause, _ := f.st.tick(time.Now()); cause != nil {
		t.Fatal(cause)
	}
	if n := len(f.st.pending); n != 1 {
		t.Fatalf("%d pending: the re-recorded collective was dropped", n)
	}
	if cause, _ := f.st.tick(time.Now()); cause != nil || len(f.st.pending) != 1 {
		t.Fatalf("%v, %d pending while the new record runs", cause, len(f.st.pending))
	}
	if cause, _ := f.st.tick(time.Now().Add(2 * time.Minute)); !errors.Is(cause, ErrTimeout) {
		t.Errorf("an old, unfinished collective: %v, want a timeout", cause)
	}
	ev.done.Store(true)
	if cause, _ := f.st.tick(time.Now()); cause != nil || len(f.st.pending) != 0 {
		t.Errorf("%v, %d pending once done", cause, len(f.st.pending))
	}
}

// TestNCCLAsyncError: an error NCCL reports aborts the communicator, and
// the calls' errors wrap it.
func TestNCCLAsyncError(t *testing.T) {
	f := newFakes(time.Minute, "rank 1 on cuda:1")
	cl := &clique{members: []*commState{f.st}}
	go f.st.watch(cl, time.Millisecond)
	f.h.mu.Lock()
	f.h.async = nccl.Result(6).Err() // ncclRemoteError: the peer died
	f.h.mu.Unlock()
	err := waitFailed(t, f.st, 5*time.Second)
	if !errors.Is(err, nccl.ErrRemoteError) || !errors.Is(err, ErrAborted) || errors.Is(err, ErrTimeout) {
		t.Errorf("%v", err)
	}
	if !strings.Contains(err.Error(), "ncclRemoteError") || !strings.Contains(err.Error(), "rank 1 on cuda:1") {
		t.Errorf("message %q", err)
	}
	if err := f.st.close(); !errors.Is(err, nccl.ErrRemoteError) {
		t.Errorf("Close: %v", err)
	}
}

// TestNCCLStuckCall: a call that stays inside NCCL past the timeout (a
// blocking communicator waiting for a peer on the host) is aborted under,
// after the grace period.
func TestNCCLStuckCall(t *testing.T) {
	setGrace(t, 20*time.Millisecond)
	f := newFakes(30*time.Millisecond, "rank 0 on cuda:0")
	cl := &clique{members: []*commState{f.st}}
	go f.st.watch(cl, time.Millisecond)
	if err := f.st.begin("all_gather"); err != nil {
		t.Fatal(err)
	}
	err := waitFailed(t, f.st, 5*time.Second)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "all_gather on rank 0 on cuda:0 has waited") {
		t.Errorf("%v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if aborts, _ := f.h.counts(); aborts == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not aborted under the stuck call")
		}
		time.Sleep(time.Millisecond)
	}
	f.st.end() // NCCL lets the call return
	f.st.close()
}

// TestNCCLAbortWaitsForCalls: an abort lets a call in progress leave NCCL
// before it frees the handle.
func TestNCCLAbortWaitsForCalls(t *testing.T) {
	setGrace(t, 5*time.Second)
	f := newFakes(time.Minute, "rank 0 on cuda:0")
	var left atomic.Bool
	f.h.whenAbort = func() {
		if !left.Load() {
			t.Error("aborted while a call was inside NCCL")
		}
	}
	if err := f.st.begin("send"); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		left.Store(true)
		f.st.end()
	}()
	cl := &clique{members: []*commState{f.st}}
	start := time.Now()
	cl.abort(errors.New("stop"), 0, true)
	if el := time.Since(start); el < 20*time.Millisecond || el > 4*time.Second {
		t.Errorf("abort took %v", el)
	}
	go f.st.watch(cl, time.Millisecond)
	if err := f.st.close(); err != nil {
		t.Errorf("Close after Abort: %v", err)
	}
}

// TestNCCLCliqueAbort: Abort on one rank of a group ends every rank; their
// calls name the aborting rank and wrap its error.
func TestNCCLCliqueAbort(t *testing.T) {
	cl := &clique{}
	var fs []*fakes
	for r := range 3 {
		f := newFakes(time.Minute, fmt.Sprintf("rank %d on cuda:%d", r, r))
		fs = append(fs, f)
		cl.members = append(cl.members, f.st)
		go f.st.watch(cl, time.Millisecond)
	}
	boom := errors.New("boom")
	comm := &ncclComm{rank: 1, st: fs[1].st, cl: cl}
	comm.Abort(boom)
	comm.Abort(errors.New("again")) // no effect
	for r, f := range fs {
		err := f.call(t, fakeStream{}, "all_reduce")
		var re *RankError
		if !errors.As(err, &re) || re.Rank != 1 || !errors.Is(err, ErrAborted) || !errors.Is(err, boom) {
			t.Errorf("rank %d: %v", r, err)
		}
		if aborts, _ := f.h.counts(); aborts != 1 {
			t.Errorf("rank %d: %d aborts", r, aborts)
		}
		if err := f.st.close(); err != nil {
			t.Errorf("rank %d: Close after Abort: %v", r, err)
		}
		if _, destroys := f.h.counts(); destroys != 0 {
			t.Errorf("rank %d: destroyed after an abort", r)
		}
	}
}

// TestNCCLCallErrors: a refused call is an ordinary error and leaves the
// communicator working; a failure of NCCL itself aborts it.
func TestNCCLCallErrors(t *testing.T) {
	f := newFakes(time.Minute, "rank 0 on cuda:0")
	cl := &clique{members: []*commState{f.st}}
	go f.st.watch(cl, time.Millisecond)
	c := &ncclComm{st: f.st, cl: cl}
	err := c.callError("all_reduce", nccl.Result(4).Err())
	var re *RankError
	if !errors.Is(err, nccl.ErrInvalidArgument) || errors.As(err, &re) || !strings.Contains(err.Error(), "all_reduce on rank 0 on cuda:0") {
		t.Errorf("refused call: %v", err)
	}
	if f.st.failure("x") != nil {
		t.Fatal("a refused call failed the communicator")
	}
	err = c.callError("reduce", nccl.Result(2).Err())
	if !errors.As(err, &re) || !errors.Is(err, ErrAborted) || !errors.Is(err, nccl.ErrSystemError) || re.Op != "reduce" {
		t.Errorf("failed call: %v", err)
	}
	if aborts, _ := f.h.counts(); aborts != 1 {
		t.Errorf("%d aborts", aborts)
	}
	f.st.close()
}

// TestNCCLGroupRegistry: a group is seen by its own goroutine only.
func TestNCCLGroupRegistry(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if currentGroup() != nil {
		t.Fatal("a group before any is open")
	}
	g := &groupCalls{}
	ncclGroups.Store(threadID(), g)
	ncclOpenGroups.Add(1)
	defer func() {
		ncclGroups.Delete(threadID())
		ncclOpenGroups.Add(-1)
	}()
	if currentGroup() != g {
		t.Error("the goroutine does not see its group")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if currentGroup() != nil {
				t.Error("another goroutine sees the group")
			}
		}()
	}
	wg.Wait()
}

// TestNCCLGroupFinish: the end of a group releases its calls' leases,
// tracks their streams once launched, and sorts the launch's errors.
func TestNCCLGroupFinish(t *testing.T) {
	newComm := func() (*ncclComm, *fakes) {
		f := newFakes(time.Minute, "rank 0 on cuda:0")
		cl := &clique{members: []*commState{f.st}}
		go f.st.watch(cl, time.Millisecond)
		return &ncclComm{st: f.st, cl: cl}, f
	}
	group := func(cs ...*ncclComm) *groupCalls {
		g := &groupCalls{}
		for _, c := range cs {
			if err := c.st.begin("send"); err != nil {
				t.Fatal(err)
			}
			g.add(c, fakeStream{}, "send")
		}
		return g
	}

	a, fa := newComm()
	b, fb := newComm()
	if err := group(a, b).finish(nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*fakes{fa, fb} {
		if f.st.busy != 0 || len(f.st.pending) != 1 {
			t.Errorf("after a launch: %d leases, %d pending", f.st.busy, len(f.st.pending))
		}
	}

	err := group(a).finish(nccl.Result(5).Err())
	if !errors.Is(err, nccl.ErrInvalidUsage) || !strings.Contains(err.Error(), "send on rank 0 on cuda:0") || fa.st.busy != 0 {
		t.Errorf("refused launch: %v, %d leases", err, fa.st.busy)
	}
	if fa.st.failure("x") != nil {
		t.Error("a refused launch failed the communicator")
	}

	err = group(a, b).finish(nccl.Result(6).Err())
	if !errors.Is(err, ErrAborted) || !errors.Is(err, nccl.ErrRemoteError) || fb.st.failure("x") == nil {
		t.Errorf("failed launch: %v", err)
	}
	for _, f := range []*fakes{fa, fb} {
		for i := range f.numEvents() {
			f.event(i).done.Store(true)
		}
		f.st.close()
	}
}

// TestNCCLWatchdogRace drives the calls, the watchdog and an abort from
// another goroutine at once; run with -race.
func TestNCCLWatchdogRace(t *testing.T) {
	setGrace(t, 50*time.Millisecond)
	f := newFakes(time.Minute, "rank 0 on cuda:0")
	cl := &clique{members: []*commState{f.st}}
	go f.st.watch(cl, time.Millisecond)
	streams := []backend.Stream{&fakeStream{}, &fakeStream{}}
	stopCompleter := make(chan struct{})
	go func() { // the GPU: completes every event now and then
		for {
			select {
			case <-stopCompleter:
				return
			case <-time.After(200 * time.Microsecond):
			}
			for i := range f.numEvents() {
				f.event(i).done.Store(true)
			}
		}
	}()
	go func() {
		time.Sleep(30 * time.Millisecond)
		cl.abort(errors.New("stop"), 0, true)
	}()
	var failed error
	for i := 0; i < 1_000_000 && failed == nil; i++ {
		failed = f.call(t, streams[i%2], "all_reduce")
		if i%1000 == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	if !errors.Is(failed, ErrAborted) {
		t.Errorf("the loop ended with %v", failed)
	}
	close(stopCompleter)
	for i := range f.numEvents() {
		f.event(i).done.Store(true)
	}
	if err := f.st.close(); err != nil {
		t.Error(err)
	}
	for i := range f.numEvents() {
		if !f.event(i).destroyed.Load() {
			t.Errorf("event %d not destroyed", i)
		}
	}
}

// TestNCCLInitWithin: the creation of communicators waits at most the
// timeout; what it makes after is aborted; a peer's failure during it is a
// *RankError.
func TestNCCLInitWithin(t *testing.T) {
	run := func(f func() error) error { return f() }
	var mu sync.Mutex
	var aborted []nccl.Comm
	abort := func(h nccl.Comm) {
		mu.Lock()
		aborted = append(aborted, h)
		mu.Unlock()
	}

	hs, err := initWithin("ncclCommInitAll", time.Minute, run, func() ([]nccl.Comm, error) { return []nccl.Comm{1, 2}, nil }, abort)
	if err != nil || !slices.Equal(hs, []nccl.Comm{1, 2}) {
		t.Errorf("in time: %v, %v", hs, err)
	}

	release := make(chan struct{})
	start := time.Now()
	_, err = initWithin("ncclCommInitRank", 20*time.Millisecond, run, func() ([]nccl.Comm, error) {
		<-release
		return []nccl.Comm{7}, nil
	}, abort)
	var re *RankError
	if !errors.As(err, &re) || re.Op != "init" || re.Rank != -1 || !errors.Is(err, ErrTimeout) ||
		!strings.Contains(err.Error(), "ncclCommInitRank did not complete within 20ms") {
		t.Errorf("late: %v", err)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("gave up after %v", el)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(aborted)
		mu.Unlock()
		if slices.Equal(got, []nccl.Comm{7}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late communicator was not aborted: %v", got)
		}
		time.Sleep(time.Millisecond)
	}

	_, err = initWithin("ncclCommInitRank", time.Minute, run, func() ([]nccl.Comm, error) {
		return nil, nccl.Result(6).Err()
	}, abort)
	if !errors.As(err, &re) || !errors.Is(err, ErrAborted) || !errors.Is(err, nccl.ErrRemoteError) {
		t.Errorf("a peer failed: %v", err)
	}
	_, err = initWithin("ncclCommInitRank", time.Minute, run, func() ([]nccl.Comm, error) {
		return nil, nccl.Result(4).Err()
	}, abort)
	if errors.As(err, &re) || !errors.Is(err, nccl.ErrInvalidArgument) {
		t.Errorf("refused: %v", err)
	}
}
